// What `inspect_agent` / `Orchestrator.inspect` return, and the usage totals per agent and
// subtree. "Recent activity" is kept in memory (OrchestratorState: noted by the Orchestrator and
// the Router as turns end and messages go) and rebuilt from the logs by recovery after a restart
// (the recovery fold's rings, docs/messaging.md): the last 3 turns (prompt/response excerpts of 200 chars),
// the last 5 messages sent or received; plus how many messages wait in the inbox, how many sync
// requests the agent is still waiting on.
import { Schema } from "effect"
import { UsageReport as UsageReportSchema } from "../domain/usage.js"
import { AgentState } from "../domain/agent.js"
import type { AgentId } from "../domain/ids.js"
import { addWithTurns as plus, type UsageReport, type UsageWithTurns as Totals, zeroWithTurns as zero } from "../domain/usage.js"
import type { OrchestratorStateService } from "./OrchestratorState.js"

export { UsageReport } from "../domain/usage.js"

export const AgentInspection = Schema.Struct({
  agent_id: Schema.String,
  name: Schema.String,
  role: Schema.String,
  provider: Schema.String,
  session_id: Schema.String,
  parent: Schema.NullOr(Schema.String),
  state: AgentState,
  children: Schema.Array(Schema.String),
  pending_inbox: Schema.Number,
  queued_turns: Schema.Number,
  waiting_for_replies: Schema.Number,
  recent_turns: Schema.Array(Schema.Struct({
    turn_id: Schema.String,
    prompt: Schema.String,
    response: Schema.String,
    error: Schema.NullOr(Schema.String)
  })),
  recent_messages: Schema.Array(Schema.Struct({
    direction: Schema.Literal("in", "out"),
    peer: Schema.String,
    kind: Schema.String,
    message_id: Schema.String,
    text: Schema.String
  })),
  usage: UsageReportSchema
})
export type AgentInspection = typeof AgentInspection.Type

export const EXCERPT = 200
export const excerpt = (s: string): string => s.length <= EXCERPT ? s : `${s.slice(0, EXCERPT - 1)}…`

/** idle | busy (mid-turn) | waiting (sent a sync request, no reply yet). */
export const stateOf = (s: OrchestratorStateService, id: AgentId): AgentState => {
  if (!s.tree.has(id)) return "terminated"
  if (s.turns.has(id)) return "busy"
  for (const r of s.requests.values()) if (r.from === id) return "waiting"
  return "idle"
}


/** Own totals, and subtree totals (own + live descendants + terminated descendants). */
export const usageOf = (s: OrchestratorStateService, id: AgentId): UsageReport => {
  const own = (a: AgentId): Totals => {
    const u = s.usage.get(a)
    return u ? { ...u.own, turns: u.turns } : zero
  }
  const retired = (a: AgentId): Totals => {
    const u = s.usage.get(a)
    return u ? { ...u.retired, turns: u.retiredTurns } : zero
  }
  const subtree = s.tree.subtree(id).reduce((acc, n) => plus(plus(acc, own(n.id)), retired(n.id)), zero)
  return { agent_id: id, own: own(id), subtree }
}

export const inspectionOf = (s: OrchestratorStateService, id: AgentId): AgentInspection | null => {
  const n = s.tree.get(id)
  if (!n) return null
  const a = s.activity.get(id) ?? { turns: [], messages: [] }
  return {
    agent_id: n.id,
    name: n.name,
    role: n.role,
    provider: n.provider,
    session_id: n.session_id,
    parent: s.tree.parent(id)?.name ?? null,
    state: stateOf(s, id),
    children: s.tree.children(id).map((c) => c.name),
    pending_inbox: (s.inboxes.get(id) ?? []).length + (s.unborn.get(id) ?? []).length,
    queued_turns: (s.triggers.get(id) ?? []).length,
    waiting_for_replies: [...s.requests.values()].filter((r) => r.from === id).length,
    recent_turns: a.turns.map((t) => ({ ...t, prompt: excerpt(t.prompt), response: excerpt(t.response) })),
    recent_messages: a.messages.map((m) => ({ ...m, text: excerpt(m.text) })),
    usage: usageOf(s, id)
  }
}
