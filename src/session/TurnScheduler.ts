// TurnScheduler: the order of a session's turns. `serialize` runs work for one session after
// every earlier submission for it and before later ones (FIFO); different sessions run
// concurrently (the Multiplexer bounds how many hold a provider slot). `stoppable` marks the
// session's running turn so that `stopTurn` can end it from outside (e.g. its workspace is being
// deleted). What a turn does — the events it logs, its output, its end — is the agent layer's
// (src/agent/TurnRunner.ts): nothing here calls back into it.
import { Deferred, Effect, FiberId, Schema } from "effect"
import type { SessionId } from "../domain/ids.js"

/** The turn was stopped from outside (`stopTurn`: e.g. its workspace is being deleted). */
export class TurnStopped extends Schema.TaggedError<TurnStopped>()("TurnStopped", { message: Schema.String }) {}

/** A submission: done once it has run (`ran`), or once it gave up its place before it ran. */
interface Link {
  readonly done: Deferred.Deferred<void>
  /** The submission before it, until it runs (then everything before it has ended). */
  prev: Link | undefined
  ran: boolean
}

export class TurnScheduler extends Effect.Service<TurnScheduler>()("substrat/TurnScheduler", {
  effect: Effect.gen(function*() {
    // The last submission of each session: an update in place, so a submission costs the same
    // whatever the number of sessions. Removed when it ends with none after it.
    const tails = new Map<SessionId, Link>()
    /** The running turn of each session: failing `stop` ends its provider stream with TurnStopped. */
    const running = new Map<SessionId, { readonly stop: Deferred.Deferred<never, TurnStopped>; readonly done: Deferred.Deferred<void> }>()

    /**
     * Wait until `link` has run and ended — or, when it gave up its place before it ran (its fiber
     * interrupted while it waited), until the submissions before it have.
     */
    const after = (link: Link | undefined): Effect.Effect<void> =>
      link === undefined
        ? Effect.void
        : Effect.zipRight(Deferred.await(link.done), Effect.suspend(() => (link.ran ? Effect.void : after(link.prev))))

    /** Run `eff` after every earlier submission for this session, and before later ones. */
    const serialize = <A, E, R>(session: SessionId, eff: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      Effect.suspend(() => {
        const mine: Link = { done: Deferred.unsafeMake<void>(FiberId.none), prev: tails.get(session), ran: false }
        tails.set(session, mine)
        const done = Effect.suspend(() => {
          // One that never ran stays the tail: a later submission waits through it for the ones before.
          if (tails.get(session) === mine && (mine.ran || mine.prev === undefined)) tails.delete(session)
          return Deferred.succeed(mine.done, undefined)
        })
        const run = Effect.suspend(() => {
          mine.ran = true
          mine.prev = undefined // everything before it has ended
          return eff
        })
        return (mine.prev === undefined ? run : Effect.zipRight(after(mine.prev), run)).pipe(Effect.ensuring(done))
      })

    /**
     * Run the session's turn `turn` as its running turn: `stopped` fails with TurnStopped once
     * `stopTurn` is called (the turn interrupts its provider stream with it). `stopTurn` returns
     * when `turn` has finished, whatever it did with the stop.
     */
    const stoppable = <A, E, R>(
      session: SessionId,
      turn: (stopped: Effect.Effect<never, TurnStopped>) => Effect.Effect<A, E, R>
    ): Effect.Effect<A, E, R> =>
      Effect.gen(function*() {
        const stop = yield* Deferred.make<never, TurnStopped>()
        const done = yield* Deferred.make<void>()
        running.set(session, { stop, done })
        return yield* turn(Deferred.await(stop)).pipe(
          Effect.ensuring(Effect.suspend(() => {
            if (running.get(session)?.done === done) running.delete(session)
            return Deferred.succeed(done, undefined)
          }))
        )
      })

    /**
     * Stop the session's running turn, if any: its provider stream ends with TurnStopped (the
     * provider's process is interrupted), the turn ends as failed (`provider.error`, reason
     * `TurnStopped`) like any failed turn. Returns once it has ended and its hooks have recorded
     * it (the workspace diff: no git left running in its workspace); false: no turn was running.
     */
    const stopTurn = (session: SessionId, message: string): Effect.Effect<boolean> =>
      Effect.suspend(() => {
        const r = running.get(session)
        if (r === undefined) return Effect.succeed(false)
        return Deferred.fail(r.stop, new TurnStopped({ message })).pipe(
          Effect.zipRight(Deferred.await(r.done)),
          Effect.as(true)
        )
      })

    return { serialize, stoppable, stopTurn } as const
  })
}) {}
