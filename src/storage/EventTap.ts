// Decorates the EventLog so everything appended is also published, live, to in-daemon
// subscribers (the transcript writer, `agent.attach`, the event feed). The orchestrator keeps
// writing to the EventLog port and knows nothing of this; subscribers see an entry only once it
// is durable.
// Each session's appends go through the tap one at a time: the tap's work runs under the log's own
// per-session lock (`append`'s `after`, `readThen`), so different sessions never wait on each
// other's fsync and there is one lock per session. After its append, an entry gets its line in events.jsonl and
// its global *position*: the next record of the EventIndex (src/storage/EventIndex.ts), given out
// in append order and written (in batches, one write in flight at a time, below) before the entry
// is published to numbered subscribers — so they receive entries in position order, a position
// names the same entry after a restart, and an append returns once its entry has one.
// The index can lag the logs (a machine crash loses its unsynced tail, an old home has none): the
// first append to a session in this process, and every `snapshot`, read the log and index (and
// publish) the lines it lacks, so every line gets exactly one position.
import { Chunk, Clock, Context, Effect, Layer, PubSub, type Queue, type Scope } from "effect"
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
  /** The last position given out so far (0: none), once every position up to it is published (in the index). */
  readonly position: Effect.Effect<number>
  /** The index records at positions `(after, upTo]`. */
  readonly records: (after: number, upTo: number) => Effect.Effect<ReadonlyArray<IndexRecord>>
}

export class EventTap extends Context.Tag("substrat/EventTap")<EventTap, EventTapService>() {}

interface Slot {
  /** The log was read in this process, so `lines` below is its true length. Changed only under the log's session lock. */
  verified: boolean
}

/**
 * How long a writer gathers records before an index write. Entries reach numbered subscribers —
 * the event feed, which then waits its own 10 ms window — up to that much later; `position` waits
 * for it. Short: appends further apart than this cost little CPU anyway. Wall time even under a
 * test clock.
 */
const indexWindow = "5 millis"
const window = Effect.sleep(indexWindow).pipe(Effect.withClock(Clock.make()))

