// EventFeed: the daemon's event stream — every session's log entries for the whole daemon, one
// agent, or an agent's subtree — each with its position (session, line in events.jsonl). A
// stream starts from a Cursor (Cursor.ts): the backlog after it comes from the event logs, then
// live entries from the EventTap, with no entry lost or repeated between the two, nor across a
// reconnect from the cursor of the last item seen — also after a daemon restart, since positions
// are line numbers in the append-only logs. Used by the HTTP API's SSE (src/http) and meant for
// `substrat logs -f`.
//
// How live entries get their line: the tap numbers each session's appends in this process
// (`seq`) and its `snapshot` reads a log with the count of appends so far, so
// `line = (snapshot length - appended) + seq` (the base is constant for the process; cached here).
// A stream subscribes to the tap before reading its backlog; a live entry at or below the line
// already delivered for its session is skipped, one past a gap is preceded by the missing lines
// from a fresh snapshot.
import { Chunk, Effect, Option, Stream } from "effect"
import type { LogEntry } from "../domain/events.js"
import type { SessionId } from "../domain/ids.js"
import { NotFoundError } from "../domain/errors.js"
import { EventTap, type TapSnapshot } from "../daemon/EventTap.js"
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
  readonly entry: LogEntry
}

/** The backlog is over; `cursor` is where the stream stands (every followed session). */
export interface FeedLive {
  readonly _tag: "Live"
  readonly cursor: Cursor.Cursor
}

export type FeedItem = FeedEvent | FeedLive

export interface FeedOptions {
  readonly scope: FeedScope
  /** Deliver what comes after this cursor (empty: everything); "end": only what happens from now. */
  readonly from: Cursor.Cursor | "end"
}

interface Owner {
  readonly agent: string
  readonly parent: SessionId | null
}

const ownerOf = (entries: Chunk.Chunk<LogEntry>): Owner | undefined => {
  for (const e of entries) {
    if (e.event === "agent.created") return { agent: e.data.agent_id, parent: e.data.parent_session_id }
  }
  return undefined
}

/** `a` before `b`: by time, then session, then line (a stable merge of the logs). */
const byTime = (a: FeedEvent, b: FeedEvent): number =>
  a.entry.ts < b.entry.ts ? -1 : a.entry.ts > b.entry.ts ? 1 : a.session < b.session ? -1 : a.session > b.session ? 1 : a.line - b.line

export class EventFeed extends Effect.Service<EventFeed>()("substrat/EventFeed", {
  effect: Effect.gen(function*() {
    const tap = yield* EventTap
    const store = yield* SessionStore
    /** Per session: its line count before this process's first append through the tap. */
    const bases = new Map<SessionId, number>()

    const snapshot = (session: SessionId): Effect.Effect<Option.Option<TapSnapshot>> =>
      tap.snapshot(session).pipe(
        Effect.tap((s) => Effect.sync(() => bases.set(session, s.entries.length - s.appended))),
        Effect.map(Option.some),
        Effect.catchAll((e) => Effect.as(Effect.logWarning(`event feed: cannot read ${session}: ${e.message}`), Option.none()))
      )

    const stream = (options: FeedOptions): Stream.Stream<FeedItem, NotFoundError> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        // Subscribe first: whatever is appended from here on is in the queue, possibly also in
        // the backlog read below (then skipped by line).
        const queue = yield* tap.subscribeNumbered
        const all = (yield* Effect.orElseSucceed(store.scan, () => [])).map((s) => s.id)
        // One agent named by its session id: that log alone; otherwise every log (owners, parents).
        const scope = options.scope
        const sessions = scope._tag === "agent" && all.includes(scope.agent as SessionId) ? [scope.agent as SessionId] : all
        const snaps = new Map<SessionId, TapSnapshot>()
        for (const id of sessions) {
          const snap = yield* snapshot(id)
          if (Option.isSome(snap)) snaps.set(id, snap.value)
        }
        const owners = new Map<SessionId, Owner | undefined>()
        for (const [id, snap] of snaps) owners.set(id, ownerOf(snap.entries))

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

        const delivered = new Map<string, number>()
        const backlog: Array<FeedEvent> = []
        for (const id of member) {
          const entries = Chunk.toReadonlyArray(snaps.get(id)!.entries)
          const from = options.from === "end" ? entries.length : Math.min(Cursor.lineOf(options.from, id), entries.length)
          for (let i = from; i < entries.length; i++) backlog.push({ _tag: "Event", session: id, line: i + 1, entry: entries[i]! })
          delivered.set(Cursor.keyOf(id), entries.length)
        }
        backlog.sort(byTime)
        const live: FeedLive = { _tag: "Live", cursor: new Map(delivered) }

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

        /** The feed events one tapped entry stands for: none (seen), itself, or a gap and itself. */
        const onTapped = (entry: LogEntry, seq: number): Effect.Effect<ReadonlyArray<FeedEvent>> =>
          Effect.gen(function*() {
            if (!joins(entry)) return []
            const id = entry.session_id
            const key = Cursor.keyOf(id)
            let base = bases.get(id)
            let fresh: TapSnapshot | undefined
            if (base === undefined) {
              const snap = yield* snapshot(id)
              if (Option.isNone(snap)) return []
              fresh = snap.value
              base = bases.get(id)!
            }
            const line = base + seq
            const done = delivered.get(key) ?? 0
            if (line <= done) return []
            if (line === done + 1) {
              delivered.set(key, line)
              return [{ _tag: "Event", session: id, line, entry }]
            }
            // A gap (a session that joined late): the lines in between from its log.
            if (fresh === undefined) {
              const snap = yield* snapshot(id)
              if (Option.isNone(snap)) return []
              fresh = snap.value
            }
            const entries = Chunk.toReadonlyArray(fresh.entries)
            const out: Array<FeedEvent> = []
            for (let i = done; i < Math.min(line, entries.length); i++) {
              out.push({ _tag: "Event", session: id, line: i + 1, entry: entries[i]! })
            }
            delivered.set(key, Math.max(done, Math.min(line, entries.length)))
            return out
          })

        const liveItems = Stream.fromQueue(queue).pipe(
          Stream.mapEffect((t) => onTapped(t.entry, t.seq)),
          Stream.flattenIterables
        )
        return Stream.fromIterable<FeedItem>(backlog).pipe(Stream.concat(Stream.make(live)), Stream.concat(liveItems))
      }))

    return { stream } as const
  })
}) {}
