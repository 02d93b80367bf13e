// requires: bwrap
// End to end through the REAL daemon process and CLI: agents on the `openai` provider (a bare
// Chat Completions model, the tool loop in the daemon) against a scripted endpoint on loopback
// (SUBSTRAT_OPENAI_BASE_URL), the key only in the daemon's environment. A SIGKILL of the daemon
// and a restart: the root's next request carries its whole earlier conversation (the event log
// replayed). Needs `npm run build` (the CLI/daemon bundles).
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { makeTmpDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, isAlive, startDaemon, waitFor, waitQuiet } from "../integration/daemon.support.js"
import { daemonTestScope } from "./support.js"

type Entry = { readonly event: string; readonly data: Record<string, unknown> }
const events = (home: string, sid: string): ReadonlyArray<Entry> =>
  Fs.readFileSync(Path.join(home, "agents", sid, "events.jsonl"), "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Entry)
const of = (es: ReadonlyArray<Entry>, name: string) => es.filter((e) => e.event === name).map((e) => e.data)
type Msg = { readonly role: string; readonly content?: unknown; readonly tool_calls?: ReadonlyArray<{ function: { name: string } }> }
const messagesOf = (r: ScriptedLlm.RecordedRequest): ReadonlyArray<Msg> => (r.body as { messages: ReadonlyArray<Msg> }).messages

/** Every file under `dir`, recursively (sockets and other non-files skipped). */
const filesUnder = (dir: string): ReadonlyArray<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const p = Path.join(dir, d.name)
    return d.isDirectory() ? filesUnder(p) : d.isFile() ? [p] : []
  })

const withLlm = async <A>(script: ReadonlyArray<ScriptedLlm.ScriptEntry>, f: (llm: ScriptedLlm.ScriptedLlmServer) => Promise<A>): Promise<A> =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(ScriptedLlm.make({ listen: { port: 0 }, script }), (llm) => Effect.promise(() => f(llm)))))

const KEY = "sk-openai-e2e-daemon-only-3f9a"

const { ds, homes } = daemonTestScope([
  "SUBSTRAT_OPENAI_BASE_URL",
  "SUBSTRAT_OPENAI_API_KEY",
  "SUBSTRAT_OPENAI_MODEL",
  "OPENAI_API_KEY",
  "OPENROUTER_API_KEY"
])

const clearOpenAiEnv = () => {
  for (const k of ["SUBSTRAT_OPENAI_BASE_URL", "SUBSTRAT_OPENAI_API_KEY", "SUBSTRAT_OPENAI_MODEL", "OPENAI_API_KEY", "OPENROUTER_API_KEY"]) {
    delete process.env[k]
  }
}

