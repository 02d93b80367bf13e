// requires: bwrap, git
// The REAL Qwen Code (`@qwen-code/qwen-code`, `qwen --acp`) as `acp:qwen` through the daemon and
// the CLI: each agent's qwen in its own bwrap sandbox (network off), its model traffic through the
// daemon's OpenAI forwarder to a scripted Chat Completions endpoint (`acp.model`), the key only in
// the daemon. Qwen Code has no system prompt for the client to set: Substrat's instructions open
// the first prompt of its session, so the script tells agents apart by that first message.
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import type * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { makeTmpDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, kill9, rpcOnce, spawnCli, startDaemon, waitFor } from "../integration/daemon.support.js"
import { agentEvents as events, daemonTestScope, dataNamed as of, withLlm } from "./support.js"
import { type AgentWs, checkTeamEndState, expectOrder, FILE_BYTES, FINAL, LEAD, LEAD_INSTRUCTIONS, TASK, teamScript } from "./team.support.js"

const envKeys = ["SUBSTRAT_OPENAI_UPSTREAM", "OPENAI_API_KEY", "SUBSTRAT_METER_PRICES"]
const { ds, homes } = daemonTestScope(envKeys)

const MODEL = "qwen-scripted"
/** Chat Completions usage: prompt_tokens include the cached ones. */
const usage = { input_tokens: 1000, output_tokens: 200, cache_read_tokens: 3000 }
/** $ per request: (1000×1 + 200×2 + 3000×0.5) / 1e6. */
const price = 2900 / 1e6

/** The text of a Chat Completions message's content. */
const textOf = (c: unknown): string =>
  typeof c === "string" ? c : Array.isArray(c) ? c.map((p) => (typeof p === "object" && p !== null && "text" in p ? String(p.text) : "")).join("") : ""

/**
 * The first prompt of the agent's session: the user message that carries Substrat's
 * instructions (qwen puts its own reminders before it). "" for a request without it.
 */
export const firstPrompt = (r: { readonly body: unknown }): string => {
  const b = r.body
  const msgs = typeof b === "object" && b !== null && "messages" in b && Array.isArray(b.messages) ? (b.messages as ReadonlyArray<unknown>) : []
  for (const m of msgs) {
    if (typeof m !== "object" || m === null || !("role" in m) || m.role !== "user") continue
    const t = textOf("content" in m ? m.content : "")
    if (t.includes("You are one agent in a team run by Substrat")) return t
  }
  return ""
}

/**
 * Substrat's tools as qwen names them. Qwen offers MCP tools as deferred ones (listed by name in
 * its start-up reminder, reached through its tool_search/tool_call): a session's first request
 * must already offer them, or the model's first call of one finds no such tool.
 */
const SUBSTRAT_TOOLS = ["mcp__substrat__send_message", "mcp__substrat__spawn_agent", "mcp__substrat__check_inbox"]
/** Which of Substrat's tools the request names to the model (declared or listed). */
const offered = (r: { readonly body: unknown }): ReadonlyArray<string> => {
  const raw = JSON.stringify(r.body)
  return SUBSTRAT_TOOLS.filter((t) => raw.includes(t))
}

/** A fresh home whose acp:qwen agents reach `llm` through the daemon's forwarder as MODEL, priced. */
const qwenHome = (llm: ScriptedLlm.ScriptedLlmServer, toml = ""): string => {
  const home = makeTmpDir("saq-") // short: agent socket paths must fit in sun_path
  homes.push(home)
  Fs.chmodSync(home, 0o755)
  Fs.writeFileSync(Path.join(home, "config.toml"), `[acp]\nmodel = "${MODEL}"\n${toml}`)
  process.env["SUBSTRAT_OPENAI_UPSTREAM"] = llm.baseUrl
  process.env["OPENAI_API_KEY"] = "sk-test-daemon-only"
  process.env["SUBSTRAT_METER_PRICES"] = JSON.stringify({ [MODEL]: { input: 1, output: 2, cache_read: 0.5, cache_write: 4 } })
  return home
}

/** The label of a request the endpoint holds until the daemon is dead. */
const HELD = "held"

const withUsage = (r: ScriptedLlm.Reply): ScriptedLlm.Reply => (r._tag === "Message" ? { ...r, usage } : r)

/**
 * The team's script for qwen agents: each rule keyed on an agent's system prompt is keyed on its
 * first prompt instead. The coder writes with qwen's own write_file, the reviewer reads with its
 * read_file.
 */
const qwenWrite = Reply.toolCall("write_file", { file_path: "/workspace/version.ts", content: FILE_BYTES })
const qwenTeamScript = (): Array<ScriptedLlm.ScriptEntry> => [
  // A coder's turn re-run after a kill -9 (its prompt is the recovery note) writes again.
  {
    match: { where: (r: ScriptedLlm.ScriptRequest) => firstPrompt(r).includes("AGENT=coder") && r.lastUser.includes("stopped unexpectedly") },
    reply: qwenWrite._tag === "Message" ? { ...qwenWrite, usage } : qwenWrite,
    label: "coder-write"
  },
  ...teamScript({
    usage,
    write: qwenWrite,
    read: Reply.toolCall("read_file", { file_path: "/workspace/version.ts" })
  }).map((e) => {
    const m = e.match
    if (m?.system === undefined) return e
    const { system, where, ...rest } = m
    return { ...e, match: { ...rest, where: (r: ScriptedLlm.ScriptRequest) => firstPrompt(r).includes(system) && (where === undefined || where(r)) } }
  })
]

