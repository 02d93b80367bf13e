// What several views read about the agents, kept as the event feed (feed.js) and the agent list
// (tree.js) report it: current steps, busy times, names, usage counted as the daemon counts.
// Plain Maps and Sets; the module that learns a fact writes it, the others only read.
import { fmtCost } from "/lib.js"

export const steps = new Map() // session_id → current step text
export const busySince = new Map() // session_id → Date of turn.start
// Turns started (live) since the agent list was last fetched: the list is throttled, so a short
// turn may begin and end between two fetches; until a fetch begun after its turn.start comes
// back, the event says the agent is busy. session_id → the fetch generation at the event.
export const startedLive = new Map()
export const shownSessions = new Set() // session ids of the agents the tree shows
/** What the tree shows for an agent: the list's state, or busy for a turn the list predates. */
export const stateOf = (a) => a.state === "idle" && startedLive.has(a.session_id) ? "busy" : a.state
export const usage = new Map() // session_id → { in, out, cache, cost }: what counts (addUsage)
const usageBooks = new Map() // session_id → the usage events by kind, for addUsage
export const names = new Map() // agent id → name

export const nameOf = (id) => (id === "USER" || id === "SYSTEM" ? id : names.get(id) || String(id).slice(0, 8))

export const fmtUsage = (u) => (u ? (u.in + u.out + u.cache) + " tok · " + fmtCost(u.cost) : "")

const noUsage = () => ({ in: 0, out: 0, cache: 0, cost: 0 })
const addTo = (t, u) => { t.in += u.in; t.out += u.out; t.cache += u.cache; t.cost += u.cost; return t }
/**
 * One `usage` event of a session, counted as the daemon counts (docs/events.md, "Usage: which
 * events count"): request-level events (`source: "request"`) always; a turn's own total only for a
 * turn without request-level ones. Tokens include cache reads and writes, as budgets count them.
 */
export const addUsage = (s, d) => {
  const b = usageBooks.get(s) || { requests: noUsage(), metered: new Set(), turns: new Map(), other: noUsage() }
  usageBooks.set(s, b)
  const u = { in: d.input_tokens, out: d.output_tokens, cache: (d.cache_read_tokens || 0) + (d.cache_write_tokens || 0), cost: d.cost_usd }
  if (d.source === "request") {
    addTo(b.requests, u)
    if (d.turn_id) b.metered.add(d.turn_id)
  } else if (d.turn_id) b.turns.set(d.turn_id, addTo(b.turns.get(d.turn_id) || noUsage(), u))
  else addTo(b.other, u)
  const total = addTo(addTo(noUsage(), b.requests), b.other)
  for (const [turn, t] of b.turns) if (!b.metered.has(turn)) addTo(total, t)
  usage.set(s, total)
}

/** Own + descendants' usage of `root`; `childrenOf` maps an agent id to its children (every agent, not only the shown ones). */
export const subtreeUsage = (root, childrenOf) => {
  const total = noUsage()
  const visit = (a) => {
    const u = usage.get(a.session_id)
    if (u) addTo(total, u)
    for (const c of childrenOf.get(a.id) || []) visit(c)
  }
  visit(root)
  return total
}

/** Agents of a swarm's code nodes (role swarm-*) below the swarm's root: shown in the Swarm view, not in the agent tree. */
export const isSwarmNode = (a) => a.parent_id !== null && typeof a.role === "string" && a.role.startsWith("swarm-")