describe("daemon + openai agents (scripted Chat Completions endpoint)", () => {
  it("a root spawns a child by a tool call and asks it; SIGKILL + restart; the next request carries the whole conversation", () =>
    withLlm([
      { match: { system: "AGENT=boss", lastUser: "Reply from w" }, reply: Reply.text("w says 42."), label: "boss-3" },
      { match: { system: "AGENT=boss", lastUser: "And now?" }, reply: Reply.text("Still 42."), label: "boss-4" },
      {
        match: { system: "AGENT=boss", lastUser: "Start" },
        reply: Reply.message([
          { type: "tool_use", name: "spawn_agent", input: { name: "w", instructions: "AGENT=w You answer." } },
          { type: "tool_use", name: "send_message", input: { recipient: "w", text: "What is 6*7?" } }
        ]),
        label: "boss-1"
      },
      { match: { system: "AGENT=boss" }, reply: Reply.text("Asked w."), label: "boss-2" },
      { match: { system: "AGENT=w" }, reply: Reply.text("42"), label: "w-1" }
    ], async (llm) => {
      const home = makeTmpDir("sdo-")
      homes.push(home)
      clearOpenAiEnv()
      process.env["SUBSTRAT_OPENAI_BASE_URL"] = `${llm.baseUrl}/v1`
      process.env["SUBSTRAT_OPENAI_API_KEY"] = KEY
      const pid = await startDaemon(home)
      ds.track(pid)
      const boss = await cliJson<Agent>(home, ["agent", "create", "--provider", "openai:e2e-model", "--name", "boss", "--instructions", "AGENT=boss You lead."])
      expect((await cli(home, ["agent", "send", "boss", "Start the work."])).code).toBe(0)
      const agents = await waitQuiet(home)
      expect(agents.map((a) => a.name).sort()).toEqual(["boss", "w"])

      let reqs = await Effect.runPromise(llm.modelRequests)
      expect(reqs.map((r) => r.label)).toEqual(["boss-1", "boss-2", "w-1", "boss-3"])
      expect(reqs.every((r) => r.path === "/v1/chat/completions" && r.model === "e2e-model")).toBe(true)
      // The tool results went back to the model within the turn.
      expect(messagesOf(reqs[1]!).slice(-2).map((m) => m.role)).toEqual(["tool", "tool"])
      const bossLog = events(home, boss.session_id)
      expect(of(bossLog, "turn.complete").map((d) => d["response"])).toEqual(["Asked w.", "w says 42."])
      expect(of(bossLog, "tool_call.invoked").map((d) => d["tool"])).toEqual(["spawn_agent", "send_message"])
      // One usage event per model call (metered, docs/budgets.md) and the provider's total per turn.
      const usage = of(bossLog, "usage")
      expect(usage.filter((d) => d["source"] === "request").map((d) => d["model"])).toEqual(["e2e-model", "e2e-model", "e2e-model"])
      expect(usage.filter((d) => d["source"] !== "request").length).toBe(2)

      // kill -9: no suspend blob; the restarted daemon replays the log.
      process.kill(pid, "SIGKILL")
      await waitFor("daemon gone", () => (isAlive(pid) ? undefined : true), 10_000)
      const pid2 = await startDaemon(home)
      ds.track(pid2)
      expect((await cli(home, ["agent", "send", "boss", "And now?"])).code).toBe(0)
      await waitQuiet(home)
      reqs = await Effect.runPromise(llm.modelRequests)
      const after = reqs.find((r) => r.label === "boss-4")!
      const ms = messagesOf(after)
      expect(ms.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "user", "assistant", "user"])
      expect(String(ms[1]!.content)).toMatch(/Start the work\.$/)
      expect(ms[2]!.tool_calls!.map((c) => c.function.name)).toEqual(["spawn_agent"])
      expect(ms[6]!.content).toBe("Asked w.")
      expect(String(ms[7]!.content)).toMatch(/^Reply from w \(to message [0-9a-f-]{36}\): 42$/)
      expect(ms[8]!.content).toBe("w says 42.")
      expect(String(ms[9]!.content)).toMatch(/And now\?$/)
      expect(of(events(home, boss.session_id), "turn.complete").map((d) => d["response"])).toEqual(["Asked w.", "w says 42.", "Still 42."])

      // The key went to the endpoint, and nowhere on disk.
      expect(reqs.every((r) => r.headers["authorization"] === `Bearer ${KEY}`)).toBe(true)
      const leaks = filesUnder(home).filter((f) => Fs.readFileSync(f).includes(KEY))
      expect(leaks).toEqual([])
    }), 120_000)

  it("agent create --provider openai:<model> with no endpoint configured fails up front", async () => {
    const home = makeTmpDir("sdn-")
    homes.push(home)
    clearOpenAiEnv()
    ds.track(await startDaemon(home))
    const r = await cli(home, ["agent", "create", "--provider", "openai:some-model", "--name", "x"])
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/openai: no endpoint configured/)
    const listed = await cliJson<{ agents: ReadonlyArray<Agent> } | ReadonlyArray<Agent>>(home, ["agent", "list"])
    expect(JSON.stringify(listed)).not.toContain("\"x\"")
  }, 60_000)
})
