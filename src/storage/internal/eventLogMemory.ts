// In-memory EventLog: same contract as the file layer, no durability. For embedders' tests and
// the pure orchestration tests.
import { Clock, Effect, Ref, Stream } from "effect"
import type { LogEntry, LogEvent } from "../../domain/events.js"
import type { SessionId } from "../../domain/ids.js"
import type { EventLogService } from "../EventLog.js"

export const makeMemory = Effect.gen(function*() {
  const logs = yield* Ref.make(new Map<SessionId, ReadonlyArray<LogEntry>>())
  const service: EventLogService = {
    append: Effect.fn("EventLog.append")(function*(session: SessionId, event: LogEvent) {
      const ms = yield* Clock.currentTimeMillis
      const entry = { ...event, ts: new Date(ms).toISOString(), session_id: session } as LogEntry
      yield* Ref.update(logs, (m) => new Map(m).set(session, [...(m.get(session) ?? []), entry]))
      return entry
    }),
    read: (session) =>
      Stream.unwrap(Ref.get(logs).pipe(Effect.map((m) => Stream.fromIterable(m.get(session) ?? [])))),
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
