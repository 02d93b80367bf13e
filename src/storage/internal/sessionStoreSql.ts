// Postgres implementation of the SessionStore port (`SessionStore.layerSql`, ../SessionStore.ts)
// for cluster mode: one row per session in `substrat_sessions` (internal/sqlSchema.ts) holding
// the same JSON text as the file layer's session.json. A save is one upsert, whole or not at all.
// The rows are shared by every runner of the cluster, so nothing is cached here: every call reads
// what Postgres has. A lost connection fails with a typed error (reason "io").
import { SqlClient, type SqlError } from "@effect/sql"
import { Array as Arr, Clock, Effect, Either, Schema } from "effect"
import { SessionStoreError } from "../../domain/errors.js"
import type { SessionId } from "../../domain/ids.js"
import { Session, transition } from "../../domain/session.js"
import type { SessionStoreService } from "../SessionStore.js"
import { parseRecord } from "./sessionStoreFile.js"
import { ensureSchema, sqlMessage } from "./sqlSchema.js"

const encodeRecord = Schema.encode(Schema.parseJson(Session))
const utf8 = new TextEncoder()
const where = (id: string) => `postgres:substrat_sessions/${id}`

export const makeSql = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const ioError = (session_id: string) => (e: SqlError.SqlError) =>
    new SessionStoreError({ reason: "io", fault: "io", session_id, message: sqlMessage(e) })
  yield* ensureSchema.pipe(Effect.mapError(ioError("")))

  const decodeRow = (row: { id: string; record: string }) =>
    Either.match(parseRecord(row.id, where(row.id), utf8.encode(row.record)), {
      onLeft: (e) => Effect.fail(e),
      onRight: (s) => Effect.succeed(s)
    })

  const save = Effect.fn("SessionStore.save")(function*(session: Session) {
    const json = yield* encodeRecord(session).pipe(
      Effect.mapError((e) => new SessionStoreError({ reason: "decode", session_id: session.id, message: e.message }))
    )
    yield* sql`INSERT INTO substrat_sessions (id, record) VALUES (${session.id}, ${json})
      ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record`.pipe(Effect.mapError(ioError(session.id)))
  })

  const load = Effect.fn("SessionStore.load")(function*(id: SessionId) {
    const rows = yield* sql<{ id: string; record: string }>`SELECT id, record FROM substrat_sessions WHERE id = ${id}`.pipe(
      Effect.mapError(ioError(id))
    )
    const row = rows[0]
    if (row === undefined) return yield* new SessionStoreError({ reason: "not-found", session_id: id, message: `no session ${id}` })
    return yield* decodeRow(row)
  })

  // A thousand ids a query; the records in the order of `ids`.
  const loadMany = (ids: ReadonlyArray<SessionId>) =>
    Effect.map(
      Effect.forEach(Arr.chunksOf(ids, 1000), (group) =>
        sql<{ id: string; record: string }>`SELECT id, record FROM substrat_sessions WHERE id IN ${sql.in(group)}`.pipe(
          Effect.mapError(ioError(group[0]!)),
          Effect.flatMap((rows) => Effect.forEach(rows, decodeRow))
        )),
      (groups) => {
        const found = new Map(groups.flat().map((s) => [s.id, s]))
        return ids.flatMap((id) => found.get(id) ?? [])
      }
    ).pipe(Effect.withSpan("SessionStore.loadMany"))

  const scan: Effect.Effect<ReadonlyArray<Session>, SessionStoreError> = sql<{ id: string; record: string }>`
    SELECT id, record FROM substrat_sessions ORDER BY id COLLATE "C"`.pipe(
    Effect.mapError(ioError("")),
    Effect.flatMap((rows) => Effect.forEach(rows, decodeRow)),
    Effect.withSpan("SessionStore.scan")
  )

  const count = sql<{ n: string }>`SELECT count(*)::text AS n FROM substrat_sessions`.pipe(
    Effect.mapError(ioError("")),
    Effect.map((rows) => Number(rows[0]?.n ?? 0))
  )

  const del = (id: SessionId) =>
    sql`DELETE FROM substrat_sessions WHERE id = ${id}`.pipe(Effect.mapError(ioError(id)), Effect.asVoid)

  // ACTIVE → SUSPENDED in one transaction: the records change all together or not at all.
  const recover = sql.withTransaction(Effect.gen(function*() {
    const now = new Date(yield* Clock.currentTimeMillis).toISOString()
    const all = yield* scan
    const out: Array<Session> = []
    for (const s of all) {
      if (s.state !== "active") {
        out.push(s)
        continue
      }
      const suspended = yield* transition(s, "suspended", now).pipe(
        Effect.mapError((e) => new SessionStoreError({ reason: "decode", session_id: s.id, message: e.message }))
      )
      yield* save(suspended)
      out.push(suspended)
    }
    return out as ReadonlyArray<Session>
  })).pipe(
    Effect.catchTag("SqlError", (e) => Effect.fail(ioError("")(e))),
    Effect.withSpan("SessionStore.recover")
  )

  const service: SessionStoreService = { save, load, loadMany, scan, count, delete: del, recover }
  return service
})
