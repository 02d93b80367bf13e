// requires: bwrap, git
// The README's "Running a real Claude Code team", end to end with the REAL Claude Code binary:
// the daemon as a child process, every agent a claude in its own bwrap sandbox (network off), the
// model reached through the daemon's forwarder, upstream = a scripted Anthropic endpoint.
//   lead (created WITHOUT --workspace) spawns coder and reviewer (spawn_agent), asks coder; coder
//   writes version.ts with claude's built-in Write; lead then asks reviewer, who reads it (Read)
//   and answers with what it read; lead answers USER after both replies.
// Asserted: `agent send --wait` prints lead's FINAL text (not its progress) and exits 0; the file
// is in lead's default workspace on disk with the exact bytes (children share that workspace);
// `agent logs coder` shows the Write call (⚙); every request's `usage` is the scripted usage and
// price; each message is enqueued once and each request answered once.
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import type * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { type Agent, cli, cliJson, isAlive, spawnCli, startDaemon, waitFor, waitQuiet } from "../integration/daemon.support.js"
import { agentEvents, claudeMeteredHome, claudeMeterEnvKeys, daemonTestScope, dataNamed, withLlm } from "./support.js"

const { ds, homes } = daemonTestScope(claudeMeterEnvKeys)
const events = agentEvents
const of = dataNamed

// The README's commands, word for word.
const LEAD_INSTRUCTIONS = "You lead a small team. Spawn a 'coder' and a 'reviewer' and coordinate them."
const TASK = "Add a --version flag to the CLI in /workspace and get it reviewed."
const LEAD = "You lead a small team"
const FILE_BYTES = "export const version = \"1.2.3\"\n"
const FINAL = "Done: coder wrote version.ts, reviewer approved it."

const usage = { input_tokens: 1000, output_tokens: 200, cache_read_tokens: 3000, cache_write_tokens: 500 }
/** $ per request: (1000×1 + 200×2 + 3000×0.5 + 500×4) / 1e6. */
const price = 4900 / 1e6
const withUsage = (r: ScriptedLlm.Reply): ScriptedLlm.Reply => (r._tag === "Message" ? { ...r, usage } : r)

/** The team's script. The reviewer's answer says whether its Read returned the coder's bytes. */
const teamScript = (): Array<ScriptedLlm.ScriptEntry> => {
  let read = ""
  const e = (label: string, match: ScriptedLlm.Match, reply: ScriptedLlm.Reply): ScriptedLlm.ScriptEntry => ({ match, reply: withUsage(reply), label })
  return [
    // Rules keyed on the wake-up prompt first; the rest of lead's requests go in order.
    e("lead-final", { system: LEAD, lastUser: "Reply from reviewer" }, Reply.text(FINAL)),
    e("lead-ask-reviewer", { system: LEAD, lastUser: "Reply from coder" },
      Reply.toolCall("mcp__substrat__send_message", { recipient: "reviewer", text: "Review /workspace/version.ts.", sync: true })),
    e("lead-spawn-coder", { system: LEAD }, Reply.toolCall("mcp__substrat__spawn_agent", { name: "coder", instructions: "AGENT=coder You write code." })),
    e("lead-spawn-reviewer", { system: LEAD }, Reply.toolCall("mcp__substrat__spawn_agent", { name: "reviewer", instructions: "AGENT=reviewer You review code." })),
    e("lead-ask-coder", { system: LEAD },
      Reply.toolCall("mcp__substrat__send_message", { recipient: "coder", text: "Write /workspace/version.ts.", sync: true })),
    e("lead-progress-1", { system: LEAD }, Reply.text("Asked coder; waiting.")),
    e("lead-progress-2", { system: LEAD }, Reply.text("Asked reviewer; waiting.")),
    e("coder-write", { system: "AGENT=coder" }, Reply.toolCall("Write", { file_path: "/workspace/version.ts", content: FILE_BYTES })),
    e("coder-done", { system: "AGENT=coder" }, Reply.text("Wrote /workspace/version.ts.")),
    e("reviewer-read", { system: "AGENT=reviewer" }, Reply.toolCall("Read", { file_path: "/workspace/version.ts" })),
    {
      match: { system: "AGENT=reviewer", where: (r) => ((read = r.lastUser), true) },
      reply: { _tag: "Message", usage, get content() { return [{ type: "text" as const, text: `Approved. ${read.includes("version = \"1.2.3\"") ? "It sets 1.2.3." : "FILE NOT SEEN"}` }] } },
      label: "reviewer-done"
    }
  ]
}

