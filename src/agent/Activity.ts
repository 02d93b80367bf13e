// Activity: the one owner of each agent's usage totals and recent activity (the last 3 turns,
// the last 5 messages sent or received) for `inspect_agent` / `agent inspect`. Noted as turns
// end and messages go; rebuilt from the logs by recovery after a restart (docs/messaging.md).
import { Effect, Either, Schema } from "effect"
import type { AgentId } from "../domain/ids.js"
import { RecentMessage, RecentTurn } from "../domain/inspection.js"
import {
  addUsage,
  addWithTurns,
  type UsageReport,
  type UsageLike,
  type UsageTotals,
  type UsageWithTurns,
  zeroUsage,
  zeroWithTurns
} from "../domain/usage.js"
import type { TurnOutcome } from "./Turn.js"

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

/**
 * The rings as a fold checkpoint keeps them (JSON; `peer: null` is a broadcast, whose peers the
 * log does not name). Either ring may be absent (empty).
 */
export const RecentRings = Schema.Struct({
  turns: Schema.optional(Schema.Array(RecentTurn)),
  messages: Schema.optional(Schema.Array(Schema.Struct({ ...RecentMessage.fields, peer: Schema.NullOr(Schema.String) })))
})
export type RecentRings = typeof RecentRings.Type
const RingsJson = Schema.parseJson(RecentRings)
export const decodeRings = Schema.decodeUnknownEither(RingsJson)
export const encodeRings = Schema.encodeSync(RingsJson)

/**
 * An agent's rings still encoded (recovery seeds them so from a fold checkpoint): decoded when
 * its activity is first asked for, not at start-up. `broadcastPeers` names a broadcast's peers.
 */
export interface EncodedActivity {
  readonly _tag: "EncodedActivity"
  readonly json: string
  readonly broadcastPeers: string
}
export type SeededActivity = RecentActivity | EncodedActivity

const isEncoded = (a: SeededActivity): a is EncodedActivity => "_tag" in a && a._tag === "EncodedActivity"

/**
 * Pure: the rings of `a`, decoded if they are still encoded. Rings that do not decode (a damaged
 * checkpoint) are empty.
 */
export const decodeActivity = (a: SeededActivity | undefined): RecentActivity | undefined => {
  if (a === undefined || !isEncoded(a)) return a
  const r = decodeRings(a.json)
  if (Either.isLeft(r)) return noActivity
  return {
    turns: r.right.turns ?? [],
    messages: (r.right.messages ?? []).map((m) => m.peer === null ? { ...m, peer: a.broadcastPeers } : { ...m, peer: m.peer })
  }
}
export const noUsage: AgentUsage = { own: zeroUsage, turns: 0, retired: zeroUsage, retiredTurns: 0 }

const ring = <A>(xs: ReadonlyArray<A>, x: A, n: number): ReadonlyArray<A> => {
  const next = [...xs, x]
  return next.length > n ? next.slice(next.length - n) : next
}
/** Pure: `a` with one more message in its ring. */
export const withMessage = (seeded: SeededActivity | undefined, m: MessageSummary): RecentActivity => {
  const a = decodeActivity(seeded)
  return { turns: a?.turns ?? [], messages: ring(a?.messages ?? [], m, RECENT_MESSAGES) }
}
/** Pure: `a` with one more turn in its ring. */
export const withTurn = (seeded: SeededActivity | undefined, t: TurnSummary): RecentActivity => {
  const a = decodeActivity(seeded)
  return { turns: ring(a?.turns ?? [], t, RECENT_TURNS), messages: a?.messages ?? [] }
}
/** Pure: a parent's usage once a child with usage `u` is terminated (its totals retire into it). */
export const retireInto = (parent: AgentUsage | undefined, u: AgentUsage): AgentUsage => {
  const p = parent ?? noUsage
  return {
    ...p,
    retired: addUsage(p.retired, addUsage(u.own, u.retired)),
    retiredTurns: p.retiredTurns + u.turns + u.retiredTurns
  }
}

