// requires: bwrap
// End to end through the REAL daemon process and CLI: a Codex agent and a Claude Code sibling
// (real binaries, bwrap, network off) talk through substrat's tools. A scripted root — its book
// loaded from $SUBSTRAT_HOME/scripts/ — spawns `cl` on claude and `cx` on codex with
// spawn_agent(..., provider) and asks cx to find something out from cl; cx sends cl a sync
// request, cl answers with send_message(reply_to), and cx gets `Reply from cl …` as its next
// prompt (an `exec resume` of its thread). Both models are one scripted endpoint behind the
// daemon's forwarders (SUBSTRAT_ANTHROPIC_UPSTREAM / SUBSTRAT_OPENAI_UPSTREAM); the API keys are
// only in the daemon's environment.
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { type Agent, cli, cliJson, startDaemon, waitQuiet } from "../integration/daemon.support.js"
import { makeTmpDir } from "../support/tmp.js"
import { claudeBin, codexVendorDir, daemonTestScope } from "./support.js"

type Entry = { readonly event: string; readonly data: Record<string, unknown> }
const events = (home: string, sid: string): ReadonlyArray<Entry> =>
  Fs.readFileSync(Path.join(home, "agents", sid, "events.jsonl"), "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Entry)
const of = (es: ReadonlyArray<Entry>, name: string) => es.filter((e) => e.event === name).map((e) => e.data)
const uuid = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
const uuidIn = (s: string) => new RegExp(`message (${uuid})`).exec(s)?.[1] ?? "?"

const withLlm = async <A>(script: ReadonlyArray<ScriptedLlm.ScriptEntry>, f: (llm: ScriptedLlm.ScriptedLlmServer) => Promise<A>): Promise<A> =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(ScriptedLlm.make({ listen: { port: 0 }, script }), (llm) => Effect.promise(() => f(llm)))))

const envKeys = [
  "SUBSTRAT_ANTHROPIC_UPSTREAM",
  "SUBSTRAT_OPENAI_UPSTREAM",
  "ANTHROPIC_API_KEY",
  "OPENAI_API_KEY",
  "SUBSTRAT_CLAUDE_BIN",
  "SUBSTRAT_CODEX_BIN",
  "SUBSTRAT_CODEX_MODEL"
]
const { ds, homes } = daemonTestScope(envKeys)

/** The root's book: spawn the two siblings on their providers, ask cx (sync), report the reply. */
const boss = {
  boss: {
    steps: [
      {
        tools: [
          { tool: "spawn_agent", args: { name: "cl", instructions: "AGENT=cl You know arithmetic.", provider: "claude" } },
          { tool: "spawn_agent", args: { name: "cx", instructions: "AGENT=cx You ask your sibling cl.", provider: "codex" } },
          { tool: "send_message", args: { recipient: "cx", text: "Find out from cl what 6*7 is.", sync: true } }
        ],
        text: "team started"
      },
      { text: "boss got: {{prompt}}" }
    ],
    after: "silent"
  }
}

/** Both models: cx (Responses API, through codex) asks cl; cl (Messages API) answers with reply_to. */
const llmScript = (): Array<ScriptedLlm.ScriptEntry> => {
  let replyTo = "?"
  return [
    { match: { system: "AGENT=cx", lastUser: "Reply from cl" }, reply: Reply.text("cl says 42"), label: "cx-2" },
    {
      match: { system: "AGENT=cx", lastUser: "Find out from cl" },
      reply: Reply.toolCall("mcp__substrat__send_message", { recipient: "cl", text: "What is 6*7?", sync: true }),
      label: "cx-ask"
    },
    { match: { system: "AGENT=cx" }, reply: Reply.text("asked cl"), label: "cx-1-end" },
    {
      match: { system: "AGENT=cl", lastUser: "What is 6*7?", where: (r) => ((replyTo = uuidIn(r.lastUser)), true) },
      reply: {
        _tag: "Message",
        get content() {
          return [{ type: "tool_use" as const, name: "mcp__substrat__send_message", input: { recipient: "cx", text: "42", reply_to: replyTo } }]
        }
      },
      label: "cl-reply"
    },
    { match: { system: "AGENT=cl" }, reply: Reply.text("Answered."), label: "cl-end" }
  ]
}