const ORDER = [
  "lead-spawn-coder", "lead-spawn-reviewer", "lead-ask-coder", "lead-progress-1",
  "coder-write", "coder-done",
  "lead-ask-reviewer", "lead-progress-2",
  "reviewer-read", "reviewer-done",
  "lead-final"
]

type AgentWs = Agent & { readonly workspace_id: string | null }

/** The end state both tests reach. */
const checkEndState = async (home: string, llm: ScriptedLlm.ScriptedLlmServer) => {
  const agents = (await waitQuiet(home)) as ReadonlyArray<AgentWs>
  const by = Object.fromEntries(agents.map((a) => [a.name, a]))
  expect(Object.keys(by).sort()).toEqual(["coder", "lead", "reviewer"])
  const lead = by["lead"]!

  // The file, in lead's default workspace on disk; the children work there too.
  expect(lead.workspace_id).not.toBeNull()
  expect(by["coder"]!.workspace_id).toBe(lead.workspace_id)
  expect(by["reviewer"]!.workspace_id).toBe(lead.workspace_id)
  const ws = (await cliJson<{ workspaces: ReadonlyArray<{ id: string; root_path: string; default_for: string | null }> }>(home, ["workspace", "list"]))
    .workspaces.find((w) => w.id === lead.workspace_id)!
  expect(ws.default_for).toBe("lead")
  expect(Fs.readFileSync(Path.join(ws.root_path, "version.ts"), "utf8")).toBe(FILE_BYTES)

  // The reviewer read what the coder wrote; lead heard both.
  const reviewerLog = events(home, by["reviewer"]!.session_id)
  expect(of(reviewerLog, "turn.complete").map((d) => d["response"])).toEqual(["Approved. It sets 1.2.3."])
  const leadLog = events(home, lead.session_id)
  expect(of(leadLog, "provider.error")).toEqual([])

  // coder's transcript shows claude's Write (⚙), call and result.
  const logs = await cli(home, ["agent", "logs", "coder"])
  expect(logs.code).toBe(0)
  expect(logs.stdout).toMatch(/coder ⚙ Write \{"file_path":"\/workspace\/version\.ts","content":"export const version = \\"1\.2\.3\\"\\n"\}/)
  expect(logs.stdout).toMatch(/coder ⚙ Write → .*\/workspace\/version\.ts/)

  // Metering: one `usage` per request of each agent, each the scripted usage at the set price.
  const reqs = await Effect.runPromise(llm.modelRequests)
  const perTurnPrices: Array<number> = []
  for (const a of agents) {
    const log = events(home, a.session_id)
    const perRequest = of(log, "usage").filter((u) => u["source"] === "request")
    // (A request the daemon died under got no response: nothing to meter.)
    const mine = reqs.filter((r) => r.label !== "reviewer-held" && (r.system ?? "").includes(a.name === "lead" ? LEAD : `AGENT=${a.name}`))
    expect(perRequest.length, a.name).toBe(mine.length)
    for (const u of perRequest) {
      expect(u).toMatchObject({ ...usage, model: "claude-test-1" })
      expect(u["cost_usd"]).toBeCloseTo(price, 12)
    }
    // Per turn (claude's own report, resumed sessions included): the turn's requests summed —
    // cache reads/writes folded into input_tokens — and its cost the delta of claude's running
    // total, i.e. the same per-request price in every turn (claude's own price list, not ours).
    for (const t of of(log, "turn.complete")) {
      const n = perRequest.filter((u) => u["turn_id"] === t["turn_id"]).length
      expect(n, `${a.name} turn`).toBeGreaterThan(0)
      const turnUsage = of(log, "usage").filter((u) => u["source"] === undefined && u["turn_id"] === t["turn_id"])
      expect(turnUsage.length, `${a.name} turn usage`).toBe(1)
      expect(turnUsage[0]).toMatchObject({
        input_tokens: n * (usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens),
        output_tokens: n * usage.output_tokens
      })
      perTurnPrices.push(Number(turnUsage[0]!["cost_usd"]) / n)
    }
  }
  expect(perTurnPrices.length).toBeGreaterThan(0)
  for (const p of perTurnPrices) expect(p).toBeCloseTo(perTurnPrices[0]!, 10)
  expect(perTurnPrices[0]!).toBeGreaterThan(0)

  // No message lost or doubled: each id enqueued once across the team; each request answered once.
  const all = agents.flatMap((a) => of(events(home, a.session_id), "message.enqueued"))
  const ids = all.map((m) => String(m["id"]))
  expect(new Set(ids).size).toBe(ids.length)
  const requests = all.filter((m) => m["kind"] === "request")
  // USER's request to lead, lead's to coder and to reviewer.
  expect(requests.map((m) => m["payload"])).toEqual(expect.arrayContaining([TASK, "Write /workspace/version.ts.", "Review /workspace/version.ts."]))
  expect(requests.length).toBe(3)
  const answers = all.filter((m) => m["kind"] === "response")
  for (const r of requests) expect(answers.filter((a) => a["reply_to"] === r["id"]).length, String(r["payload"])).toBe(1)
  const toUser = of(leadLog, "message.enqueued").filter((m) => m["recipient"] === "USER")
  expect(toUser.filter((m) => m["kind"] === "response").map((m) => m["payload"])).toEqual([FINAL])
  expect(toUser.filter((m) => m["progress"] === true).map((m) => m["payload"])).toEqual(["Asked coder; waiting.", "Asked reviewer; waiting."])
  return { reqs, by }
}

