// The recent activity an inspection shows (`inspect_agent`, `agent.inspect`): excerpts of the
// last turns and messages of an agent. One definition for the tool result and the admin RPC.
import { Schema } from "effect"

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
