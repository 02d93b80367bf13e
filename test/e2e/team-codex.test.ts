// requires: bwrap, git
// The team of test/e2e/team-claude.test.ts with the REAL `codex` binary: the daemon as a child
// process, every agent a `codex exec` in its own bwrap sandbox (network off), the model reached
// through the daemon's OpenAI forwarder, upstream = a scripted Responses endpoint. Codex runs
// with its DEFAULT model (a model of its bundled catalog: MCP tools must be declared directly,
// not deferred behind tool_search — docs/providers-real.md).
//   lead (created WITHOUT --workspace, provider codex) spawns coder and reviewer (spawn_agent),
//   asks coder; coder writes version.ts with codex's own exec_command; lead then asks reviewer,
//   who reads it (exec_command `cat`) and answers with what it read; lead answers USER after both.
// Asserted: `agent send --wait` prints lead's FINAL text and exits 0; the file is in lead's
// default workspace with the exact bytes (children share it); `agent logs coder` shows the
// exec_command call and its output (⚙); every request's `usage` is the scripted usage at the set
// price, and each turn's usage is the sum of its requests; each message is enqueued once and
// each request answered once. Part 2: kill -9 of the daemon mid-way; the lost `--wait` names the
// command that waits again (`agent wait`), which prints the same final answer after a restart.
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import type * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { responsesTools } from "../../src/testing/scripted/OpenAi.js"
import { makeTmpDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, isAlive, spawnCli, startDaemon, waitFor, waitQuiet } from "../integration/daemon.support.js"
import { agentEvents, daemonTestScope, dataNamed, withLlm } from "./support.js"

const envKeys = ["SUBSTRAT_OPENAI_UPSTREAM", "OPENAI_API_KEY", "SUBSTRAT_CODEX_BIN", "SUBSTRAT_CODEX_MODEL", "SUBSTRAT_METER_PRICES"]
const { ds, homes } = daemonTestScope(envKeys)
const events = agentEvents
const of = dataNamed

const LEAD_INSTRUCTIONS = "You lead a small team. Spawn a 'coder' and a 'reviewer' and coordinate them."
const TASK = "Add a --version flag to the CLI in /workspace and get it reviewed."
const LEAD = "You lead a small team"
const FILE_BYTES = "export const version = \"1.2.3\"\n"
const FINAL = "Done: coder wrote version.ts, reviewer approved it."
/** Codex's default model (src/provider/codex/CodexProvider.ts), in its bundled catalog. */
const MODEL = "gpt-5.5"

/** Responses usage: input_tokens counts the cached tokens too (the endpoint adds them). */
const usage = { input_tokens: 1000, output_tokens: 200, cache_read_tokens: 3000 }
/** $ per request: (1000×1 + 200×2 + 3000×0.5) / 1e6. */
const price = 2900 / 1e6
const withUsage = (r: ScriptedLlm.Reply): ScriptedLlm.Reply => (r._tag === "Message" ? { ...r, usage } : r)

/** A call of codex's own shell tool. */
const exec = (cmd: string): ScriptedLlm.Reply => Reply.message([{ type: "tool_use", name: "exec_command", input: { cmd } }])
const WRITE = `printf '%s\\n' 'export const version = "1.2.3"' > /workspace/version.ts`

