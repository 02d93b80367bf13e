// EventLog (file layer): a session's log file is closed once the session has been idle for
// `idleCloseMs`, so idle sessions hold no file descriptor; the next append reopens it and the log
// reads back whole, in order, with no repair needed (nothing torn, no pending file left). An idle
// session's state is dropped and made afresh on its next use: with the idle close every few ms,
// concurrent appends, batches and reads of the same sessions still lose, tear or reorder nothing,
// none waits forever, and what runs under a session's lock (`append`'s `after`, `readThen`) never
// runs twice at once.
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Context, Effect, Layer, Random, Stream, TestClock } from "effect"
import * as fs from "node:fs"
import { SubstratPaths } from "../../src/config/Paths.js"
import { makeEvent } from "../../src/domain/events.js"
import { MessageId, SessionId } from "../../src/domain/ids.js"
import { Durable } from "../../src/storage/Durable.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { tmpDir } from "../support/tmpDir.js"

/** This process's open fds whose target lies under `dir`. */
const fdsUnder = (dir: string): number => {
  let n = 0
  for (const fd of fs.readdirSync("/proc/self/fd")) {
    try {
      if (fs.readlinkSync(`/proc/self/fd/${fd}`).startsWith(dir)) n++
    } catch {} // the fd of the readdir itself, closed meanwhile
  }
  return n
}

/** `fdsUnder(dir)` once it equals `want` (closes run on the libuv pool: polled, bounded), else its last value. */
const fdsSettled = (dir: string, want: number) =>
  Effect.promise(async () => {
    let n = fdsUnder(dir)
    for (let i = 0; i < 500 && n !== want; i++) {
      await new Promise((r) => setTimeout(r, 10))
      n = fdsUnder(dir)
    }
    return n
  })

const session = (n: number) => SessionId.make(`00000000-0000-4000-8000-${String(n).padStart(12, "0")}`)
const read = (n: number) => makeEvent("user.read", { message_ids: [MessageId.make(`20000000-0000-4000-8000-${String(n).padStart(12, "0")}`)] })

describe("EventLog idle close", () => {
  it.scoped("idle sessions hold no fd; an append reopens the log and every line reads back in order", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      const layer = EventLog.layerFileWith({ idleCloseMs: 1000 }).pipe(
        Layer.provide(Layer.mergeAll(Durable.layer, SubstratPaths.layer(home)))
      )
      const log = yield* Layer.build(layer).pipe(Effect.map(Context.get(EventLog)))
      const ids = [1, 2, 3].map(session)
      for (const id of ids) yield* log.append(id, read(1))
      // Three logs and the home's journal.
      expect(fdsUnder(home)).toBe(4)

      // Half the delay: still open. The sweep after the whole delay closes them all, the journal's too.
      yield* TestClock.adjust("600 millis")
      expect(fdsUnder(home)).toBe(4)
      yield* TestClock.adjust("1500 millis")
      expect(yield* fdsSettled(home, 0)).toBe(0)

      // One session is busy again: only it holds a fd, until it is idle too.
      yield* log.append(ids[0]!, read(2))
      yield* log.append(ids[0]!, read(3))
      expect(fdsUnder(home)).toBe(2)
      yield* TestClock.adjust("2 seconds")
      expect(yield* fdsSettled(home, 0)).toBe(0)
      yield* log.append(ids[1]!, read(2))

      const lines = (id: SessionId) =>
        Effect.map(Stream.runCollect(log.read(id)), (c) => Chunk.toReadonlyArray(c).map((e) => e.event === "user.read" ? Number(e.data.message_ids[0]!.slice(-12)) : e.event))
      expect(yield* lines(ids[0]!)).toEqual([1, 2, 3])
      expect(yield* lines(ids[1]!)).toEqual([1, 2])
      expect(yield* lines(ids[2]!)).toEqual([1])
      // Nothing to repair: no torn tail, no pending file (appends go through the journal).
      for (const id of ids) expect(yield* log.repair(id)).toEqual({ session_id: id, truncatedBytes: 0, pendingReplayed: false, pendingDiscarded: false })
      expect(fs.readdirSync(`${home}/agents/${ids[0]}`).sort()).toEqual(["events.jsonl"])
      yield* TestClock.adjust("2 seconds")
      expect(yield* fdsSettled(home, 0)).toBe(0)
    }))

  it.live("sessions dropped and remade every few ms: concurrent appends, batches and reads keep every line, in order", () =>
    Effect.scoped(Effect.gen(function*() {
      const home = yield* tmpDir()
      const layer = EventLog.layerFileWith({ idleCloseMs: 2 }).pipe(
        Layer.provide(Layer.mergeAll(Durable.layer, SubstratPaths.layer(home)))
      )
      const log = yield* Layer.build(layer).pipe(Effect.map(Context.get(EventLog)))
      const ids = [1, 2, 3, 4].map(session)
      // Writer w of session s appends 1000·w + 1, 1000·w + 2, … (some as batches of 2), with
      // pauses around the idle delay, while readers read the same logs; each holds the lock a few
      // ms (`after`, `readThen`), counting who else is inside.
      const inside = new Map<SessionId, number>()
      let overlaps = 0
      const underLock = (id: SessionId) =>
        Effect.acquireUseRelease(
          Effect.sync(() => {
            const n = (inside.get(id) ?? 0) + 1
            inside.set(id, n)
            if (n > 1) overlaps++
          }),
          () => Effect.flatMap(Random.nextIntBetween(0, 4), (ms) => Effect.sleep(`${ms} millis`)),
          () => Effect.sync(() => inside.set(id, inside.get(id)! - 1))
        )
      const writer = (id: SessionId, w: number) =>
        Effect.gen(function*() {
          for (let k = 1; k <= 30;) {
            if ((yield* Random.nextIntBetween(0, 3)) === 0 && k < 30) {
              yield* log.appendAll(id, [read(1000 * w + k), read(1000 * w + k + 1)], () => underLock(id))
              k += 2
            } else yield* log.append(id, read(1000 * w + k++), () => underLock(id))
            yield* Effect.sleep(`${yield* Random.nextIntBetween(0, 5)} millis`)
          }
        })
      const reader = (id: SessionId) =>
        Effect.repeatN(
          Effect.zipRight(Effect.zipRight(Stream.runDrain(log.read(id)), log.readThen(id, () => underLock(id))), Effect.sleep("3 millis")),
          20
        )
      yield* Effect.all([
        ...ids.flatMap((id) => [1, 2, 3].map((w) => writer(id, w))),
        ...ids.map(reader)
      ], { concurrency: "unbounded", discard: true }).pipe(Effect.timeoutFail({ duration: "30 seconds", onTimeout: () => "a session's lock was never handed on" }))
      expect(overlaps).toBe(0)
      for (const id of ids) {
        const got = Chunk.toReadonlyArray(yield* Stream.runCollect(log.read(id))).map((e) => e.event === "user.read" ? Number(e.data.message_ids[0]!.slice(-12)) : -1)
        expect(got.length).toBe(90)
        for (const w of [1, 2, 3]) {
          expect(got.filter((n) => Math.floor(n / 1000) === w)).toEqual(Array.from({ length: 30 }, (_, k) => 1000 * w + k + 1))
        }
        expect(yield* log.repair(id)).toEqual({ session_id: id, truncatedBytes: 0, pendingReplayed: false, pendingDiscarded: false })
      }
      expect(yield* fdsSettled(home, 0)).toBe(0)
    })), 60_000)
})
