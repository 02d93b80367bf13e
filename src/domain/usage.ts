// Usage totals: tokens and cost, summed per model request, per turn, per agent and per subtree.
// One definition for the Meter (per request, read at the model forwarder), the TurnRunner (per
// turn, as the provider reports it), the agent state (per agent), recovery (from the `usage`
// events) and the RPC/tool payloads (with a turn count). Cache tokens are kept apart from
// `input_tokens` (which counts only uncached input) and count towards token budgets.
import { Schema } from "effect"

export const UsageTotals = Schema.Struct({
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  cache_read_tokens: Schema.Number,
  cache_write_tokens: Schema.Number,
  cost_usd: Schema.Number
})
export type UsageTotals = typeof UsageTotals.Type

/** What a provider or an older log line reports: cache tokens may be absent (0). */
export interface UsageLike {
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cache_read_tokens?: number | undefined
  readonly cache_write_tokens?: number | undefined
  readonly cost_usd: number
}

export const zeroUsage: UsageTotals = { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, cost_usd: 0 }
export const addUsage = (a: UsageTotals, b: UsageLike): UsageTotals => ({
  input_tokens: a.input_tokens + b.input_tokens,
  output_tokens: a.output_tokens + b.output_tokens,
  cache_read_tokens: a.cache_read_tokens + (b.cache_read_tokens ?? 0),
  cache_write_tokens: a.cache_write_tokens + (b.cache_write_tokens ?? 0),
  cost_usd: a.cost_usd + b.cost_usd
})
/** Every token a budget counts: input, output, cache reads and cache writes. */
export const totalTokens = (u: UsageLike): number =>
  u.input_tokens + u.output_tokens + (u.cache_read_tokens ?? 0) + (u.cache_write_tokens ?? 0)

/** Totals with the number of turns they cover (what `usage` / `inspect` report). */
export const UsageWithTurns = Schema.Struct({ ...UsageTotals.fields, turns: Schema.Number })
export type UsageWithTurns = typeof UsageWithTurns.Type

export const zeroWithTurns: UsageWithTurns = { ...zeroUsage, turns: 0 }
export const addWithTurns = (a: UsageWithTurns, b: UsageWithTurns): UsageWithTurns => ({
  ...addUsage(a, b),
  turns: a.turns + b.turns
})

/** One agent's own totals and its subtree's (own + live descendants + terminated descendants). */
export const UsageReport = Schema.Struct({ agent_id: Schema.String, own: UsageWithTurns, subtree: UsageWithTurns })
export type UsageReport = typeof UsageReport.Type
