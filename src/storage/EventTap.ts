// Decorates the EventLog so everything appended is also published, live, to in-daemon
// subscribers (the transcript writer, `agent.attach`, the event feed). The orchestrator keeps
// writing to the EventLog port and knows nothing of this; subscribers see an entry only once it
// is durable.
// Each session's appends go through the tap one at a time: the tap's work runs under the log's own
// per-session lock (`append`'s `after`, `readThen`), so different sessions never wait on each
// other's fsync and there is one lock per session. After its append, an entry gets its line in events.jsonl and
// its global *position*: the next record of the EventIndex (src/storage/EventIndex.ts), written
// before the entry is published. Records queue in append order and are written in batches, one
// write in flight at a time (below) — so numbered subscribers receive entries in position order,
// a position names the same entry after a restart, and an append returns once its entry has one.
// The index can lag the logs (a machine crash loses its unsynced tail, an old home has none): the
// first append to a session in this process, and every `snapshot`, read the log and index (and
// publish) the lines it lacks, so every line gets exactly one position.
import { Chunk, Context, Deferred, Effect, Exit, FiberId, Layer, PubSub, type Queue, type Scope } from "effect"
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
  /** The batch holding this session's last record (it is written after every earlier batch). */
  batch: Batch | undefined
}

/** Records waiting for one index write: every record queued while the previous write was in flight. */
interface Batch {
  readonly records: Array<IndexRecord>
  readonly entries: Array<LogEntry>
  /** Set once the batch is written and published (`done` completed). */
  written: boolean
  readonly done: Deferred.Deferred<void>
}

