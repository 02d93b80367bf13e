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
