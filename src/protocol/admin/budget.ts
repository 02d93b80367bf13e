// Admin methods `budget.*`, `caps.*` and `inbox.*`: budgets, caps and the human inbox (docs/budgets.md).
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import { Schema } from "effect"
import { Budget, InboxItem, Remaining } from "../../domain/budget.js"
import { TreeCaps } from "../../domain/caps.js"
import { AgentId } from "../../domain/ids.js"
import { UsageWithTurns } from "../../domain/usage.js"
import { AdminMiddleware, AgentRef, BudgetPatch, MessageText, Mutation, RpcError } from "./common.js"

export const BudgetView = Schema.Struct({
  agent_id: AgentId,
  agent_name: Schema.String,
  /** The agent's own subtree budget (null: none; it shares its ancestors'). */
  budget: Schema.NullOr(Budget),
  /** What the subtree used (cache tokens included). */
  used: UsageWithTurns,
  remaining: Schema.NullOr(Remaining),
  /** Why the agent cannot work now (its own or an ancestor's budget spent), else null. */
  exhausted: Schema.NullOr(Schema.String),
  /** The inbox item of its spent budget, while the human has not raised it. */
  breach: Schema.NullOr(Schema.Struct({ item_id: Schema.String, reason: Schema.String }))
})
export type BudgetView = typeof BudgetView.Type

export class BudgetSetRpc extends Rpc.make("budget.set", {
  payload: { agent: AgentRef, ...BudgetPatch.fields },
  success: BudgetView,
  error: RpcError
}) {}

export class BudgetShowRpc extends Rpc.make("budget.show", {
  payload: { agent: AgentRef },
  success: BudgetView,
  error: RpcError
}) {}

/** A tree's caps (docs/budgets.md, "Caps"): the root's own, those in force (0: none), the policy. */
export const CapsView = Schema.Struct({
  root_id: AgentId,
  root_name: Schema.String,
  /** The root's own caps (`agent create --max-*`, `caps set`); null: the config's. */
  own: TreeCaps,
  /** What holds now: the root's own over the config's `caps.*` (0: no cap). */
  in_force: Schema.Struct({ max_depth: Schema.Number, max_children: Schema.Number, max_live: Schema.Number }),
  policy: Schema.Literal("queue", "refuse"),
  /** Spawns of this tree waiting for room. */
  queued: Schema.Number
})
export type CapsView = typeof CapsView.Type

/** Caps to change: an absent key keeps its value, null returns it to the config's, 0 is no cap. */
export const CapsPatch = Schema.Struct({
  max_depth: Schema.optional(TreeCaps.fields.max_depth),
  max_children: Schema.optional(TreeCaps.fields.max_children),
  max_live: Schema.optional(TreeCaps.fields.max_live)
})
export type CapsPatch = typeof CapsPatch.Type

export class CapsSetRpc extends Rpc.make("caps.set", {
  payload: { agent: AgentRef, ...CapsPatch.fields },
  success: CapsView,
  error: RpcError
}) {}

export class CapsShowRpc extends Rpc.make("caps.show", {
  payload: { agent: AgentRef },
  success: CapsView,
  error: RpcError
}) {}

export class InboxListRpc extends Rpc.make("inbox.list", {
  success: Schema.Struct({ items: Schema.Array(InboxItem) }),
  error: RpcError
}) {}

export class InboxAnswerRpc extends Rpc.make("inbox.answer", {
  payload: { id: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(128)), text: MessageText },
  success: Schema.Struct({
    id: Schema.String,
    kind: Schema.Literal("question", "stop", "cancel", "read", "resume", "approve", "dismiss", "allow", "allow-always", "reject"),
    agent_id: AgentId,
    agent_name: Schema.String
  }),
  error: RpcError
}) {}


export const BudgetGroup = RpcGroup.make(BudgetSetRpc.annotate(Mutation, true), BudgetShowRpc, CapsSetRpc.annotate(Mutation, true), CapsShowRpc, InboxListRpc, InboxAnswerRpc.annotate(Mutation, true)).middleware(AdminMiddleware)
