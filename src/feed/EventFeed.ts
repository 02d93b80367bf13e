// EventFeed: the daemon's event stream — every session's log entries for the whole daemon, one
// agent, or an agent's subtree — each with its line in its session's events.jsonl and its global
// position (src/storage/EventIndex.ts). A stream starts from a Cursor (the position last seen): the
// backlog after it comes from the index and the event logs, then live entries from the EventTap,
// with no entry lost or repeated between the two, nor across a reconnect from the position of the
// last item seen — also after a daemon restart, since positions are kept in `events.index`.
// Used by the HTTP API's SSE (src/http).
//
// Live entries reach streams through the feed's own hub: one fiber takes every numbered entry from
// the tap, records its owner (the directory below) and the position it reached (`known`), then
// hands it to a publisher that publishes what came within 10 ms as one chunk (so each stream
// wakes and writes once per batch, not once per entry) — the same object to every stream, so a
// frame encoded for one client is reused by all (src/http/Sse.ts). A stream subscribes to the
// hub, then takes `known` as `top`: entries up to `top` are in the index and in the logs read
// after it; those after `top` arrive in its queue, in position order (entries the index lacked,
// indexed while the logs are read, among them).
// Every 15 s the hub also carries a keep-alive tick, which streams opened with `keepAlive` pass on
// (SSE's comment line), so no stream needs a timer of its own merged into it.
// Opening costs what the stream sends: which sessions it follows comes from an in-memory
// directory of owners, and only the logs of followed sessions with entries after the cursor are
// read — none from the end. Every log is read once per process (`catchUp`: by `warm`, which the
// HTTP server runs in the background at start-up, or else by the first stream).
import { Chunk, Clock, Effect, Option, PubSub, Queue, Stream } from "effect"
import type { LogEntry } from "../domain/events.js"
import type { SessionId } from "../domain/ids.js"
import { NotFoundError } from "../domain/errors.js"
import { EventTap, type Tapped } from "../storage/EventTap.js"
import { SessionStore } from "../storage/SessionStore.js"
import * as Cursor from "./Cursor.js"

/** Which sessions a stream follows. `agent`: an agent id (or its session id). */
export type FeedScope =
  | { readonly _tag: "all" }
  | { readonly _tag: "agent"; readonly agent: string }
  | { readonly _tag: "tree"; readonly agent: string }

export interface FeedEvent {
  readonly _tag: "Event"
  readonly session: SessionId
  /** 1-based line of the entry in the session's events.jsonl. */
  readonly line: number
  /**
   * The entry's global position (1-based); 0 for a line brought along by a session joining a
   * tree stream (delivered just before its `agent.created`, whose position is the resume point).
   */
  readonly position: number
  readonly entry: LogEntry
}

/** The backlog is over; `cursor` is where the stream stands. */
export interface FeedLive {
  readonly _tag: "Live"
  readonly cursor: Cursor.Cursor
}

/** Nothing happened for a while (every 15 s; only on streams opened with `keepAlive`). */
export interface FeedKeepAlive {
  readonly _tag: "KeepAlive"
}

export type FeedItem = FeedEvent | FeedLive | FeedKeepAlive

export interface FeedOptions {
  readonly scope: FeedScope
  /** Deliver what comes after this position (0: everything); "end": only what happens from now. */
  readonly from: Cursor.Cursor | "end"
  /** Also deliver a `KeepAlive` item every 15 s (what SSE needs to keep idle connections open). */
  readonly keepAlive?: boolean
}

const tick = { _tag: "KeepAlive" } as const satisfies FeedKeepAlive
/** How long live entries gather before the hub publishes them to every stream as one chunk. */
const batchWindow = "10 millis"
const liveClock = Clock.make()
type Live = Tapped | typeof tick

interface Owner {
  readonly agent: string
  readonly parent: SessionId | null
}

const ownerOf = (entries: ReadonlyArray<LogEntry>): Owner | undefined => {
  for (const e of entries) {
    if (e.event === "agent.created") return { agent: e.data.agent_id, parent: e.data.parent_session_id }
  }
  return undefined
}

