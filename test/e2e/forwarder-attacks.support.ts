// Attacks on the model forwarder from inside a sandboxed claude agent (real binary, bwrap,
// network off), through the daemon: the agent's own Bash curls its forwarder socket
// (/run/substrat/llm.sock). Each scenario runs in a fresh home against a scripted upstream and
// returns what it measured; the e2e test (forwarder-security-claude.test.ts) asserts on it and
// the `security` chaos experiment (scripts/chaos-security/forwarder.ts) replays it. No test runner here.
import { Effect } from "effect"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { type Agent, cli, cliJson, kill9, startDaemon, waitFor, waitQuiet } from "../integration/daemon.support.js"
import { agentEvents, claudeMeteredHome, dataNamed, withLlm } from "./daemon-claude.support.js"

const { Reply } = ScriptedLlm
const small = { input_tokens: 100, output_tokens: 10, cache_read_tokens: 0, cache_write_tokens: 0 }
const withUsage = (r: ScriptedLlm.Reply, usage: typeof small): ScriptedLlm.Reply => (r._tag === "Message" ? { ...r, usage } : r)
const bash = (command: string) => Reply.toolCall("Bash", { command, description: "forwarder" })
const requestUsage = (home: string, sid: string) => dataNamed(agentEvents(home, sid), "usage").filter((u) => u["source"] === "request")
const bashResult = (home: string, sid: string) =>
  dataNamed(agentEvents(home, sid), "tool_call.result").find((d) => d["tool"] === "Bash")

/** A curl of the forwarder socket from inside the sandbox, the target sent as is. */
const curl = (method: string, target: string, body: string, extra = "") =>
  `curl -s --path-as-is --unix-socket /run/substrat/llm.sock -X ${method} -H 'content-type: application/json' -H 'x-api-key: sk-placeholder' ${extra} --data '${body}' 'http://localhost${target}'`

