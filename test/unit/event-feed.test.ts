// EventFeed over the tapped log: backlog + live without loss or repeat, lines equal to line
// numbers in the log, positions 1, 2, 3, … in the daemon's order, resume from a position, tree
// scope joining children created later, lines the index lacks indexed once, and — on the file
// layers, with 1200 sessions — a cursor of a few bytes that resumes across a restart.
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, Either, Fiber, Layer, Stream, TestClock } from "effect"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SubstratPaths } from "../../src/config/Paths.js"
import * as EventTap from "../../src/storage/EventTap.js"
import { makeEvent } from "../../src/domain/events.js"
import { AgentId, newAgentId, newSessionId, type SessionId } from "../../src/domain/ids.js"
import * as Cursor from "../../src/feed/Cursor.js"
import { EventFeed, type FeedEvent, type FeedItem } from "../../src/feed/EventFeed.js"
import { newSession, saveSession } from "../support/feed.js"
import { Durable } from "../../src/storage/Durable.js"
import { EventIndex } from "../../src/storage/EventIndex.js"
import { encodeEntryLine, EventLog } from "../../src/storage/EventLog.js"
import { SessionStore } from "../../src/storage/SessionStore.js"

const Storage = Layer.mergeAll(
  EventTap.layer.pipe(Layer.provide(Layer.mergeAll(EventLog.layerMemory, EventIndex.layerMemory))),
  SessionStore.layerMemory
)
const TestLayer = EventFeed.Default.pipe(Layer.provideMerge(Storage))

const usage = (tokens: number) => makeEvent("usage", { turn_id: null, input_tokens: tokens, output_tokens: 0, cost_usd: 0 })
const turn = (id: SessionId, prompt: string) => Effect.flatMap(EventLog, (log) => log.append(id, usage(prompt.length)))

const events = (items: Chunk.Chunk<FeedItem>): Array<FeedEvent> =>
  Chunk.toReadonlyArray(items).filter((i): i is FeedEvent => i._tag === "Event")

/** Lines per session 1, 2, 3, … after `start` lines; positions strictly increasing. */
const expectContiguous = (evs: ReadonlyArray<FeedEvent>, start: ReadonlyMap<string, number> = new Map()) => {
  const last = new Map<string, number>()
  let position = 0
  for (const e of evs) {
    const prev = last.get(e.session) ?? start.get(e.session) ?? 0
    expect(e.line).toBe(prev + 1)
    last.set(e.session, e.line)
    expect(e.position).toBeGreaterThan(position)
    position = e.position
  }
}

const backlogOf = (feed: EventFeed, scope: Parameters<EventFeed["stream"]>[0]["scope"], from: Cursor.Cursor) =>
  feed.stream({ scope, from }).pipe(Stream.takeWhile((i) => i._tag === "Event"), Stream.runCollect, Effect.map(events))

