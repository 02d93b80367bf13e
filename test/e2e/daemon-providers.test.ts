// requires: bwrap
// End to end through the REAL daemon process and CLI: Claude Code agents (real binary, bwrap,
// network off), the daemon's model forwarder relaying to a scripted Anthropic endpoint
// (SUBSTRAT_ANTHROPIC_UPSTREAM), the API key only in the daemon. Needs the daemon's runtime to
// use src/provider/registryLive.ts (docs/providers.md, "Wiring").
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { makeTmpDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, isAlive, startDaemon, waitFor, waitQuiet } from "../integration/daemon.support.js"
import { conversationText } from "./providers.support.js"
import { claudeBin, daemonTestScope } from "./support.js"

type Entry = { readonly event: string; readonly data: Record<string, unknown> }
const events = (home: string, sid: string): ReadonlyArray<Entry> =>
  Fs.readFileSync(Path.join(home, "agents", sid, "events.jsonl"), "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Entry)
const of = (es: ReadonlyArray<Entry>, name: string) => es.filter((e) => e.event === name).map((e) => e.data)
const uuidIn = (s: string) => /message ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/.exec(s)?.[1] ?? "?"

/** A scripted endpoint for the duration of a test (plain async: the daemon tests are promise-based). */
const withLlm = async <A>(script: ReadonlyArray<ScriptedLlm.ScriptEntry>, f: (llm: ScriptedLlm.ScriptedLlmServer) => Promise<A>): Promise<A> =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(ScriptedLlm.make({ listen: { port: 0 }, script }), (llm) => Effect.promise(() => f(llm)))))

const { ds, homes } = daemonTestScope([
  "SUBSTRAT_ANTHROPIC_UPSTREAM",
  "ANTHROPIC_API_KEY",
  "SUBSTRAT_CLAUDE_BIN",
  "SUBSTRAT_CODEX_BIN",
  "SUBSTRAT_SLOTS"
])

const setup = (llm: ScriptedLlm.ScriptedLlmServer) => {
  // Short: agent socket paths must fit in sun_path.
  const home = makeTmpDir("sde-")
  homes.push(home)
  process.env["SUBSTRAT_ANTHROPIC_UPSTREAM"] = llm.baseUrl
  process.env["ANTHROPIC_API_KEY"] = "sk-test-daemon-only"
  process.env["SUBSTRAT_CLAUDE_BIN"] = claudeBin
  return home
}

const teamScript = (): Array<ScriptedLlm.ScriptEntry> => {
  let replyTo = "?"
  return [
    { match: { system: "AGENT=boss", lastUser: "Reply from w1" }, reply: Reply.text("w1 says 42. Done."), label: "boss-2" },
    { match: { system: "AGENT=boss" }, reply: Reply.toolCall("mcp__substrat__spawn_agent", { name: "w1", instructions: "AGENT=w1" }), label: "spawn-1" },
    { match: { system: "AGENT=boss" }, reply: Reply.toolCall("mcp__substrat__spawn_agent", { name: "w2", instructions: "AGENT=w2" }), label: "spawn-2" },
    { match: { system: "AGENT=boss" }, reply: Reply.toolCall("mcp__substrat__send_message", { recipient: "w1", text: "What is 6*7?", sync: true }), label: "ask" },
    { match: { system: "AGENT=boss" }, reply: Reply.text("Asked w1."), label: "boss-1" },
    {
      match: { system: "AGENT=w1", where: (r) => ((replyTo = uuidIn(r.lastUser)), true) },
      reply: { _tag: "Message", get content() { return [{ type: "tool_use" as const, name: "mcp__substrat__send_message", input: { recipient: "boss", text: "42", reply_to: replyTo } }] } },
      label: "w1-reply"
    },
    { match: { system: "AGENT=w1" }, reply: Reply.text("Answered."), label: "w1-end" }
  ]
}