describe("a real Claude Code team, as the README runs it", () => {
  it("lead (default workspace) spawns coder and reviewer; --wait prints the final answer; file, ⚙ Write, usage, one answer each", () =>
    withLlm(teamScript(), async (llm) => {
      const home = claudeMeteredHome(llm, homes, "stc-")
      ds.track(await startDaemon(home))
      const created = await cliJson<AgentWs>(home, ["agent", "create", "--provider", "claude", "--name", "lead", "--instructions", LEAD_INSTRUCTIONS])
      expect(created.workspace_id).not.toBeNull()
      const sent = await cli(home, ["agent", "send", "--wait", "lead", TASK])
      expect(sent.stderr).toBe("")
      expect(sent.code).toBe(0)
      expect(sent.stdout).toBe(`${FINAL}\n`)
      const { reqs } = await checkEndState(home, llm)
      // Each agent's requests in its order (agents run concurrently, so only per agent).
      for (const who of ["lead", "coder", "reviewer"]) {
        expect(reqs.map((r) => r.label ?? "").filter((l) => l.startsWith(who))).toEqual(ORDER.filter((l) => l.startsWith(who)))
      }
      expect(reqs.every((r) => r.headers["x-api-key"] === "sk-test-daemon-only")).toBe(true)
    }), 300_000)

  it("kill -9 of the daemon while the reviewer's turn runs: after a restart the same end state, nothing lost or answered twice", () =>
    withLlm([], async (llm) => {
      const home = claudeMeteredHome(llm, homes, "stc-")
      // The reviewer's first request is held until the daemon is dead; every later one is answered.
      await Effect.runPromise(llm.replace([
        { match: { system: "AGENT=reviewer" }, reply: Reply.text("never seen"), delayMs: 600_000, label: "reviewer-held" },
        ...teamScript()
      ]))
      const pid = await startDaemon(home)
      ds.track(pid)
      await cliJson<AgentWs>(home, ["agent", "create", "--provider", "claude", "--name", "lead", "--instructions", LEAD_INSTRUCTIONS])
      const waiting = spawnCli(home, ["agent", "send", "--wait", "lead", TASK])
      await Effect.runPromise(llm.awaitRequests(1, (r) => r.label === "reviewer-held").pipe(
        Effect.timeoutFail({ duration: "150 seconds", onTimeout: () => new Error("the reviewer's first request never came") })
      ))
      process.kill(pid, "SIGKILL")
      await waitFor("daemon gone", () => (isAlive(pid) ? undefined : true), 10_000)
      // The waiting CLI lost its daemon: exit 3 (docs/cli.md), no answer printed.
      expect(await waiting.exit).toBe(3)
      expect(waiting.err()).toMatch(/^substrat: lost the connection to the daemon/)
      expect(waiting.out()).not.toContain(FINAL)
      const pid2 = await startDaemon(home)
      ds.track(pid2)
      const { reqs } = await checkEndState(home, llm)
      // After the restart the reviewer ran again (the request re-delivered) and lead answered once.
      expect(reqs.filter((r) => r.label === "reviewer-done").length).toBe(1)
      expect(reqs.filter((r) => r.label === "lead-final").length).toBe(1)
      // Where the user finds the answer after the restart: lead's transcript.
      const logs = await cli(home, ["agent", "logs", "lead"])
      expect(logs.stdout).toMatch(/lead → USER \(progress\): Asked coder; waiting\./)
      expect(logs.stdout).toContain(`lead → USER: ${FINAL}`)
    }), 300_000)
})