describe("EventFeed", () => {
  it.scoped("serves the backlog, then live entries, numbered by line and position, none lost or repeated", () =>
    Effect.gen(function*() {
      const feed = yield* EventFeed
      const a = yield* newSession(null)
      yield* turn(a.id, "one")
      const fiber = yield* feed.stream({ scope: { _tag: "all" }, from: Cursor.empty }).pipe(
        Stream.take(3 + 1 + 5 + 2),
        Stream.runCollect,
        Effect.fork
      )
      // Live appends race with the backlog read: each entry must come exactly once.
      const b = yield* newSession(a.id)
      for (let i = 0; i < 5; i++) yield* turn(i % 2 === 0 ? a.id : b.id, `t${i}`)
      const items = yield* Fiber.join(fiber)
      const evs = events(items)
      expect(evs.length).toBe(3 + 5 + 2)
      expectContiguous(evs)
      expect(evs.map((e) => e.position)).toEqual(evs.map((_, i) => i + 1))
      expect(evs.filter((e) => e.session === a.id).map((e) => e.line)).toEqual([1, 2, 3, 4, 5, 6])
      expect(evs.filter((e) => e.session === b.id).map((e) => e.line)).toEqual([1, 2, 3, 4])
      const live = Chunk.toReadonlyArray(items).filter((i) => i._tag === "Live")
      expect(live.length).toBe(1)
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("resumes from a position with nothing repeated; tree scope follows children born later", () =>
    Effect.gen(function*() {
      const feed = yield* EventFeed
      const root = yield* newSession(null)
      const other = yield* newSession(null)
      yield* turn(root.id, "x")
      yield* turn(other.id, "y")
      // Everything of the tree so far: root's three lines, at positions 1, 2 and 5.
      const first = yield* backlogOf(feed, { _tag: "tree", agent: root.agent }, Cursor.empty)
      expect(first.map((e) => [e.session, e.line, e.position])).toEqual([[root.id, 1, 1], [root.id, 2, 2], [root.id, 3, 5]])
      const child = yield* newSession(root.id)
      yield* turn(other.id, "z")
      yield* turn(child.id, "c")
      // From position 2 (root's second line): root's third, then the child's three.
      const resumed = yield* backlogOf(feed, { _tag: "tree", agent: root.agent }, Cursor.decode(Cursor.encode(2))!)
      expect(resumed.map((e) => [e.session, e.line])).toEqual([[root.id, 3], [child.id, 1], [child.id, 2], [child.id, 3]])
      // Live: a grandchild joins the tree stream; the unrelated root does not.
      const seen = resumed.at(-1)!.position
      const fiber = yield* feed.stream({ scope: { _tag: "tree", agent: root.agent }, from: seen }).pipe(
        Stream.filter((i) => i._tag === "Event"),
        Stream.take(3),
        Stream.runCollect,
        Effect.fork
      )
      yield* Effect.yieldNow()
      yield* Effect.sleep("50 millis")
      yield* turn(other.id, "ignored")
      const grandchild = yield* newSession(child.id)
      yield* turn(grandchild.id, "g")
      const live = events(yield* Fiber.join(fiber))
      expect(live.map((e) => [e.session, e.line])).toEqual([[grandchild.id, 1], [grandchild.id, 2], [grandchild.id, 3]])
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("keep-alive every 15 s only on streams that ask for it; every stream gets the same entry objects", () =>
    Effect.gen(function*() {
      const feed = yield* EventFeed
      const a = yield* newSession(null)
      const open = (keepAlive: boolean) =>
        Effect.gen(function*() {
          const live = yield* Deferred.make<void>()
          const fiber = yield* feed.stream({ scope: { _tag: "all" }, from: "end", keepAlive }).pipe(
            Stream.tap((i) => i._tag === "Live" ? Deferred.succeed(live, undefined) : Effect.void),
            Stream.filter((i) => i._tag !== "Live"),
            Stream.take(3),
            Stream.runCollect,
            Effect.fork
          )
          yield* Deferred.await(live)
          return fiber
        })
      const ticking = yield* open(true)
      const quiet = yield* open(false)
      yield* turn(a.id, "x")
      yield* TestClock.adjust("15 seconds")
      yield* turn(a.id, "y")
      yield* turn(a.id, "z")
      const t = Chunk.toReadonlyArray(yield* Fiber.join(ticking))
      const q = Chunk.toReadonlyArray(yield* Fiber.join(quiet))
      expect(t.filter((i) => i._tag === "KeepAlive").length).toBe(1)
      expect(events(Chunk.unsafeFromArray(t)).map((e) => e.line)).toEqual([3, 4])
      expect(q.map((i) => i._tag)).toEqual(["Event", "Event", "Event"])
      expect(events(Chunk.unsafeFromArray(q)).map((e) => e.line)).toEqual([3, 4, 5])
      // One object per entry for all streams (SSE encodes each entry's frame once, src/http/Sse.ts).
      expect(events(Chunk.unsafeFromArray(t))[0]!.entry).toBe(events(Chunk.unsafeFromArray(q))[0]!.entry)
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("one agent, named by its agent id or by its session id: only its lines", () =>
    Effect.gen(function*() {
      const feed = yield* EventFeed
      const a = yield* newSession(null)
      const b = yield* newSession(a.id)
      yield* turn(a.id, "x")
      yield* turn(b.id, "y")
      for (const agent of [b.agent as string, b.id as string]) {
        const evs = yield* backlogOf(feed, { _tag: "agent", agent }, Cursor.empty)
        expect(evs.map((e) => [e.session, e.line])).toEqual([[b.id, 1], [b.id, 2], [b.id, 3]])
      }
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("an unknown agent is NotFound", () =>
    Effect.gen(function*() {
      const feed = yield* EventFeed
      const r = yield* feed.stream({ scope: { _tag: "agent", agent: AgentId.make(newAgentId()) }, from: Cursor.empty }).pipe(
        Stream.runCollect,
        Effect.flip
      )
      expect(r._tag).toBe("NotFoundError")
    }).pipe(Effect.provide(TestLayer)))

  it.scoped("lines the index lacks (written past the tap) get one position each, the same in every stream", () =>
    Effect.gen(function*() {
      // The raw log below the tap: what a home written before the index existed looks like.
      const raw = yield* Effect.provide(EventLog, EventLog.layerMemory)
      const tapped = yield* Layer.build(EventTap.layer.pipe(Layer.provide(Layer.mergeAll(Layer.succeed(EventLog, raw), EventIndex.layerMemory))))
      const layer = EventFeed.Default.pipe(Layer.provideMerge(Layer.mergeAll(Layer.succeedContext(tapped), SessionStore.layerMemory)))
      const a = newSessionId()
      const b = newSessionId()
      yield* raw.append(a, usage(1))
      yield* raw.append(a, usage(2))
      yield* raw.append(b, usage(3))
      yield* Effect.gen(function*() {
        const feed = yield* EventFeed
        yield* saveSession(a)
        yield* saveSession(b)
        // Neither session has an index record; a tapped append to `a` indexes its old lines first.
        yield* turn(a, "xyz")
        const once = yield* backlogOf(feed, { _tag: "agent", agent: a }, Cursor.empty)
        expect(once.map((e) => [e.line, e.position])).toEqual([[1, 1], [2, 2], [3, 3]])
        const again = yield* backlogOf(feed, { _tag: "agent", agent: a }, Cursor.empty)
        expect(again).toEqual(once)
        // `b` is indexed when a stream reads it: delivered live (after the backlog), then in the backlog.
        const fromHere = yield* feed.stream({ scope: { _tag: "agent", agent: b }, from: 3 }).pipe(
          Stream.filter((i) => i._tag === "Event"),
          Stream.take(1),
          Stream.runCollect,
          Effect.map(events)
        )
        expect(fromHere.map((e) => [e.session, e.line, e.position])).toEqual([[b, 1, 4]])
        const later = yield* backlogOf(feed, { _tag: "all" }, Cursor.empty)
        expect(later.map((e) => e.position)).toEqual([1, 2, 3, 4])
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("opening a stream reads only the logs it sends from: none from the end, the resumed sessions' on a resume", () =>
    Effect.gen(function*() {
      // The memory log below the tap, counting every read of a log (a snapshot is one: readThen), and a
      // session store counting its scans.
      const raw = yield* Effect.provide(EventLog, EventLog.layerMemory)
      const reads: Array<SessionId> = []
      const counted = EventLog.of({
        ...raw,
        read: (session) => Stream.suspend(() => (reads.push(session), raw.read(session))),
        readThen: (session, f) => Effect.suspend(() => (reads.push(session), raw.readThen(session, f)))
      })
      const store = yield* Effect.provide(SessionStore, SessionStore.layerMemory)
      let scans = 0
      const countedStore = SessionStore.of({ ...store, scan: Effect.suspend(() => (scans++, store.scan)) })
      const tapped = yield* Layer.build(EventTap.layer.pipe(Layer.provide(Layer.mergeAll(Layer.succeed(EventLog, counted), EventIndex.layerMemory))))
      const layer = EventFeed.Default.pipe(Layer.provideMerge(Layer.mergeAll(Layer.succeedContext(tapped), Layer.succeed(SessionStore, countedStore))))
      yield* Effect.gen(function*() {
        const feed = yield* EventFeed
        const root = yield* newSession(null)
        const child = yield* newSession(root.id)
        const grandchild = yield* newSession(child.id)
        const others: Array<SessionId> = []
        for (let i = 0; i < 300; i++) others.push((yield* newSession(null)).id)
        for (const id of others.slice(0, 50)) yield* turn(id, "x")
        // The first stream of the process reads every log once (lines the index lacks, owners).
        const first = yield* backlogOf(feed, { _tag: "all" }, Cursor.empty)
        expect(first.length).toBe(303 * 2 + 50)
        const top = first.at(-1)!.position
        const opened = (label: string) => {
          const r = { label, reads: [...reads], scans }
          reads.length = 0
          scans = 0
          return r
        }
        opened("first")

        // From the end (what the dashboard and `?from=end` open): no log is read, no scan.
        for (const scope of [
          { _tag: "all" as const },
          { _tag: "tree" as const, agent: root.agent as string },
          { _tag: "agent" as const, agent: child.agent as string },
          { _tag: "agent" as const, agent: grandchild.id as string }
        ]) {
          const live = yield* feed.stream({ scope, from: "end" }).pipe(Stream.take(1), Stream.runCollect)
          expect(Chunk.toReadonlyArray(live).map((i) => i._tag)).toEqual(["Live"])
          expect(opened(scope._tag)).toEqual({ label: scope._tag, reads: [], scans: 0 })
        }
        // Resuming at the last position seen: nothing to send, nothing read.
        expect(yield* backlogOf(feed, { _tag: "all" }, top)).toEqual([])
        expect(opened("resume at top")).toEqual({ label: "resume at top", reads: [], scans: 0 })

        // Work on the grandchild and one unrelated session; resume: only those logs are read.
        yield* turn(grandchild.id, "g1")
        yield* turn(others[299]!, "o")
        yield* turn(grandchild.id, "g2")
        opened("appends")
        const all = yield* backlogOf(feed, { _tag: "all" }, top)
        expect(all.map((e) => [e.session, e.line])).toEqual([[grandchild.id, 3], [others[299], 3], [grandchild.id, 4]])
        expect(opened("resume all")).toEqual({ label: "resume all", reads: [grandchild.id, others[299]], scans: 0 })
        const tree = yield* backlogOf(feed, { _tag: "tree", agent: root.agent }, top)
        expect(tree.map((e) => [e.session, e.line])).toEqual([[grandchild.id, 3], [grandchild.id, 4]])
        expect(opened("resume tree")).toEqual({ label: "resume tree", reads: [grandchild.id], scans: 0 })
        const one = yield* backlogOf(feed, { _tag: "agent", agent: child.agent }, top)
        expect(one).toEqual([])
        expect(opened("resume child")).toEqual({ label: "resume child", reads: [], scans: 0 })
      }).pipe(Effect.provide(layer))
    }))

  it("cursor text round-trips and rejects garbage", () => {
    expect(Cursor.decode(Cursor.encode(1234))).toBe(1234)
    expect(Cursor.decode("")).toBe(0)
    expect(Cursor.decode("nope")).toBeUndefined()
    expect(Cursor.decode("0123456789abcdef:3")).toBeUndefined()
    expect(Cursor.decode("-1")).toBeUndefined()
  })

  it.live("1200 sessions on disk, no index yet: the cursor stays a few bytes and resumes across a restart without loss or repeat", () => {
    const home = mkdtempSync(join(tmpdir(), "substrat-feed-"))
    const N = 1200
    // The logs of a home written before the index existed (written directly: 2 lines per session).
    const sessions: Array<SessionId> = []
    for (let i = 0; i < N; i++) {
      const id = newSessionId()
      sessions.push(id)
      const lines = [
        makeEvent("session.created", { provider: "scripted", model: null, system_prompt: "" }),
        makeEvent("agent.created", {
          agent_id: newAgentId(),
          name: `a${i}`,
          parent_session_id: null,
          instructions: "",
          role: "worker",
          provider: "scripted",
          workspace: null
        })
      ].map((e) => Either.getOrThrow(encodeEntryLine(e, new Date().toISOString(), id)))
      mkdirSync(join(home, "agents", id), { recursive: true })
      writeFileSync(join(home, "agents", id, "events.jsonl"), lines.join(""))
    }
    return Effect.gen(function*() {
      // One session store for every run (its records are not what this test is about).
      const store = yield* Effect.provide(SessionStore, SessionStore.layerMemory)
      yield* Effect.provideService(Effect.forEach(sessions, saveSession), SessionStore, store)
      const FileStorage = EventTap.layer.pipe(
        Layer.provide(Layer.mergeAll(EventLog.layerFile, EventIndex.layerFile.pipe(Layer.provide(NodeContext.layer)))),
        Layer.provideMerge(Layer.mergeAll(Durable.layer, Layer.succeed(SessionStore, store))),
        Layer.provide(SubstratPaths.layer(home))
      )
      // A fresh layer each time stands for a daemon (re)start on the same home.
      const daemon = () => EventFeed.Default.pipe(Layer.provideMerge(FileStorage))
      // The first stream indexes every line; stop halfway: the SSE id there is one small number.
      const firstRun = yield* Effect.gen(function*() {
        const feed = yield* EventFeed
        return yield* feed.stream({ scope: { _tag: "all" }, from: Cursor.empty }).pipe(
          Stream.filter((i) => i._tag === "Event"),
          Stream.take(N),
          Stream.runCollect,
          Effect.map(events)
        )
      }).pipe(Effect.scoped, Effect.provide(daemon()))
      const cursor = Cursor.encode(firstRun.at(-1)!.position)
      expect(cursor).toBe(String(N))
      // Restart; more work on some sessions; resume from the cursor.
      const resumed = yield* Effect.gen(function*() {
        for (let i = 0; i < N; i += 100) yield* turn(sessions[i]!, "after")
        const feed = yield* EventFeed
        return yield* backlogOf(feed, { _tag: "all" }, Cursor.decode(cursor)!)
      }).pipe(Effect.scoped, Effect.provide(daemon()))
      const all = [...firstRun, ...resumed]
      const keys = all.map((e) => `${e.session}:${e.line}`)
      expect(new Set(keys).size).toBe(keys.length)
      expect(keys.length).toBe(N * 2 + N / 100)
      expect(all.map((e) => e.position)).toEqual(all.map((_, i) => i + 1))
      expectContiguous(all)
      expect(readFileSync(join(home, "events.index")).length).toBe(48 * keys.length)
    }).pipe(Effect.ensuring(Effect.sync(() => rmSync(home, { recursive: true, force: true }))))
  }, 120_000)
})