describe("daemon + real Claude Code agents", () => {
  it("a claude root spawns two claude children, sync question, reply_to answer, the root resumes and finishes", () =>
    withLlm(teamScript(), async (llm) => {
      const home = setup(llm)
      ds.track(await startDaemon(home))
      const boss = await cliJson<Agent>(home, ["agent", "create", "--provider", "claude", "--name", "boss", "--instructions", "AGENT=boss You lead."])
      const sent = await cli(home, ["agent", "send", "boss", "Start the team."])
      expect(sent.code).toBe(0)
      const agents = await waitQuiet(home)
      expect(agents.map((a) => a.name).sort()).toEqual(["boss", "w1", "w2"])
      const bossLog = events(home, boss.session_id)
      expect(of(bossLog, "turn.complete").map((d) => d["response"])).toEqual(["Asked w1.", "w1 says 42. Done."])
      expect(String(of(bossLog, "turn.start")[1]!["prompt"])).toMatch(/^Reply from w1 \(to message [0-9a-f-]{36}\): 42$/)
      expect(of(bossLog, "provider.error")).toEqual([])
      const transcript = Fs.readFileSync(Path.join(home, "agents", boss.session_id, "transcript.txt"), "utf8")
      expect(transcript).toContain("boss → w1: What is 6*7?")
      expect(transcript).toContain("w1 → boss: 42")
      const reqs = await Effect.runPromise(llm.modelRequests)
      expect(reqs.map((r) => r.label)).toEqual(["spawn-1", "spawn-2", "ask", "boss-1", "w1-reply", "w1-end", "boss-2"])
      expect(conversationText(reqs[6]!)).toContain("What is 6*7?")
      expect(reqs.every((r) => r.headers["x-api-key"] === "sk-test-daemon-only")).toBe(true)
    }), 180_000)

  it("crash: SIGKILL the daemon while a child is mid-turn; after restart the message is re-delivered and the root resumes via --resume", () =>
    withLlm([], async (llm) => {
      const home = setup(llm)
      // w1's first attempt hangs (the daemon dies under it); every later request is answered.
      await Effect.runPromise(llm.replace([
        { match: { system: "AGENT=w1" }, reply: Reply.text("never seen"), delayMs: 600_000, label: "w1-hang" },
        ...teamScript().filter((e) => e.label !== "w1-reply")
      ]))
      const pid = await startDaemon(home)
      ds.track(pid)
      const boss = await cliJson<Agent>(home, ["agent", "create", "--provider", "claude", "--name", "boss", "--instructions", "AGENT=boss You lead."])
      await cli(home, ["agent", "send", "boss", "Start the team."])
      await Effect.runPromise(llm.awaitRequests(1, (r) => r.label === "w1-hang"))
      process.kill(pid, "SIGKILL")
      await waitFor("daemon gone", () => (isAlive(pid) ? undefined : true), 10_000)
      const pid2 = await startDaemon(home)
      ds.track(pid2)
      await waitQuiet(home)
      const bossLog = events(home, boss.session_id)
      const responses = of(bossLog, "turn.complete").map((d) => d["response"])
      expect(responses[0]).toBe("Asked w1.")
      expect(responses.at(-1)).toBe("w1 says 42. Done.")
      const reqs = await Effect.runPromise(llm.modelRequests)
      // w1 ran again after the restart (the request re-delivered) and answered with its final text.
      expect(reqs.filter((r) => r.label === "w1-end").length).toBe(1)
      // The boss's post-crash request carries its pre-crash conversation: --resume of the same session.
      const last = reqs.find((r) => r.label === "boss-2")!
      expect(conversationText(last)).toContain("What is 6*7?")
      expect(last.headers["x-claude-code-session-id"]).toBe(reqs.find((r) => r.label === "spawn-1")!.headers["x-claude-code-session-id"])
    }), 180_000)

  it("agent create with a provider whose binary is missing fails up front (missing-binary)", async () => {
    const home = makeTmpDir("sdm-")
    homes.push(home)
    process.env["SUBSTRAT_CODEX_BIN"] = "/nonexistent/codex"
    ds.track(await startDaemon(home))
    const r = await cli(home, ["agent", "create", "--provider", "codex", "--name", "cx"])
    expect(r.code).not.toBe(0)
    expect(r.stderr).toMatch(/codex/)
    expect(r.stderr).toMatch(/not|missing/i)
  }, 60_000)
})