/** The team's script. The reviewer's answer says whether its `cat` returned the coder's bytes. */
const teamScript = (): Array<ScriptedLlm.ScriptEntry> => {
  let read = ""
  const e = (label: string, match: ScriptedLlm.Match, reply: ScriptedLlm.Reply): ScriptedLlm.ScriptEntry => ({ match, reply: withUsage(reply), label })
  return [
    e("lead-final", { system: LEAD, lastUser: "Reply from reviewer" }, Reply.text(FINAL)),
    e("lead-ask-reviewer", { system: LEAD, lastUser: "Reply from coder" },
      Reply.toolCall("mcp__substrat__send_message", { recipient: "reviewer", text: "Review /workspace/version.ts.", sync: true })),
    e("lead-spawn-coder", { system: LEAD }, Reply.toolCall("mcp__substrat__spawn_agent", { name: "coder", instructions: "AGENT=coder You write code." })),
    e("lead-spawn-reviewer", { system: LEAD }, Reply.toolCall("mcp__substrat__spawn_agent", { name: "reviewer", instructions: "AGENT=reviewer You review code." })),
    e("lead-ask-coder", { system: LEAD },
      Reply.toolCall("mcp__substrat__send_message", { recipient: "coder", text: "Write /workspace/version.ts.", sync: true })),
    e("lead-progress-1", { system: LEAD }, Reply.text("Asked coder; waiting.")),
    e("lead-progress-2", { system: LEAD }, Reply.text("Asked reviewer; waiting.")),
    e("coder-write", { system: "AGENT=coder", lastUser: "Write /workspace/version.ts." }, exec(WRITE)),
    e("coder-done", { system: "AGENT=coder" }, Reply.text("Wrote /workspace/version.ts.")),
    e("reviewer-read", { system: "AGENT=reviewer", lastUser: "Review /workspace/version.ts." }, exec("cat /workspace/version.ts")),
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

type AgentWs = Agent & { readonly workspace_id: string | null; readonly provider: string }

/** The end state both tests reach. */
const checkEndState = async (home: string, llm: ScriptedLlm.ScriptedLlmServer) => {
  const agents = (await waitQuiet(home)) as ReadonlyArray<AgentWs>
  const by = Object.fromEntries(agents.map((a) => [a.name, a]))
  expect(Object.keys(by).sort()).toEqual(["coder", "lead", "reviewer"])
  expect(agents.map((a) => a.provider)).toEqual(["codex", "codex", "codex"])
  const lead = by["lead"]!

  // The file, in lead's default workspace on disk; the children work there too.
  expect(lead.workspace_id).not.toBeNull()
  expect(by["coder"]!.workspace_id).toBe(lead.workspace_id)
  expect(by["reviewer"]!.workspace_id).toBe(lead.workspace_id)
  const ws = (await cliJson<{ workspaces: ReadonlyArray<{ id: string; root_path: string; default_for: string | null }> }>(home, ["workspace", "list"]))
    .workspaces.find((w) => w.id === lead.workspace_id)!
  expect(ws.default_for).toBe("lead")
  expect(Fs.readFileSync(Path.join(ws.root_path, "version.ts"), "utf8")).toBe(FILE_BYTES)

  // The reviewer read what the coder wrote; lead heard both; nobody's turn failed.
  const reviewerLog = events(home, by["reviewer"]!.session_id)
  expect(of(reviewerLog, "turn.complete").map((d) => d["response"])).toEqual(["Approved. It sets 1.2.3."])
  const leadLog = events(home, lead.session_id)
  for (const a of agents) expect(of(events(home, a.session_id), "provider.error"), a.name).toEqual([])

  // coder's log and transcript show codex's own exec_command (⚙), call and output.
  const coderLog = events(home, by["coder"]!.session_id)
  const invoked = of(coderLog, "tool_call.invoked").filter((c) => c["source"] === "provider")
  expect(invoked.map((c) => c["tool"])).toEqual(["exec_command"])
  expect(JSON.stringify(invoked[0]!["arguments"])).toContain("> /workspace/version.ts")
  const logs = await cli(home, ["agent", "logs", "coder"])
  expect(logs.code).toBe(0)
  expect(logs.stdout).toMatch(/coder ⚙ exec_command .*printf .*export const version = .*> \/workspace\/version\.ts/)
  expect(logs.stdout).toMatch(/coder ⚙ exec_command → .*"exit_code":0/)
  const reviewerLogs = await cli(home, ["agent", "logs", "reviewer"])
  expect(reviewerLogs.stdout).toMatch(/reviewer ⚙ exec_command → .*export const version = \\"1\.2\.3\\"/)

  // Metering: one `usage` per request of each agent, each the scripted usage at the set price;
  // each turn's own usage (codex's turn.completed) is the sum of its requests' tokens.
  const reqs = await Effect.runPromise(llm.modelRequests)
  for (const a of agents) {
    const log = events(home, a.session_id)
    const perRequest = of(log, "usage").filter((u) => u["source"] === "request")
    // (A request the daemon died under got no response: nothing to meter.)
    const mine = reqs.filter((r) => r.label !== "reviewer-held" && (r.system ?? "").includes(a.name === "lead" ? LEAD : `AGENT=${a.name}`))
    expect(perRequest.length, a.name).toBe(mine.length)
    for (const u of perRequest) {
      expect(u).toMatchObject({ input_tokens: usage.input_tokens, output_tokens: usage.output_tokens, cache_read_tokens: usage.cache_read_tokens, model: MODEL })
      expect(u["cost_usd"]).toBeCloseTo(price, 12)
    }
    for (const t of of(log, "turn.complete")) {
      const n = perRequest.filter((u) => u["turn_id"] === t["turn_id"]).length
      expect(n, `${a.name} turn`).toBeGreaterThan(0)
      const turnUsage = of(log, "usage").filter((u) => u["source"] === undefined && u["turn_id"] === t["turn_id"])
      expect(turnUsage.length, `${a.name} turn usage`).toBe(1)
      // Codex counts cached input in input_tokens, as the Responses API does.
      expect(turnUsage[0]).toMatchObject({
        input_tokens: n * (usage.input_tokens + usage.cache_read_tokens),
        output_tokens: n * usage.output_tokens
      })
      const turnCost = perRequest.filter((u) => u["turn_id"] === t["turn_id"]).reduce((s, u) => s + Number(u["cost_usd"]), 0)
      expect(turnCost).toBeCloseTo(n * price, 12)
    }
  }

  // No message lost or doubled: each id enqueued once across the team; each request answered once.
  const all = agents.flatMap((a) => of(events(home, a.session_id), "message.enqueued"))
  const ids = all.map((m) => String(m["id"]))
  expect(new Set(ids).size).toBe(ids.length)
  const requests = all.filter((m) => m["kind"] === "request")
  expect(requests.map((m) => m["payload"])).toEqual(expect.arrayContaining([TASK, "Write /workspace/version.ts.", "Review /workspace/version.ts."]))
  expect(requests.length).toBe(3)
  const answers = all.filter((m) => m["kind"] === "response")
  for (const r of requests) expect(answers.filter((a) => a["reply_to"] === r["id"]).length, String(r["payload"])).toBe(1)
  const toUser = of(leadLog, "message.enqueued").filter((m) => m["recipient"] === "USER")
  expect(toUser.filter((m) => m["kind"] === "response").map((m) => m["payload"])).toEqual([FINAL])
  expect(toUser.filter((m) => m["progress"] === true).map((m) => m["payload"])).toEqual(["Asked coder; waiting.", "Asked reviewer; waiting."])
  // The keys are the daemon's: the sandboxed codex only ever had the placeholder.
  expect(reqs.every((r) => r.headers["authorization"] === "Bearer sk-test-daemon-only")).toBe(true)
  expect(reqs.every((r) => r.model === MODEL)).toBe(true)
  return { reqs, by }
}

describe("a real Codex team", () => {
  it("lead (default workspace, default model) spawns coder and reviewer; --wait prints the final answer; file, ⚙ exec_command, usage, one answer each", () =>
    withLlm(teamScript(), async (llm) => {
      const home = codexHome(llm)
      ds.track(await startDaemon(home))
      const created = await cliJson<AgentWs>(home, ["agent", "create", "--provider", "codex", "--name", "lead", "--instructions", LEAD_INSTRUCTIONS])
      expect(created.workspace_id).not.toBeNull()
      const sent = await cli(home, ["agent", "send", "--wait", "lead", TASK])
      expect(sent.stderr).toBe("")
      expect(sent.code).toBe(0)
      expect(sent.stdout).toBe(`${FINAL}\n`)
      const { reqs } = await checkEndState(home, llm)
      for (const who of ["lead", "coder", "reviewer"]) {
        expect(reqs.map((r) => r.label ?? "").filter((l) => l.startsWith(who))).toEqual(ORDER.filter((l) => l.startsWith(who)))
      }
      // MCP tools declared directly to the default model: no tool_search.
      for (const r of reqs) {
        const declared = [...responsesTools(r.body).keys()]
        expect(declared).toContain("mcp__substrat__send_message")
        expect(declared).toContain("exec_command")
        expect(declared).not.toContain("tool_search")
      }
    }), 300_000)

  it("kill -9 of the daemon while the reviewer's turn runs: `agent wait` prints the answer after a restart; nothing lost or answered twice", () =>
    withLlm([], async (llm) => {
      const home = codexHome(llm)
      // The reviewer's first request is held until the daemon is dead; every later one is answered.
      await Effect.runPromise(llm.replace([
        { match: { system: "AGENT=reviewer" }, reply: Reply.text("never seen"), delayMs: 600_000, label: "reviewer-held" },
        ...teamScript()
      ]))
      const pid = await startDaemon(home)
      ds.track(pid)
      await cliJson<AgentWs>(home, ["agent", "create", "--provider", "codex", "--name", "lead", "--instructions", LEAD_INSTRUCTIONS])
      const waiting = spawnCli(home, ["agent", "send", "--wait", "lead", TASK])
      await Effect.runPromise(llm.awaitRequests(1, (r) => r.label === "reviewer-held").pipe(
        Effect.timeoutFail({ duration: "150 seconds", onTimeout: () => new Error("the reviewer's first request never came") })
      ))
      process.kill(pid, "SIGKILL")
      await waitFor("daemon gone", () => (isAlive(pid) ? undefined : true), 10_000)
      // The waiting CLI lost its daemon: exit 3, no answer, and the command that waits again.
      expect(await waiting.exit).toBe(3)
      expect(waiting.err()).toMatch(/^substrat: lost the connection to the daemon/)
      const again = /substrat agent wait lead ([0-9a-f-]{36})/.exec(waiting.err())
      expect(again, waiting.err()).not.toBeNull()
      expect(waiting.out()).not.toContain(FINAL)
      const pid2 = await startDaemon(home)
      ds.track(pid2)
      // Waiting again for the same request prints lead's final answer once it comes.
      const rewait = await cli(home, ["agent", "wait", "lead", again![1]!, "--home", home])
      expect(rewait.stderr).toBe("")
      expect(rewait.code).toBe(0)
      expect(rewait.stdout).toBe(`${FINAL}\n`)
      const { reqs, by } = await checkEndState(home, llm)
      const asked = of(events(home, by["lead"]!.session_id), "message.enqueued").filter((m) => m["sender"] === "USER")
      expect(asked.map((m) => m["id"])).toEqual([again![1]])
      expect(reqs.filter((r) => r.label === "reviewer-done").length).toBe(1)
      expect(reqs.filter((r) => r.label === "lead-final").length).toBe(1)
      const logs = await cli(home, ["agent", "logs", "lead"])
      expect(logs.stdout).toContain(`lead → USER: ${FINAL}`)
    }), 300_000)
})
