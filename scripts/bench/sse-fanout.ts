// SSE fan-out CPU, in process: N clients follow the whole daemon (`Sse.frames` over
// `EventFeed.stream({ from: "end" })`, the bytes GET /v1/events writes; the sink only counts
// them) while 20 sessions append E entries to the tapped in-memory log. The figure is the CPU
// each extra client costs per event: (CPU with N clients − CPU with 1) / (N − 1) / E, from
// process.cpuUsage over the appends and the delivery of every frame. With
// SUBSTRAT_BENCH_BEFORE=<another checkout> that checkout's src/ runs the same cases in the same
// run (loaded through tsx). `npm run bench -- sse` measures the same over HTTP against a daemon.
import { Deferred, Effect, Fiber, Layer, Stream } from "effect"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "sse-fanout"

const here = join(import.meta.dirname, "..", "..")

interface Modules {
  readonly Sse: typeof import("../../src/http/Sse.js")
  readonly Feed: typeof import("../../src/feed/EventFeed.js")
  readonly Tap: typeof import("../../src/storage/EventTap.js")
  readonly Log: typeof import("../../src/storage/EventLog.js")
  readonly Index: typeof import("../../src/storage/EventIndex.js")
  readonly Store: typeof import("../../src/storage/SessionStore.js")
  readonly Events: typeof import("../../src/domain/events.js")
  readonly Ids: typeof import("../../src/domain/ids.js")
}

const load = async (root: string): Promise<Modules> => {
  const m = (p: string) => import(pathToFileURL(join(root, "src", p)).href)
  return {
    Sse: await m("http/Sse.ts"),
    Feed: await m("feed/EventFeed.ts"),
    Tap: await m("storage/EventTap.ts"),
    Log: await m("storage/EventLog.ts"),
    Index: await m("storage/EventIndex.ts"),
    Store: await m("storage/SessionStore.ts"),
    Events: await m("domain/events.ts"),
    Ids: await m("domain/ids.ts")
  }
}

const SESSIONS = 20
const MARK = "fanout-end-mark"

/** CPU µs for `clients` followers while `events` entries are appended and delivered to all. */
const measure = (M: Modules, clients: number, events: number): Promise<number> => {
  const storage = Layer.mergeAll(
    M.Tap.layer.pipe(Layer.provide(Layer.mergeAll(M.Log.EventLog.layerMemory, M.Index.EventIndex.layerMemory))),
    M.Store.SessionStore.layerMemory
  )
  const program = Effect.gen(function*() {
    const feed = yield* M.Feed.EventFeed
    const log = yield* M.Log.EventLog
    const sessions = Array.from({ length: SESSIONS }, () => M.Ids.newSessionId())
    const follower = Effect.gen(function*() {
      const live = yield* Deferred.make<void>()
      const done = yield* Deferred.make<void>()
      let bytes = 0
      const fiber = yield* M.Sse.frames(feed.stream({ scope: { _tag: "all" }, from: "end" })).pipe(
        Stream.runForEachChunk((chunk) =>
          Effect.sync(() => {
            for (const b of chunk) {
              bytes += b.length
              const tail = Buffer.from(b.buffer, b.byteOffset, b.length).toString("latin1", Math.max(0, b.length - 400))
              if (tail.includes("event: live")) Deferred.unsafeDone(live, Effect.void)
              if (tail.includes(MARK)) Deferred.unsafeDone(done, Effect.void)
            }
          })
        ),
        Effect.forkScoped
      )
      return { live, done, fiber, bytes: () => bytes }
    })
    const fs = yield* Effect.all(Array.from({ length: clients }, () => follower))
    yield* Effect.forEach(fs, (f) => Deferred.await(f.live), { discard: true })
    const t0 = process.cpuUsage()
    const per = Math.floor(events / SESSIONS)
    yield* Effect.forEach(sessions, (id) =>
      Effect.forEach(Array.from({ length: per }, (_, i) => i), (i) =>
        log.append(id, M.Events.makeEvent("usage", { turn_id: null, input_tokens: i, output_tokens: i, cost_usd: 0 })), { discard: true }), { concurrency: "unbounded", discard: true })
    yield* log.append(sessions[0]!, M.Events.makeEvent("session.created", { provider: MARK, model: null, system_prompt: "" }))
    yield* Effect.forEach(fs, (f) => Deferred.await(f.done), { discard: true })
    const t = process.cpuUsage(t0)
    yield* Effect.forEach(fs, (f) => Fiber.interrupt(f.fiber), { discard: true })
    return t.user + t.system
  })
  return Effect.runPromise(program.pipe(Effect.provide(M.Feed.EventFeed.Default.pipe(Layer.provideMerge(storage))), Effect.scoped))
}

const median = (xs: ReadonlyArray<number>): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const N = opts.quick ? 20 : 50
  const E = opts.quick ? 1000 : 4000
  const reps = opts.quick ? 3 : 5
  const beforeRoot = process.env["SUBSTRAT_BENCH_BEFORE"]
  const sides: Array<readonly [string, Modules]> = [["after", await load(here)]]
  if (beforeRoot !== undefined && beforeRoot !== "") sides.unshift(["before", await load(beforeRoot)])
  const rows: Array<Record<string, string | number>> = []
  const summary: Record<string, number | string> = { clients: N, events: E }
  const perClient = new Map<string, Array<number>>()
  // Interleaved repetitions, so load changes hit both sides alike; warm-up first.
  for (const [, M] of sides) await measure(M, 2, 200)
  for (let r = 0; r < reps; r++) {
    for (const [label, M] of sides) {
      const one = await measure(M, 1, E)
      const many = await measure(M, N, E)
      const us = (many - one) / (N - 1) / E
      perClient.set(label, [...(perClient.get(label) ?? []), us])
      rows.push({ side: label, rep: r + 1, "cpu ms 1 client": Math.round(one / 1000), [`cpu ms ${N} clients`]: Math.round(many / 1000), "µs/extra client/event": Number(us.toFixed(2)) })
    }
  }
  for (const [label] of sides) summary[`cpu_us_per_extra_client_per_event_${label}`] = Number(median(perClient.get(label)!).toFixed(2))
  if (sides.length === 2) {
    summary["ratio_before_after"] = Number((median(perClient.get("before")!) / median(perClient.get("after")!)).toFixed(2))
  }
  return { rows, summary }
}
