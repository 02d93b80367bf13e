// EventFeed over the in-memory log: backlog + live without loss or repeat, positions equal to
// line numbers in the log, resume from a cursor, tree scope joining children created later.
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Layer, Stream } from "effect"
import * as EventTap from "../../src/daemon/EventTap.js"
import { makeEvent } from "../../src/domain/events.js"
import { AgentId, newAgentId, newSessionId, type SessionId } from "../../src/domain/ids.js"
import { Session } from "../../src/domain/session.js"
import * as Cursor from "../../src/feed/Cursor.js"
import { EventFeed, type FeedEvent, type FeedItem } from "../../src/feed/EventFeed.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { SessionStore } from "../../src/storage/SessionStore.js"

const Storage = Layer.mergeAll(EventTap.layer.pipe(Layer.provide(EventLog.layerMemory)), SessionStore.layerMemory)
const TestLayer = EventFeed.Default.pipe(Layer.provideMerge(Storage))

const newSession = (parent: SessionId | null, agent: AgentId = newAgentId()) =>
  Effect.gen(function*() {
    const id = newSessionId()
    const store = yield* SessionStore
    const log = yield* EventLog
    yield* store.save(new Session({
      id,
      state: "active",
      provider_name: "scripted",
      model: null,
      created_at: new Date().toISOString(),
      suspended_at: null,
      provider_state: new Uint8Array()
    }))
    yield* log.append(id, makeEvent("session.created", { provider: "scripted", model: null, system_prompt: "" }))
    yield* log.append(id, makeEvent("agent.created", {
      agent_id: agent,
      name: "a",
      parent_session_id: parent,
      instructions: "",
      role: "worker",
      provider: "scripted",
      workspace: null
    }))
    return { id, agent }
  })

const turn = (id: SessionId, prompt: string) =>
  Effect.flatMap(EventLog, (log) =>
    log.append(id, makeEvent("usage", { turn_id: null, input_tokens: prompt.length, output_tokens: 0, cost_usd: 0 })))

const events = (items: Chunk.Chunk<FeedItem>): Array<FeedEvent> =>
  Chunk.toReadonlyArray(items).filter((i): i is FeedEvent => i._tag === "Event")

/** Line numbers per session must be 1, 2, 3, … with no gap and no repeat. */
const expectContiguous = (evs: ReadonlyArray<FeedEvent>, start: Cursor.Cursor = Cursor.empty) => {
  const last = new Map<string, number>()
  for (const e of evs) {
    const prev = last.get(e.session) ?? Cursor.lineOf(start, e.session)
    expect(e.line).toBe(prev + 1)
    last.set(e.session, e.line)
  }
}

describe("EventFeed", () => {
  it.scoped("serves the backlog, then live entries, numbered by line, none lost or repeated", () =>
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
      expect(evs.filter((e) => e.session === a.id).map((e) => e.line)).toEqual([1, 2, 3, 4, 5, 6])
      expect(evs.filter((e) => e.session === b.id).map((e) => e.line)).toEqual([1, 2, 3, 4])
      expect(Chunk.toReadonlyArray(items).filter((i) => i._tag === "Live").length).toBe(1)
    }).pipe(Effect.provide(TestLayer)))

  it.scopedLive("resumes from a cursor with nothing repeated; tree scope follows children born later", () =>
    Effect.gen(function*() {
      const feed = yield* EventFeed
      const root = yield* newSession(null)
      const other = yield* newSession(null)
      yield* turn(root.id, "x")
      yield* turn(other.id, "y")
      // Everything of the tree so far, then stop: the cursor of the last item.
      const first = events(
        yield* feed.stream({ scope: { _tag: "tree", agent: root.agent }, from: Cursor.empty }).pipe(
          Stream.takeWhile((i) => i._tag === "Event"),
          Stream.runCollect
        )
      )
      expect(first.map((e) => [e.session, e.line])).toEqual([[root.id, 1], [root.id, 2], [root.id, 3]])
      const cursor = new Map([[Cursor.keyOf(root.id), 2]])
      const child = yield* newSession(root.id)
      yield* turn(other.id, "z")
      yield* turn(child.id, "c")
      const resumed = events(
        yield* feed.stream({ scope: { _tag: "tree", agent: root.agent }, from: Cursor.decode(Cursor.encode(cursor))! }).pipe(
          Stream.takeWhile((i) => i._tag === "Event"),
          Stream.runCollect
        )
      )
      // Sessions interleave by time; per session the lines follow the cursor.
      expect(resumed.filter((e) => e.session === root.id).map((e) => e.line)).toEqual([3])
      expect(resumed.filter((e) => e.session === child.id).map((e) => e.line)).toEqual([1, 2, 3])
      expect(resumed.length).toBe(4)
      // Live: a grandchild joins the tree stream; the unrelated root does not. (From the cursor of
      // all seen so far: should the stream subscribe only after the appends, the backlog has them.)
      const seen = new Map([[Cursor.keyOf(root.id), 3], [Cursor.keyOf(child.id), 3]])
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

  it.scoped("one agent, named by its agent id or by its session id: only its lines", () =>
    Effect.gen(function*() {
      const feed = yield* EventFeed
      const a = yield* newSession(null)
      const b = yield* newSession(a.id)
      yield* turn(a.id, "x")
      yield* turn(b.id, "y")
      for (const agent of [b.agent as string, b.id as string]) {
        const evs = events(
          yield* feed.stream({ scope: { _tag: "agent", agent }, from: Cursor.empty }).pipe(
            Stream.takeWhile((i) => i._tag === "Event"),
            Stream.runCollect
          )
        )
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

  it("cursor text round-trips and rejects garbage", () => {
    const c = new Map([["0123456789abcdef", 3], ["fedcba9876543210", 12]])
    expect(Cursor.decode(Cursor.encode(c))).toEqual(c)
    expect(Cursor.decode("nope")).toBeUndefined()
    expect(Cursor.decode("")).toEqual(new Map())
  })
})