export class Activity extends Effect.Service<Activity>()("substrat/Activity", {
  sync: () => {
    const usage = new Map<AgentId, AgentUsage>()
    /** Recovery's seed may leave an agent's rings encoded until they are first asked for. */
    const recent = new Map<AgentId, SeededActivity>()
    const recentOf = (agent: AgentId): RecentActivity => {
      const a = recent.get(agent)
      if (a === undefined) return noActivity
      const decoded = decodeActivity(a) ?? noActivity
      if (decoded !== a) recent.set(agent, decoded)
      return decoded
    }
    /** Per agent, the running turns that have request-level usage (metered at the forwarder). */
    const metered = new Map<AgentId, Set<string>>()
    const own = (a: AgentId): UsageWithTurns => {
      const u = usage.get(a)
      return u ? { ...u.own, turns: u.turns } : zeroWithTurns
    }
    const retired = (a: AgentId): UsageWithTurns => {
      const u = usage.get(a)
      return u ? { ...u.retired, turns: u.retiredTurns } : zeroWithTurns
    }
    return {
      noteMessage: (agent: AgentId, m: MessageSummary): void => {
        recent.set(agent, withMessage(recent.get(agent), m))
      },
      /**
       * One model request's usage (metered at the forwarder): counted at once, so budgets see it
       * between the requests of a turn. The turn's own (provider-reported) total is then not added.
       */
      noteRequest: (agent: AgentId, turn_id: string | null, u: UsageLike): void => {
        const cur = usage.get(agent) ?? noUsage
        usage.set(agent, { ...cur, own: addUsage(cur.own, u) })
        if (turn_id === null) return
        const set = metered.get(agent) ?? new Set<string>()
        set.add(turn_id)
        metered.set(agent, set)
      },
      /** A turn ended: its usage counts (unless metered per request), it joins the recent turns. */
      noteTurn: (agent: AgentId, o: TurnOutcome): void => {
        const u = usage.get(agent) ?? noUsage
        const set = metered.get(agent)
        const wasMetered = set?.delete(o.turn_id) === true
        if (set !== undefined && set.size === 0) metered.delete(agent)
        usage.set(agent, { ...u, own: wasMetered ? u.own : addUsage(u.own, o.usage), turns: u.turns + 1 })
        recent.set(
          agent,
          withTurn(recent.get(agent), {
            turn_id: o.turn_id,
            prompt: o.prompt,
            response: o.response,
            error: o.error ? `${o.error.reason}: ${o.error.message}` : null
          })
        )
      },
      /** The agent is terminated: its totals retire into its parent's, its activity goes. */
      retire: (agent: AgentId, parent: AgentId | null): void => {
        const u = usage.get(agent)
        usage.delete(agent)
        recent.delete(agent)
        metered.delete(agent)
        if (u && parent !== null) usage.set(parent, retireInto(usage.get(parent), u))
      },
      recentOf,
      /** An agent's own totals without copying them (undefined: nothing used yet). */
      ownUsage: (agent: AgentId): UsageTotals | undefined => usage.get(agent)?.own,
      /** Own totals, and subtree totals (own + live descendants + terminated descendants). */
      usageOf: (agent: AgentId, subtree: ReadonlyArray<AgentId>): UsageReport => ({
        agent_id: agent,
        own: own(agent),
        subtree: subtree.reduce((acc, a) => addWithTurns(addWithTurns(acc, own(a)), retired(a)), zeroWithTurns)
      }),
      /** Recovery: totals and activity rebuilt from the logs (rings may stay encoded until asked for). */
      seed: (u: ReadonlyMap<AgentId, AgentUsage>, a: ReadonlyMap<AgentId, SeededActivity>): void => {
        for (const [k, v] of u) usage.set(k, v)
        for (const [k, v] of a) recent.set(k, v)
      },
      snapshot: () => ({
        usage: new Map(usage) as ReadonlyMap<AgentId, AgentUsage>,
        activity: new Map([...recent.keys()].map((k) => [k, recentOf(k)])) as ReadonlyMap<AgentId, RecentActivity>
      })
    } as const
  }
}) {}
