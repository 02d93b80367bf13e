// EventLog (port): per-session append-only JSONL with a pending-file WAL, and its layers:
// `EventLog.layerFile` (internal/eventLogFile.ts), `EventLog.layerSql` (internal/eventLogSql.ts, cluster
// mode's Postgres) and `EventLog.layerMemory` (internal/eventLogMemory.ts).
import type { SqlClient } from "@effect/sql"
import { Context, type Effect, Layer, type Stream } from "effect"
import type { SubstratPaths } from "../config/Paths.js"
import type { EventLogError } from "../domain/errors.js"
import type { LogEntry, LogEvent } from "../domain/events.js"
import type { SessionId } from "../domain/ids.js"
import type { Durable } from "./Durable.js"
import { type EventLogFileOptions, make as makeFile } from "./internal/eventLogFile.js"
import { makeMemory } from "./internal/eventLogMemory.js"
import { makeSql } from "./internal/eventLogSql.js"

/** What open/recover did to a log: bytes cut from a torn tail, whether a pending entry was replayed. */
export interface RepairReport {
  readonly session_id: SessionId
  readonly truncatedBytes: number
  readonly pendingReplayed: boolean
  readonly pendingDiscarded: boolean
}

export interface EventLogService {
  /**
   * Append one event to the session's log, injecting `ts` and `session_id`. Succeeds only once
   * the entry is durable. Appends to one session are ordered; different sessions never wait on
   * each other's fsync. Opens (and repairs) the log on first use. `after`, when given, runs once
   * the entry is durable and before the next append to the session starts (uninterruptibly, under
   * the session's lock): a decorator's per-append work is ordered without a lock of its own.
   */
  readonly append: (
    session: SessionId,
    event: LogEvent,
    after?: (entry: LogEntry) => Effect.Effect<void>
  ) => Effect.Effect<LogEntry, EventLogError>
  /**
   * Append several events to the session's log in one durable step (the file layer: one pending
   * write + fsync, one log write + fsync; Postgres: one INSERT). All or nothing: after a crash
   * the log holds every entry of the batch or none of them, never a part. Succeeds once all are
   * durable, with the entries in order (one `ts` for all). A value that does not encode fails the
   * whole batch before anything is written. `after` runs as `append`'s does, once, with all of
   * them. An empty batch writes nothing.
   */
  readonly appendAll: (
    session: SessionId,
    events: ReadonlyArray<LogEvent>,
    after?: (entries: ReadonlyArray<LogEntry>) => Effect.Effect<void>
  ) => Effect.Effect<ReadonlyArray<LogEntry>, EventLogError>
  /** The whole log, decoded, in order. An undecodable line fails with file and line. */
  readonly read: (session: SessionId) => Stream.Stream<LogEntry, EventLogError>
  /**
   * `read` of each of `sessions`, one after another in the order given (an entry's `session_id`
   * says whose): Postgres reads them in a few queries rather than one each.
   */
  readonly readMany: (sessions: ReadonlyArray<SessionId>) => Stream.Stream<LogEntry, EventLogError>
  /**
   * The whole log, then `f` of it, while no append to the session runs (the session's one lock,
   * the same that orders its appends and their `after`). For decorators that keep per-line state.
   */
  readonly readThen: <A>(
    session: SessionId,
    f: (entries: ReadonlyArray<LogEntry>) => Effect.Effect<A>
  ) => Effect.Effect<A, EventLogError>
  /** Repair a log in place (torn tail, pending replay); idempotent. */
  readonly repair: (session: SessionId) => Effect.Effect<RepairReport, EventLogError>
  /** Release the session's open file handle (it reopens, and repairs, on the next append). */
  readonly close: (session: SessionId) => Effect.Effect<void>
  /** Close and delete the session's log files. */
  readonly remove: (session: SessionId) => Effect.Effect<void, EventLogError>
}

export class EventLog extends Context.Tag("substrat/EventLog")<EventLog, EventLogService>() {
  /**
   * `agents/<sid>/events.jsonl` under $SUBSTRAT_HOME; open handles are released with the layer's
   * scope, and a session's after 2 s without an append (it reopens on the next one).
   */
  static readonly layerFile: Layer.Layer<EventLog, never, Durable | SubstratPaths> = Layer.scoped(EventLog, makeFile())
  /** `layerFile` with its own idle-close delay (0: handles stay open until `close`). */
  static readonly layerFileWith = (options: EventLogFileOptions): Layer.Layer<EventLog, never, Durable | SubstratPaths> =>
    Layer.scoped(EventLog, makeFile(options))
  /** In Postgres (cluster mode), same contract; creates its table when it starts. */
  static readonly layerSql: Layer.Layer<EventLog, EventLogError, SqlClient.SqlClient> = Layer.effect(EventLog, makeSql)
  /** In memory, same contract, no durability (embedders' tests, pure orchestration tests). */
  static readonly layerMemory: Layer.Layer<EventLog> = Layer.effect(EventLog, makeMemory)
}

export { encodeEntryLine } from "./internal/eventLine.js"
export { repairedView } from "./internal/eventLogFile.js"