/** Whose request it was: the team member whose instructions open its first prompt. */
const whose = (r: { readonly body: unknown }): string => {
  const p = firstPrompt(r)
  return p.includes(LEAD) ? "lead" : p.includes("AGENT=coder") ? "coder" : p.includes("AGENT=reviewer") ? "reviewer" : "?"
}

type Item = { readonly id: string; readonly kind: string; readonly agent_name: string; readonly text: string }
const permissions = async (home: string) =>
  (await cliJson<{ items: ReadonlyArray<Item> }>(home, ["inbox"])).items.filter((i) => i.kind === "permission")
/** The same list over the admin socket (what `inbox --json` prints), for polls: no CLI process each. */
const permissionsRpc = async (home: string) =>
  (await rpcOnce<{ items: ReadonlyArray<Item> }>(home, "inbox.list")).items.filter((i) => i.kind === "permission")

/** Agent `a`'s per-request usage events: one per answered request, each the scripted usage at the price. */
const expectPerRequestUsage = (home: string, a: { readonly name: string; readonly session_id: string }, answered: number) => {
  const perRequest = of(events(home, a.session_id), "usage").filter((u) => u["source"] === "request")
  expect(perRequest.length, a.name).toBe(answered)
  for (const u of perRequest) {
    expect(u).toMatchObject({ ...usage, model: MODEL })
    expect(u["cost_usd"]).toBeCloseTo(price, 12)
  }
}

describe("acp:qwen, the real Qwen Code (daemon + CLI, bwrap, network off, scripted endpoint)", () => {
  it("one turn: `send --wait` prints qwen's answer; one request, metered exactly; the key never reaches the sandbox", () =>
    withLlm([], async (llm) => {
      const home = qwenHome(llm)
      await Effect.runPromise(llm.replace([
        { match: { where: (r) => firstPrompt(r).includes("AGENT=solo") }, reply: withUsage(Reply.text("Hello from Qwen Code.")), label: "solo" }
      ]))
      ds.track(await startDaemon(home))
      const a = await cliJson<Agent>(home, ["agent", "create", "--provider", "acp:qwen", "--name", "solo", "--instructions", "AGENT=solo Be brief."])
      const sent = await cli(home, ["agent", "send", "--wait", "solo", "Say hello."])
      expect(sent.stderr).toBe("")
      expect(sent.stdout).toBe("Hello from Qwen Code.\n")
      expect(sent.code).toBe(0)
      // Exactly the one request: qwen's background requests (memory extraction, next-prompt
      // suggestions) are off in the settings the preset writes to its HOME.
      const reqs = await Effect.runPromise(llm.modelRequests)
      expect(reqs.map((r) => r.label ?? `unmatched: ${(r.lastUser ?? "").slice(0, 80)}`)).toEqual(["solo"])
      expect(reqs[0]!.kind).toBe("openai-chat")
      expect(reqs[0]!.model).toBe(MODEL)
      expect(reqs[0]!.headers["authorization"]).toBe("Bearer sk-test-daemon-only")
      // Substrat's MCP tools are registered before the first prompt runs (the preset makes qwen's
      // MCP discovery blocking): offered to the model from its first request on.
      expect(offered(reqs[0]!)).toEqual(SUBSTRAT_TOOLS)
      // The instructions and the message open the first prompt.
      expect(reqs[0]!.lastUser).toContain("AGENT=solo Be brief.")
      expect(reqs[0]!.lastUser).toContain("Say hello.")
      expectPerRequestUsage(home, a, 1)
      expect(of(events(home, a.session_id), "turn.complete").map((t) => t["response"])).toEqual(["Hello from Qwen Code."])
      expect(of(events(home, a.session_id), "provider.error")).toEqual([])
      // The agent's HOME has qwen's settings and its session; no key anywhere in it.
      const agentHome = Path.join(home, "agents", a.session_id, "home")
      const files = (Fs.readdirSync(agentHome, { recursive: true }) as Array<string>).filter((f) => Fs.statSync(Path.join(agentHome, f)).isFile())
      expect(JSON.parse(Fs.readFileSync(Path.join(agentHome, ".qwen/settings.json"), "utf8"))).toMatchObject({
        telemetry: { enabled: false },
        memory: { enableManagedAutoMemory: false },
        ui: { enableFollowupSuggestions: false }
      })
      for (const f of files) expect(Fs.readFileSync(Path.join(agentHome, f), "utf8"), f).not.toContain("sk-test-daemon-only")
    }), 180_000)

  it("the team, killed -9 mid-turn: coder's write_file is asked in the inbox; the daemon dies while the question is open; after the restart the re-run turn asks the same item, its answer lets coder write once; reviewer reads it; `agent wait` prints lead's answer once; usage per request", () =>
    withLlm([], async (llm) => {
      const home = qwenHome(llm, "approve = \"ask\"\n")
      await Effect.runPromise(llm.replace(qwenTeamScript()))
      const pid = await startDaemon(home)
      ds.track(pid)
      const created = await cliJson<AgentWs>(home, ["agent", "create", "--provider", "acp:qwen", "--name", "lead", "--instructions", LEAD_INSTRUCTIONS])
      expect(created.workspace_id).not.toBeNull()
      const sent = spawnCli(home, ["agent", "send", "--wait", "lead", TASK])
      // The one question: coder's write (Substrat's own tools and qwen's reads are not asked).
      const q = await waitFor("coder's permission request", async () => (await permissionsRpc(home))[0], 150_000)
      expect(q).toMatchObject({ agent_name: "coder" })
      expect(q.text).toContain("coder asks permission: write_file: ")
      expect(q.text).toContain("version.ts")

      // kill -9 while the question is open (coder's turn waits on it; lead waits on coder).
      await kill9(pid)
      // The waiting CLI lost its daemon: exit 3, no answer; it names the command that waits again.
      expect(await sent.exit).toBe(3)
      expect(sent.out()).toBe("")
      const again = /wait again with: substrat agent wait lead ([0-9a-f-]{36})\n/.exec(sent.err())
      expect(again, sent.err()).not.toBeNull()
      ds.track(await startDaemon(home))
      // Recovery re-runs coder's turn in a new qwen (its session loaded): it asks again, the same item.
      const q2 = await waitFor("the re-run's permission request", async () => (await permissionsRpc(home))[0], 150_000)
      expect({ ...q2, ts: "" }).toEqual({ ...q, ts: "" })
      const answered = await cli(home, ["inbox", "answer", q.id, "allow"])
      expect(answered.code, answered.stderr).toBe(0)
      const waited = await cli(home, ["agent", "wait", "lead", again![1]!])
      expect(waited.stderr).toBe("")
      expect(waited.code).toBe(0)
      expect(waited.stdout).toBe(`${FINAL}\n`)
      const { reqs, by } = await checkQwenTeam(home, llm, 2)
      // The coder's model request before the kill was answered (and metered); the re-run's repeats it.
      expect(reqs.filter((r) => r.label === "coder-write").length).toBe(2)
      // The question was logged once and answered once, across the restart.
      const coderLog = events(home, by["coder"]!.session_id)
      expect(of(coderLog, "permission.asked").map((x) => x["item_id"])).toEqual([q.id])
      expect(of(coderLog, "permission.answered").map((x) => [x["item_id"], x["choice"]])).toEqual([[q.id, "allow"]])
    }), 420_000)

})

