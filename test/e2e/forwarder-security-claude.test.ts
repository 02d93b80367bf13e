// The model forwarder against a sandboxed agent, with the REAL Claude Code binary (bwrap, network
// off), through the daemon and CLI. The agent's own Bash curls its forwarder socket
// (/run/substrat/llm.sock), as an agent working around the meter would:
//   - side doors (batches, complete, files, models, case and %2f spellings, dot segments): each
//     gets a 403, the scripted upstream never sees one, each is a `forwarder.refused` in the log;
//   - a slow 100,000-token stream closed by the client after its first bytes is charged the
//     100,000 output tokens the upstream reports at its end (not the 1 of its first event);
//   - 20 parallel slow requests against a small USD budget: spending ends within the limit plus
//     one request's reservation (the rest wait, then are refused);
//   - kill -9 of the daemon while a request is in flight: after the restart the budget shows
//     that request charged at its reservation.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { type Agent, cli, cliJson, kill9, startDaemon, waitFor, waitQuiet } from "../integration/daemon.support.js"
import { agentEvents, claudeMeteredHome, claudeMeterEnvKeys, daemonTestScope, dataNamed, withLlm } from "./support.js"

const { ds, homes } = daemonTestScope(claudeMeterEnvKeys)
const { Reply } = ScriptedLlm
const small = { input_tokens: 100, output_tokens: 10, cache_read_tokens: 0, cache_write_tokens: 0 }
const withUsage = (r: ScriptedLlm.Reply, usage: typeof small): ScriptedLlm.Reply => (r._tag === "Message" ? { ...r, usage } : r)
const bash = (command: string) => Reply.toolCall("Bash", { command, description: "forwarder" })
const requestUsage = (home: string, sid: string) => dataNamed(agentEvents(home, sid), "usage").filter((u) => u["source"] === "request")

/** A curl of the forwarder socket from inside the sandbox, the target sent as is. */
const curl = (method: string, target: string, body: string, extra = "") =>
  `curl -s --path-as-is --unix-socket /run/substrat/llm.sock -X ${method} -H 'content-type: application/json' -H 'x-api-key: sk-placeholder' ${extra} --data '${body}' 'http://localhost${target}'`

const doors: ReadonlyArray<readonly [string, string]> = [
  ["POST", "/v1/messages/batches"],
  ["POST", "/v1/complete"],
  ["GET", "/v1/files"],
  ["GET", "/v1/models"],
  ["POST", "/V1/MESSAGES"],
  ["POST", "/v1/messages%2fbatches"],
  ["POST", "/v1%2Fmessages"],
  ["POST", "/v1/./messages/batches"],
  ["POST", "/v1/x/../messages/batches"],
  ["POST", "/v1/messages;x/batches"],
  ["POST", "/v1//messages"]
]

