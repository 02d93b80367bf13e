// TurnGate and HumanDesk (optional ports): what the turn runner and the tool handler ask before
// an agent works, and how an agent asks the human. The daemon provides both from the Meter
// (src/meter/Meter.ts: budgets, parked agents, the human inbox); without them every turn may start
// and `ask_human` is refused.
import { Context, type Effect } from "effect"
import type { AgentNode } from "../domain/agent.js"
import type { LimitsPatch } from "../domain/budget.js"
import type { AgentId } from "../domain/ids.js"

export class TurnGate extends Context.Tag("substrat/TurnGate")<TurnGate, {
  /** May `node` start a turn now? True reserves one (released by `turnEnded`); false: it is parked. */
  readonly mayStart: (node: AgentNode) => Effect.Effect<boolean>
  readonly turnEnded: (node: AgentNode) => Effect.Effect<void>
  /**
   * Why `node` may do no more work now (a budget on its path is spent), or null. A turn that
   * fails while this holds is parked, not failed: its inputs wait for a raise (TurnRunner).
   */
  readonly spent: (node: AgentNode) => string | null
  /** Null: `parent` may spawn a child now; else why not. */
  readonly maySpawn: (parent: AgentNode) => Effect.Effect<string | null>
}>() {}

export class HumanDesk extends Context.Tag("substrat/HumanDesk")<HumanDesk, {
  /** Put `question` in the human's inbox (durable); the agent is parked once its turn ends. */
  readonly ask: (node: AgentNode, question: string) => Effect.Effect<{ readonly item_id: string }, { readonly message: string }>
  /** `agent` asked the human and the answer has not come: a request of USER it holds stays open. */
  readonly asking: (agent: AgentId) => boolean
  /** How many of `agent`'s questions wait for an answer (the `open_questions` quota, src/agent/Quotas.ts). */
  readonly openQuestions: (agent: AgentId) => number
}>() {}

/** A spawn's share of its parent's budget (spawn_agent `budget_*`); the daemon provides it from the Meter. */
export class BudgetShares extends Context.Tag("substrat/BudgetShares")<BudgetShares, {
  /**
   * Fails (a clear message) when `share` is more than `parent`'s path has left now, the
   * outstanding shares of live children counted as spent (`pendingOf`: shares of children not
   * born yet).
   */
  readonly carve: (
    parent: AgentNode,
    share: LimitsPatch,
    pendingOf: (child: AgentId) => LimitsPatch | undefined
  ) => Effect.Effect<void, { readonly field: string; readonly message: string }>
  /** The child is born: its own budget is `share` (logged as its `budget.set`). */
  readonly give: (child: AgentNode, share: LimitsPatch) => Effect.Effect<void, { readonly message: string }>
}>() {}