/** The end state of the qwen team: the team's, plus the permission line, qwen's own tools, and metering. */
const checkQwenTeam = async (home: string, llm: ScriptedLlm.ScriptedLlmServer, coderWrites = 1) => {
  const { agents, by } = await checkTeamEndState(home)
  expect(agents.map((a) => a.provider)).toEqual(["acp:qwen", "acp:qwen", "acp:qwen"])
  expect(await permissions(home)).toEqual([])
  // The coder's one permission answer, and its own write_file; the reviewer's read_file.
  const coderLog = events(home, by["coder"]!.session_id)
  expect(of(coderLog, "tool_call.result").filter((r) => r["tool"] === "permission").map((r) => [r["result"], r["is_error"]]))
    .toEqual([["allow_once (the human)", false]])
  for (const a of agents) {
    if (a.name !== "coder") expect(of(events(home, a.session_id), "tool_call.result").filter((r) => r["tool"] === "permission"), a.name).toEqual([])
  }
  const reqs = await Effect.runPromise(llm.modelRequests)
  // The order per agent; a turn re-run after a kill -9 repeats coder's write request.
  expectOrder(reqs.filter((r, i) => r.label !== "coder-write" || reqs.findIndex((x) => x.label === "coder-write") === i))
  expect(reqs.filter((r) => r.label === "coder-write").length).toBe(coderWrites)
  // Each agent's first request already offered Substrat's tools (lead's first call is one).
  for (const who of ["lead", "coder", "reviewer"]) expect(offered(reqs.find((r) => whose(r) === who)!), who).toEqual(SUBSTRAT_TOOLS)
  // Every request is one of the team's conversation (no background ones), and each agent's
  // answered requests are metered one by one at the scripted usage.
  expect(reqs.filter((r) => r.label === undefined).map((r) => `${whose(r)}: ${(r.lastUser ?? "").slice(0, 100)}`)).toEqual([])
  for (const a of agents) expectPerRequestUsage(home, a, reqs.filter((r) => whose(r) === a.name && r.status === 200 && r.label !== HELD).length)
  expect(reqs.every((r) => r.headers["authorization"] === "Bearer sk-test-daemon-only" && r.model === MODEL)).toBe(true)
  return { reqs, by }
}
