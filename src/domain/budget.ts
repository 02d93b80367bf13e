// Budgets and the human inbox as data (docs/budgets.md). A budget belongs to an agent and covers
// its subtree (itself and every descendant, live or terminated); any limit may be null (none).
// `since` starts the wall-clock limit. Pure: the checks are functions of the totals.
import { Schema } from "effect"
import { totalTokens, type UsageWithTurns } from "./usage.js"

export const BudgetLimits = Schema.Struct({
  usd: Schema.NullOr(Schema.JsonNumber.pipe(Schema.nonNegative())),
  tokens: Schema.NullOr(Schema.JsonNumber.pipe(Schema.nonNegative())),
  turns: Schema.NullOr(Schema.JsonNumber.pipe(Schema.nonNegative())),
  time_s: Schema.NullOr(Schema.JsonNumber.pipe(Schema.nonNegative()))
})
export type BudgetLimits = typeof BudgetLimits.Type

/** Limits to change: an absent (undefined) key keeps its limit, null removes it. */
export type LimitsPatch = { readonly [K in keyof BudgetLimits]?: BudgetLimits[K] | undefined }

export const noLimits: BudgetLimits = { usd: null, tokens: null, turns: null, time_s: null }
export const hasLimit = (b: BudgetLimits): boolean => b.usd !== null || b.tokens !== null || b.turns !== null || b.time_s !== null

/** A budget in force: its limits and when its clock started. */
export const Budget = Schema.Struct({ ...BudgetLimits.fields, since: Schema.String })
export type Budget = typeof Budget.Type

/** What a budget has left (null: no such limit). */
export const Remaining = Schema.Struct({
  usd: Schema.NullOr(Schema.Number),
  tokens: Schema.NullOr(Schema.Number),
  turns: Schema.NullOr(Schema.Number),
  time_s: Schema.NullOr(Schema.Number)
})
export type Remaining = typeof Remaining.Type

/** `limits` minus what the subtree used (`reservedTurns` running now), at `now` (ms). */
export const remainingOf = (b: Budget, used: UsageWithTurns, reservedTurns: number, now: number): Remaining => ({
  usd: b.usd === null ? null : b.usd - used.cost_usd,
  tokens: b.tokens === null ? null : b.tokens - totalTokens(used),
  turns: b.turns === null ? null : b.turns - used.turns - reservedTurns,
  time_s: b.time_s === null ? null : b.time_s - (now - Date.parse(b.since)) / 1000
})

const fmtUsd = (n: number) => `$${n.toFixed(4)}`

/** Which limit of a budget is spent, and what it says. */
export interface Spent {
  readonly limit: "usd" | "tokens" | "turns" | "time_s"
  readonly reason: string
}

/**
 * Which limit admits no more work, or null. `turn`: a new turn would start (it needs one turn
 * left); else a model request inside a running turn (already reserved).
 */
export const spentLimit = (b: Budget, used: UsageWithTurns, reservedTurns: number, now: number, turn: boolean): Spent | null => {
  const r = remainingOf(b, used, reservedTurns, now)
  if (r.usd !== null && r.usd <= 0) return { limit: "usd", reason: `USD budget spent (${fmtUsd(used.cost_usd)} of ${fmtUsd(b.usd!)})` }
  if (r.tokens !== null && r.tokens <= 0) {
    return { limit: "tokens", reason: `token budget spent (${totalTokens(used)} of ${b.tokens} tokens, cache included)` }
  }
  if (r.turns !== null && (turn ? r.turns < 1 : r.turns < 0)) return { limit: "turns", reason: `turn budget spent (${used.turns} of ${b.turns} turns)` }
  if (r.time_s !== null && r.time_s <= 0) return { limit: "time_s", reason: `time budget spent (${b.time_s}s since ${b.since})` }
  return null
}

/** Why the budget admits no more work, or null (`spentLimit`'s words). */
export const exhaustedBy = (b: Budget, used: UsageWithTurns, reservedTurns: number, now: number, turn: boolean): string | null =>
  spentLimit(b, used, reservedTurns, now, turn)?.reason ?? null

/**
 * What in-flight model requests hold against a budget (docs/budgets.md, "Reservations"): a new
 * request waits while they fill what is left (`used + held >= limit`), so the spending past the
 * limit is at most the last admitted request's own reservation, however many run at once.
 */
export const heldFull = (b: Budget, used: UsageWithTurns, held: { readonly usd: number; readonly tokens: number }): boolean =>
  (b.usd !== null && held.usd > 0 && used.cost_usd + held.usd >= b.usd) ||
  (b.tokens !== null && held.tokens > 0 && totalTokens(used) + held.tokens >= b.tokens)

/** One thing waiting for the human, oldest first in `substrat inbox`. */
export const InboxItem = Schema.Struct({
  id: Schema.String,
  kind: Schema.Literal("question", "budget", "queued_spawn", "answer", "quota", "egress", "permission"),
  agent_id: Schema.String,
  agent_name: Schema.String,
  text: Schema.String,
  ts: Schema.String,
  /** The answers the item takes, when it takes only fixed words (an egress request: approve/dismiss; a reached egress limit: dismiss). */
  answers: Schema.optional(Schema.Array(Schema.String))
})
export type InboxItem = typeof InboxItem.Type
