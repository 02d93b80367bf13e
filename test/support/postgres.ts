// One throwaway Postgres server per vitest file (the server itself: ./pg-server.ts).
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll } from "@effect/vitest"
import { Duration, Effect, Layer, Redacted } from "effect"
import { EventLog } from "../../src/storage/EventLog.js"
import * as Postgres from "../../src/storage/Postgres.js"
import { SessionStore } from "../../src/storage/SessionStore.js"
import { freshDatabase, type PgServer, startPostgres } from "./pg-server.js"

export { freePort, freshDatabase, type PgServer, startPostgres } from "./pg-server.js"

/** A fresh database with its client and the Postgres storage layers over that client. */
export interface SqlStorage {
  readonly url: string
  readonly client: Layer.Layer<SqlClient.SqlClient, Postgres.PostgresUnreachable>
  readonly log: Layer.Layer<EventLog, import("../../src/domain/errors.js").EventLogError | Postgres.PostgresUnreachable>
  readonly store: Layer.Layer<SessionStore, import("../../src/domain/errors.js").SessionStoreError | Postgres.PostgresUnreachable>
}

/**
 * One server for the whole test file: started before its first test, disposed after its last.
 * `server()` is that server; `sqlStorage()` makes a fresh database on it and the storage layers.
 */
export const postgresPerFile = (): {
  readonly server: () => PgServer
  readonly sqlStorage: (options?: { readonly connectTimeout?: Duration.DurationInput }) => Effect.Effect<SqlStorage>
} => {
  let pg: PgServer | undefined
  beforeAll(async () => {
    pg = await startPostgres()
  }, 120_000)
  afterAll(async () => {
    await pg?.dispose()
  })
  const server = (): PgServer => {
    if (pg === undefined) throw new Error("the test file's Postgres server is not running")
    return pg
  }
  return {
    server,
    sqlStorage: (options) =>
      Effect.map(Effect.promise(() => freshDatabase(server())), (url) => {
        const client = Postgres.layer({ url: Redacted.make(url), ...options })
        return {
          url,
          client,
          log: EventLog.layerSql.pipe(Layer.provide(client)),
          store: SessionStore.layerSql.pipe(Layer.provide(client))
        }
      })
  }
}