describe("the model forwarder against a sandboxed claude agent", () => {
  it("side doors get a 403 and never reach the upstream; an early close is charged the whole response", () => {
    const early = JSON.stringify({ model: "claude-test-1", max_tokens: 100000, stream: true, messages: [{ role: "user", content: "EARLY-CLOSE" }] })
    const command = [
      ...doors.map(([m, p]) => `${curl(m, p, "{}", "-o /dev/null -w '%{http_code}\\n'")} >> /tmp/codes`),
      // Read the first bytes of a slow stream, then hang up.
      `${curl("POST", "/v1/messages", early, "-N")} | head -c 200 > /dev/null`,
      "cat /tmp/codes"
    ].join("; ")
    return withLlm([
      { match: { lastUser: "EARLY-CLOSE" }, reply: withUsage(Reply.text("y".repeat(400)), { ...small, output_tokens: 100000 }), frameDelayMs: 150, label: "early" },
      { match: { system: "AGENT=door" }, reply: withUsage(bash(command), small), label: "bash" },
      { match: { system: "AGENT=door" }, reply: withUsage(Reply.text("done"), small), label: "done" }
    ], async (llm) => {
      const home = claudeMeteredHome(llm, homes, "fsd-")
      ds.track(await startDaemon(home))
      const door = await cliJson<Agent>(home, ["agent", "create", "--provider", "claude", "--name", "door", "--instructions", "AGENT=door Work."])
      expect((await cli(home, ["agent", "send", "door", "Go."])).code).toBe(0)
      await waitQuiet(home)
      const events = agentEvents(home, door.session_id)
      const result = dataNamed(events, "tool_call.result").find((d) => d["tool"] === "Bash")
      expect(String(JSON.stringify(result?.["result"]))).toContain("403")
      const seen = await Effect.runPromise(llm.requests)
      // The upstream saw the agent's own model requests and the early-closed one: nothing else.
      for (const r of seen) expect([r.method, r.path.split("?")[0]]).toEqual([r.method === "HEAD" ? "HEAD" : "POST", r.method === "HEAD" ? r.path : "/v1/messages"])
      expect(seen.filter((r) => r.label === "early")).toHaveLength(1)
      const refused = dataNamed(events, "forwarder.refused")
      expect(refused.map((d) => [d["method"], d["path"]])).toEqual(doors.map(([m, p]) => [m, p]))
      // The early-closed stream: charged what the upstream reports at its end, read after the client left.
      const charged = await waitFor("the early-closed request settled", () =>
        requestUsage(home, door.session_id).find((u) => u["output_tokens"] === 100000), 30_000)
      expect(charged["input_tokens"]).toBe(100)
    })
  }, 240_000)

  it("20 parallel slow requests against a small budget spend at most the limit plus one reservation", () => {
    const limit = 0.05
    const body = JSON.stringify({ model: "claude-test-1", max_tokens: 10000, messages: [{ role: "user", content: "PARALLEL" }] })
    const command = `for i in $(seq 20); do (${curl("POST", "/v1/messages", body, "-o /dev/null -w '%{http_code}\\n'")} >> /tmp/par) & done; wait; sort /tmp/par | uniq -c`
    return withLlm([
      // $0.0201 each ($1/M in, $2/M out): 20 of them would be $0.40.
      { match: { lastUser: "PARALLEL" }, reply: withUsage(Reply.text("p"), { ...small, output_tokens: 10000 }), delayMs: 1500, times: 20, label: "par" },
      { match: { system: "AGENT=par" }, reply: withUsage(bash(command), small), label: "bash" },
      { match: { system: "AGENT=par" }, reply: withUsage(Reply.text("done"), small), times: 3, label: "done" }
    ], async (llm) => {
      const home = claudeMeteredHome(llm, homes, "fsp-")
      ds.track(await startDaemon(home))
      const par = await cliJson<Agent>(home, [
        "agent", "create", "--provider", "claude", "--name", "par", "--instructions", "AGENT=par Work.", "--budget-usd", String(limit)
      ])
      expect((await cli(home, ["agent", "send", "par", "Go."])).code).toBe(0)
      await waitFor("the Bash call's result", () =>
        dataNamed(agentEvents(home, par.session_id), "tool_call.result").find((d) => d["tool"] === "Bash"), 180_000)
      await waitQuiet(home).catch(() => undefined)
      const parallel = (await Effect.runPromise(llm.requests)).filter((r) => r.label === "par")
      const events = agentEvents(home, par.session_id)
      const reservations = dataNamed(events, "usage.reserved").filter((d) => d["output_tokens"] === 10000).map((d) => Number(d["cost_usd"]))
      const shown = await cliJson<{ used: { cost_usd: number } }>(home, ["budget", "show", "par"])
      const spent = requestUsage(home, par.session_id).reduce((s, u) => s + Number(u["cost_usd"]), 0)
      expect(shown.used.cost_usd).toBeCloseTo(spent, 9)
      expect(reservations.length).toBe(parallel.length)
      expect(parallel.length).toBeLessThan(20)
      expect(spent).toBeLessThanOrEqual(limit + Math.max(...reservations))
      const result = JSON.stringify(dataNamed(events, "tool_call.result").find((d) => d["tool"] === "Bash")?.["result"])
      expect(result).toContain("400")
    })
  }, 300_000)

  it("kill -9 with a request in flight: after the restart the budget shows it charged at its reservation", () =>
    withLlm([
      // Never answered before the kill.
      { match: { system: "AGENT=k9" }, reply: withUsage(Reply.text("late"), small), delayMs: 120_000, label: "hang" }
    ], async (llm) => {
      const home = claudeMeteredHome(llm, homes, "fsk-")
      const pid = await startDaemon(home)
      ds.track(pid)
      const k9 = await cliJson<Agent>(home, ["agent", "create", "--provider", "claude", "--name", "k9", "--instructions", "AGENT=k9 Work.", "--budget-usd", "100"])
      expect((await cli(home, ["agent", "send", "k9", "Go.", "--notify"])).code).toBe(0)
      await Effect.runPromise(llm.awaitRequests(1, (r) => r.label === "hang"))
      const reserved = dataNamed(agentEvents(home, k9.session_id), "usage.reserved")
      expect(reserved).toHaveLength(1)
      const r = reserved[0]!
      expect(Number(r["cost_usd"])).toBeGreaterThan(0)
      await kill9(pid)
      ds.track(await startDaemon(home))
      const shown = await cliJson<{ used: { cost_usd: number; input_tokens: number; output_tokens: number } }>(home, ["budget", "show", "k9"])
      expect(shown.used.cost_usd).toBeCloseTo(Number(r["cost_usd"]), 9)
      expect([shown.used.input_tokens, shown.used.output_tokens]).toEqual([r["input_tokens"], r["output_tokens"]])
    }), 240_000)
})
