// requires: bwrap, git
// The claude provider through the real Orchestrator (file EventLog/SessionStore, WorkspaceStore,
// bwrap Sandbox with network off): the REAL Claude Code binary per turn, its MCP server inside the
// sandbox talking to the agent socket, the model a scripted Anthropic endpoint reached through the
// daemon's model forwarder (a Unix socket bound into the sandbox).
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import * as ModelForwarder from "../../src/provider/cli/ModelForwarder.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import {
  conversationText,
  dataOf,
  dynamicToolCall,
  eventsOf,
  stackWith,
  testSettings,
  toolResultsOf
} from "../e2e/providers.support.js"
import { tmpDir } from "../support/tmpDir.js"

const uuidIn = (s: string) => /message ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/.exec(s)?.[1] ?? "?"

describe("claude provider (real binary, bwrap, orchestrator)", () => {
  it.scoped("a root spawns two claude children, asks one (sync), the child answers with reply_to, the root resumes with the reply", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-claude-")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          // boss, turn 2: the reply arrives as the next prompt
          { match: { system: "AGENT=boss", lastUser: "Reply from w1" }, reply: Reply.text("w1 says 42. Done."), label: "boss-2" },
          // boss, turn 1
          { match: { system: "AGENT=boss" }, reply: Reply.toolCall("mcp__substrat__spawn_agent", { name: "w1", instructions: "AGENT=w1 You are worker one." }), label: "boss-spawn-1" },
          { match: { system: "AGENT=boss" }, reply: Reply.toolCall("mcp__substrat__spawn_agent", { name: "w2", instructions: "AGENT=w2 You are worker two." }), label: "boss-spawn-2" },
          { match: { system: "AGENT=boss" }, reply: Reply.toolCall("mcp__substrat__send_message", { recipient: "w1", text: "What is 6*7?", sync: true }), label: "boss-ask" },
          { match: { system: "AGENT=boss" }, reply: Reply.text("Asked w1; waiting for the answer."), label: "boss-1-end" },
          // w1: answers explicitly with reply_to = the id in its prompt
          (() => {
            const d = dynamicToolCall("mcp__substrat__send_message", (lastUser) => ({ recipient: "boss", text: "42", reply_to: uuidIn(lastUser) }))
            return { match: { system: "AGENT=w1", where: d.where }, reply: d.reply, label: "w1-reply" }
          })(),
          { match: { system: "AGENT=w1" }, reply: Reply.text("Answered boss."), label: "w1-end" }
        ]
      })
      const fwd = yield* ModelForwarder.serve({
        socketPath: Path.join(home, "llm", "anthropic.sock"),
        api: "anthropic",
        upstream: llm.baseUrl,
        credential: { header: "x-api-key", value: "sk-daemon-only" }
      })

      yield* Effect.gen(function*() {
      const o = yield* Orchestrator
      const boss = yield* o.createRoot({ name: "boss", instructions: "AGENT=boss You lead the team.", provider: "claude" })
      yield* o.send({ agent: boss.id, text: "Start the team." })
      yield* o.awaitIdle

      const agents = yield* o.list
      const byName = new Map(agents.map((a) => [a.name, a]))
      expect([...byName.keys()].sort()).toEqual(["boss", "w1", "w2"])
      expect(byName.get("w1")!.parent_id).toBe(boss.id)
      expect(byName.get("w2")!.parent_id).toBe(boss.id)

      // The boss's log: two turns; the second prompt is the reply; tools logged by the ToolHandler.
      const bossLog = yield* eventsOf(boss.session_id)
      const starts = dataOf(bossLog, "turn.start")
      const completes = dataOf(bossLog, "turn.complete")
      expect(starts.map((s) => s.prompt)).toEqual([expect.stringMatching(/^Message from USER \(message [0-9a-f-]{36}, reply expected\):\nStart the team\.$/), expect.stringMatching(/^Reply from w1 \(to message [0-9a-f-]{36}\): 42$/)])
      expect(completes.map((c) => c.response)).toEqual(["Asked w1; waiting for the answer.", "w1 says 42. Done."])
      expect(dataOf(bossLog, "tool_call.invoked").map((t) => t.tool)).toEqual(["spawn_agent", "spawn_agent", "send_message"])
      expect(dataOf(bossLog, "tool_call.result").every((r) => !r.is_error)).toBe(true)
      expect(dataOf(bossLog, "provider.error")).toEqual([])
      const usage = dataOf(bossLog, "usage")
      expect(usage.length).toBe(2)
      expect(usage.every((u) => u.input_tokens > 0 && u.output_tokens > 0)).toBe(true)

      // w1 answered with an explicit reply_to equal to the request's id.
      const w1Log = yield* eventsOf(byName.get("w1")!.session_id)
      const asked = dataOf(w1Log, "message.enqueued")[0]!
      expect(asked.payload).toBe("What is 6*7?")
      const replyCall = dataOf(w1Log, "tool_call.invoked").find((t) => t.tool === "send_message")!
      expect(replyCall.arguments).toMatchObject({ recipient: "boss", text: "42", reply_to: asked.id })
      expect(starts[1]!.prompt).toBe(`Reply from w1 (to message ${asked.id}): 42`)

      // What the model saw: the resumed boss request carries the whole first turn (--resume).
      const reqs = yield* llm.modelRequests
      expect(reqs.map((r) => r.label)).toEqual(["boss-spawn-1", "boss-spawn-2", "boss-ask", "boss-1-end", "w1-reply", "w1-end", "boss-2"])
      const resumed = reqs.at(-1)!
      expect(conversationText(resumed)).toContain("Start the team.")
      expect(conversationText(resumed)).toContain("What is 6*7?")
      expect(conversationText(resumed)).toContain("Asked w1; waiting for the answer.")
      expect(resumed.headers["x-claude-code-session-id"]).toBe(reqs[0]!.headers["x-claude-code-session-id"])
      // Tool results came back from the daemon through the agent socket (real message ids).
      expect(toolResultsOf(reqs[3]!).join("\n")).toMatch(/message_id/)
      // The guidance is in the system prompt; the key stayed in the daemon (forwarder injected it).
      expect(resumed.system).toContain("Every substrat tool returns immediately")
      expect(reqs.every((r) => r.headers["x-api-key"] === "sk-daemon-only")).toBe(true)
      expect(yield* fwd.requests).toBe(reqs.length)
      // The private HOME holds Claude's session store (what --resume reads).
      expect(Fs.existsSync(Path.join(home, "agents", boss.session_id, "home", ".claude", "projects"))).toBe(true)
      }).pipe(Effect.provide(stackWith(home, testSettings({ anthropic: fwd.socketPath, openai: null }))))
    }), { timeout: 120_000 })
})
