// Turns: the turns running now — per agent its trigger and the children it spawned (born when
// the turn ends, deferred spawn) — and the count of outstanding work (queued or running turns,
// pending births) that `awaitIdle` waits on. Only the turn runner (TurnRunner.ts) begins and
// ends a turn. Operations on the map are synchronous (atomic within an Effect.sync block).
import { Deferred, Effect, Stream, SubscriptionRef } from "effect"
import type { AgentId, MessageId, TurnId } from "../domain/ids.js"
import type { TurnOutcome } from "./Turn.js"

/**
 * Why a turn runs: a message that wakes the agent, or an explicit prompt. `note`: text put first
 * in the turn's prompt, before its messages (recovery's note to an agent whose turn a crash
 * interrupted, src/agent/Prompt.ts `recoveryPrompt`).
 */
export type Trigger =
  | { readonly _tag: "message"; readonly id: MessageId; readonly note?: string }
  | {
    readonly _tag: "prompt"
    readonly text: string
    readonly done: Deferred.Deferred<TurnOutcome | null> | null
    readonly note?: string
  }

/** Tell whoever waits on an explicit prompt how it ended (null: it did not run). */
export const settle = (t: Trigger, o: TurnOutcome | null): Effect.Effect<void> =>
  t._tag === "prompt" && t.done ? Deferred.succeed(t.done, o).pipe(Effect.asVoid) : Effect.void

interface TurnContext {
  readonly trigger: Trigger
  /** Children spawned during the turn, born when it ends. */
  readonly deferredSpawns: Array<AgentId>
  /** Set once the turn has started (its `turn.start` is logged). */
  turn_id: TurnId | null
}

export class Turns extends Effect.Service<Turns>()("substrat/Turns", {
  effect: Effect.gen(function*() {
    const running = new Map<AgentId, TurnContext>()
    const work = yield* SubscriptionRef.make(0)

    return {
      begin: (agent: AgentId, trigger: Trigger): void => {
        running.set(agent, { trigger, deferredSpawns: [], turn_id: null })
      },
      /** The turn's id, once its `turn.start` is logged. */
      started: (agent: AgentId, turn_id: TurnId): void => {
        const ctx = running.get(agent)
        if (ctx) ctx.turn_id = turn_id
      },
      /** The id of `agent`'s running turn (null: none running, or not started yet). */
      turnIdOf: (agent: AgentId): TurnId | null => running.get(agent)?.turn_id ?? null,
      /** The turn is over; the children it spawned (to be born now, if not yet). */
      end: (agent: AgentId): ReadonlyArray<AgentId> => {
        const ctx = running.get(agent)
        running.delete(agent)
        return ctx?.deferredSpawns ?? []
      },
      /** Why `agent`'s running turn runs (undefined: none running). */
      triggerOf: (agent: AgentId): Trigger | undefined => running.get(agent)?.trigger,
      isBusy: (agent: AgentId): boolean => running.has(agent),
      /** The agents whose turn is running now. */
      runningAgents: (): ReadonlyArray<AgentId> => [...running.keys()],
      /** Defer `child`'s birth to the end of `parent`'s running turn; false: no turn is running. */
      deferSpawn: (parent: AgentId, child: AgentId): boolean => {
        const ctx = running.get(parent)
        if (ctx) ctx.deferredSpawns.push(child)
        return ctx !== undefined
      },
      /** The children spawned so far by `agent`'s running turn (a live view: later spawns show up). */
      deferredOf: (agent: AgentId): ReadonlyArray<AgentId> => running.get(agent)?.deferredSpawns ?? [],
      /** How many turns run now. */
      runningCount: (): number => running.size,
      /** Count `n` more (or, negative, fewer) units of outstanding work. */
      addWork: (n: number): Effect.Effect<void> => SubscriptionRef.update(work, (w) => w + n),
      /** Completes when no turn is queued or running anywhere. */
      awaitIdle: work.changes.pipe(Stream.filter((n) => n <= 0), Stream.take(1), Stream.runDrain)
    } as const
  })
}) {}
