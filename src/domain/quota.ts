// Per-agent quotas on what an agent sends through its tools (docs/tools.md, "Quotas"): how many
// messages and bytes, open questions to the human, spawns, tool calls per turn, and the bytes its
// tool calls add to the event logs. The daemon's config gives the defaults (`quotas.*`); a root may
// carry its own for its tree (`agent create --quota-…`, logged with its caps). 0: no limit. Pure.
import { Schema } from "effect"

const Limit = Schema.Number.pipe(Schema.int(), Schema.nonNegative())

/** Every quota, one limit each (0: none). */
export const QuotaLimits = Schema.Struct({
  messages_per_minute: Limit,
  message_bytes_per_hour: Limit,
  open_questions: Limit,
  spawns_per_minute: Limit,
  tool_calls_per_turn: Limit,
  log_bytes_per_hour: Limit
})
export type QuotaLimits = typeof QuotaLimits.Type
export type QuotaName = keyof QuotaLimits
export const quotaNames: ReadonlyArray<QuotaName> = [
  "messages_per_minute",
  "message_bytes_per_hour",
  "open_questions",
  "spawns_per_minute",
  "tool_calls_per_turn",
  "log_bytes_per_hour"
]

/** A root's own quotas for its tree; absent: the config's. */
export const QuotaOverrides = Schema.partialWith(QuotaLimits, { exact: true })
export type QuotaOverrides = typeof QuotaOverrides.Type

/** What `agent inspect` shows: the limits in force, the use in the current windows, a park. */
export const QuotaView = Schema.Struct({
  limits: QuotaLimits,
  used: QuotaLimits,
  /** Refusals in the last 10 minutes (parked at `park_after`). */
  breaches: Schema.Number,
  park_after: Schema.Number,
  parked: Schema.NullOr(Schema.Struct({ item_id: Schema.String, reason: Schema.String }))
})
export type QuotaView = typeof QuotaView.Type
