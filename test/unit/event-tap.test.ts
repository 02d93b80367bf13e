// EventTap's index under concurrent appends: every line of every session gets exactly one
// position, numbered subscribers get them in position order, each append returns with its
// entry's position given out, and the index is written in batches (one write in flight at a
// time, the records queued meanwhile in the next write) rather than once per append — also for
// one session appending alone (a writer waits a moment before it writes); closing writes the rest.
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Queue } from "effect"
import { makeEvent } from "../../src/domain/events.js"
import { newSessionId, type SessionId } from "../../src/domain/ids.js"
import { EventIndex, type IndexRecord } from "../../src/storage/EventIndex.js"
import { EventLog } from "../../src/storage/EventLog.js"
import * as EventTap from "../../src/storage/EventTap.js"

/** An index in memory whose every write first runs `delay`: the records it holds and how many writes made them. */
const countingIndex = (delay: Effect.Effect<void>) => {
  const written = Object.assign(new Array<IndexRecord>(), { writes: 0 })
  const index = EventIndex.of({
    load: Effect.succeed([]),
    append: (records) =>
      Effect.zipRight(delay, Effect.sync(() => (written.writes++, written.push(...records))))
  })
  return { index, written }
}

/** The tapped memory log over `index`, built in the current scope. */
const tapped = (index: EventIndex["Type"]) =>
  Effect.map(
    Layer.build(EventTap.layer.pipe(Layer.provide(Layer.mergeAll(EventLog.layerMemory, Layer.succeed(EventIndex, index))))),
    (ctx) => ({ log: Context.get(ctx, EventLog), tap: Context.get(ctx, EventTap.EventTap) })
  )

const usage = (n: number) => makeEvent("usage", { turn_id: null, input_tokens: n, output_tokens: 0, cost_usd: 0 })

describe("EventTap", () => {
  it.scoped("64 sessions appending at once: one position per line, in order, written in batches", () =>
    Effect.gen(function*() {
      // An index whose write takes a while (it yields, as a write to the file does).
      const { index, written } = countingIndex(Effect.yieldNow())
      const { log, tap } = yield* tapped(index)
      const numbered = yield* tap.subscribeNumbered
      const sessions: Array<SessionId> = Array.from({ length: 64 }, () => newSessionId())
      const perSession = 5
      // After each append returns, its position is given out: at least as many positions as
      // this session's lines so far.
      const lagging: Array<string> = []
      yield* Effect.forEach(
        sessions,
        (s) =>
          Effect.forEach(Array.from({ length: perSession }, (_, i) => i + 1), (n) =>
            Effect.flatMap(log.append(s, usage(n)), () =>
              Effect.map(tap.position, (p) => {
                if (p < n) lagging.push(`${s}:${n} at ${p}`)
              }))),
        { concurrency: "unbounded", discard: true }
      )
      expect(lagging).toEqual([])
      const total = sessions.length * perSession
      expect(yield* tap.position).toBe(total)
      // The index: every (session, line) exactly once, each session's lines in order.
      expect(written.length).toBe(total)
      const seen = new Set(written.map((r) => `${r.session}:${r.line}`))
      expect(seen.size).toBe(total)
      for (const s of sessions) {
        expect(written.filter((r) => r.session === s).map((r) => r.line)).toEqual([1, 2, 3, 4, 5])
      }
      expect(yield* tap.records(0, total)).toEqual([...written])
      // Numbered subscribers: positions 1..total, each entry the line the index names.
      const got = yield* Queue.takeAll(numbered)
      expect([...got].map((t) => t.position)).toEqual(written.map((_, i) => i + 1))
      expect([...got].map((t) => `${t.entry.session_id}:${t.line}`)).toEqual(written.map((r) => `${r.session}:${r.line}`))
      expect([...got].map((t) => t.entry.event === "usage" ? t.entry.data.input_tokens : -1)).toEqual(written.map((r) => r.line))
      // Batched: while one write is in flight the others' records wait for the next one.
      expect(written.writes).toBeLessThan(total / 4)
    }))

  it.live("one session appending alone: an index write takes the records given out while it waited", () =>
    Effect.gen(function*() {
      // One session's appends come one after another (each waits for its fsync, here a yield): one
      // write per append before; now a writer waits a moment and takes them together.
      const { index, written } = countingIndex(Effect.void)
      yield* Effect.scoped(Effect.gen(function*() {
        const { log, tap } = yield* tapped(index)
        const s = newSessionId()
        for (let n = 1; n <= 40; n++) {
          yield* log.append(s, usage(n))
          yield* Effect.yieldNow()
        }
        // `position` waits until what it reports is written and published.
        expect(yield* tap.position).toBe(40)
        expect(written.map((r) => r.line)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1))
        expect(written.writes).toBeLessThanOrEqual(20)
        yield* log.append(s, usage(41))
      }))
      // Closing the layer writes what was given out and not yet written.
      expect(written.map((r) => r.line).at(-1)).toBe(41)
    }))
})

