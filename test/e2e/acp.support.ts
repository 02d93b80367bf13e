// The team scenario of team.support.ts for real ACP agents (acp-qwen.test.ts, acp-opencode.test.ts,
// acp-adapters.test.ts): each agent's process in its own bwrap sandbox (network off), its model
// traffic through the daemon's forwarder to the scripted endpoint (Chat Completions, or the
// adapters' Anthropic Messages / OpenAI Responses) as `acp.model`, the key only in the daemon. ACP
// has no system prompt: Substrat's instructions open the first prompt of the agent's session, so
// the script tells agents apart by that first message. What differs per agent is an `AcpAgent`:
// its preset and API, how it names Substrat's tools, its own write and read calls, how its
// permission question reads, and the requests an adapter makes of its own.
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Effect } from "effect"
import { expect } from "vitest"
import type * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { responsesTools } from "../../src/testing/scripted/OpenAi.js"
import { makeTmpDir } from "../support/tmp.js"
import { cli, cliJson, kill9, rpcOnce, spawnCli, startDaemon, waitFor } from "../integration/daemon.support.js"
import { agentEvents as events, dataNamed as of } from "./support.js"
import { type AgentWs, checkTeamEndState, expectOrder, FINAL, HELD, killDuringReview, LEAD, LEAD_INSTRUCTIONS, rewait, sendTheTask, TASK, teamScript } from "./team.support.js"

export const acpEnvKeys = ["SUBSTRAT_OPENAI_UPSTREAM", "OPENAI_API_KEY", "SUBSTRAT_ANTHROPIC_UPSTREAM", "ANTHROPIC_API_KEY", "SUBSTRAT_METER_PRICES"]
const KEY = "sk-test-daemon-only"

/** The API an agent speaks through the daemon's forwarder: the upstream's variable, the key's, how a request shows the key. */
const apis = {
  "openai-chat": { upstream: "SUBSTRAT_OPENAI_UPSTREAM", key: "OPENAI_API_KEY", header: "authorization", value: `Bearer ${KEY}` },
  "openai-responses": { upstream: "SUBSTRAT_OPENAI_UPSTREAM", key: "OPENAI_API_KEY", header: "authorization", value: `Bearer ${KEY}` },
  anthropic: { upstream: "SUBSTRAT_ANTHROPIC_UPSTREAM", key: "ANTHROPIC_API_KEY", header: "x-api-key", value: KEY }
} as const

/** No cache writes (the OpenAI formats have none): the same usage and price in every API. Chat Completions' prompt_tokens include the cached ones. */
const usage = { input_tokens: 1000, output_tokens: 200, cache_read_tokens: 3000 }
/** $ per request: (1000×1 + 200×2 + 3000×0.5) / 1e6. */
const price = 2900 / 1e6

export interface AcpAgent {
  /** `acp:<preset>`. */
  readonly preset: string
  /** `acp.model`: what every request names. */
  readonly model: string
  /** Substrat's tool `t` as the agent names it to the model. */
  readonly tool: (t: string) => string
  /** The coder's call of its own tool writing /workspace/version.ts, and the reviewer's reading it. */
  readonly write: ScriptedLlm.Reply
  readonly read: ScriptedLlm.Reply
  /** The start of the inbox item's text for the coder's write. */
  readonly asks: string
  /** The API of its requests (default: Chat Completions). */
  readonly api?: "anthropic" | "openai-responses"
  /**
   * The requests an adapter makes of its own (a session title once per new session, on a small
   * model of its own, carrying the first prompt or not; a one-token request when a session is
   * resumed): each answered under its label, metered against the agent like any.
   */
  readonly background?: ReadonlyArray<{
    readonly label: string
    readonly match: ScriptedLlm.Match
    /** One per agent at least (a title per session): the check waits for them, as they may come after the turn. */
    readonly perAgent?: boolean
  }>
  /** The names of the coder's and the reviewer's own calls in their logs (checked when given). */
  readonly calls?: { readonly coder: ReadonlyArray<string>; readonly reviewer: ReadonlyArray<string> }
}

/** Whether the request is one of the adapter's own (answered under a `background` label). */
const isBackground = (agent: AcpAgent, r: { readonly label?: string | undefined }): boolean =>
  (agent.background ?? []).some((b) => b.label === r.label)

