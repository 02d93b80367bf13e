// requires: bwrap, git
// The team of test/e2e/team-claude.test.ts with the REAL `codex` binary: the daemon as a child
// process, every agent a `codex exec` in its own bwrap sandbox (network off), the model reached
// through the daemon's OpenAI forwarder, upstream = a scripted Responses endpoint. Codex runs
// with its DEFAULT model (a model of its bundled catalog: MCP tools must be declared directly,
// not deferred behind tool_search — docs/providers-real.md) and the binary installed with
// substrat (no SUBSTRAT_CODEX_BIN).
//   lead (created WITHOUT --workspace, provider codex) spawns coder and reviewer (spawn_agent),
//   asks coder; coder writes version.ts with codex's own apply_patch; lead then asks reviewer,
//   who reads it (codex's exec_command `cat`) and answers with what it read; lead answers USER after both.
// Asserted: `agent send --wait` prints lead's FINAL text and exits 0; the file is in lead's
// default workspace with the exact bytes (children share it); `agent logs coder` shows the
// apply_patch call and its result (⚙), `agent logs reviewer` the exec_command and its output; every request's `usage` is the scripted usage at the set
// price, and each turn's usage is the sum of its requests (codex reports the thread's running
// totals; the provider turns them into the turn's own); each message is enqueued once and each
// request answered once. Part 2: kill -9 of the daemon mid-way; the lost `--wait` names the
// command that waits again (`agent wait`), which prints the same final answer after a restart.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import type * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { responsesTools } from "../../src/testing/scripted/OpenAi.js"
import { makeTmpDir } from "../support/tmp.js"
import { cli, startDaemon } from "../integration/daemon.support.js"
import { agentEvents, daemonTestScope, dataNamed, withLlm } from "./support.js"
import { checkTeamEndState, expectOrder, FINAL, killDuringReview, perRequestUsage, rewait, sendTheTask, teamScript } from "./team.support.js"

const envKeys = ["SUBSTRAT_OPENAI_UPSTREAM", "OPENAI_API_KEY", "SUBSTRAT_CODEX_BIN", "SUBSTRAT_CODEX_MODEL", "SUBSTRAT_METER_PRICES"]
const { ds, homes } = daemonTestScope(envKeys)
const events = agentEvents
const of = dataNamed

/** Codex's default model (src/provider/codex/CodexProvider.ts), in its bundled catalog. */
const MODEL = "gpt-5.5"
/** Responses usage: the endpoint reports input_tokens with the cached tokens included. */
const usage = { input_tokens: 1000, output_tokens: 200, cache_read_tokens: 3000 }
/** $ per request: (1000×1 + 200×2 + 3000×0.5) / 1e6. */
const price = 2900 / 1e6

/** The coder writes with codex's own apply_patch (a freeform tool for the default model). */
const PATCH = "*** Begin Patch\n*** Add File: version.ts\n+export const version = \"1.2.3\"\n*** End Patch\n"
/** The reviewer reads with codex's own shell tool. */
const script = (): Array<ScriptedLlm.ScriptEntry> =>
  teamScript({
    usage,
    write: Reply.message([{ type: "tool_use", name: "apply_patch", input: PATCH }]),
    read: Reply.message([{ type: "tool_use", name: "exec_command", input: { cmd: "cat /workspace/version.ts" } }])
  })

/** A fresh home whose codex agents reach `llm` through the daemon's forwarder, with the default model priced. */
const codexHome = (llm: ScriptedLlm.ScriptedLlmServer): string => {
  const home = makeTmpDir("stx-") // short: agent socket paths must fit in sun_path
  homes.push(home)
  process.env["SUBSTRAT_OPENAI_UPSTREAM"] = llm.baseUrl
  process.env["OPENAI_API_KEY"] = "sk-test-daemon-only"
  // The codex installed with substrat (its own node_modules) and its default model.
  delete process.env["SUBSTRAT_CODEX_BIN"]
  delete process.env["SUBSTRAT_CODEX_MODEL"]
  process.env["SUBSTRAT_METER_PRICES"] = JSON.stringify({ [MODEL]: { input: 1, output: 2, cache_read: 0.5, cache_write: 4 } })
  return home
}

