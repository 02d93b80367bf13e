// Usage totals: tokens and cost, summed per turn, per agent and per subtree. One definition for
// the TurnScheduler (per turn), the agent state (per agent), recovery (from the `usage` events)
// and the RPC/tool payloads (with a turn count).
import { Schema } from "effect"

export const UsageTotals = Schema.Struct({
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  cost_usd: Schema.Number
})
export type UsageTotals = typeof UsageTotals.Type

export const zeroUsage: UsageTotals = { input_tokens: 0, output_tokens: 0, cost_usd: 0 }
export const addUsage = (a: UsageTotals, b: UsageTotals): UsageTotals => ({
  input_tokens: a.input_tokens + b.input_tokens,
  output_tokens: a.output_tokens + b.output_tokens,
  cost_usd: a.cost_usd + b.cost_usd
})

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