/** Substrat's tools the agent's first request must already offer (lead's first call is one). */
const TOOLS = ["send_message", "spawn_agent", "check_inbox"]

/** The text of a Chat Completions message's content. */
const textOf = (c: unknown): string =>
  typeof c === "string" ? c : Array.isArray(c) ? c.map((p) => (typeof p === "object" && p !== null && "text" in p ? String(p.text) : "")).join("") : ""

/** The first prompt of the agent's session: the user message that carries Substrat's instructions. "" for a request without it. */
export const firstPrompt = (r: { readonly body: unknown }): string => {
  const b = r.body
  // Chat Completions and Anthropic `messages`, Responses `input`.
  const list = typeof b !== "object" || b === null ? undefined : "messages" in b ? b.messages : "input" in b ? b.input : undefined
  const msgs = Array.isArray(list) ? (list as ReadonlyArray<unknown>) : []
  for (const m of msgs) {
    if (typeof m !== "object" || m === null || !("role" in m) || m.role !== "user") continue
    const t = textOf("content" in m ? m.content : "")
    if (t.includes("You are one agent in a team run by Substrat")) return t
  }
  return ""
}

/** Which of Substrat's tools the request names to the model (declared, or listed as deferred ones). */
export const offered = (agent: AcpAgent, r: { readonly body: unknown }): ReadonlyArray<string> => {
  // Responses tools may come in a namespace (`mcp__substrat__` holding `send_message`): their qualified names.
  const raw = agent.api === "openai-responses" ? [...responsesTools(r.body).keys()].join(" ") : JSON.stringify(r.body)
  return TOOLS.map(agent.tool).filter((t) => raw.includes(t))
}

/** A fresh home whose `agent`s reach `llm` through the daemon's forwarder as its model, priced. */
export const acpHome = (homes: Array<string>, agent: AcpAgent, llm: ScriptedLlm.ScriptedLlmServer, toml = ""): string => {
  const home = makeTmpDir("sa-") // short: agent socket paths must fit in sun_path
  homes.push(home)
  Fs.chmodSync(home, 0o755)
  Fs.writeFileSync(Path.join(home, "config.toml"), `[acp]\nmodel = "${agent.model}"\n${toml}`)
  const api = apis[agent.api ?? "openai-chat"]
  process.env[api.upstream] = llm.baseUrl
  process.env[api.key] = KEY
  process.env["SUBSTRAT_METER_PRICES"] = JSON.stringify({ [agent.model]: { input: 1, output: 2, cache_read: 0.5, cache_write: 4 } })
  return home
}

export const withUsage = (r: ScriptedLlm.Reply): ScriptedLlm.Reply => (r._tag === "Message" ? { ...r, usage } : r)

/**
 * A reply naming the agent's own tool where the script names Substrat's (`mcp__substrat__x`).
 * Any other reply is kept as it is (the reviewer's answer is a getter, read when it is sent).
 */
const renamed = (agent: AcpAgent, r: ScriptedLlm.Reply): ScriptedLlm.Reply =>
  r._tag !== "Message" || !r.content.some((b) => b.type === "tool_use" && b.name.startsWith("mcp__substrat__")) ? r : {
    ...r,
    content: r.content.map((b) => (b.type === "tool_use" && b.name.startsWith("mcp__substrat__") ? { ...b, name: agent.tool(b.name.slice(15)) } : b))
  }

/**
 * The team's script for `agent`: each rule keyed on an agent's system prompt is keyed on its first
 * prompt instead, and Substrat's tools go by the agent's names. A coder's turn re-run after a kill
 * -9 (its prompt is the recovery note) writes again.
 */
