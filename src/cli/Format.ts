// Human and JSON renderings of what the daemon returns, as plain strings (printed by the
// commands through Output.ts). Pure functions.
import { quotaNames, type QuotaView } from "../domain/quota.js"
import type { DaemonStatus, InspectResult, SessionInfo, Usage } from "../protocol/AdminRpcs.js"
import type { AgentNode } from "../domain/agent.js"
import type { AgentBrief } from "../domain/inspection.js"
import type { InboxItem } from "../domain/budget.js"
import { forPeople } from "../agent/Prompt.js"
import { describePolicy } from "../domain/egress.js"
import { activityText } from "./Live.js"
import type { WorkspaceSpec } from "../domain/workspace.js"

/** What `--json` prints (followed by a newline). */
export const jsonText = (value: unknown): string => JSON.stringify(value, null, 2)

/**
 * Left-aligned columns; `style` may wrap a cell (already padded) in colour codes, which then do
 * not count towards its width.
 */
export const table = (
  rows: ReadonlyArray<ReadonlyArray<string>>,
  style: (cell: string, row: number, column: number) => string = (c) => c
): string => {
  const widths: Array<number> = []
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)))
  return rows.map((r, j) =>
    r.map((c, i) => style(i === r.length - 1 ? c : c.padEnd(widths[i]!), j, i)).join("  ").replace(/ +$/, "")
  ).join("\n")
}

/** ANSI colour of each state `agent list` shows (only on a terminal that wants colour). */
const stateColour: Record<string, number> = {
  idle: 32,
  busy: 33,
  waiting: 36,
  queued: 36,
  "asks you": 35,
  "parked (budget)": 31,
  "parked (quotas)": 31,
  quarantined: 31,
  dormant: 2,
  terminated: 2
}

/** `git diff` text coloured as git does on a terminal: headers bold, hunks cyan, lines added green, removed red. */
export const colourDiff = (diff: string): string =>
  diff.split("\n").map((l) =>
    /^(diff --git|index |--- |\+\+\+ |new file|deleted file|similarity|rename |old mode|new mode)/.test(l)
      ? `\x1b[1m${l}\x1b[0m`
      : l.startsWith("@@")
      ? `\x1b[36m${l}\x1b[0m`
      : l.startsWith("+")
      ? `\x1b[32m${l}\x1b[0m`
      : l.startsWith("-")
      ? `\x1b[31m${l}\x1b[0m`
      : l
  ).join("\n")

const usedText = (d: AgentBrief | undefined): string =>
  d?.tokens === undefined && d?.cost_usd === undefined ? "" : `${d.tokens ?? 0} tok · $${(d.cost_usd ?? 0).toFixed(4)}`

/** The NAME column's width: longer names (with their tree branches) end in "…" (`--json` has them whole). */
export const NAME_WIDTH = 40

const clipName = (s: string): string => (s.length <= NAME_WIDTH ? s : `${s.slice(0, NAME_WIDTH - 1)}…`)

/** A swarm's code-node agent (below the swarm's root): listed by `swarm agents`, hidden from `agent list` unless asked. */
export const isSwarmNode = (a: AgentNode): boolean => a.parent_id !== null && a.role.startsWith("swarm-")

export interface TreeView {
  /** Agent id → what its running turn is doing (a DOING column when any agent is busy). */
  readonly doing?: ReadonlyMap<string, string>
  /** Agent id → the daemon's extras for its row (dormant, a turn waiting to start, usage). */
  readonly details?: ReadonlyMap<string, AgentBrief>
  /** Show the swarm node agents too (`--swarm`, `--all`). */
  readonly swarm?: boolean
  /** What waits for the human (`inbox.list`): parks and questions become states. */
  readonly inbox?: ReadonlyArray<InboxItem>
  /** Colour the states (a terminal that wants colour). */
  readonly color?: boolean
}

/**
 * Each agent's state as `agent list` shows it: `dormant` (a swarm node agent that never ran),
 * `parked (budget)` (its own or an ancestor's budget is spent: the owner of an open budget item
 * and its subtree), `parked (quotas)`, `asks you` (an open question), `queued` (a turn waits to start:
 * for a provider slot), else the daemon's state.
 */
