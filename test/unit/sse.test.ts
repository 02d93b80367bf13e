// SSE bytes of the event feed (src/http/Sse.ts): live events are encoded once per distinct output
// of a batch — every client with the same filter gets the very same bytes (one buffer), clients
// with other filters one buffer per distinct part — and a client that falls too far behind is
// dropped with a comment, then resumes by its last id with nothing lost or repeated.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer } from "effect"
import type { Readable } from "node:stream"
import { makeEvent } from "../../src/domain/events.js"
import type { SessionId } from "../../src/domain/ids.js"
import { EventFeed, type FeedOptions, type FeedScope } from "../../src/feed/EventFeed.js"
import * as Sse from "../../src/http/Sse.js"
import { newSession } from "../support/feed.js"
import { EventIndex } from "../../src/storage/EventIndex.js"
import { EventLog } from "../../src/storage/EventLog.js"
import * as EventTap from "../../src/storage/EventTap.js"
import { SessionStore } from "../../src/storage/SessionStore.js"

const TestLayer = EventFeed.Default.pipe(Layer.provideMerge(Layer.mergeAll(
  EventTap.layer.pipe(Layer.provide(Layer.mergeAll(EventLog.layerMemory, EventIndex.layerMemory))),
  SessionStore.layerMemory
)))

const text = (b: Uint8Array) => new TextDecoder().decode(b)

const usage = (id: SessionId, tokens: number) =>
  Effect.flatMap(EventLog, (log) => log.append(id, makeEvent("usage", { turn_id: null, input_tokens: tokens, output_tokens: 0, cost_usd: 0 })))

/** A client reading `Sse.open`: every buffer it got after its live marker, in order. */
const client = (feed: EventFeed, options: FeedOptions) =>
  Effect.gen(function*() {
    const got: Array<Uint8Array> = []
    let live = false
    const body = yield* Sse.open(feed, options)
    yield* Effect.addFinalizer(() => Effect.sync(() => body.destroy()))
    body.on("data", (b: Uint8Array) => {
      if (live) got.push(b)
      if (text(b).includes("event: live")) live = true
    })
    return { got, live: () => live }
  })

/** Everything a body sends until it ends. */
const rest = (body: Readable): Effect.Effect<string> =>
  Effect.async((resume) => {
    let s = ""
    body.on("data", (b: Uint8Array) => (s += text(b)))
    body.on("end", () => resume(Effect.succeed(s)))
  })

const until = (what: () => boolean): Effect.Effect<void> =>
  Effect.suspend(() => (what() ? Effect.void : Effect.zipRight(Effect.sleep("5 millis"), until(what))))

/** The events in some SSE bytes: [id or null, input_tokens]. */
const usages = (s: string) =>
  s.split("\n\n").filter((f) => f.includes("\"usage\"")).map((f) => {
    const id = /^id: (\d+)$/m.exec(f)?.[1]
    const data = JSON.parse(/^data: (.*)$/m.exec(f)![1]!) as { data: { input_tokens: number } }
    return [id === undefined ? null : Number(id), data.data.input_tokens] as const
  })

