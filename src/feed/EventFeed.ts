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
// hands it to a publisher that gathers what came within 10 ms into one batch and serves every
// open stream in one pass: each stream's filter picks its part and hands it to the stream's sink
// (`subscribe`). Streams taking the same part get the same array — every stream of the whole
// daemon gets the batch itself — so a receiver encodes it once for all of them (src/http/Sse.ts).
// A stream subscribes to the hub, then takes `known` as `top`: entries up to `top` are in the
// index and in the logs read after it; those after `top` reach its sink, in position order
// (entries the index lacked, indexed while the logs are read, among them); batches published
// while it opens, or while it reads a log (a session joining its tree with earlier lines), wait
// for it in order.
// Every 15 s the hub also carries a keep-alive tick, which streams opened with `keepAlive` pass on
// (SSE's comment line), so no stream needs a timer of its own merged into it.
// Opening costs what the stream sends: which sessions it follows comes from an in-memory
// directory of owners, and only the logs of followed sessions with entries after the cursor are
// read — none from the end. Every log is read once per process (`catchUp`: by `warm`, which the
// HTTP server runs in the background at start-up, or else by the first stream).
//
// Over 300 lines because the backlog, the live hub and the directory of owners are one ordering
// contract (no entry lost or repeated between them), kept together so it reads in order.
import { Chunk, Clock, Effect, Option, Queue, type Scope, Stream } from "effect"
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

/**
 * What receives one stream's live items (`EventFeed.subscribe`). `offer` is called from the
 * feed's publishing fiber, once per batch the stream has items in, in order: keep it short and
 * synchronous (every stream waits for it). Streams that take the same items from one batch get
 * the same array, so what a receiver derives from it (SSE's encoded bytes) can be kept with it
 * and reused. `offer` returns false when the receiver has no room: the stream is then dropped
 * (no further calls).
 */
export interface FeedSink {
  readonly offer: (items: ReadonlyArray<FeedItem>) => boolean
}

const tick = { _tag: "KeepAlive" } as const satisfies FeedKeepAlive
const ticks: ReadonlyArray<FeedItem> = [tick]
/** How long live entries gather before the hub publishes them to every stream as one batch. */
const batchWindow = "10 millis"
const liveClock = Clock.make()

/** The entries of one window, as events built once for every stream. */
interface Batch {
  readonly events: ReadonlyArray<FeedEvent>
  /** The parts streams took (by the indexes taken): one array per distinct part. */
  readonly parts: Map<string, ReadonlyArray<FeedEvent>>
}
type Published = Batch | FeedKeepAlive

/** One stream, as the hub sees it. */
interface Subscriber {
  readonly sink: FeedSink
  readonly keepAlive: boolean
  readonly scope: Scope.Scope
  /**
   * Passes the stream's part of a batch, from entry `start` on, to its sink. When a log must be
   * read first, it returns that read: the read delivers its items and puts the rest of the batch
   * first in `waiting`.
   */
  take: (batch: Batch, start: number) => Effect.Effect<void> | undefined
  /** Batches that wait while the stream opens or a read is under way, taken in order after it. */
  waiting: Array<readonly [Published, number]> | undefined
  dropped: boolean
}

