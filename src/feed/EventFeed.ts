// EventFeed: the daemon's event stream — every session's log entries for the whole daemon, one
// agent, or an agent's subtree — each with its line in its session's events.jsonl and its global
// position (src/storage/EventIndex.ts). A stream starts from a Cursor (the position last seen): the
// backlog after it comes from the index and the event logs, then live entries from the EventTap,
// with no entry lost or repeated between the two, nor across a reconnect from the position of the
// last item seen — also after a daemon restart, since positions are kept in `events.index`.
// Used by the HTTP API's SSE (src/http).
//
// A stream subscribes to the tap, then takes the last position given out (`top`): entries up to
// `top` are in the index and in the logs read after it; those after `top` arrive in the queue, in
// position order (entries the index lacked, indexed while the logs are read, among them).
import { Chunk, Effect, Option, Stream } from "effect"
import type { LogEntry } from "../domain/events.js"
import type { SessionId } from "../domain/ids.js"
import { NotFoundError } from "../domain/errors.js"
import { EventTap, type Tapped } from "../daemon/EventTap.js"
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

export type FeedItem = FeedEvent | FeedLive

export interface FeedOptions {
  readonly scope: FeedScope
  /** Deliver what comes after this position (0: everything); "end": only what happens from now. */
  readonly from: Cursor.Cursor | "end"
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
  effect: Effect.gen(function*() {
    const tap = yield* EventTap
    const store = yield* SessionStore

    const snapshot = (session: SessionId): Effect.Effect<Option.Option<ReadonlyArray<LogEntry>>> =>
      tap.snapshot(session).pipe(
        Effect.map((entries) => Option.some(Chunk.toReadonlyArray(entries))),
        Effect.catchAll((e) => Effect.as(Effect.logWarning(`event feed: cannot read ${session}: ${e.message}`), Option.none()))
      )

    const stream = (options: FeedOptions): Stream.Stream<FeedItem, NotFoundError> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        // Subscribe first: whatever is indexed from here on is in the queue.
        const queue = yield* tap.subscribeNumbered
        const top = yield* tap.position
        const from = options.from === "end" ? top : Math.min(options.from, top)
        const records = yield* tap.records(from, top)
        const all = new Set((yield* Effect.orElseSucceed(store.scan, () => [])).map((s) => s.id))
        for (const r of records) all.add(r.session)
        // One agent named by its session id: that log alone; otherwise every log (owners, parents).
        const scope = options.scope
        const sessions = scope._tag === "agent" && all.has(scope.agent as SessionId) ? [scope.agent as SessionId] : [...all]
        const snaps = new Map<SessionId, ReadonlyArray<LogEntry>>()
        for (const id of sessions) {
          const snap = yield* snapshot(id)
          if (Option.isSome(snap)) snaps.set(id, snap.value)
        }
        const owners = new Map<SessionId, Owner | undefined>()
        for (const [id, entries] of snaps) owners.set(id, ownerOf(entries))

        // Which sessions are followed; for a tree, those created later below it join.
        const member = new Set<SessionId>()
        if (scope._tag === "all") {
          for (const id of snaps.keys()) member.add(id)
        } else {
          const roots = [...snaps.keys()].filter((id) => id === scope.agent || owners.get(id)?.agent === scope.agent)
          if (roots.length === 0) {
            return yield* new NotFoundError({ kind: "agent", id: scope.agent, message: `no agent or session ${scope.agent}` })
          }
          for (const r of roots) member.add(r)
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

        const onTapped = (t: Tapped): Effect.Effect<ReadonlyArray<FeedEvent>> => {
          if (t.position <= top || !joins(t.entry)) return Effect.succeed([])
          const session = t.entry.session_id
          const event: FeedEvent = { _tag: "Event", session, line: t.line, position: t.position, entry: t.entry }
          if (t.line === 1 || !bringsAlong(session, t.entry)) return Effect.succeed([event])
          return Effect.map(snapshot(session), (snap) => {
            const earlier = Option.getOrElse(snap, () => []).slice(0, t.line - 1)
            return [...earlier.map((entry, l): FeedEvent => ({ _tag: "Event", session, line: l + 1, position: 0, entry })), event]
          })
        }

        const liveItems = Stream.fromQueue(queue).pipe(Stream.mapEffect(onTapped), Stream.flattenIterables)
        return Stream.fromIterable<FeedItem>(backlog).pipe(Stream.concat(Stream.make(live)), Stream.concat(liveItems))
      }))

    return { stream } as const
  })
}) {}
