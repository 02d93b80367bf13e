// Decorates the EventLog so everything appended is also published, live, to in-daemon
// subscribers (the transcript writer, `agent.attach`, the event feed). The orchestrator keeps
// writing to the EventLog port and knows nothing of this; subscribers see an entry only once it
// is durable.
// Each session's appends go through the tap one at a time: the tap's work runs under the log's own
// per-session lock (`append`'s `after`, `readThen`), so different sessions never wait on each
// other's fsync and there is one lock per session. After its append, an entry gets its line in events.jsonl and
// its global *position*: the next record of the EventIndex (src/storage/EventIndex.ts), written
// before the entry is published, under one daemon-wide permit — so numbered subscribers receive
// entries in position order, and a position names the same entry after a restart.
// The index can lag the logs (a machine crash loses its unsynced tail, an old home has none): the
// first append to a session in this process, and every `snapshot`, read the log and index (and
// publish) the lines it lacks, so every line gets exactly one position.
import { Chunk, Context, Effect, Layer, PubSub, type Queue, type Scope } from "effect"
import type { EventLogError } from "../domain/errors.js"
import type { LogEntry } from "../domain/events.js"
import type { SessionId } from "../domain/ids.js"
import { EventIndex, type IndexRecord } from "./EventIndex.js"
import { EventLog, type EventLogService } from "./EventLog.js"

/** An appended entry with its line in its session's log and its global position (both 1-based). */
export interface Tapped {
  readonly entry: LogEntry
  readonly line: number
  readonly position: number
}

export interface EventTapService {
  /** A queue of every entry appended after this call, in append order per session. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<LogEntry>, never, Scope.Scope>
  /** Every entry indexed after this call, numbered, in position order. */
  readonly subscribeNumbered: Effect.Effect<Queue.Dequeue<Tapped>, never, Scope.Scope>
  /** A session's whole log, read while no append to it runs (its lines are all indexed after). */
  readonly snapshot: (session: SessionId) => Effect.Effect<Chunk.Chunk<LogEntry>, EventLogError>
  /** The last position given out so far (0: none). */
  readonly position: Effect.Effect<number>
  /** The index records at positions `(after, upTo]`. */
  readonly records: (after: number, upTo: number) => Effect.Effect<ReadonlyArray<IndexRecord>>
}

export class EventTap extends Context.Tag("substrat/EventTap")<EventTap, EventTapService>() {}

interface Slot {
  /** The log was read in this process, so `lines` below is its true length. Changed only under the log's session lock. */
  verified: boolean
}