/** The end state both tests reach: the team's, plus codex's exec_command and metering. */
const checkEndState = async (home: string, llm: ScriptedLlm.ScriptedLlmServer) => {
  const { agents, by } = await checkTeamEndState(home)
  expect(agents.map((a) => a.provider)).toEqual(["codex", "codex", "codex"])

  // coder's log and transcript show codex's own apply_patch (⚙), call and result; the reviewer's
  // its exec_command read, with the output.
  const coderLog = events(home, by["coder"]!.session_id)
  const invoked = of(coderLog, "tool_call.invoked").filter((c) => c["source"] === "provider")
  expect(invoked.map((c) => c["tool"])).toEqual(["apply_patch"])
  const logs = await cli(home, ["agent", "logs", "coder"])
  expect(invoked[0]!["arguments"]).toEqual({ changes: [{ path: "/workspace/version.ts", kind: "add" }] })
  expect(of(coderLog, "tool_call.result").filter((c) => c["source"] === "provider").map((r) => [r["result"], r["is_error"]]))
    .toEqual([[{ status: "completed" }, false]])
  expect(logs.code).toBe(0)
  expect(logs.stdout).toContain(`coder ⚙ apply_patch {"changes":[{"path":"/workspace/version.ts","kind":"add"}]}\n`)
  expect(logs.stdout).toContain(`coder ⚙ apply_patch → {"status":"completed"}\n`)
  expect((await cli(home, ["agent", "logs", "reviewer"])).stdout).toMatch(/reviewer ⚙ exec_command → .*export const version = \\"1\.2\.3\\"/)

  // Metering: one `usage` per request of each agent, each the scripted usage at the set price;
  // each turn's own usage is the sum of its requests' tokens (cached input inside input_tokens,
  // as codex counts it), and its cost what the forwarder metered for them.
  const reqs = await Effect.runPromise(llm.modelRequests)
  for (const a of agents) {
    const log = events(home, a.session_id)
    const perRequest = perRequestUsage(home, a, reqs, { ...usage, model: MODEL }, price)
    for (const t of of(log, "turn.complete")) {
      const own = perRequest.filter((u) => u["turn_id"] === t["turn_id"])
      expect(own.length, `${a.name} turn`).toBeGreaterThan(0)
      const turnUsage = of(log, "usage").filter((u) => u["source"] === undefined && u["turn_id"] === t["turn_id"])
      expect(turnUsage.length, `${a.name} turn usage`).toBe(1)
      expect(turnUsage[0], `${a.name} turn of ${own.length} requests`).toMatchObject({
        input_tokens: own.length * (usage.input_tokens + usage.cache_read_tokens),
        output_tokens: own.length * usage.output_tokens
      })
      expect(own.reduce((sum, u) => sum + Number(u["cost_usd"]), 0)).toBeCloseTo(own.length * price, 12)
    }
  }
  // The key is the daemon's: the sandboxed codex only ever had the placeholder.
  expect(reqs.every((r) => r.headers["authorization"] === "Bearer sk-test-daemon-only")).toBe(true)
  expect(reqs.every((r) => r.model === MODEL)).toBe(true)
  return { reqs, by }
}

describe("a real Codex team", () => {
  it("lead (default workspace, default model) spawns coder and reviewer; --wait prints the final answer; file, ⚙ apply_patch and exec_command, usage, one answer each", () =>
    withLlm(script(), async (llm) => {
      const home = codexHome(llm)
      await sendTheTask(home, "codex", (pid) => ds.track(pid))
      const { reqs } = await checkEndState(home, llm)
      expectOrder(reqs)
      // The default model gets the MCP tools directly, and codex's own shell: no tool_search.
      for (const r of reqs) {
        const declared = [...responsesTools(r.body).keys()]
        expect(declared).toContain("mcp__substrat__send_message")
        expect(declared).toContain("exec_command")
        expect(declared).toContain("apply_patch")
        expect(declared).not.toContain("tool_search")
      }
    }), 300_000)

  it("kill -9 of the daemon while the reviewer's turn runs: `agent wait` prints the answer after a restart; nothing lost or answered twice", () =>
    withLlm([], async (llm) => {
      const home = codexHome(llm)
      const request = await killDuringReview(home, llm, "codex", script(), (pid) => ds.track(pid))
      ds.track(await startDaemon(home))
      await rewait(home, request)
      const { reqs, by } = await checkEndState(home, llm)
      // That id is USER's one request; the reviewer ran again and lead answered once.
      const asked = of(events(home, by["lead"]!.session_id), "message.enqueued").filter((m) => m["sender"] === "USER")
      expect(asked.map((m) => m["id"])).toEqual([request])
      expect(reqs.filter((r) => r.label === "reviewer-done").length).toBe(1)
      expect(reqs.filter((r) => r.label === "lead-final").length).toBe(1)
      expect((await cli(home, ["agent", "logs", "lead"])).stdout).toContain(`lead → USER: ${FINAL}`)
    }), 300_000)
})
