// The orchestrator's in-memory state, in one seedable service: the tree, inboxes, queued turn
// triggers, pending sync requests, unborn children (deferred spawn), usage totals and recent
// activity. Crash recovery (a later issue) rebuilds a `StateSeed` from the event logs and
// provides `OrchestratorState.layerSeeded(seed)`. All mutations are synchronous blocks on
// this object, so each one is atomic with respect to other fibers.
import { Context, Deferred, Effect, Layer, Queue, SubscriptionRef } from "effect"
import type { MessageEnvelope } from "../domain/message.js"
import type { AgentId, MessageId } from "../domain/ids.js"
import type { TurnOutcome } from "../session/TurnScheduler.js"
import { type AgentUsage, type MessageSummary, type RecentActivity, type TurnSummary, withMessage, withTurn } from "./Activity.js"
import type { PendingRequest } from "./Requests.js"
import { AgentTree } from "./AgentTree.js"

/** Why a turn runs: a message that wakes the agent, or an explicit prompt. */
export type Trigger =
  | { readonly _tag: "message"; readonly id: MessageId }
  | {
    readonly _tag: "prompt"
    readonly text: string
    readonly done: Deferred.Deferred<TurnOutcome | null> | null
  }

export type { PendingRequest }

/** What a running turn collects for after the turn. */
export interface TurnContext {
  readonly trigger: Trigger
  /** Children spawned during the turn, born when it ends. */
  readonly deferredSpawns: Array<AgentId>
}

export type { AgentUsage, MessageSummary, TurnSummary }
export type Activity = RecentActivity

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

export { RECENT_MESSAGES, RECENT_TURNS } from "./Activity.js"

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

export const noteMessage = (s: OrchestratorStateService, id: AgentId, m: MessageSummary): void => {
  s.activity.set(id, withMessage(s.activity.get(id), m))
}

export const noteTurn = (s: OrchestratorStateService, id: AgentId, t: TurnSummary): void => {
  s.activity.set(id, withTurn(s.activity.get(id), t))
}

/** Count one more unit of outstanding work (a queued turn, a pending birth). */
export const addWork = (s: OrchestratorStateService, n: number) => SubscriptionRef.update(s.work, (w) => w + n)
