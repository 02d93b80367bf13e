// Multiplexer: at most N live providers (default 4). Acquire = reuse a live provider, resume a
// suspended session from its blob, or start a new one. When every slot is taken, the least
// recently used *idle* session is suspended (blob → session.json, `suspend.result` logged);
// a session mid-turn is never evicted; if every slot is mid-turn the caller waits in a FIFO
// queue (never errors). Re-acquiring an evicted session logs `session.restored`.
// The lock covers only the bookkeeping (which slot, which victim): an eviction's and an open's
// I/O run outside it, in the acquiring fiber, so sessions are suspended and resumed side by
// side; a session being suspended is not acquired (nor dropped) before its record is saved.
// An open saves the record's `active` state in the background, while the turn runs.
//
// Over 300 lines because the slot table, the decisions taken under its lock and the eviction and
// open I/O run outside it are one protocol: which session may be acquired or dropped when.
import { Context, Deferred, Effect, Exit, Fiber, FiberId, Layer, Option, Schema, Scope } from "effect"
import type { EventLogError, ProviderError, SessionStoreError } from "../domain/errors.js"
import { makeEvent } from "../domain/events.js"
import type { SessionId } from "../domain/ids.js"
import { Session } from "../domain/session.js"
import { EventLog } from "../storage/EventLog.js"
import { parseProviderName, type ProviderContext, type ProviderService } from "../provider/Provider.js"
import { ProviderRegistry } from "../provider/ProviderRegistry.js"
import { SessionStore } from "../storage/SessionStore.js"

export class MultiplexerConfig extends Context.Tag("substrat/MultiplexerConfig")<MultiplexerConfig, {
  readonly slots: number
}>() {
  static readonly layer = (slots: number): Layer.Layer<MultiplexerConfig> =>
    Layer.succeed(MultiplexerConfig, { slots: Math.max(1, Math.floor(slots)) })
}
export const defaultSlots = 4

/** A session that is mid-turn cannot be suspended or deleted right now. */
export class SessionBusyError extends Schema.TaggedError<SessionBusyError>()("SessionBusyError", {
  session_id: Schema.String,
  message: Schema.String
}) {}

/** Everything the Multiplexer needs to (re)create a session's provider. */
export interface SessionBinding {
  readonly session_id: SessionId
  /** Provider string, e.g. `scripted:demo`. */
  readonly provider: string
  readonly instructions: string
  readonly context: Omit<ProviderContext, "session_id" | "variant">
}

export type MultiplexerError = ProviderError | SessionStoreError | EventLogError

interface Slot {
  readonly provider: ProviderService
  readonly scope: Scope.CloseableScope
  /** The open's record and event writes, running on while the session's first turn runs. */
  readonly written: Fiber.RuntimeFiber<void>
  busy: boolean
  lastUsed: number
}
interface Ticket {
  deferred: Deferred.Deferred<void>
}
export interface SlotInfo {
  readonly session_id: SessionId
  readonly busy: boolean
  readonly last_used: number
}