describe("daemon + a codex agent and a claude sibling", () => {
  it("cx (codex) sends a sync request to cl (claude); cl answers with reply_to; cx gets `Reply from cl` as its next prompt", () =>
    withLlm(llmScript(), async (llm) => {
      const home = makeTmpDir("sdx-") // short: agent socket paths must fit in sun_path
      homes.push(home)
      process.env["SUBSTRAT_ANTHROPIC_UPSTREAM"] = llm.baseUrl
      process.env["SUBSTRAT_OPENAI_UPSTREAM"] = llm.baseUrl
      process.env["ANTHROPIC_API_KEY"] = "sk-ant-daemon-only"
      process.env["OPENAI_API_KEY"] = "sk-openai-daemon-only"
      process.env["SUBSTRAT_CLAUDE_BIN"] = claudeBin
      process.env["SUBSTRAT_CODEX_BIN"] = Path.join(codexVendorDir(), "bin/codex")
      // Outside Codex's bundled model catalog, so MCP tools are declared directly (providers-real.md).
      process.env["SUBSTRAT_CODEX_MODEL"] = "scripted-model"
      Fs.mkdirSync(Path.join(home, "scripts"), { recursive: true })
      Fs.writeFileSync(Path.join(home, "scripts", "pair.json"), JSON.stringify(boss))
      ds.track(await startDaemon(home))

      const root = await cliJson<Agent>(home, ["agent", "create", "--provider", "scripted:pair", "--name", "boss"])
      expect((await cli(home, ["agent", "send", "boss", "Start."])).code).toBe(0)
      const agents = await waitQuiet(home)

      // Siblings on their own providers, under the scripted root.
      const byName = new Map(agents.map((a) => [a.name, a] as const))
      expect([...byName.keys()].sort()).toEqual(["boss", "cl", "cx"])
      const cl = byName.get("cl")!
      const cx = byName.get("cx")!
      expect([cl.provider, cx.provider, root.provider]).toEqual(["claude", "codex", "scripted:pair"])
      expect([cl.parent_id, cx.parent_id]).toEqual([root.id, root.id])

      // cx: asked cl (sync), finished its turn; the reply came as its next prompt.
      const cxLog = events(home, cx.session_id)
      expect(of(cxLog, "provider.error")).toEqual([])
      expect(of(cxLog, "tool_call.invoked").map((d) => [d["tool"], (d["arguments"] as Record<string, unknown>)["recipient"]])).toEqual([["send_message", "cl"]])
      const cxPrompts = of(cxLog, "turn.start").map((d) => String(d["prompt"]))
      expect(cxPrompts).toHaveLength(2)
      expect(cxPrompts[0]).toMatch(/^Message from boss \(message [0-9a-f-]{36}, reply expected\):\nFind out from cl what 6\*7 is\.$/)
      expect(cxPrompts[1]).toMatch(new RegExp(`^Reply from cl \\(to message ${uuid}\\): 42$`))
      expect(of(cxLog, "turn.complete").map((d) => d["response"])).toEqual(["asked cl", "cl says 42"])
      const asked = (of(cxLog, "tool_call.result")[0]!["result"] as { message_id: string }).message_id

      // cl: woken by cx's request, answered it explicitly (reply_to = that request's id).
      const clLog = events(home, cl.session_id)
      expect(of(clLog, "provider.error")).toEqual([])
      expect(of(clLog, "turn.start").map((d) => d["prompt"])).toEqual([`Message from cx (message ${asked}, reply expected):\nWhat is 6*7?`])
      expect(of(clLog, "tool_call.invoked").map((d) => d["arguments"])).toEqual([expect.objectContaining({ recipient: "cx", text: "42", reply_to: asked })])
      expect(cxPrompts[1]).toBe(`Reply from cl (to message ${asked}): 42`)

      // The root heard back from cx (cx's first turn's final text was its automatic reply).
      const bossResponses = of(events(home, root.session_id), "turn.complete").map((d) => String(d["response"]))
      expect(bossResponses[0]).toBe("team started")
      expect(bossResponses[1]).toMatch(new RegExp(`^boss got: Reply from cx \\(to message ${uuid}\\): asked cl$`))

      // Transcripts show the exchange from both sides.
      const transcript = (a: Agent) => Fs.readFileSync(Path.join(home, "agents", a.session_id, "transcript.txt"), "utf8")
      for (const a of [cx, cl]) {
        expect(transcript(a)).toContain("cx → cl: What is 6*7?")
        expect(transcript(a)).toContain("cl → cx: 42")
      }

      // What the models saw. cx's second request is a Responses request of the same (resumed)
      // thread: the earlier exchange, then the reply as the new user input.
      const reqs = await Effect.runPromise(llm.modelRequests)
      const labels = reqs.map((r) => r.label)
      expect([...labels].sort()).toEqual(["cl-end", "cl-reply", "cx-1-end", "cx-2", "cx-ask"])
      expect(labels.indexOf("cx-2")).toBeGreaterThan(Math.max(labels.indexOf("cl-reply"), labels.indexOf("cx-1-end")))
      const cx2 = reqs.find((r) => r.label === "cx-2")!
      expect([cx2.kind, cx2.path]).toEqual(["openai-responses", "/v1/responses"])
      expect(cx2.lastUser).toContain(`Reply from cl (to message ${asked}): 42`)
      const history = JSON.stringify((cx2.body as { input: unknown }).input)
      expect(history).toContain("Find out from cl what 6*7 is.")
      expect(history).toContain("What is 6*7?")
      expect(history).toContain("asked cl")
      const clReq = reqs.find((r) => r.label === "cl-reply")!
      expect([clReq.kind, clReq.path.split("?")[0]]).toEqual(["anthropic", "/v1/messages"])
      // Keys injected by the daemon's forwarders, never seen by the sandboxed CLIs.
      for (const r of reqs) {
        if (r.kind === "anthropic") expect(r.headers["x-api-key"]).toBe("sk-ant-daemon-only")
        else expect(r.headers["authorization"]).toBe("Bearer sk-openai-daemon-only")
      }
    }), 120_000)
})