export const acpTeamScript = (agent: AcpAgent, held = false): Array<ScriptedLlm.ScriptEntry> => [
  ...(agent.background ?? []).map((b) => ({ match: b.match, reply: withUsage(Reply.text(JSON.stringify({ title: "Team work" }))), label: b.label, times: Infinity })),
  ...(held ? [{ match: { where: (r: ScriptedLlm.ScriptRequest) => firstPrompt(r).includes("AGENT=reviewer") }, reply: Reply.text("never seen"), delayMs: 600_000, label: HELD }] : []),
  {
    match: { where: (r: ScriptedLlm.ScriptRequest) => firstPrompt(r).includes("AGENT=coder") && r.lastUser.includes("stopped unexpectedly") },
    reply: withUsage(agent.write),
    label: "coder-write"
  },
  ...teamScript({ usage, write: agent.write, read: agent.read }).map((e) => {
    const m = e.match
    const reply = renamed(agent, e.reply)
    if (m?.system === undefined) return { ...e, reply }
    const { system, where, ...rest } = m
    return { ...e, reply, match: { ...rest, where: (r: ScriptedLlm.ScriptRequest) => firstPrompt(r).includes(system) && (where === undefined || where(r)) } }
  })
]

/** Whose request it was: the team member whose instructions open its first prompt. */
export const whose = (r: { readonly body: unknown }): string => {
  const p = firstPrompt(r)
  return p.includes(LEAD) ? "lead" : p.includes("AGENT=coder") ? "coder" : p.includes("AGENT=reviewer") ? "reviewer" : "?"
}

type Item = { readonly id: string; readonly kind: string; readonly agent_name: string; readonly text: string }
export const permissions = async (home: string) =>
  (await cliJson<{ items: ReadonlyArray<Item> }>(home, ["inbox"])).items.filter((i) => i.kind === "permission")
/** The same list over the admin socket (what `inbox --json` prints), for polls: no CLI process each. */
const permissionsRpc = async (home: string) =>
  (await rpcOnce<{ items: ReadonlyArray<Item> }>(home, "inbox.list")).items.filter((i) => i.kind === "permission")

/**
 * Agent `a`'s per-request usage events: one for each of its conversation's answered requests
 * (`answered`), at the agent's model and the scripted price, and one for each request the
 * adapter made of its own for it (any model); each with the scripted usage. Returns how many of
 * the latter there were.
 */
export const expectPerRequestUsage = (
  home: string,
  agent: AcpAgent,
  a: { readonly name: string; readonly session_id: string },
  answered: ReadonlyArray<unknown>
): number => {
  const perRequest = of(events(home, a.session_id), "usage").filter((u) => u["source"] === "request")
  for (const u of perRequest) expect(u).toMatchObject(usage)
  const own = perRequest.filter((u) => u["model"] === agent.model)
  expect(own.length, a.name).toBeGreaterThanOrEqual(answered.length)
  for (const u of own) expect(u["cost_usd"]).toBeCloseTo(price, 12)
  return perRequest.length - answered.length
}

/** No file under the agent's HOME holds the daemon's key; returns the HOME's files. */
export const keyNotIn = (home: string, a: { readonly session_id: string }): ReadonlyArray<string> => {
  const agentHome = Path.join(home, "agents", a.session_id, "home")
  // lstat: a link the agent left (codex's arg0 links into its own temporary directories) is not followed.
  const files = (Fs.readdirSync(agentHome, { recursive: true }) as Array<string>).filter((f) => Fs.lstatSync(Path.join(agentHome, f)).isFile())
  for (const f of files) expect(Fs.readFileSync(Path.join(agentHome, f)).includes(KEY), f).toBe(false)
  return files
}

/** Every request was of the agent's API, named the model (the adapter's own: any) and carried the daemon's key (added outside the sandbox). */
export const expectForwarded = (agent: AcpAgent, reqs: ReadonlyArray<ScriptedLlm.RecordedRequest>) => {
  const api = agent.api ?? "openai-chat"
  const h = apis[api]
  expect(reqs.filter((r) => r.kind !== api || (!isBackground(agent, r) && r.model !== agent.model) || r.headers[h.header] !== h.value).map((r) => [r.kind, r.model, r.label]))
    .toEqual([])
}

/**
 * The end state of the team: the team's, plus the coder's permission lines (`coderPermissions`:
 * their results; nobody else's call is asked), the agent's own tools, and metering. `coderWrites`:
 * how many times the coder's write request came (a turn re-run after a kill -9 repeats it).
 */
