// Caps on the shape of an agent tree (docs/budgets.md, "Caps"): how deep it may grow, how many
// live children one agent may have, and how many live agents one tree may have. A value of 0 or
// null is no cap. The daemon's config gives the defaults (`caps.*`); a root may carry its own
// (`agent create --max-depth …`, logged as `caps.set` in its log). Pure.
import { Schema } from "effect"
import { QuotaOverrides } from "./quota.js"

const Cap = Schema.NullOr(Schema.Number.pipe(Schema.int(), Schema.nonNegative()))

/** A root's own caps; null: the config's. */
export const TreeCaps = Schema.Struct({
  max_depth: Cap,
  max_children: Cap,
  max_live: Cap,
  /** The tree's own quotas per agent (src/domain/quota.ts); absent: the config's. */
  quotas: Schema.optional(QuotaOverrides)
})
export type TreeCaps = typeof TreeCaps.Type

export const noCaps: TreeCaps = { max_depth: null, max_children: null, max_live: null }

/** A spawn beyond a cap: queued until room frees, or refused. */
export const CapsPolicy = Schema.Literal("queue", "refuse")
export type CapsPolicy = typeof CapsPolicy.Type

/** The caps in force for one tree: the root's own over the config's (0: none). */
export const capsInForce = (root: TreeCaps, config: TreeCaps): { readonly [K in keyof TreeCaps]: number } => ({
  max_depth: root.max_depth ?? config.max_depth ?? 0,
  max_children: root.max_children ?? config.max_children ?? 0,
  max_live: root.max_live ?? config.max_live ?? 0
})

/** Which caps a spawn would exceed now (none: it may start). Depth never frees up. */
export type CapHit =
  | { readonly cap: "max_depth"; readonly limit: number }
  | { readonly cap: "max_children"; readonly limit: number; readonly live: number }
  | { readonly cap: "max_live"; readonly limit: number; readonly live: number }

/** The spawn `share` of the parent's budget a `spawn_agent` may ask for. */
export const BudgetShare = Schema.Struct({
  usd: Schema.optional(Schema.JsonNumber.pipe(Schema.nonNegative())),
  tokens: Schema.optional(Schema.JsonNumber.pipe(Schema.nonNegative())),
  turns: Schema.optional(Schema.JsonNumber.pipe(Schema.nonNegative()))
})
export type BudgetShare = typeof BudgetShare.Type