describe("Sse", () => {
  it.scopedLive("one buffer per distinct output of a batch: the same bytes for every client with the same filter", () =>
    Effect.gen(function*() {
      const feed = yield* EventFeed
      const root = yield* newSession(null)
      const child = yield* newSession(root.id)
      const other = yield* newSession(null)
      const scopes: ReadonlyArray<FeedScope> = [
        { _tag: "all" },
        { _tag: "all" },
        { _tag: "all" },
        { _tag: "tree", agent: root.agent },
        { _tag: "tree", agent: root.agent },
        { _tag: "agent", agent: other.agent },
        { _tag: "agent", agent: other.agent }
      ]
      const clients = yield* Effect.forEach(scopes, (scope) => client(feed, { scope, from: "end" }))
      yield* until(() => clients.every((c) => c.live()))
      // Rounds of entries appended together (they reach the hub in batches of several), some in
      // the tree, some not; the last round is the tree's alone.
      const rounds = 6
      for (let r = 0; r < rounds; r++) {
        yield* Effect.all([usage(root.id, r * 10 + 1), usage(child.id, r * 10 + 2), usage(other.id, r * 10 + 3)], { discard: true })
        yield* Effect.sleep("20 millis")
      }
      const sent = (c: typeof clients[number]) => usages(c.got.map(text).join(""))
      const counts = (extra: number) => clients.every((c, i) => sent(c).length === (i < 3 ? rounds * 3 + extra : i < 5 ? rounds * 2 + extra : rounds))
      yield* until(() => counts(0))
      yield* usage(child.id, 999)
      yield* until(() => counts(1))
      const [all, tree, one] = [clients.slice(0, 3), clients.slice(3, 5), clients.slice(5)]
      // Each group: the same bytes, buffer for buffer (encoded once for all of its clients).
      for (const group of [all, tree, one]) {
        for (const c of group.slice(1)) {
          expect(c.got.length).toBe(group[0]!.got.length)
          c.got.forEach((b, i) => expect(b.buffer).toBe(group[0]!.got[i]!.buffer))
        }
      }
      // Other filters, other bytes; but the tree's own batch is the whole batch: its clients got
      // the buffer the others got.
      expect(tree[0]!.got[0]!.buffer).not.toBe(all[0]!.got[0]!.buffer)
      expect(tree[0]!.got.at(-1)!.buffer).toBe(all[0]!.got.at(-1)!.buffer)
      // What each filter sends: its entries, in order, with their ids.
      expect(sent(tree[0]!).map(([, t]) => t)).toEqual([...Array.from({ length: rounds }, (_, r) => [r * 10 + 1, r * 10 + 2]).flat(), 999])
      expect(sent(one[0]!).map(([, t]) => t)).toEqual(Array.from({ length: rounds }, (_, r) => r * 10 + 3))
      expect(sent(all[0]!).every(([id]) => id !== null)).toBe(true)
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("a client that falls behind is dropped with a comment and resumes by its last id: nothing lost or repeated", () =>
    Effect.gen(function*() {
      const feed = yield* EventFeed
      const a = yield* newSession(null)
      // The slow client takes nothing: what the hub pushes stays queued, up to 1,000 bytes.
      const slow = yield* Sse.open(feed, { scope: { _tag: "all" }, from: "end" }, 1000)
      yield* Effect.addFinalizer(() => Effect.sync(() => slow.destroy()))
      // A fast client sees each entry before the next is appended: one batch per entry.
      const fast = yield* client(feed, { scope: { _tag: "all" }, from: "end" })
      yield* until(fast.live)
      const n = 20
      for (let i = 1; i <= n; i++) {
        yield* usage(a.id, i)
        yield* until(() => usages(fast.got.map(text).join("")).length === i)
      }
      // The slow client gets what it had queued, then the comment, then the end.
      const first = yield* rest(slow)
      expect(first).toMatch(/event: live\n[^]*\n\n: dropped: .*Last-Event-ID\n\n$/)
      const got = usages(first)
      expect(got.length).toBeGreaterThan(0)
      expect(got.length).toBeLessThan(n)
      // Reconnecting with its last id gives it every entry since, once.
      const resumed = yield* Sse.open(feed, { scope: { _tag: "all" }, from: got.at(-1)![0]! })
      let again = ""
      resumed.on("data", (b: Uint8Array) => (again += text(b)))
      yield* until(() => again.includes("event: live"))
      resumed.destroy()
      const all = [...got, ...usages(again)].map(([, t]) => t)
      expect(all).toEqual(Array.from({ length: n }, (_, i) => i + 1))
      // The fast client, never behind, got them all live.
      expect(usages(fast.got.map(text).join("")).map(([, t]) => t)).toEqual(Array.from({ length: n }, (_, i) => i + 1))
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("a stream opened while entries are appended sends its backlog first, then what came live: every entry once, ids rising", () =>
    Effect.gen(function*() {
      const feed = yield* EventFeed
      const a = yield* newSession(null)
      // Many sessions: the first stream reads every log once (the feed's catch-up), which takes a while.
      for (let i = 0; i < 300; i++) yield* newSession(null)
      const n = 100
      // Appends go on while the streams open (each from the start: a backlog to send first).
      const appending = yield* Effect.forkScoped(Effect.forEach(Array.from({ length: n }, (_, i) => i + 1), (i) =>
        Effect.zipRight(usage(a.id, i), Effect.sleep("1 millis")), { discard: true }))
      const bodies = yield* Effect.forEach(Array.from({ length: 12 }, () => 0), () =>
        Effect.zipLeft(Sse.open(feed, { scope: { _tag: "all" }, from: 0 }), Effect.sleep("4 millis")))
      const got = bodies.map((body) => {
        let s = ""
        body.on("data", (b: Uint8Array) => (s += text(b)))
        return () => s
      })
      yield* Fiber.join(appending)
      yield* until(() => got.every((s) => usages(s()).length === n))
      for (const body of bodies) body.destroy()
      for (const s of got) {
        const sent = usages(s()).filter(([id]) => id !== null)
        expect(sent.map(([, t]) => t)).toEqual(Array.from({ length: n }, (_, i) => i + 1))
        const ids = sent.map(([id]) => id!)
        expect(ids).toEqual([...ids].sort((x, y) => x - y))
        expect(s().indexOf("event: live")).toBeLessThan(s().length)
      }
    }).pipe(Effect.provide(TestLayer)))
})
