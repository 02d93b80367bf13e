// Postgres implementation of the EventLog port (`EventLog.layerSql`, ../EventLog.ts) for cluster
// mode. One row per entry in `substrat_events` (internal/sqlSchema.ts), the line text exactly as
// the file layer encodes it. An append is one INSERT that numbers the entry after the session's
// last; it is acknowledged once Postgres has committed it (synchronous_commit, the server's
// default), so an acknowledged entry survives a crash of the daemon or of the server. A lost
// connection fails the append with a typed error (reason "io"); as with a crash of the file layer,
// that one unacknowledged entry may or may not be in the log. Appends to one session are ordered
// by a per-session lock in this process; sessions of one tree live on one runner (cluster mode's
// placement), so no other process appends to them. Nothing is ever torn: `repair` has nothing to do.
// `appendAll` is one INSERT of all its rows (one commit: all of them or none).
import { SqlClient, type SqlError } from "@effect/sql"
import { Array as Arr, Chunk, Clock, Effect, Either, Option, Schema, Stream } from "effect"
import { EventLogError } from "../../domain/errors.js"
import { LogEntry, type LogEvent } from "../../domain/events.js"
import { SessionId } from "../../domain/ids.js"
import type { EventLogService } from "../EventLog.js"
import { encodeEntryLine } from "./eventLine.js"
import { ensureSchema, sqlMessage } from "./sqlSchema.js"

/** Rows fetched per page when a log is read. */
const PAGE = 500

/** Sessions whose logs `readMany` reads together (their rows in pages of PAGE). */
const GROUP = 100

const decodeEntry = Schema.decodeUnknownEither(Schema.parseJson(LogEntry))

const where = (session: SessionId) => `postgres:substrat_events/${session}`

