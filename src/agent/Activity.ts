// Activity: per agent, its usage totals and its recent activity (the last 3 turns, the last 5
// messages sent or received) for `inspect_agent` / `agent inspect`. Noted as turns end and
// messages go; rebuilt from the logs by recovery after a restart (docs/messaging.md).
import { addUsage, type UsageTotals, zeroUsage } from "../domain/usage.js"

export const RECENT_TURNS = 3
export const RECENT_MESSAGES = 5

export interface TurnSummary {
  readonly turn_id: string
  readonly prompt: string
  readonly response: string
  readonly error: string | null
}
export interface MessageSummary {
  readonly direction: "in" | "out"
  readonly peer: string
  readonly kind: string
  readonly message_id: string
  readonly text: string
}
/** The rings of one agent, oldest first. */
export interface RecentActivity {
  readonly turns: ReadonlyArray<TurnSummary>
  readonly messages: ReadonlyArray<MessageSummary>
}
export interface AgentUsage {
  readonly own: UsageTotals
  readonly turns: number
  /** Totals of terminated descendants, so subtree totals survive termination. */
  readonly retired: UsageTotals
  readonly retiredTurns: number
}

export const noActivity: RecentActivity = { turns: [], messages: [] }
export const noUsage: AgentUsage = { own: zeroUsage, turns: 0, retired: zeroUsage, retiredTurns: 0 }

const ring = <A>(xs: ReadonlyArray<A>, x: A, n: number): ReadonlyArray<A> => {
  const next = [...xs, x]
  return next.length > n ? next.slice(next.length - n) : next
}
/** Pure: `a` with one more message in its ring. */
export const withMessage = (a: RecentActivity | undefined, m: MessageSummary): RecentActivity => ({
  turns: a?.turns ?? [],
  messages: ring(a?.messages ?? [], m, RECENT_MESSAGES)
})
/** Pure: `a` with one more turn in its ring. */
export const withTurn = (a: RecentActivity | undefined, t: TurnSummary): RecentActivity => ({
  turns: ring(a?.turns ?? [], t, RECENT_TURNS),
  messages: a?.messages ?? []
})
/** Pure: a parent's usage once a child with usage `u` is terminated (its totals retire into it). */
export const retireInto = (parent: AgentUsage | undefined, u: AgentUsage): AgentUsage => {
  const p = parent ?? noUsage
  return {
    ...p,
    retired: addUsage(p.retired, addUsage(u.own, u.retired)),
    retiredTurns: p.retiredTurns + u.turns + u.retiredTurns
  }
}
