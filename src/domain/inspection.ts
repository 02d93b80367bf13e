// What an inspection shows (`inspect_agent`, `agent.inspect`): the live facts of an agent and
// excerpts of its last turns and messages. One definition: `AgentInspection` is the tool's result;
// the admin method's `InspectResult` (src/protocol/admin/agent.ts) takes its facts' Schemas from it.
import { Schema } from "effect"
import { AgentState } from "./agent.js"
import { UsageReport } from "./usage.js"

export const RecentTurn = Schema.Struct({
  turn_id: Schema.String,
  prompt: Schema.String,
  response: Schema.String,
  error: Schema.NullOr(Schema.String)
})
export type RecentTurn = typeof RecentTurn.Type

export const RecentMessage = Schema.Struct({
  direction: Schema.Literal("in", "out"),
  peer: Schema.String,
  kind: Schema.String,
  message_id: Schema.String,
  text: Schema.String
})
export type RecentMessage = typeof RecentMessage.Type

/** One row's extras in `agent list` (`AgentList`'s `details`, src/protocol/admin/agent.ts). */
export const AgentBrief = Schema.Struct({
  agent_id: Schema.String,
  /** A swarm node agent not materialized yet (docs/swarm.md): no session, nothing ran. */
  dormant: Schema.optional(Schema.Boolean),
  /** A turn of it waits to start (for a provider slot, or held by a budget or a question). */
  queued: Schema.optional(Schema.Boolean),
  /** Its own use: tokens (cache included, as budgets count them) and USD. */
  tokens: Schema.optional(Schema.Number),
  cost_usd: Schema.optional(Schema.Number)
})
export type AgentBrief = typeof AgentBrief.Type

/** The inspect result: `inspect_agent`'s JSON, and the facts `agent.inspect` shows (its `InspectResult`). */
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
  recent_turns: Schema.Array(RecentTurn),
  recent_messages: Schema.Array(RecentMessage),
  usage: UsageReport
})
export type AgentInspection = typeof AgentInspection.Type
