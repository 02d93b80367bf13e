// In-memory EventLog: same contract as the file layer, no durability. For embedders' tests and
// the pure orchestration tests.
import { Chunk, Clock, Effect, Ref, Stream } from "effect"
import type { LogEntry, LogEvent } from "../../domain/events.js"
import type { SessionId } from "../../domain/ids.js"
import type { EventLogService } from "../EventLog.js"

export const makeMemory = Effect.gen(function*() {
  const logs = yield* Ref.make(new Map<SessionId, ReadonlyArray<LogEntry>>())
  // Per session, the lock that orders an append with its `after` (and `readThen`).
  const locks = new Map<SessionId, Effect.Semaphore>()
  const lockOf = (session: SessionId): Effect.Semaphore => {
    let lock = locks.get(session)
    if (lock === undefined) locks.set(session, lock = Effect.unsafeMakeSemaphore(1))
    return lock
  }
  const entriesOf = (session: SessionId) => Effect.map(Ref.get(logs), (m) => m.get(session) ?? [])
  const service: EventLogService = {
    append: (session: SessionId, event: LogEvent, after?: (entry: LogEntry) => Effect.Effect<void>) =>
      lockOf(session).withPermits(1)(Effect.uninterruptible(Effect.gen(function*() {
        const ms = yield* Clock.currentTimeMillis
        const entry = { ...event, ts: new Date(ms).toISOString(), session_id: session } as LogEntry
        yield* Ref.update(logs, (m) => new Map(m).set(session, [...(m.get(session) ?? []), entry]))
        if (after !== undefined) yield* after(entry)
        return entry
      }))).pipe(Effect.withSpan("EventLog.append")),
    appendAll: (session, events, after) =>
      events.length === 0
        ? Effect.succeed([])
        : lockOf(session).withPermits(1)(Effect.uninterruptible(Effect.gen(function*() {
          const ts = new Date(yield* Clock.currentTimeMillis).toISOString()
          const entries = events.map((event) => ({ ...event, ts, session_id: session }) as LogEntry)
          yield* Ref.update(logs, (m) => new Map(m).set(session, [...(m.get(session) ?? []), ...entries]))
          if (after !== undefined) yield* after(entries)
          return entries
        }))).pipe(Effect.withSpan("EventLog.appendAll")),
    read: (session) => Stream.unwrap(Effect.map(entriesOf(session), (entries) => Stream.fromChunk(Chunk.fromIterable(entries)))),
    readMany: (sessions) => Stream.flatMap(Stream.fromIterable(sessions), (session) => service.read(session)),
    readThen: (session, f) => lockOf(session).withPermits(1)(Effect.flatMap(entriesOf(session), (entries) => Effect.uninterruptible(f(entries)))),
    repair: (session) =>
      Effect.succeed({ session_id: session, truncatedBytes: 0, pendingReplayed: false, pendingDiscarded: false }),
    close: () => Effect.void,
    remove: (session) =>
      Ref.update(logs, (m) => {
        const next = new Map(m)
        next.delete(session)
        return next
      })
  }
  return service
})
