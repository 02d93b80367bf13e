// The orchestrator's in-memory state, in one seedable service: the tree, inboxes, queued turn
// triggers, pending sync requests, unborn children (deferred spawn), usage totals and recent
// activity. Crash recovery (a later issue) rebuilds a `StateSeed` from the event logs and
// provides `OrchestratorState.layerSeeded(seed)`. All mutations are synchronous blocks on
// this object, so each one is atomic with respect to other fibers.
import { Context, Deferred, Effect, Layer, Queue, SubscriptionRef } from "effect"
import type { MessageEnvelope } from "../domain/message.js"
import type { AgentId, MessageId } from "../domain/ids.js"
import type { TurnOutcome, UsageTotals } from "../session/TurnScheduler.js"
import { AgentTree } from "./AgentTree.js"

/** Why a turn runs: a message that wakes the agent, or an explicit prompt. */
export type Trigger =
  | { readonly _tag: "message"; readonly id: MessageId }
  | {
    readonly _tag: "prompt"
    readonly text: string
    readonly done: Deferred.Deferred<TurnOutcome | null> | null
  }

/** A sync request waiting for its reply. */
export interface PendingRequest {
  readonly id: MessageId
  readonly from: AgentId | "USER"
  readonly to: AgentId
  /** The request's reply timeout (`timeout` metadata), seconds; absent: waits indefinitely. */
  readonly timeout_s?: number | undefined
}

/** What a running turn collects for after the turn. */
export interface TurnContext {
  readonly trigger: Trigger
  /** Children spawned during the turn, born when it ends. */
  readonly deferredSpawns: Array<AgentId>
}

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
export interface Activity {
  turns: Array<TurnSummary>
  messages: Array<MessageSummary>
}
export interface AgentUsage {
  own: UsageTotals
  turns: number
  /** Totals of terminated descendants, so subtree totals survive termination. */
  retired: UsageTotals
  retiredTurns: number
}

export interface StateSeed {
  readonly tree?: AgentTree
  readonly inboxes?: ReadonlyMap<AgentId, ReadonlyArray<MessageEnvelope>>
  readonly requests?: ReadonlyArray<PendingRequest>
  readonly usage?: ReadonlyMap<AgentId, AgentUsage>
}

export interface OrchestratorStateService {
  tree: AgentTree
  readonly inboxes: Map<AgentId, Array<MessageEnvelope>>
  readonly triggers: Map<AgentId, Array<Trigger>>
  readonly requests: Map<MessageId, PendingRequest>
  /** Children added to the tree whose session is not created yet, with messages held for them. */
  readonly unborn: Map<AgentId, Array<MessageEnvelope>>
  readonly turns: Map<AgentId, TurnContext>
  readonly terminating: Set<AgentId>
  readonly usage: Map<AgentId, AgentUsage>
  readonly activity: Map<AgentId, Activity>
  readonly userOutbox: Array<MessageEnvelope>
  /** Turns queued or running anywhere, plus pending births; `awaitIdle` waits for 0. */
  readonly work: SubscriptionRef.SubscriptionRef<number>
  /** Agents with a new trigger; the Orchestrator's dispatcher runs one turn per element. */
  readonly wakes: Queue.Queue<AgentId>
}

export const RECENT_TURNS = 3
export const RECENT_MESSAGES = 5

export const makeState = (seed: StateSeed = {}): Effect.Effect<OrchestratorStateService> =>
  Effect.gen(function*() {
    const inboxes = new Map<AgentId, Array<MessageEnvelope>>()
    for (const [k, v] of seed.inboxes ?? []) inboxes.set(k, [...v])
    const tree = seed.tree ?? AgentTree.empty
    for (const n of tree.nodes.keys()) if (!inboxes.has(n)) inboxes.set(n, [])
    return {
      tree,
      inboxes,
      triggers: new Map(),
      requests: new Map((seed.requests ?? []).map((r) => [r.id, r] as const)),
      unborn: new Map(),
      turns: new Map(),
      terminating: new Set(),
      usage: new Map(seed.usage ?? []),
      activity: new Map(),
      userOutbox: [],
      work: yield* SubscriptionRef.make(0),
      wakes: yield* Queue.unbounded<AgentId>()
    }
  })

export class OrchestratorState extends Context.Tag("substrat/OrchestratorState")<
  OrchestratorState,
  OrchestratorStateService
>() {
  static readonly layer: Layer.Layer<OrchestratorState> = Layer.effect(OrchestratorState, makeState())
  static readonly layerSeeded = (seed: StateSeed): Layer.Layer<OrchestratorState> =>
    Layer.effect(OrchestratorState, makeState(seed))
}

export const activityOf = (s: OrchestratorStateService, id: AgentId): Activity => {
  let a = s.activity.get(id)
  if (!a) {
    a = { turns: [], messages: [] }
    s.activity.set(id, a)
  }
  return a
}

export const noteMessage = (s: OrchestratorStateService, id: AgentId, m: MessageSummary): void => {
  const a = activityOf(s, id)
  a.messages.push(m)
  if (a.messages.length > RECENT_MESSAGES) a.messages.splice(0, a.messages.length - RECENT_MESSAGES)
}

export const noteTurn = (s: OrchestratorStateService, id: AgentId, t: TurnSummary): void => {
  const a = activityOf(s, id)
  a.turns.push(t)
  if (a.turns.length > RECENT_TURNS) a.turns.splice(0, a.turns.length - RECENT_TURNS)
}

/** Count one more unit of outstanding work (a queued turn, a pending birth). */
export const addWork = (s: OrchestratorStateService, n: number) => SubscriptionRef.update(s.work, (w) => w + n)