export const shownStates = (agents: ReadonlyArray<AgentNode>, view: TreeView): ReadonlyMap<string, string> => {
  const details = view.details ?? new Map<string, AgentBrief>()
  const children = new Map<string, Array<string>>()
  for (const a of agents) {
    if (a.parent_id === null) continue
    const kids = children.get(a.parent_id)
    if (kids === undefined) children.set(a.parent_id, [a.id])
    else kids.push(a.id)
  }
  const flags = new Map<string, string>()
  const mark = (id: string) => {
    flags.set(id, "parked (budget)")
    for (const c of children.get(id) ?? []) mark(c)
  }
  for (const i of view.inbox ?? []) if (i.kind === "budget") mark(i.agent_id)
  for (const i of view.inbox ?? []) if (i.kind === "quota" && !flags.has(i.agent_id)) flags.set(i.agent_id, "parked (quotas)")
  for (const i of view.inbox ?? []) if (i.kind === "question" && !flags.has(i.agent_id)) flags.set(i.agent_id, "asks you")
  const out = new Map<string, string>()
  for (const a of agents) {
    const d = details.get(a.id)
    out.set(
      a.id,
      a.state === "terminated" || a.state === "quarantined"
        ? a.state
        : d?.dormant === true
        ? "dormant"
        : flags.get(a.id) ?? ((a.state === "idle" || a.state === "busy") && d?.queued === true ? "queued" : a.state)
    )
  }
  return out
}

/**
 * The agent forest, roots first, children indented with box-drawing branches. Swarm node agents
 * are left out unless `view.swarm` (a line under the table says how many and where they are);
 * a dormant one's state is `dormant`.
 */
export const renderTree = (all: ReadonlyArray<AgentNode>, view: TreeView = {}): string => {
  const doing = view.doing ?? new Map<string, string>()
  const details = view.details ?? new Map<string, AgentBrief>()
  const agents = view.swarm === true ? all : all.filter((a) => !isSwarmNode(a))
  const hidden = all.length - agents.length
  const footer = hidden === 0 ? "" : `\n\n${hidden} swarm node agent(s) not shown: substrat swarm agents lists them, agent ls --swarm shows them here`
  if (agents.length === 0) return `(no agents)${footer}`
  const ids = new Set(agents.map((a) => a.id))
  const children = new Map<string, Array<AgentNode>>()
  const roots: Array<AgentNode> = []
  for (const a of agents) {
    if (a.parent_id === null || !ids.has(a.parent_id)) roots.push(a)
    else {
      const kids = children.get(a.parent_id)
      if (kids === undefined) children.set(a.parent_id, [a])
      else kids.push(a)
    }
  }
  const withDoing = agents.some((a) => doing.has(a.id))
  const withUsed = agents.some((a) => usedText(details.get(a.id)) !== "")
  const states = shownStates(agents, view)
  const lines: Array<ReadonlyArray<string>> = []
  const walk = (a: AgentNode, prefix: string, branch: string) => {
    lines.push([
      clipName(`${prefix}${branch}${a.name}`),
      states.get(a.id) ?? a.state,
      a.provider,
      a.role,
      ...(withUsed ? [usedText(details.get(a.id))] : []),
      a.id,
      ...(withDoing ? [doing.get(a.id) ?? ""] : [])
    ])
    const kids = children.get(a.id) ?? []
    const nextPrefix = prefix + (branch === "" ? "" : branch === "└─ " ? "   " : "│  ")
    kids.forEach((k, i) => walk(k, nextPrefix, i === kids.length - 1 ? "└─ " : "├─ "))
  }
  for (const r of roots) walk(r, "", "")
  const paintState = (cell: string, row: number, column: number) => {
    const code = view.color === true && row > 0 && column === 1 ? stateColour[cell.trimEnd()] : undefined
    return code === undefined ? cell : `\x1b[${code}m${cell.trimEnd()}\x1b[0m${cell.slice(cell.trimEnd().length)}`
  }
  const header = ["NAME", "STATE", "PROVIDER", "ROLE", ...(withUsed ? ["USED"] : []), "ID", ...(withDoing ? ["DOING"] : [])]
  const out = table([header, ...lines], paintState) + footer
  const held = agents.filter((a) => a.state === "quarantined")
  if (held.length === 0) return out
  return `${out}\n\n${
    held.map((a) =>
      `${a.name} is quarantined (the daemon died repeatedly during its turn): ` +
      `substrat agent resume ${a.id} runs its held turns again, substrat agent terminate ${a.id} ends it`
    ).join("\n")
  }`
}

export const renderSessions = (sessions: ReadonlyArray<SessionInfo>): string =>
  sessions.length === 0
    ? "(no sessions)"
    : table([
      ["SESSION", "STATE", "AGENT", "PROVIDER", "CREATED"],
      ...sessions.map((s) => [s.id, s.state, s.agent_name ?? "-", s.provider_name, s.created_at])
    ])