const checkAcpTeam = async (
  home: string,
  agent: AcpAgent,
  llm: ScriptedLlm.ScriptedLlmServer,
  o: { readonly coderWrites: number; readonly coderPermissions: ReadonlyArray<string> }
) => {
  const { agents, by } = await checkTeamEndState(home)
  expect(agents.map((a) => a.provider)).toEqual(Array(3).fill(`acp:${agent.preset}`))
  expect(await permissions(home)).toEqual([])
  // The coder's permission answers, and its own write; the reviewer's read.
  const coderLog = events(home, by["coder"]!.session_id)
  expect(of(coderLog, "tool_call.result").filter((r) => r["tool"] === "permission").map((r) => [r["result"], r["is_error"]]))
    .toEqual(o.coderPermissions.map((p) => [p, false]))
  for (const a of agents) {
    if (a.name !== "coder") expect(of(events(home, a.session_id), "tool_call.result").filter((r) => r["tool"] === "permission"), a.name).toEqual([])
  }
  if (agent.calls !== undefined) {
    for (const who of ["coder", "reviewer"] as const) {
      const own = of(events(home, by[who]!.session_id), "tool_call.result").filter((r) => r["source"] === "provider" && r["tool"] !== "permission")
      expect(own.map((r) => [r["tool"], r["is_error"]]), who).toEqual(agent.calls[who].map((t) => [t, false]))
    }
  }
  // The adapter's requests of its own run beside the turns (codex-acp's title after a turn has
  // ended): wait for one per agent where each agent makes one, then for every request but the
  // held one to be metered.
  const metered = () => agents.reduce((n, a) => n + of(events(home, a.session_id), "usage").filter((u) => u["source"] === "request").length, 0)
  const reqs = await waitFor("the adapter's own requests, each metered", async () => {
    const rs = await Effect.runPromise(llm.modelRequests)
    const due = (agent.background ?? []).every((b) => !b.perAgent || rs.filter((r) => r.label === b.label).length >= agents.length)
    return due && metered() === rs.filter((r) => r.label !== HELD).length ? rs : undefined
  }, 60_000)
  const talk = reqs.filter((r) => !isBackground(agent, r) && r.label !== HELD)
  // The order per agent; a turn re-run after a kill -9 repeats coder's write request.
  expectOrder(talk.filter((r, i) => r.label !== "coder-write" || talk.findIndex((x) => x.label === "coder-write") === i))
  expect(reqs.filter((r) => r.label === "coder-write").length).toBe(o.coderWrites)
  // Each agent's first request already offered Substrat's tools (lead's first call is one).
  for (const who of ["lead", "coder", "reviewer"]) expect(offered(agent, talk.find((r) => whose(r) === who)!), who).toEqual(TOOLS.map(agent.tool))
  // Every request is one of the team's conversation or one the adapter makes of its own (no other
  // background ones), and each agent's answered requests are metered one by one at the scripted
  // usage; the adapter's own too, each against the agent it ran for.
  expect(reqs.filter((r) => r.label === undefined).map((r) => `${whose(r)}: ${(r.lastUser ?? "").slice(0, 100)}`)).toEqual([])
  let own = 0
  for (const a of agents) own += expectPerRequestUsage(home, agent, a, talk.filter((r) => whose(r) === a.name && r.status === 200))
  expect(own).toBe(reqs.filter((r) => isBackground(agent, r)).length)
  expectForwarded(agent, reqs)
  for (const a of agents) keyNotIn(home, a)
  return { reqs, by }
}

/** What a test file gives the scenarios: its daemons' tracker and its homes (daemonTestScope). */
export type TeamScope = { readonly ds: { readonly track: (pid: number) => void }; readonly homes: Array<string> }

/**
 * The team on `agent` (`--approve auto`): lead spawns coder and reviewer, coder writes with its
 * own tool (asked and allowed by the policy where the agent asks: `coderPermissions` as in
 * checkAcpTeam), reviewer reads it; every request metered. Without `killed`: `send --wait` prints
 * lead's final answer. `killed`: the daemon is killed -9 while the reviewer's first request is
 * held (team.support.ts killDuringReview); after the restart `agent wait` prints lead's answer,
 * the reviewer's turn ran again, nothing lost or answered twice, the held request unmetered.
 */