/** Provides a tapped EventLog and the EventTap, given the real EventLog and the index. */
export const layer: Layer.Layer<EventLog | EventTap, EventLogError, EventLog | EventIndex> = Layer.scopedContext(
  Effect.gen(function*() {
    const inner = yield* EventLog
    const index = yield* EventIndex
    const scope = yield* Effect.scope
    const hub = yield* PubSub.unbounded<LogEntry>()
    const numbered = yield* PubSub.unbounded<Tapped>()
    // Position p is record p - 1; `lines`: each session's highest line given a position.
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

    // Positions are given out in memory, under the entry's session lock, in append order; the index
    // is written in batches by one fiber at a time (group commit: the records given out while a
    // write is in flight go in the next write), and a batch is published to numbered subscribers
    // only once written. So an append waits neither for the index nor for a daemon-wide lock, and
    // a position reaches a client (the feed takes them from numbered subscribers) only once it is
    // in the index — a killed daemon's restart reads it back.
    let records: Array<IndexRecord> = []
    let published: Array<Tapped> = []
    let writing = false
    /** Positions up to this one are written and published; callers of `position` wait for theirs. */
    let publishedUpTo = recSession.length
    let waiting: Array<{ readonly upTo: number; readonly resume: () => void }> = []
    const wake = (upTo: number): void => {
      publishedUpTo = upTo
      if (waiting.length === 0) return
      const still: typeof waiting = []
      for (const w of waiting) (w.upTo <= upTo ? w.resume() : still.push(w))
      waiting = still
    }
    const position: Effect.Effect<number> = Effect.suspend(() => {
      const upTo = recSession.length
      if (publishedUpTo >= upTo) return Effect.succeed(upTo)
      return Effect.async<number>((resume) => {
        waiting.push({ upTo, resume: () => resume(Effect.succeed(upTo)) })
      })
    })

    /** Give the session's lines up to `total` that have none a position (under its lock). */
    const enqueue = (session: SessionId, total: number, entries: ReadonlyArray<LogEntry>, first: number): void => {
      for (let l = (lines.get(session) ?? 0) + 1; l <= total; l++) {
        recSession.push(session)
        recLine.push(l)
        records.push({ session, line: l })
        published.push({ entry: entries[l - first]!, line: l, position: recSession.length })
      }
      lines.set(session, Math.max(lines.get(session) ?? 0, total))
    }

    /** Write and publish what was given out, batch after batch, until nothing waits. */
    const writeAll: Effect.Effect<void> = Effect.suspend(() => {
      if (records.length === 0) {
        writing = false
        return Effect.void
      }
      const batch = records
      const tapped = published
      records = []
      published = []
      return index.append(batch).pipe(
        // The entries are durable in their logs; positions stay right in this process, and a
        // restart indexes the lost records again.
        Effect.catchAll((e) => Effect.logWarning(`event index: ${e.message}`)),
        Effect.zipRight(PubSub.publishAll(numbered, tapped)),
        Effect.zipRight(Effect.suspend(() => {
          wake(tapped[tapped.length - 1]!.position)
          return writeAll
        }))
      )
    })
    /**
     * Start a writer unless one runs: it waits `indexWindow` for more records (one session appending
     * alone gives out one every fsync), then writes whatever was given out meanwhile.
     */
    const kick: Effect.Effect<void> = Effect.suspend(() => {
      if (writing || records.length === 0) return Effect.void
      writing = true
      return Effect.asVoid(Effect.forkIn(Effect.zipRight(window, Effect.uninterruptible(writeAll)), scope))
    })
    // At close, after the writer (forked later, so interrupted — and awaited — first): the rest.
    yield* Effect.addFinalizer(() => Effect.suspend(() => (records.length === 0 ? Effect.void : writeAll)))

    /** Under the session's lock: queue records for whatever of the whole log has none yet. */
    const verify = (session: SessionId, slot: Slot, entries: ReadonlyArray<LogEntry>): Effect.Effect<void> => {
      slot.verified = true
      enqueue(session, entries.length, entries, 1)
      return kick
    }
    const verifyFirst = (session: SessionId, slot: Slot): Effect.Effect<void> =>
      inner.readThen(session, (entries) => verify(session, slot, entries)).pipe(
        Effect.catchAll((e) => Effect.logWarning(`event index: cannot read ${session}: ${e.message}`))
      )

    // Runs under the log's own per-session lock (`append`'s `after`): a session's line numbers
    // follow its appends without a second lock here. One function for every append (no closure per call).
    const tapOne = (entry: LogEntry): Effect.Effect<void> => {
      const session = entry.session_id
      const slot = slots.get(session)
      if (slot === undefined || !slot.verified) return PubSub.publish(hub, entry)
      const line = (lines.get(session) ?? 0) + 1
      enqueue(session, line, [entry], line)
      return Effect.zipRight(kick, PubSub.publish(hub, entry))
    }
    const log = EventLog.of({
      ...inner,
      appendAll: (session, events, after) => appendAll(session, events, after),
      append: (session, event) =>
        Effect.suspend(() => {
          const slot = slotOf(session)
          const write = inner.append(session, event, tapOne)
          // First append in this process: index the lines the log has and the index lacks first.
          return slot.verified ? write : Effect.zipRight(verifyFirst(session, slot), write)
        })
    })
    const appendAll: EventLogService["appendAll"] = (session, events, after) =>
      Effect.suspend(() => {
        const slot = slotOf(session)
        const tapped = (entries: ReadonlyArray<LogEntry>) =>
          Effect.suspend(() => {
            let tap = PubSub.publishAll(hub, entries)
            if (slot.verified) {
              const from = lines.get(session) ?? 0
              enqueue(session, from + entries.length, entries, from + 1)
              tap = Effect.zipRight(kick, tap)
            }
            return after === undefined ? tap : Effect.zipRight(tap, after(entries))
          })
        const write = inner.appendAll(session, events, tapped)
        return slot.verified ? write : Effect.zipRight(verifyFirst(session, slot), write)
      })
    const snapshot = (session: SessionId) =>
      Effect.suspend(() => {
        const slot = slotOf(session)
        return inner.readThen(session, (entries) => Effect.as(verify(session, slot, entries), Chunk.unsafeFromArray(entries)))
      })
    return Context.make(EventLog, log).pipe(Context.add(
      EventTap,
      EventTap.of({
        subscribe: PubSub.subscribe(hub),
        subscribeNumbered: PubSub.subscribe(numbered),
        snapshot,
        position,
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