export const makeSql = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* ensureSchema.pipe(
    Effect.mapError((e) => new EventLogError({ reason: "io", fault: "io", file: "postgres:substrat_events", message: sqlMessage(e) }))
  )
  const ioError = (session: SessionId) => (e: SqlError.SqlError) =>
    new EventLogError({ reason: "io", fault: "io", file: where(session), message: sqlMessage(e) })
  const locks = new Map<SessionId, Effect.Semaphore>()
  const lockOf = (session: SessionId): Effect.Semaphore => {
    let lock = locks.get(session)
    if (lock === undefined) {
      lock = Effect.unsafeMakeSemaphore(1)
      locks.set(session, lock)
    }
    return lock
  }

  const append = Effect.fn("EventLog.append")(function*(
    session: SessionId,
    event: LogEvent,
    after?: (entry: LogEntry) => Effect.Effect<void>
  ) {
    const ts = new Date(yield* Clock.currentTimeMillis).toISOString()
    const line = encodeEntryLine(event, ts, session)
    if (Either.isLeft(line)) {
      return yield* new EventLogError({ reason: "encode", file: where(session), message: line.left })
    }
    const text = line.right.slice(0, -1)
    const entry = { ...event, ts, session_id: session } as LogEntry
    // Once the INSERT is sent it runs to its answer (and `after` with it): an interrupted caller
    // does not leave the entry's fate unknown to the next append.
    yield* lockOf(session).withPermits(1)(
      Effect.uninterruptible(
        sql`INSERT INTO substrat_events (session_id, seq, line)
            SELECT ${session}, COALESCE(MAX(seq), 0) + 1, ${text} FROM substrat_events WHERE session_id = ${session}`.pipe(
          Effect.mapError(ioError(session)),
          Effect.zipRight(after === undefined ? Effect.void : after(entry))
        )
      )
    )
    return entry
  })

  // One INSERT of every row: Postgres commits the statement whole or not at all.
  const appendAll = Effect.fn("EventLog.appendAll")(function*(
    session: SessionId,
    events: ReadonlyArray<LogEvent>,
    after?: (entries: ReadonlyArray<LogEntry>) => Effect.Effect<void>
  ) {
    if (events.length === 0) return []
    const ts = new Date(yield* Clock.currentTimeMillis).toISOString()
    const rows = []
    for (const [i, event] of events.entries()) {
      const line = encodeEntryLine(event, ts, session)
      if (Either.isLeft(line)) {
        return yield* new EventLogError({ reason: "encode", file: where(session), message: line.left })
      }
      rows.push(sql`(${i + 1}::bigint, ${line.right.slice(0, -1)}::text)`)
    }
    const entries = events.map((event) => ({ ...event, ts, session_id: session }) as LogEntry)
    yield* lockOf(session).withPermits(1)(
      Effect.uninterruptible(
        sql`INSERT INTO substrat_events (session_id, seq, line)
            SELECT ${session}, m.base + v.ord, v.line
            FROM (SELECT COALESCE(MAX(seq), 0) AS base FROM substrat_events WHERE session_id = ${session}) AS m,
                 (VALUES ${sql.csv(rows)}) AS v(ord, line)`.pipe(
          Effect.mapError(ioError(session)),
          Effect.zipRight(after === undefined ? Effect.void : after(entries))
        )
      )
    )
    return entries
  })

  // Rows of `session`'s log (or of the session each row names) decoded, in order; the first that does not decode fails.
  const decodeRows = (rows: ReadonlyArray<{ readonly s?: string; readonly n: string; readonly line: string }>, session: SessionId) =>
    Effect.suspend(() => {
      const out: Array<LogEntry> = []
      for (const row of rows) {
        const decoded = decodeEntry(row.line)
        if (Either.isLeft(decoded)) {
          const n = Number(row.n)
          const file = where(row.s === undefined ? session : SessionId.make(row.s))
          return Effect.fail(new EventLogError({ reason: "decode", file, line: n, message: `${file}:${n}: ${decoded.left.message}` }))
        }
        out.push(decoded.right)
      }
      return Effect.succeed(out)
    })

  const read = (session: SessionId): Stream.Stream<LogEntry, EventLogError> =>
    Stream.paginateChunkEffect(0, (after: number) =>
      sql<{ n: string; line: string }>`SELECT seq::text AS n, line FROM substrat_events
        WHERE session_id = ${session} AND seq > ${after} ORDER BY seq LIMIT ${PAGE}`.pipe(
        Effect.mapError(ioError(session)),
        Effect.flatMap((rows) =>
          Effect.map(decodeRows(rows, session), (out) => {
            const last = rows[rows.length - 1]
            const next = rows.length < PAGE || last === undefined ? Option.none<number>() : Option.some(Number(last.n))
            return [Chunk.unsafeFromArray(out), next] as const
          })
        )
      )
    )

  // A group of sessions' logs in pages of rows ordered by (session, seq), then in the group's order.
  const readGroup = (group: ReadonlyArray<SessionId>) =>
    Effect.gen(function*() {
      const logs = new Map(group.map((s) => [s, [] as Array<LogEntry>]))
      let after: readonly [string, string] = ["", "0"]
      for (;;) {
        const rows = yield* sql<{ s: string; n: string; line: string }>`SELECT session_id AS s, seq::text AS n, line FROM substrat_events
          WHERE session_id IN ${sql.in(group)} AND (session_id, seq) > (${after[0]}, ${after[1]}::bigint)
          ORDER BY session_id, seq LIMIT ${PAGE}`.pipe(Effect.mapError(ioError(group[0]!)))
        const entries = yield* decodeRows(rows, group[0]!)
        entries.forEach((e, i) => logs.get(SessionId.make(rows[i]!.s))?.push(e))
        const last = rows[rows.length - 1]
        if (rows.length < PAGE || last === undefined) return group.flatMap((s) => logs.get(s) ?? [])
        after = [last.s, last.n]
      }
    })

  const readMany = (sessions: ReadonlyArray<SessionId>): Stream.Stream<LogEntry, EventLogError> =>
    Stream.flatMap(Stream.fromIterable(Arr.chunksOf(sessions, GROUP)), (group) =>
      Stream.flatMap(Stream.fromEffect(readGroup(group)), (entries) => Stream.fromIterable(entries)))

  const readThen = <A>(session: SessionId, f: (entries: ReadonlyArray<LogEntry>) => Effect.Effect<A>) =>
    lockOf(session).withPermits(1)(
      Effect.flatMap(Stream.runCollect(read(session)), (entries) => Effect.uninterruptible(f(Chunk.toReadonlyArray(entries))))
    )

  const service: EventLogService = {
    append,
    appendAll,
    read,
    readMany,
    readThen,
    repair: (session) =>
      Effect.succeed({ session_id: session, truncatedBytes: 0, pendingReplayed: false, pendingDiscarded: false }),
    close: () => Effect.void,
    remove: (session) =>
      lockOf(session).withPermits(1)(sql`DELETE FROM substrat_events WHERE session_id = ${session}`).pipe(
        Effect.mapError(ioError(session)),
        Effect.asVoid
      )
  }
  return service
})