export class Multiplexer extends Effect.Service<Multiplexer>()("substrat/Multiplexer", {
  scoped: Effect.gen(function*() {
    const slots = Option.match(yield* Effect.serviceOption(MultiplexerConfig), {
      onNone: () => defaultSlots,
      onSome: (c) => c.slots
    })
    const registry = yield* ProviderRegistry
    const store = yield* SessionStore
    const log = yield* EventLog
    const lock = yield* Effect.makeSemaphore(1)
    const live = new Map<SessionId, Slot>()
    // Sessions being suspended outside the lock; done once the record holds the blob.
    const evicting = new Map<SessionId, Deferred.Deferred<void>>()
    const waiters: Array<Ticket> = []
    let reserved = 0
    let clock = 0

    const wakeHead = Effect.suspend(() => {
      const head = waiters[0]
      return head ? Deferred.succeed(head.deferred, undefined).pipe(Effect.asVoid) : Effect.void
    })

    const now = Effect.sync(() => new Date().toISOString())

    /**
     * Suspend a session taken out of `live`: blob → session.json, `suspend.result`, stop. The
     * record and the event go to two files side by side (recovery ignores `suspend.result`).
     */
    const evict = (id: SessionId, slot: Slot) =>
      Effect.gen(function*() {
        // The open's `active` record first: the suspended one is saved after it, never before.
        yield* Fiber.await(slot.written)
        const blob = yield* slot.provider.suspend.pipe(
          Effect.catchAll((e) =>
            log.append(id, makeEvent("provider.error", { turn_id: null, reason: e.reason, message: e.message })).pipe(
              Effect.ignore,
              Effect.as(new Uint8Array())
            )
          )
        )
        yield* Scope.close(slot.scope, Exit.void)
        const rec = yield* store.load(id)
        const record = new Session({ ...rec, state: "suspended", suspended_at: yield* now, provider_state: blob })
        yield* Effect.all([store.save(record), log.append(id, makeEvent("suspend.result", { state_size: blob.byteLength }))], {
          concurrency: 2,
          discard: true
        })
      })

    /** `evict` outside the lock: the session counts as being suspended until its record is saved. */
    const evictOutside = (id: SessionId, slot: Slot) => {
      const done = evicting.get(id)
      return evict(id, slot).pipe(
        Effect.ensuring(Effect.suspend(() => {
          if (evicting.get(id) === done) evicting.delete(id)
          return done === undefined ? Effect.void : Deferred.succeed(done, undefined)
        })),
        Effect.uninterruptible
      )
    }

    type Decision =
      | { readonly _tag: "live"; readonly provider: ProviderService }
      | { readonly _tag: "new"; readonly victim: readonly [SessionId, Slot] | undefined }
      | { readonly _tag: "wait"; readonly deferred: Deferred.Deferred<void> }

    const decide = (id: SessionId, ticket: Ticket) =>
      Effect.gen(function*() {
        const slot = live.get(id)
        const queued = waiters.indexOf(ticket)
        if (slot) {
          slot.busy = true
          slot.lastUsed = ++clock
          if (queued >= 0) {
            waiters.splice(queued, 1)
            yield* wakeHead
          }
          return { _tag: "live", provider: slot.provider } satisfies Decision
        }
        // Being suspended: wait until its record holds the blob, then decide again.
        const out = evicting.get(id)
        if (out !== undefined) return { _tag: "wait", deferred: out } satisfies Decision
        const enqueue = Effect.gen(function*() {
          ticket.deferred = yield* Deferred.make<void>()
          if (queued < 0) waiters.push(ticket)
          return { _tag: "wait", deferred: ticket.deferred } satisfies Decision
        })
        if (waiters.length > 0 && queued !== 0) return yield* enqueue
        let victim: [SessionId, Slot] | undefined
        if (live.size + reserved >= slots) {
          for (const entry of live) {
            if (!entry[1].busy && (victim === undefined || entry[1].lastUsed < victim[1].lastUsed)) victim = entry
          }
          if (victim === undefined) return yield* enqueue
          // Its slot is this acquire's from now on; the acquirer suspends it (evictOutside).
          live.delete(victim[0])
          evicting.set(victim[0], Deferred.unsafeMake<void>(FiberId.none))
        }
        reserved += 1
        if (queued === 0) waiters.shift()
        return { _tag: "new", victim } satisfies Decision
      })

    /**
     * Make a provider for the session: resume from its blob (`session.restored` logged) when it
     * has one, else start. The record's `active` state is saved in the background, in the slot's
     * scope, while the session's turn runs: recovery sets every `active` record to `suspended`
     * anyway, and the record's next save (its suspension) waits for it. A failed save is a
     * warning; the turn's own appends report a failing disk.
     */
    const open = (b: SessionBinding) =>
      Effect.gen(function*() {
        const scope = yield* Scope.make()
        const result = yield* Effect.gen(function*() {
          const factory = yield* registry.get(b.provider)
          const { variant } = parseProviderName(b.provider)
          const provider = yield* factory.make({ ...b.context, session_id: b.session_id, variant }).pipe(
            Scope.extend(scope)
          )
          const rec = yield* store.load(b.session_id)
          // (A record still `created` has a blob when recovery wrote one: the conversation went on.)
          const resuming = rec.provider_state.byteLength > 0
          if (resuming) yield* provider.resume(rec.provider_state)
          else yield* provider.start(b.session_id, b.instructions)
          const written = yield* store.save(new Session({ ...rec, state: "active", suspended_at: null })).pipe(
            Effect.catchAll((e) => Effect.logWarning(`session ${b.session_id}: record not set to active: ${e.message}`)),
            Effect.uninterruptible,
            Effect.forkIn(scope)
          )
          if (resuming) {
            yield* log.append(b.session_id, makeEvent("session.restored", { provider: b.provider, model: rec.model }))
          }
          return { provider, written }
        }).pipe(Effect.onError((cause) => Scope.close(scope, Exit.failCause(cause))))
        return { ...result, scope }
      })

    const acquire = (b: SessionBinding): Effect.Effect<ProviderService, MultiplexerError> =>
      Effect.gen(function*() {
        const ticket: Ticket = { deferred: yield* Deferred.make<void>() }
        while (true) {
          const d: Decision = yield* lock.withPermits(1)(decide(b.session_id, ticket)).pipe(
            Effect.onInterrupt(() => lock.withPermits(1)(Effect.sync(() => {
              const i = waiters.indexOf(ticket)
              if (i >= 0) waiters.splice(i, 1)
            }).pipe(Effect.andThen(wakeHead))))
          )
          if (d._tag === "live") return d.provider
          if (d._tag === "new") {
            const opened = yield* (d.victim === undefined ? open(b) : Effect.zipRight(evictOutside(d.victim[0], d.victim[1]), open(b))).pipe(
              Effect.tapErrorCause(() =>
                lock.withPermits(1)(Effect.sync(() => {
                  reserved -= 1
                }).pipe(Effect.andThen(wakeHead)))
              )
            )
            yield* lock.withPermits(1)(Effect.sync(() => {
              reserved -= 1
              live.set(b.session_id, { ...opened, busy: true, lastUsed: ++clock })
            }).pipe(Effect.andThen(wakeHead)))
            return opened.provider
          }
          yield* Deferred.await(d.deferred).pipe(
            Effect.onInterrupt(() =>
              lock.withPermits(1)(Effect.sync(() => {
                const i = waiters.indexOf(ticket)
                if (i >= 0) waiters.splice(i, 1)
              }).pipe(Effect.andThen(wakeHead)))
            )
          )
        }
      })

    const release = (id: SessionId) =>
      lock.withPermits(1)(Effect.sync(() => {
        const slot = live.get(id)
        if (slot) {
          slot.busy = false
          slot.lastUsed = ++clock
        }
      }).pipe(Effect.andThen(wakeHead)))

    /** Run `f` with the session's live provider; the session is busy (never evicted) meanwhile. */
    const use = <A, E, R>(
      binding: SessionBinding,
      f: (provider: ProviderService) => Effect.Effect<A, E, R>
    ): Effect.Effect<A, E | MultiplexerError, R> =>
      Effect.acquireUseRelease(acquire(binding), f, () => release(binding.session_id))

    /** Once the live session's record says `active` (its open's background save is done). */
    const settled = (id: SessionId): Effect.Effect<void> =>
      Effect.suspend(() => {
        const slot = live.get(id)
        return slot === undefined ? Effect.void : Effect.asVoid(Fiber.await(slot.written))
      })

    /** Suspend a live idle session now (no-op when it is not live). */
    const suspend = Effect.fn("Multiplexer.suspend")(function*(id: SessionId) {
      return yield* lock.withPermits(1)(Effect.gen(function*() {
        const slot = live.get(id)
        if (!slot) return false
        if (slot.busy) {
          return yield* new SessionBusyError({ session_id: id, message: `session ${id} is mid-turn` })
        }
        live.delete(id)
        yield* evict(id, slot)
        yield* wakeHead
        return true
      }))
    })

    /** Stop a session's provider without suspending it (termination, deletion). */
    const drop = Effect.fn("Multiplexer.drop")(function*(id: SessionId) {
      // A suspension in flight finishes first: its record is not written after the caller's.
      const out = evicting.get(id)
      if (out !== undefined) yield* Deferred.await(out)
      yield* lock.withPermits(1)(Effect.gen(function*() {
        const slot = live.get(id)
        if (!slot) return
        live.delete(id)
        yield* Scope.close(slot.scope, Exit.void)
        yield* wakeHead
      }))
    })

    /** Suspend every idle live session (graceful shutdown). */
    const suspendAll = Effect.fn("Multiplexer.suspendAll")(function*() {
      const ids = [...live.entries()].filter(([, s]) => !s.busy).map(([id]) => id)
      for (const id of ids) yield* suspend(id).pipe(Effect.catchTag("SessionBusyError", () => Effect.succeed(false)))
    })

    const info = Effect.sync((): ReadonlyArray<SlotInfo> =>
      [...live.entries()].map(([session_id, s]) => ({ session_id, busy: s.busy, last_used: s.lastUsed }))
    )

    yield* Effect.addFinalizer(() =>
      Effect.forEach([...live.values()], (s) => Scope.close(s.scope, Exit.void), { discard: true }).pipe(
        Effect.andThen(Effect.sync(() => live.clear()))
      )
    )

    return { slots, use, settled, suspend, drop, suspendAll, info, isLive: (id: SessionId) => live.has(id) } as const
  })
}) {}