/** The side doors of the attack pass: other endpoints, and spellings of them. */
export const doors: ReadonlyArray<readonly [string, string]> = [
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

export interface SideDoors {
  /** Requests the upstream got that are not the agent's model requests (HEAD probes aside). */
  readonly reachedUpstream: ReadonlyArray<string>
  /** HTTP codes the sandbox saw, one per door. */
  readonly codes: ReadonlyArray<string>
  /** `forwarder.refused` events in the agent's log: method and target. */
  readonly refused: ReadonlyArray<readonly [unknown, unknown]>
  /** Output tokens charged for the early-closed 100,000-token stream (null: none recorded). */
  readonly earlyOutput: number | null
}

/**
 * The side doors, then a slow stream whose upstream reports 100,000 output tokens at its end,
 * closed by the client after its first 200 bytes. `track` gets every daemon pid started.
 */
export const sideDoorsAndEarlyClose = (homes: Array<string>, track: (pid: number) => void): Promise<SideDoors> => {
  const early = JSON.stringify({ model: "claude-test-1", max_tokens: 100000, stream: true, messages: [{ role: "user", content: "EARLY-CLOSE" }] })
  const command = [
    "rm -f /tmp/codes",
    ...doors.map(([m, p]) => `${curl(m, p, "{}", "-o /dev/null -w '%{http_code}\\n'")} >> /tmp/codes`),
    `${curl("POST", "/v1/messages", early, "-N")} | head -c 200 > /dev/null`,
    "echo CODES; cat /tmp/codes"
  ].join("; ")
  return withLlm([
    { match: { lastUser: "EARLY-CLOSE" }, reply: withUsage(Reply.text("y".repeat(400)), { ...small, output_tokens: 100000 }), frameDelayMs: 150, label: "early" },
    { match: { system: "AGENT=door" }, reply: withUsage(bash(command), small), label: "bash" },
    { match: { system: "AGENT=door" }, reply: withUsage(Reply.text("done"), small), label: "done" }
  ], async (llm) => {
    const home = claudeMeteredHome(llm, homes, "fsd-")
    track(await startDaemon(home))
    const door = await cliJson<Agent>(home, ["agent", "create", "--provider", "claude", "--name", "door", "--instructions", "AGENT=door Work."])
    await cli(home, ["agent", "send", "door", "Go."])
    await waitQuiet(home)
    const out = JSON.stringify(bashResult(home, door.session_id)?.["result"] ?? "")
    const codes = (out.split("CODES")[1] ?? "").match(/\d{3}/g) ?? []
    const seen = await Effect.runPromise(llm.requests)
    const reachedUpstream = seen
      .filter((r) => r.method !== "HEAD" && !(r.method === "POST" && r.path.split("?")[0] === "/v1/messages"))
      .map((r) => `${r.method} ${r.path}`)
    const refused = dataNamed(agentEvents(home, door.session_id), "forwarder.refused").map((d) => [d["method"], d["path"]] as const)
    // The early-closed request (the agent's own report 10 out): settled when the upstream's stream ends.
    const charged = await waitFor("the early-closed request settled", () =>
      requestUsage(home, door.session_id).find((u) => u["input_tokens"] === 100 && u["output_tokens"] !== 10), 30_000).catch(() => undefined)
    return { reachedUpstream, codes, refused, earlyOutput: charged === undefined ? null : Number(charged["output_tokens"]) }
  })
}

export interface Parallel {
  readonly limit: number
  /** USD charged in all (the budget's own figure). */
  readonly spent: number
  /** The largest reservation of one of the parallel requests (0: none logged). */
  readonly maxReservation: number
  /** Parallel requests that reached the upstream (of 20). */
  readonly reached: number
  /** HTTP codes the sandbox's curls got. */
  readonly codes: ReadonlyArray<string>
}

/** 20 parallel slow requests ($0.0201 each) against a $0.05 budget. */
export const parallelAgainstBudget = (homes: Array<string>, track: (pid: number) => void): Promise<Parallel> => {
  const limit = 0.05
  const body = JSON.stringify({ model: "claude-test-1", max_tokens: 10000, messages: [{ role: "user", content: "PARALLEL" }] })
  const command = `rm -f /tmp/par; for i in $(seq 20); do (${
    curl("POST", "/v1/messages", body, "-o /dev/null -w '%{http_code}\\n'")
  } >> /tmp/par) & done; wait; echo CODES; cat /tmp/par`
  return withLlm([
    { match: { lastUser: "PARALLEL" }, reply: withUsage(Reply.text("p"), { ...small, output_tokens: 10000 }), delayMs: 1500, times: 20, label: "par" },
    { match: { system: "AGENT=par" }, reply: withUsage(bash(command), small), label: "bash" },
    { match: { system: "AGENT=par" }, reply: withUsage(Reply.text("done"), small), times: 3, label: "done" }
  ], async (llm) => {
    const home = claudeMeteredHome(llm, homes, "fsp-")
    track(await startDaemon(home))
    const par = await cliJson<Agent>(home, [
      "agent", "create", "--provider", "claude", "--name", "par", "--instructions", "AGENT=par Work.", "--budget-usd", String(limit)
    ])
    await cli(home, ["agent", "send", "par", "Go."])
    await waitFor("the Bash call's result", () => bashResult(home, par.session_id), 180_000)
    await waitQuiet(home, ["par"])
    const reached = (await Effect.runPromise(llm.requests)).filter((r) => r.label === "par").length
    const reservations = dataNamed(agentEvents(home, par.session_id), "usage.reserved")
      .filter((d) => d["output_tokens"] === 10000)
      .map((d) => Number(d["cost_usd"]))
    const shown = await cliJson<{ used: { cost_usd: number } }>(home, ["budget", "show", "par"])
    const out = JSON.stringify(bashResult(home, par.session_id)?.["result"] ?? "")
    return {
      limit,
      spent: shown.used.cost_usd,
      maxReservation: reservations.length === 0 ? 0 : Math.max(...reservations),
      reached,
      codes: (out.split("CODES")[1] ?? "").match(/\d{3}/g) ?? []
    }
  })
}

export interface KillMidRequest {
  /** The in-flight request's reservation as logged (null: none was). */
  readonly reserved: { readonly cost_usd: number; readonly input_tokens: number; readonly output_tokens: number } | null
  /** What the budget shows used after the restart. */
  readonly used: { readonly cost_usd: number; readonly input_tokens: number; readonly output_tokens: number }
}

/** kill -9 of the daemon while the agent's model request hangs upstream, then a restart. */
export const killMidRequest = (homes: Array<string>, track: (pid: number) => void): Promise<KillMidRequest> =>
  withLlm([
    { match: { system: "AGENT=k9" }, reply: withUsage(Reply.text("late"), small), delayMs: 120_000, label: "hang" }
  ], async (llm) => {
    const home = claudeMeteredHome(llm, homes, "fsk-")
    const pid = await startDaemon(home)
    track(pid)
    const k9 = await cliJson<Agent>(home, ["agent", "create", "--provider", "claude", "--name", "k9", "--instructions", "AGENT=k9 Work.", "--budget-usd", "100"])
    await cli(home, ["agent", "send", "k9", "Go.", "--notify"])
    await Effect.runPromise(llm.awaitRequests(1, (r) => r.label === "hang"))
    const r = dataNamed(agentEvents(home, k9.session_id), "usage.reserved")[0]
    await kill9(pid)
    track(await startDaemon(home))
    const shown = await cliJson<{ used: KillMidRequest["used"] }>(home, ["budget", "show", "k9"])
    return {
      reserved: r === undefined ? null : { cost_usd: Number(r["cost_usd"]), input_tokens: Number(r["input_tokens"]), output_tokens: Number(r["output_tokens"]) },
      used: shown.used
    }
  })
