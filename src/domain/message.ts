// The message envelope (seed 000 §7). The same Schema encodes the log line (`message.enqueued`
// data), the RPC payload and the test arbitrary. What the daemon says about a message is in
// typed fields (`sender_name`, `timeout_s`, `timed_out`, `late`, `multicast_id`, `recovered`).
// Logs written before those fields existed carry them as strings in `metadata`
// (`{"sender_name": "w", "timeout": "10", "timed_out": "true", …}`): `MessageEnvelopeFromLog`
// reads both forms and always writes the typed one (docs/events.md).
import { Schema } from "effect"
import { AgentId, MessageId } from "./ids.js"

/** A sender is an agent, or one of the two sentinels. */
export const Sender = Schema.Union(AgentId, Schema.Literal("USER", "SYSTEM"))
export type Sender = typeof Sender.Type

export const MessageKind = Schema.Literal("request", "response", "notification", "multicast")
export type MessageKind = typeof MessageKind.Type

/**
 * A `find:<symbol>` search in transit (docs/swarm.md, "find:"). Each hop is its own message in
 * the hop agent's log (`state: "hop"`: the daemon forwards it, no turn reads it); the copy the
 * found agent reads has `state: "found"`, the search's id (`origin`) and the searcher as sender.
 */
export const FindRoute = Schema.Struct({
  symbol: Schema.String,
  /** The search's id: what the searcher's `send_message` returned, and the found copy's id. */
  origin: MessageId,
  /** Who searched: the found copy's sender (its answer goes there). */
  origin_sender: AgentId,
  /** A request (the found agent's turn answers it) or a notification. */
  sync: Schema.Boolean,
  /** Hops so far, this message's included. */
  hops: Schema.NonNegativeInt,
  state: Schema.Literal("hop", "found"),
  /** The agents the search went through, the searcher first, this message's recipient last. */
  path: Schema.Array(AgentId)
})
export type FindRoute = typeof FindRoute.Type

const base = {
  id: MessageId,
  /** ISO 8601. */
  timestamp: Schema.String,
  sender: Sender,
  /** The recipient; for a multicast, each fanned-out copy names its own recipient. */
  recipient: Schema.NullOr(Schema.Union(AgentId, Schema.Literal("USER"))),
  reply_to: Schema.NullOr(MessageId),
  kind: MessageKind,
  payload: Schema.String
}

const fields = {
  ...base,
  /** The sender's name when it was sent (agents are addressed by name). */
  sender_name: Schema.optional(Schema.String),
  /** A sync request's reply timeout, seconds (positive). */
  timeout_s: Schema.optional(Schema.Number),
  /** A SYSTEM response: the daemon's notice that request `reply_to` timed out. */
  timed_out: Schema.optional(Schema.Boolean),
  /** A reply that came after its request timed out. */
  late: Schema.optional(Schema.Boolean),
  /** A multicast copy: the broadcast's id (each copy has its own `id`). */
  multicast_id: Schema.optional(MessageId),
  /** A reply recovery sent (a lost auto-reply re-delivered, or an error for a request nobody will answer). */
  recovered: Schema.optional(Schema.Boolean),
  /** With tracing on: the W3C traceparent of the message's span (the recipient's turn hangs below it). */
  trace: Schema.optional(Schema.String),
  /**
   * To USER: a root's turn text while it still waits on its own requests — progress on the
   * user's open request, not its answer (docs/messaging.md, "When a user's request is answered").
   */
  progress: Schema.optional(Schema.Boolean),
  /** A SYSTEM notice that waits in the inbox for the recipient's next turn instead of waking it (a swarm node's start-up change notice). */
  queued: Schema.optional(Schema.Boolean),
  /** A `find:<symbol>` hop, or the found agent's copy of the search. */
  find: Schema.optional(FindRoute)
}

export class MessageEnvelope extends Schema.Class<MessageEnvelope>("MessageEnvelope")(fields) {}

/** A reply the daemon wrote because no answer will come (a failed turn, a terminated or lost agent): "[error] …". */
export const isErrorReply = (env: MessageEnvelope): boolean => env.kind === "response" && env.payload.startsWith("[error] ")

/**
 * The envelope as logs written before the typed fields carried it. `metadata` comes first: a
 * Struct checks its fields in order, so a typed line (no `metadata`) fails this union member at
 * once instead of after decoding every base field twice.
 */
const LegacyEnvelope = Schema.Struct({ metadata: Schema.Record({ key: Schema.String, value: Schema.String }), ...base })
const Typed = Schema.Struct(fields)

const positive = (raw: string | undefined): number | undefined => {
  const t = raw === undefined ? Number.NaN : Number(raw)
  return Number.isFinite(t) && t > 0 ? t : undefined
}
const isId = Schema.is(MessageId)

const fromLegacy = ({ metadata: m, ...rest }: typeof LegacyEnvelope.Type): typeof Typed.Type => {
  const timeout_s = positive(m["timeout"])
  const multicast_id = m["multicast_id"]
  return {
    ...rest,
    ...(m["sender_name"] !== undefined ? { sender_name: m["sender_name"] } : {}),
    ...(timeout_s !== undefined ? { timeout_s } : {}),
    ...(m["timed_out"] === "true" ? { timed_out: true } : {}),
    ...(m["late"] === "true" ? { late: true } : {}),
    ...(multicast_id !== undefined && isId(multicast_id) ? { multicast_id } : {}),
    ...(m["recovered"] === "true" ? { recovered: true } : {})
  }
}

/**
 * The envelope in a log line: decodes the typed form and the older `metadata` form (a line with
 * a `metadata` object is read as the older form), encodes the typed form.
 */
export const MessageEnvelopeFromLog = Schema.transform(
  Schema.Union(LegacyEnvelope, Typed),
  Schema.typeSchema(MessageEnvelope),
  {
    strict: true,
    // Already decoded field by field (fromLegacy keeps only valid values): no second validation.
    decode: (x) => new MessageEnvelope("metadata" in x ? fromLegacy(x) : x, true),
    encode: (env) => Typed.make({ ...env }, true)
  }
)
