// requires: bwrap, git
// The README's "Running a real Claude Code team", end to end with the REAL Claude Code binary:
// the daemon as a child process, every agent a claude in its own bwrap sandbox (network off), the
// model reached through the daemon's forwarder, upstream = a scripted Anthropic endpoint.
//   lead (created WITHOUT --workspace) spawns coder and reviewer (spawn_agent), asks coder; coder
//   writes version.ts with claude's built-in Write; lead then asks reviewer, who reads it (Read)
//   and answers with what it read; lead answers USER after both replies (team.support.ts).
// Asserted: `agent send --wait` prints lead's FINAL text (not its progress) and exits 0; the file
// is in lead's default workspace on disk with the exact bytes (children share that workspace);
// `agent logs coder` shows the Write call (⚙); every request's `usage` is the scripted usage and
// price; each message is enqueued once and each request answered once. Part 2: kill -9 of the
// daemon mid-way; `agent wait` with the id the lost `--wait` printed gives the final answer.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import type * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { cli, startDaemon } from "../integration/daemon.support.js"
import { agentEvents, claudeMeteredHome, claudeMeterEnvKeys, daemonTestScope, dataNamed, withLlm } from "./support.js"
import { checkTeamEndState, expectOrder, FINAL, killDuringReview, perRequestUsage, rewait, sendTheTask, teamScript } from "./team.support.js"

const { ds, homes } = daemonTestScope(claudeMeterEnvKeys)
const events = agentEvents
const of = dataNamed

const usage = { input_tokens: 1000, output_tokens: 200, cache_read_tokens: 3000, cache_write_tokens: 500 }
/** $ per request: (1000×1 + 200×2 + 3000×0.5 + 500×4) / 1e6. */
const price = 4900 / 1e6

/** The team with claude's own Write and Read. */
const script = (): Array<ScriptedLlm.ScriptEntry> =>
  teamScript({
    usage,
    write: Reply.toolCall("Write", { file_path: "/workspace/version.ts", content: "export const version = \"1.2.3\"\n" }),
    read: Reply.toolCall("Read", { file_path: "/workspace/version.ts" })
  })

/** The end state both tests reach: the team's, plus claude's Write and metering. */
const checkEndState = async (home: string, llm: ScriptedLlm.ScriptedLlmServer) => {
  const { agents, by } = await checkTeamEndState(home)

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
    const perRequest = perRequestUsage(home, a, reqs, { ...usage, model: "claude-test-1" }, price)
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
  return { reqs, by }
}

describe("a real Claude Code team, as the README runs it", () => {
  it("lead (default workspace) spawns coder and reviewer; --wait prints the final answer; file, ⚙ Write, usage, one answer each", () =>
    withLlm(script(), async (llm) => {
      const home = claudeMeteredHome(llm, homes, "stc-")
      await sendTheTask(home, "claude", (pid) => ds.track(pid))
      const { reqs } = await checkEndState(home, llm)
      expectOrder(reqs)
      expect(reqs.every((r) => r.headers["x-api-key"] === "sk-test-daemon-only")).toBe(true)
    }), 300_000)

  it("kill -9 of the daemon while the reviewer's turn runs: after a restart the same end state, nothing lost or answered twice", () =>
    withLlm([], async (llm) => {
      const home = claudeMeteredHome(llm, homes, "stc-")
      const request = await killDuringReview(home, llm, "claude", script(), (pid) => ds.track(pid))
      ds.track(await startDaemon(home))
      // The command the lost --wait printed waits again for the same request: lead's final answer.
      await rewait(home, request)
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