export class EventFeed extends Effect.Service<EventFeed>()("substrat/EventFeed", {
  scoped: Effect.gen(function*() {
    const tap = yield* EventTap
    const store = yield* SessionStore

    const snapshot = (session: SessionId): Effect.Effect<Option.Option<ReadonlyArray<LogEntry>>> =>
      tap.snapshot(session).pipe(
        Effect.map((entries) => Option.some(Chunk.toReadonlyArray(entries))),
        Effect.catchAll((e) => Effect.as(Effect.logWarning(`event feed: cannot read ${session}: ${e.message}`), Option.none()))
      )

    // The directory: which agent owns which session (its `agent.created`; null: none logged). Kept
    // from every entry indexed (a fiber on the numbered tap, `known` = the last position it took)
    // and, once per process, from every log on disk (`catchUp`), so a stream decides membership in
    // memory and reads only the logs it has something to send from.
    const owners = new Map<SessionId, Owner | null>()
    const learn = (session: SessionId, entries: ReadonlyArray<LogEntry>) => {
      const o = ownerOf(entries)
      if (o !== undefined || !owners.has(session)) owners.set(session, o ?? null)
    }
    const directory = yield* tap.subscribeNumbered
    // Positions given out before this subscription were never published to it (catchUp reads them).
    let known = yield* tap.position
    const hub = yield* PubSub.unbounded<Live>()
    const pending = yield* Queue.unbounded<Tapped>()
    // `known` and the owners move before the entries are published: a stream subscribing in
    // between takes them as backlog and drops them from its queue (position ≤ its `top`).
    yield* Stream.fromQueue(directory).pipe(
      Stream.runForEachChunk((chunk) =>
        Effect.suspend(() => {
          for (const t of chunk) {
            const e = t.entry
            if (e.event === "agent.created") owners.set(e.session_id, { agent: e.data.agent_id, parent: e.data.parent_session_id })
            known = t.position
          }
          return Queue.offerAll(pending, chunk)
        })
      ),
      Effect.forkScoped
    )
    // What the directory took reaches the hub in batches, one every `batchWindow` at most while
    // entries come: every stream then wakes, filters and writes once per batch rather than once
    // per entry. The window is wall-clock time (the live clock even under a test clock).
    yield* Queue.takeBetween(pending, 1, Number.MAX_SAFE_INTEGER).pipe(
      Effect.zipLeft(Effect.sleep(batchWindow).pipe(Effect.withClock(liveClock))),
      Effect.flatMap((first) => Effect.map(Queue.takeAll(pending), (rest) => Chunk.appendAll(first, rest))),
      Effect.flatMap((batch) => PubSub.publishAll(hub, batch)),
      Effect.forever,
      Effect.forkScoped
    )
    yield* PubSub.publish(hub, tick).pipe(Effect.delay("15 seconds"), Effect.forever, Effect.forkScoped)

    // Once per process, the first stream reads every log: lines the index lacks (a home from
    // before the index, a tail a machine crash lost) get their positions, and the owners of
    // sessions older than this process are learned. Later streams read no log to open.
    const catchUp = yield* Effect.cached(Effect.gen(function*() {
      const ids = new Set((yield* Effect.orElseSucceed(store.scan, () => [])).map((s) => s.id))
      for (const r of yield* Effect.flatMap(tap.position, (top) => tap.records(0, top))) ids.add(r.session)
      for (const id of ids) {
        const snap = yield* snapshot(id)
        if (Option.isSome(snap)) learn(id, snap.value)
      }
    }))

    const stream = (options: FeedOptions): Stream.Stream<FeedItem, NotFoundError> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        // Subscribe first: whatever the directory takes from here on is in the queue.
        const queue = yield* PubSub.subscribe(hub)
        yield* catchUp
        // Every position given out so far reaches the directory: wait for it to have taken them
        // (it is a fiber of its own, run when this one yields).
        const given = yield* tap.position
        while (known < given) yield* Effect.yieldNow()
        const top = known
        const from = options.from === "end" ? top : Math.min(options.from, top)
        const records = yield* tap.records(from, top)
        const scope = options.scope

        // Which sessions are followed (from the directory); for a tree, those created later below it join.
        const member = new Set<SessionId>()
        if (scope._tag === "agent" && owners.has(scope.agent as SessionId)) {
          member.add(scope.agent as SessionId)
        } else if (scope._tag !== "all") {
          for (const [id, o] of owners) if (id === scope.agent || o?.agent === scope.agent) member.add(id)
          if (member.size === 0) {
            return yield* new NotFoundError({ kind: "agent", id: scope.agent, message: `no agent or session ${scope.agent}` })
          }
          if (scope._tag === "tree") {
            let grew = true
            while (grew) {
              grew = false
              for (const [id, o] of owners) {
                if (!member.has(id) && o?.parent != null && member.has(o.parent)) {
                  member.add(id)
                  grew = true
                }
              }
            }
          }
        }
        const follows = (id: SessionId) => scope._tag === "all" || member.has(id)

        // The logs to read: only those of followed sessions with entries after the cursor.
        const snaps = new Map<SessionId, ReadonlyArray<LogEntry>>()
        for (const r of records) {
          if (!follows(r.session) || snaps.has(r.session)) continue
          const snap = yield* snapshot(r.session)
          snaps.set(r.session, Option.getOrElse(snap, () => []))
        }
        if (scope._tag === "all") for (const id of snaps.keys()) member.add(id)

        // A session that joins the tree (its `agent.created`) brings its earlier lines along, just
        // before that entry: they were never delivered (their positions are lower; Sse.ts sends
        // such entries without an `id:`).
        const rootMember = new Set(scope._tag === "tree" ? member : [])
        const bringsAlong = (session: SessionId, entry: LogEntry): boolean =>
          scope._tag === "tree" && entry.event === "agent.created" && !rootMember.has(session)

        // Records up to `top` were written after their entries were durable: the logs read
        // above hold them (a session removed since is skipped).
        const backlog: Array<FeedEvent> = []
        const emitted = new Map<SessionId, number>()
        records.forEach((r, i) => {
          const entries = member.has(r.session) ? snaps.get(r.session) : undefined
          const entry = entries?.[r.line - 1]
          if (entries === undefined || entry === undefined) return
          if (!emitted.has(r.session) && bringsAlong(r.session, entry)) {
            for (let l = 1; l < r.line; l++) {
              backlog.push({ _tag: "Event", session: r.session, line: l, position: 0, entry: entries[l - 1]! })
            }
          }
          emitted.set(r.session, r.line)
          backlog.push({ _tag: "Event", session: r.session, line: r.line, position: from + i + 1, entry })
        })
        const live: FeedLive = { _tag: "Live", cursor: top }

        /** Whether a live entry is in scope; a session joining the tree is added to it. */
        const joins = (entry: LogEntry): boolean => {
          const id = entry.session_id
          if (member.has(id)) return true
          if (scope._tag === "all") {
            member.add(id)
            return true
          }
          if (scope._tag === "tree" && entry.event === "agent.created" && entry.data.parent_session_id !== null &&
            member.has(entry.data.parent_session_id)) {
            member.add(id)
            return true
          }
          return false
        }

        /**
         * The items of a chunk from the hub, in order, appended to `out`. Synchronous unless a
         * session joins the tree with earlier lines (its log is read): the rest of the chunk then
         * follows that read.
         */
        const keepAlive = options.keepAlive === true
        const onChunk = (chunk: ReadonlyArray<Live>, from: number, out: Array<FeedItem>): Effect.Effect<Array<FeedItem>> => {
          for (let i = from; i < chunk.length; i++) {
            const t = chunk[i]!
            if ("_tag" in t) {
              if (keepAlive) out.push(tick)
              continue
            }
            if (t.position <= top || !joins(t.entry)) continue
            const session = t.entry.session_id
            const event: FeedEvent = { _tag: "Event", session, line: t.line, position: t.position, entry: t.entry }
            if (t.line === 1 || !bringsAlong(session, t.entry)) {
              out.push(event)
              continue
            }
            return Effect.flatMap(snapshot(session), (snap) => {
              Option.getOrElse(snap, () => []).slice(0, t.line - 1).forEach((entry, l) =>
                out.push({ _tag: "Event", session, line: l + 1, position: 0, entry })
              )
              out.push(event)
              return onChunk(chunk, i + 1, out)
            })
          }
          return Effect.succeed(out)
        }

        const liveItems = Stream.fromQueue(queue).pipe(
          Stream.mapChunksEffect((chunk) => Effect.map(onChunk(Chunk.toReadonlyArray(chunk), 0, []), Chunk.unsafeFromArray))
        )
        return Stream.fromIterable<FeedItem>(backlog).pipe(Stream.concat(Stream.make(live)), Stream.concat(liveItems))
      }))

    return {
      stream,
      /** Read every log once now (what the first stream would do), e.g. in the background at start-up. */
      warm: catchUp
    } as const
  })
}) {}
