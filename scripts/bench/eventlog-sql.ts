// EventLog.layerSql (Postgres) vs EventLog.layerFile, appends per second in one run on the same
// machine: one session appending in sequence, and 64 sessions appending concurrently (total).
// The two layers alternate in blocks (file, sql, sql, file, …) so load from other processes hits
// both alike. Postgres is a throwaway server (test/support/postgres.ts: initdb in a temp dir,
// fsync=on, synchronous_commit on — an append is acknowledged once its commit is on disk). The
// entry encodes to the same ~200-byte line on both. Needs initdb/postgres (Debian: postgresql).
// Beside them, SQLite in WAL mode with synchronous=FULL (eventlog.ts's row, through the sqlite3
// tool; left out when it is not installed): one-row transactions of a 200-byte line in sequence.
// SQLite has one writer, so 64 sessions would queue on the same commits; only the sequence is run.
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import * as fs from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { SubstratPaths } from "../../src/config/Paths.js"
import { makeEvent } from "../../src/domain/events.js"
import { newSessionId, newTurnId, type SessionId } from "../../src/domain/ids.js"
import { Durable } from "../../src/storage/Durable.js"
import { EventLog } from "../../src/storage/EventLog.js"
import * as Postgres from "../../src/storage/Postgres.js"
import { freshDatabase, startPostgres } from "../../test/support/pg-server.js"
import { sqliteFull } from "./eventlog.js"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "eventlog-sql"

const event = makeEvent("turn.start", { turn_id: newTurnId(), prompt: "x".repeat(60) })

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const dir = fs.mkdtempSync(join(tmpdir(), "substrat-bench-eventlog-sql-"))
  const pg = await startPostgres()
  const rounds = opts.quick ? 2 : 6
  const seqN = opts.quick ? 50 : 300
  const perSession = opts.quick ? 5 : 20
  const sessions = 64
  try {
    const url = await freshDatabase(pg)
    const file = ManagedRuntime.make(
      EventLog.layerFileWith({ idleCloseMs: 0 }).pipe(
        Layer.provide(Layer.merge(Durable.layer, SubstratPaths.layer(join(dir, "home"))))
      )
    )
    const sql = ManagedRuntime.make(
      EventLog.layerSql.pipe(Layer.provide(Postgres.layer({ url: Redacted.make(url), maxConnections: 16, connectTimeout: "60 seconds" })))
    )
    const layers = { file, sql } as const
    const one = (rt: typeof sql | typeof file, s: SessionId, n: number) =>
      rt.runPromise(Effect.flatMap(EventLog, (log) => Effect.repeatN(log.append(s, event), n - 1)))
    const many = (rt: typeof sql | typeof file, ids: ReadonlyArray<SessionId>, n: number) =>
      rt.runPromise(
        Effect.flatMap(EventLog, (log) =>
          Effect.forEach(ids, (s) => Effect.repeatN(log.append(s, event), n - 1), { concurrency: "unbounded", discard: true })
        )
      )
    const load1 = loadavg()[0]!
    const ms = { file: { one: 0, many: 0 }, sql: { one: 0, many: 0 } }
    for (const k of ["file", "sql"] as const) await one(layers[k], newSessionId(), 20) // warm-up
    for (let r = 0; r < rounds; r++) {
      for (const k of r % 2 === 0 ? (["file", "sql"] as const) : (["sql", "file"] as const)) {
        const s = newSessionId()
        let t0 = performance.now()
        await one(layers[k], s, seqN)
        ms[k].one += performance.now() - t0
        const ids = Array.from({ length: sessions }, () => newSessionId())
        t0 = performance.now()
        await many(layers[k], ids, perSession)
        ms[k].many += performance.now() - t0
      }
    }
    await file.dispose()
    await sql.dispose()
    const sqliteMs = sqliteFull(dir, rounds * seqN)
    const rate = (n: number, t: number) => Math.round((n * 1000) / t)
    const oneN = rounds * seqN
    const manyN = rounds * sessions * perSession
    const summary = {
      file_1_session_appends_per_s: rate(oneN, ms.file.one),
      sql_1_session_appends_per_s: rate(oneN, ms.sql.one),
      file_64_sessions_appends_per_s: rate(manyN, ms.file.many),
      sql_64_sessions_appends_per_s: rate(manyN, ms.sql.many),
      sql_over_file_1: Number((ms.file.one / ms.sql.one).toFixed(2)),
      sql_over_file_64: Number((ms.file.many / ms.sql.many).toFixed(2)),
      ...(sqliteMs === undefined ? {} : {
        sqlite_wal_full_1_session_appends_per_s: rate(rounds * seqN, sqliteMs),
        sql_over_sqlite_full_1: Number((sqliteMs / ms.sql.one).toFixed(2))
      }),
      load_1min_before: load1,
      load_1min_after: loadavg()[0]!
    }
    return {
      rows: [
        { layer: "file", sessions: 1, appends: oneN, appends_per_s: summary.file_1_session_appends_per_s },
        { layer: "sql", sessions: 1, appends: oneN, appends_per_s: summary.sql_1_session_appends_per_s },
        ...(sqliteMs === undefined ? [] : [{ layer: "sqlite WAL synchronous=FULL", sessions: 1, appends: oneN, appends_per_s: rate(oneN, sqliteMs) }]),
        { layer: "file", sessions: 64, appends: manyN, appends_per_s: summary.file_64_sessions_appends_per_s },
        { layer: "sql", sessions: 64, appends: manyN, appends_per_s: summary.sql_64_sessions_appends_per_s }
      ],
      summary
    }
  } finally {
    await pg.dispose()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