export const renderWorkspaces = (ws: ReadonlyArray<WorkspaceSpec>): string =>
  ws.length === 0
    ? "(no workspaces)"
    : table([
      ["WORKSPACE", "NAME", "PARENT", "EGRESS", "LINKS", "ROOT"],
      ...ws.map((w) => [
        w.id,
        w.name ?? (w.default_for === null ? "-" : `(${w.default_for}'s)`),
        w.parent_id ?? "-",
        describePolicy(w.egress, w.network_access),
        String(w.symlinks.length),
        w.root_path
      ])
    ])

const usage = (x: Usage) =>
  `${x.turns} turns, ${x.input_tokens} in / ${x.output_tokens} out tokens, ${x.cache_read_tokens} cache read / ${x.cache_write_tokens} cache write, $${x.cost_usd.toFixed(4)}`

/** An agent's quotas in one line: use/limit each (0: no limit), refusals, a park. */
const quotaText = (q: QuotaView): string => {
  const parts = quotaNames.map((k) => `${k} ${q.used[k]}/${q.limits[k] === 0 ? "-" : q.limits[k]}`)
  const park = q.parked === null ? "" : `; PARKED (inbox item ${q.parked.item_id}): ${q.parked.reason}`
  return `${parts.join(", ")}; ${q.breaches} refused in 10 min (parked at ${q.park_after})${park}`
}

/** `agent inspect`: the agent's fields, then its recent turns and messages (when any). */
export const renderInspect = (r: InspectResult, raw = false): string => {
  const a = r.agent
  const out = [table([
    ["name", a.name],
    ["id", a.id],
    ["state", r.activity ? `${a.state} (${activityText(r.activity, Date.now())})` : a.state],
    ["provider", a.provider],
    // ACP permission policy: the agent's own, else the config's.
    ...(a.approve !== undefined ? [["approve", a.approve]] : a.provider.startsWith("acp") ? [["approve", "- (config acp.approve)"]] : []),
    ["role", a.role],
    ["session", r.session ? `${r.session.id} (${r.session.state})` : "-"],
    ["parent", r.parent ?? "-"],
    ["children", r.children.map((k) => k.name).join(", ") || "-"],
    ["workspace", a.workspace_id ?? "-"],
    ["inbox", `${r.inbox} waiting, ${r.queued_turns} queued turn(s), waiting for ${r.waiting_for_replies} repl(ies)`],
    ["usage", usage(r.usage.own)],
    ["subtree", usage(r.usage.subtree)],
    ...(r.quotas === undefined ? [] : [["quotas", quotaText(r.quotas)]])
  ])]
  if (r.recent_turns.length > 0) {
    out.push("\nrecent turns:")
    const said = (p: string) => (raw ? p : forPeople(p)).replace(/\r?\n/g, " ↵ ")
    for (const t of r.recent_turns) out.push(`  > ${said(t.prompt)}\n  < ${t.error === null ? t.response : `error: ${t.error}`}`)
  }
  if (r.recent_messages.length > 0) {
    out.push("\nrecent messages:")
    out.push(table(r.recent_messages.map((m) => [`  ${m.direction === "in" ? "from" : "to"} ${m.peer}`, m.kind, m.text])))
  }
  return out.join("\n")
}

/** `daemon status`. */
export const renderStatus = (s: DaemonStatus): string =>
  table([
    ["pid", String(s.pid)],
    ["version", s.version],
    ["home", s.home],
    ["socket", s.socket],
    ["started", s.started_at],
    ["uptime", `${Math.round(s.uptime_ms / 1000)} s`],
    ["slots", String(s.slots)],
    ["agents", String(s.agents)],
    ["sessions", String(s.sessions)],
    ["connections", String(s.connections)],
    ...(s.storage === undefined ? [] : [[
      "storage",
      s.storage.mode === "ok"
        ? `ok${s.storage.free_bytes === null ? "" : ` (${Math.floor(s.storage.free_bytes / 1048576)} MiB free)`}`
        : `READ-ONLY: ${s.storage.reason ?? "storage unavailable"}${
          s.storage.restart_needed ? "; after freeing space, restart the daemon to leave read-only mode" : ""
        } (changes are refused, reads are served)`
    ]]),
    ...(s.storage?.log_error === undefined ? [] : [["daemon.log", `NOT WRITTEN: ${s.storage.log_error}`]])
  ])

/** `agent send`. */
export const renderSent = (r: { readonly message_id: string }): string => `sent ${r.message_id}`
