// TurnScheduler.serialize: one session's work runs one at a time, in submission order — also when
// a submission waiting for its turn gives up (interrupted: a timed-out wait, a client gone). The
// work submitted after it must still wait for the work running before it.
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import type { SessionId } from "../../src/domain/ids.js"
import { TurnScheduler } from "../../src/session/TurnScheduler.js"

const S = "00000000-0000-4000-8000-000000000001" as SessionId

/** Let every fiber that can run do so. */
const settle = Effect.forEach(Array.from({ length: 50 }), () => Effect.yieldNow(), { discard: true })

describe("TurnScheduler.serialize", () => {
  it.effect("a waiter that gives up its place does not let the next one run beside the running one", () =>
    Effect.gen(function*() {
      const scheduler = yield* TurnScheduler
      const gate = yield* Deferred.make<void>()
      const log: Array<string> = []
      const a = yield* Effect.fork(scheduler.serialize(S, Effect.zipRight(Effect.sync(() => log.push("A start")), Deferred.await(gate))))
      yield* settle
      const b = yield* Effect.fork(scheduler.serialize(S, Effect.sync(() => log.push("B"))))
      const c = yield* Effect.fork(scheduler.serialize(S, Effect.sync(() => log.push("C"))))
      yield* settle
      yield* Fiber.interrupt(b)
      yield* settle
      // A still runs: C waits for it, though B (between them) gave up.
      expect(log).toEqual(["A start"])
      const d = yield* Effect.fork(scheduler.serialize(S, Effect.sync(() => log.push("D"))))
      yield* settle
      expect(log).toEqual(["A start"])
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(a)
      yield* Fiber.join(c)
      yield* Fiber.join(d)
      expect(log).toEqual(["A start", "C", "D"])
    }).pipe(Effect.provide(TurnScheduler.Default)))
})