/** Provides a tapped EventLog and the EventTap, given the real EventLog and the index. */
export const layer: Layer.Layer<EventLog | EventTap, EventLogError, EventLog | EventIndex> = Layer.effectContext(
  Effect.gen(function*() {
    const inner = yield* EventLog
    const index = yield* EventIndex
    const hub = yield* PubSub.unbounded<LogEntry>()
    const numbered = yield* PubSub.unbounded<Tapped>()
    const order = yield* Effect.makeSemaphore(1)
    // Position p is record p - 1; `lines`: each session's highest indexed line.
    const recSession: Array<SessionId> = []
    const recLine: Array<number> = []
    const lines = new Map<SessionId, number>()
    const canonical = new Map<string, SessionId>()
    for (const r of yield* index.load) {
      let session = canonical.get(r.session)
      if (session === undefined) canonical.set(r.session, session = r.session)
      recSession.push(session)
      recLine.push(r.line)
      lines.set(session, Math.max(lines.get(session) ?? 0, r.line))
    }
    const slots = new Map<SessionId, Slot>()
    const slotOf = (session: SessionId): Slot => {
      let slot = slots.get(session)
      if (slot === undefined) {
        slot = { verified: false }
        slots.set(session, slot)
      }
      return slot
    }

    /** Index and publish the session's lines up to `total` not indexed yet; `entryAt(line)`: the entry. */
    const indexUpTo = (session: SessionId, total: number, entryAt: (line: number) => LogEntry): Effect.Effect<void> =>
      order.withPermits(1)(Effect.suspend(() => {
        const from = lines.get(session) ?? 0
        if (total <= from) return Effect.void
        const fresh: Array<IndexRecord> = []
        for (let l = from + 1; l <= total; l++) fresh.push({ session, line: l })
        return index.append(fresh).pipe(
          // The entries are durable in their log; positions stay right in this process, and a
          // restart indexes the lost records again.
          Effect.catchAll((e) => Effect.logWarning(`event index: ${e.message}`)),
          Effect.zipRight(Effect.suspend(() => {
            const published: Array<Tapped> = []
            for (const r of fresh) {
              recSession.push(session)
              recLine.push(r.line)
              published.push({ entry: entryAt(r.line), line: r.line, position: recSession.length })
            }
            lines.set(session, total)
            return PubSub.publishAll(numbered, published)
          }))
        )
      }))

    /** Under the session's lock: index (and publish) whatever of the whole log is not yet. */
    const verify = (session: SessionId, slot: Slot) => (entries: ReadonlyArray<LogEntry>) => {
      slot.verified = true
      return indexUpTo(session, entries.length, (l) => entries[l - 1]!)
    }

    // Everything below runs under the log's own per-session lock (`append`'s `after`, `readThen`):
    // a session's line numbers follow its appends without a second lock here.
    const log = EventLog.of({
      ...inner,
      appendAll: (session, events, after) => appendAll(session, events, after),
      append: (session, event) =>
        Effect.suspend(() => {
          const slot = slotOf(session)
          const after = (entry: LogEntry) =>
            Effect.zipRight(
              slot.verified ? indexUpTo(session, (lines.get(session) ?? 0) + 1, () => entry) : Effect.void,
              PubSub.publish(hub, entry)
            )
          if (slot.verified) return inner.append(session, event, after)
          // First append in this process: index the lines the log has and the index lacks first.
          return Effect.zipRight(
            inner.readThen(session, verify(session, slot)).pipe(
              Effect.catchAll((e) => Effect.logWarning(`event index: cannot read ${session}: ${e.message}`))
            ),
            inner.append(session, event, after)
          )
        })
    })
    const appendAll: EventLogService["appendAll"] = (session, events, after) =>
      Effect.suspend(() => {
        const slot = slotOf(session)
        const tapped = (entries: ReadonlyArray<LogEntry>) =>
          Effect.zipRight(
            Effect.zipRight(
              slot.verified
                ? Effect.suspend(() => {
                  const from = lines.get(session) ?? 0
                  return indexUpTo(session, from + entries.length, (l) => entries[l - from - 1]!)
                })
                : Effect.void,
              PubSub.publishAll(hub, entries)
            ),
            after === undefined ? Effect.void : after(entries)
          )
        const write = inner.appendAll(session, events, tapped)
        if (slot.verified) return write
        return Effect.zipRight(
          inner.readThen(session, verify(session, slot)).pipe(
            Effect.catchAll((e) => Effect.logWarning(`event index: cannot read ${session}: ${e.message}`))
          ),
          write
        )
      })
    const snapshot = (session: SessionId) =>
      Effect.suspend(() => {
        const slot = slotOf(session)
        return inner.readThen(session, (entries) => Effect.as(verify(session, slot)(entries), Chunk.unsafeFromArray(entries)))
      })
    return Context.make(EventLog, log).pipe(Context.add(
      EventTap,
      EventTap.of({
        subscribe: PubSub.subscribe(hub),
        subscribeNumbered: PubSub.subscribe(numbered),
        snapshot,
        position: Effect.sync(() => recSession.length),
        records: (after, upTo) =>
          Effect.sync(() => {
            const out: Array<IndexRecord> = []
            for (let p = Math.max(0, after); p < Math.min(upTo, recSession.length); p++) {
              out.push({ session: recSession[p]!, line: recLine[p]! })
            }
            return out
          })
      })
    ))
  })
)