/** Provides a tapped EventLog and the EventTap, given the real EventLog and the index. */
export const layer: Layer.Layer<EventLog | EventTap, EventLogError, EventLog | EventIndex> = Layer.scopedContext(
  Effect.gen(function*() {
    const inner = yield* EventLog
    const index = yield* EventIndex
    const scope = yield* Effect.scope
    const hub = yield* PubSub.unbounded<LogEntry>()
    const numbered = yield* PubSub.unbounded<Tapped>()
    // Position p is record p - 1; `lines`: each session's highest line given a record (queued or written).
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
        slot = { verified: false, batch: undefined }
        slots.set(session, slot)
      }
      return slot
    }

    // The index is written in batches (group commit): a record is queued, under its session's lock,
    // into the batch being filled; whoever then finds no write in flight writes that batch (one
    // index write for all its records) and publishes it; while a write is in flight, records queue
    // for the next one. So one write, and no daemon-wide lock, per batch instead of per append; a
    // caller waits for its batch, so an append still returns with its position given out.
    let filling: Batch | undefined
    let writing = false

    /** Queue the session's lines up to `total` that have no record yet (under its lock). */
    const enqueue = (session: SessionId, slot: Slot, total: number, entries: ReadonlyArray<LogEntry>, first: number): void => {
      const from = lines.get(session) ?? 0
      if (total <= from) return
      let batch = filling
      if (batch === undefined) {
        batch = { records: [], entries: [], written: false, done: Deferred.unsafeMake(FiberId.none) }
        filling = batch
      }
      for (let l = from + 1; l <= total; l++) {
        batch.records.push({ session, line: l })
        batch.entries.push(entries[l - first]!)
      }
      lines.set(session, total)
      slot.batch = batch
    }

    /** Write and publish the batch being filled, then hand the next one (if any) to a fiber of its own. */
    const write: Effect.Effect<void> = Effect.suspend(() => {
      const batch = filling
      if (writing || batch === undefined) return Effect.void
      filling = undefined
      writing = true
      return index.append(batch.records).pipe(
        // The entries are durable in their logs; positions stay right in this process, and a
        // restart indexes the lost records again.
        Effect.catchAll((e) => Effect.logWarning(`event index: ${e.message}`)),
        Effect.flatMap(() => {
          const published: Array<Tapped> = []
          for (let i = 0; i < batch.records.length; i++) {
            const r = batch.records[i]!
            recSession.push(r.session)
            recLine.push(r.line)
            published.push({ entry: batch.entries[i]!, line: r.line, position: recSession.length })
          }
          return PubSub.publishAll(numbered, published)
        }),
        Effect.ensuring(Effect.sync(() => {
          writing = false
          batch.written = true
          Deferred.unsafeDone(batch.done, Exit.void)
        })),
        // Records that queued meanwhile: their callers are waiting (not writing); one fiber writes them.
        Effect.zipRight(Effect.suspend(() => filling === undefined ? Effect.void : Effect.asVoid(Effect.forkIn(write, scope)))),
        Effect.uninterruptible
      )
    })
    // Whatever is still queued when the layer closes is written (a forked write finishes first).
    yield* Effect.addFinalizer(() => write)

    /** Until the session's records queued so far are indexed and published: write them, or wait for the write. */
    const settle = (slot: Slot): Effect.Effect<void> =>
      Effect.suspend(() => {
        const batch = slot.batch
        if (batch === undefined || batch.written) return Effect.void
        return batch === filling && !writing ? write : Deferred.await(batch.done)
      })

    /** Under the session's lock: queue records for whatever of the whole log has none yet. */
    const verify = (session: SessionId, slot: Slot, entries: ReadonlyArray<LogEntry>): void => {
      slot.verified = true
      enqueue(session, slot, entries.length, entries, 1)
    }
    const verifyFirst = (session: SessionId, slot: Slot): Effect.Effect<void> =>
      inner.readThen(session, (entries) => Effect.sync(() => verify(session, slot, entries))).pipe(
        Effect.catchAll((e) => Effect.logWarning(`event index: cannot read ${session}: ${e.message}`))
      )

    // Runs under the log's own per-session lock (`append`'s `after`): a session's line numbers
    // follow its appends without a second lock here. One function for every append (no closure per call).
    const tapOne = (entry: LogEntry): Effect.Effect<void> => {
      const session = entry.session_id
      const slot = slots.get(session)
      if (slot !== undefined && slot.verified) {
        const line = (lines.get(session) ?? 0) + 1
        enqueue(session, slot, line, [entry], line)
      }
      return PubSub.publish(hub, entry)
    }
    const log = EventLog.of({
      ...inner,
      appendAll: (session, events, after) => appendAll(session, events, after),
      append: (session, event) =>
        Effect.suspend(() => {
          const slot = slotOf(session)
          const write = Effect.flatMap(inner.append(session, event, tapOne), (entry) => Effect.as(settle(slot), entry))
          // First append in this process: index the lines the log has and the index lacks first.
          return slot.verified ? write : Effect.zipRight(verifyFirst(session, slot), write)
        })
    })
    const appendAll: EventLogService["appendAll"] = (session, events, after) =>
      Effect.suspend(() => {
        const slot = slotOf(session)
        const tapped = (entries: ReadonlyArray<LogEntry>) =>
          Effect.suspend(() => {
            if (slot.verified) {
              const from = lines.get(session) ?? 0
              enqueue(session, slot, from + entries.length, entries, from + 1)
            }
            const published = PubSub.publishAll(hub, entries)
            return after === undefined ? published : Effect.zipRight(published, after(entries))
          })
        const write = Effect.flatMap(inner.appendAll(session, events, tapped), (entries) => Effect.as(settle(slot), entries))
        return slot.verified ? write : Effect.zipRight(verifyFirst(session, slot), write)
      })
    const snapshot = (session: SessionId) =>
      Effect.suspend(() => {
        const slot = slotOf(session)
        return Effect.zipLeft(
          inner.readThen(session, (entries) => Effect.sync(() => (verify(session, slot, entries), Chunk.unsafeFromArray(entries)))),
          settle(slot)
        )
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