export const acpTeam = async (
  agent: AcpAgent,
  scope: TeamScope,
  llm: ScriptedLlm.ScriptedLlmServer,
  o: { readonly coderPermissions: ReadonlyArray<string>; readonly killed: boolean }
): Promise<void> => {
  const home = acpHome(scope.homes, agent, llm)
  if (!o.killed) {
    await Effect.runPromise(llm.replace(acpTeamScript(agent)))
    await sendTheTask(home, `acp:${agent.preset}`, scope.ds.track)
    await checkAcpTeam(home, agent, llm, { coderWrites: 1, coderPermissions: o.coderPermissions })
    return
  }
  const request = await killDuringReview(home, llm, `acp:${agent.preset}`, acpTeamScript(agent, true), scope.ds.track)
  scope.ds.track(await startDaemon(home))
  await rewait(home, request)
  const { reqs } = await checkAcpTeam(home, agent, llm, { coderWrites: 1, coderPermissions: o.coderPermissions })
  expect(reqs.filter((r) => r.label === HELD).length).toBe(1)
  expect(reqs.filter((r) => r.label === "reviewer-done").length).toBe(1)
  expect(reqs.filter((r) => r.label === "lead-final").length).toBe(1)
}

/**
 * The team on `agent` with `--approve ask`, killed -9 mid-turn: coder's write is asked in the
 * inbox; the daemon dies while the question is open (coder's turn waits on it; lead waits on
 * coder); after the restart the re-run turn asks the same item, its answer lets coder write once;
 * reviewer reads it; `agent wait` prints lead's answer once; usage per request.
 */
export const teamKilledWhileAsked = async (
  agent: AcpAgent,
  scope: TeamScope,
  llm: ScriptedLlm.ScriptedLlmServer
): Promise<void> => {
  const home = acpHome(scope.homes, agent, llm, "approve = \"ask\"\n")
  await Effect.runPromise(llm.replace(acpTeamScript(agent)))
  const pid = await startDaemon(home)
  scope.ds.track(pid)
  const created = await cliJson<AgentWs>(home, ["agent", "create", "--provider", `acp:${agent.preset}`, "--name", "lead", "--instructions", LEAD_INSTRUCTIONS])
  expect(created.workspace_id).not.toBeNull()
  const sent = spawnCli(home, ["agent", "send", "--wait", "lead", TASK])
  // The one question: coder's write (Substrat's own tools and the agent's reads are not asked).
  const q = await waitFor("coder's permission request", async () => (await permissionsRpc(home))[0], 150_000)
  expect(q).toMatchObject({ agent_name: "coder" })
  expect(q.text).toContain(`coder asks permission: ${agent.asks}`)
  expect(q.text).toContain("version.ts")

  await kill9(pid)
  // The waiting CLI lost its daemon: exit 3, no answer; it names the command that waits again.
  expect(await sent.exit).toBe(3)
  expect(sent.out()).toBe("")
  const again = /wait again with: substrat agent wait lead ([0-9a-f-]{36})\n/.exec(sent.err())
  expect(again, sent.err()).not.toBeNull()
  scope.ds.track(await startDaemon(home))
  // Recovery re-runs coder's turn in a new process (its session loaded): it asks again, the same item.
  const q2 = await waitFor("the re-run's permission request", async () => (await permissionsRpc(home))[0], 150_000)
  expect({ ...q2, ts: "" }).toEqual({ ...q, ts: "" })
  const answered = await cli(home, ["inbox", "answer", q.id, "allow"])
  expect(answered.code, answered.stderr).toBe(0)
  const waited = await cli(home, ["agent", "wait", "lead", again![1]!])
  expect(waited.stderr).toBe("")
  expect(waited.code).toBe(0)
  expect(waited.stdout).toBe(`${FINAL}\n`)
  // The coder's model request before the kill was answered (and metered); the re-run's repeats it.
  const { by } = await checkAcpTeam(home, agent, llm, { coderWrites: 2, coderPermissions: ["allow_once (the human)"] })
  // The question was logged once and answered once, across the restart.
  const coderLog = events(home, by["coder"]!.session_id)
  expect(of(coderLog, "permission.asked").map((x) => x["item_id"])).toEqual([q.id])
  expect(of(coderLog, "permission.answered").map((x) => [x["item_id"], x["choice"]])).toEqual([[q.id, "allow"]])
}
