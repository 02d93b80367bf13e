// The message envelope (seed 000 §7). The same Schema encodes the log line (`message.enqueued`
// data), the RPC payload and the test arbitrary.
import { Schema } from "effect"
import { AgentId, MessageId } from "./ids.js"

/** A sender is an agent, or one of the two sentinels. */
export const Sender = Schema.Union(AgentId, Schema.Literal("USER", "SYSTEM"))
export type Sender = typeof Sender.Type

export const MessageKind = Schema.Literal("request", "response", "notification", "multicast")
export type MessageKind = typeof MessageKind.Type

export class MessageEnvelope extends Schema.Class<MessageEnvelope>("MessageEnvelope")({
  id: MessageId,
  /** ISO 8601. */
  timestamp: Schema.String,
  sender: Sender,
  /** The recipient; for a multicast, each fanned-out copy names its own recipient. */
  recipient: Schema.NullOr(Schema.Union(AgentId, Schema.Literal("USER"))),
  reply_to: Schema.NullOr(MessageId),
  kind: MessageKind,
  payload: Schema.String,
  /**
   * Known keys: `sender_name`, `timeout` (a request's reply timeout, seconds), `priority`,
   * `multicast_id`; on responses `timed_out` ("true": the daemon's notice that a request timed
   * out) and `late` ("true": a reply that came after its request timed out).
   */
  metadata: Schema.Record({ key: Schema.String, value: Schema.String })
}) {}