const partOf = (batch: Batch, picked: ReadonlyArray<number>): ReadonlyArray<FeedEvent> => {
  if (picked.length === batch.events.length) return batch.events
  if (picked.length === 0) return []
  const key = picked.join(",")
  let part = batch.parts.get(key)
  if (part === undefined) {
    part = picked.map((i) => batch.events[i]!)
    batch.parts.set(key, part)
  }
  return part
}

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
    const pending = yield* Queue.unbounded<Tapped>()
    // `known` and the owners move before the entries are published: a stream subscribing in
    // between takes them as backlog and skips them live (position ≤ its `top`).
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

    // The hub: every open stream, served by the publishing fiber in one pass per batch.
    const subscribers = new Set<Subscriber>()
    const deliver = (sub: Subscriber, items: ReadonlyArray<FeedItem>): void => {
      if (items.length === 0 || sub.dropped || sub.sink.offer(items)) return
      sub.dropped = true
      subscribers.delete(sub)
    }
    const step = (sub: Subscriber, p: Published, start: number): Effect.Effect<void> | undefined => {
      if (sub.dropped) return undefined
      if ("_tag" in p) {
        if (sub.keepAlive) deliver(sub, ticks)
        return undefined
      }
      return sub.take(p, start)
    }
    /** Takes a stream's waiting batches in order, then lets the hub serve it directly again. */
    const drain = (sub: Subscriber): Effect.Effect<void> =>
      Effect.suspend(() => {
        const waiting = sub.waiting ?? []
        for (let next = waiting.shift(); next !== undefined; next = waiting.shift()) {
          const read = step(sub, next[0], next[1])
          if (read !== undefined) return Effect.zipRight(read, drain(sub))
        }
        sub.waiting = undefined
        return Effect.void
      })
    const publish = (p: Published): Effect.Effect<void> =>
      Effect.suspend(() => {
        let reads: Array<Effect.Effect<unknown>> | undefined
        for (const sub of subscribers) {
          if (sub.waiting !== undefined) {
            sub.waiting.push([p, 0])
            continue
          }
          const read = step(sub, p, 0)
          if (read === undefined) continue
          sub.waiting = []
          ;(reads ??= []).push(Effect.forkIn(Effect.zipRight(read, drain(sub)), sub.scope))
        }
        return reads === undefined ? Effect.void : Effect.all(reads, { discard: true })
      })

    // What the directory took reaches the hub in batches, one every `batchWindow` at most while
    // entries come: every stream then gets at most one offer per batch rather than one per
    // entry. The window is wall-clock time (the live clock even under a test clock).
    yield* Queue.takeBetween(pending, 1, Number.MAX_SAFE_INTEGER).pipe(
      Effect.zipLeft(Effect.sleep(batchWindow).pipe(Effect.withClock(liveClock))),
      Effect.flatMap((first) => Effect.map(Queue.takeAll(pending), (rest) => Chunk.appendAll(first, rest))),
      Effect.flatMap((taken) => {
        const events = Chunk.toReadonlyArray(taken).map((t): FeedEvent => ({
          _tag: "Event",
          session: t.entry.session_id,
          line: t.line,
          position: t.position,
          entry: t.entry
        }))
        return publish({ events, parts: new Map() })
      }),
      Effect.forever,
      Effect.forkScoped
    )
    yield* publish(tick).pipe(Effect.delay("15 seconds"), Effect.forever, Effect.forkScoped)

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

    /**
     * Opens a stream: its backlog (ending with the `Live` item) is returned; its live items go to
     * `sink` (from the hub's fiber) until the scope closes or the sink has no room.
     */
    const subscribe = (options: FeedOptions, sink: FeedSink): Effect.Effect<ReadonlyArray<FeedItem>, NotFoundError, Scope.Scope> =>
      Effect.gen(function*() {
        // Subscribe first: whatever the hub publishes from here on waits for this stream.
        const sub: Subscriber = {
          sink,
          keepAlive: options.keepAlive === true,
          scope: yield* Effect.scope,
          take: () => undefined,
          waiting: [],
          dropped: false
        }
        subscribers.add(sub)
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            sub.dropped = true
            subscribers.delete(sub)
          })
        )
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
        const backlog: Array<FeedItem> = []
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
        backlog.push({ _tag: "Live", cursor: top })

        /** Whether a live entry is in scope; a session joining the tree is added to it. */
        const joins = (entry: LogEntry): boolean => {
          const id = entry.session_id
          if (scope._tag === "all" || member.has(id)) return true
          if (scope._tag === "tree" && entry.event === "agent.created" && entry.data.parent_session_id !== null &&
            member.has(entry.data.parent_session_id)) {
            member.add(id)
            return true
          }
          return false
        }

        // The stream's part of a batch: the entries after `top` in scope. A whole batch (any
        // stream of the whole daemon) is passed as published; a part, as the array every stream
        // taking the same entries gets. A session joining the tree with earlier lines has its
        // log read first (its lines then come before its `agent.created`).
        sub.take = (batch, start) => {
          const events = batch.events
          if (start === 0 && scope._tag === "all" && events.length > 0 && events[0]!.position > top) {
            deliver(sub, events)
            return undefined
          }
          const picked: Array<number> = []
          for (let i = start; i < events.length; i++) {
            const event = events[i]!
            if (event.position <= top || !joins(event.entry)) continue
            if (event.line === 1 || !bringsAlong(event.session, event.entry)) {
              picked.push(i)
              continue
            }
            deliver(sub, partOf(batch, picked))
            return Effect.map(snapshot(event.session), (snap) => {
              const items: Array<FeedItem> = Option.getOrElse(snap, () => []).slice(0, event.line - 1).map((entry, l) => ({
                _tag: "Event",
                session: event.session,
                line: l + 1,
                position: 0,
                entry
              }))
              items.push(event)
              deliver(sub, items)
              ;(sub.waiting ??= []).unshift([batch, i + 1])
            })
          }
          deliver(sub, partOf(batch, picked))
          return undefined
        }
        // Batches published while the stream opened: those after `top`, then the hub's own.
        yield* drain(sub)
        return backlog
      })

    /** A stream of the feed's items: its backlog, `Live`, then live items as they come. */
    const stream = (options: FeedOptions): Stream.Stream<FeedItem, NotFoundError> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const queue = yield* Queue.unbounded<ReadonlyArray<FeedItem>>()
        const backlog = yield* subscribe(options, { offer: (items) => Queue.unsafeOffer(queue, items) })
        return Stream.fromIterable(backlog).pipe(Stream.concat(Stream.flattenIterables(Stream.fromQueue(queue))))
      }))

    return {
      stream,
      subscribe,
      /** Read every log once now (what the first stream would do), e.g. in the background at start-up. */
      warm: catchUp
    } as const
  })
}) {}
