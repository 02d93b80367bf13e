// Cluster mode's admission of a runner (docs/cluster.md), checked before anything of the daemon
// starts. The engine keys its runners by address (`cluster_runners`, one row per host:port) and
// would let a second runner with the address of a live one overwrite it; it knows nothing of
// Substrat's versions. So each runner records itself in `substrat_runners(address, runner_id,
// version, host, home)` — its id is kept in `$SUBSTRAT_HOME/runner.id`, so a restarted runner is
// the same runner — and a runner is refused when a live runner (the engine's heartbeat younger
// than the lease) has its address but another id, or runs another Substrat version. A runner that
// starts is not draining (`cluster drain` lasts until `cluster undrain` or a restart).
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { SqlClient, type SqlError } from "@effect/sql"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { hostname } from "node:os"
import { join } from "node:path"
import { ensureSchema, sqlMessage } from "../storage/internal/sqlSchema.js"

export interface Joining {
  /** host:port, as the engine records it. */
  readonly address: string
  readonly leaseMs: number
  readonly home: string
  readonly version: string
}

/** This home's runner id (made on first use). */
const runnerId = (home: string): Effect.Effect<string, string> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = join(home, "runner.id")
    if (yield* fs.exists(file)) return (yield* fs.readFileString(file)).trim()
    yield* fs.makeDirectory(home, { recursive: true, mode: 0o700 })
    const id = randomUUID()
    yield* fs.writeFileString(file, `${id}\n`, { mode: 0o600 })
    return id
  }).pipe(
    Effect.provide(NodeFileSystem.layer),
    Effect.mapError((e) => `cannot keep the runner id in ${home}: ${e.message}`)
  )

interface LiveRunner {
  readonly address: string
  readonly age_ms: number
  readonly runner_id: string | null
  readonly version: string | null
  readonly host: string | null
  readonly home: string | null
}

/** Why this runner may not join (one line), or nothing; then it is recorded as this home's runner. */
export const admit = (j: Joining): Effect.Effect<void, string, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const id = yield* runnerId(j.home)
    const fail = (e: SqlError.SqlError) => `cluster storage (Postgres): ${sqlMessage(e)}`
    yield* Effect.mapError(ensureSchema, fail)
    // The engine creates its table when its first runner starts: none yet, no runner is live.
    const engine = yield* Effect.mapError(sql<{ t: string | null }>`SELECT to_regclass('cluster_runners')::text AS t`, fail)
    const live: ReadonlyArray<LiveRunner> = engine[0]?.t == null ? [] : yield* Effect.mapError(
      sql<LiveRunner>`SELECT c.address, (EXTRACT(EPOCH FROM (NOW() - c.last_heartbeat)) * 1000)::int AS age_ms,
          s.runner_id, s.version, s.host, s.home
        FROM cluster_runners c LEFT JOIN substrat_runners s ON s.address = c.address
        WHERE c.last_heartbeat > NOW() - (${j.leaseMs} * interval '1 millisecond')
        ORDER BY c.address`,
      fail
    )
    const same = live.find((r) => r.address === j.address && r.runner_id !== id)
    if (same !== undefined) {
      const who = same.host === null ? "another runner" : `the runner of ${same.host}:${same.home}`
      return yield* Effect.fail(
        `${who} is registered at ${j.address} and was alive ${(same.age_ms / 1000).toFixed(1)} s ago: ` +
          `two runners cannot share an address (give this one its own --listen, or wait for the lease of ${j.leaseMs} ms if that runner is gone)`
      )
    }
    const other = live.find((r) => r.address !== j.address && r.version !== j.version)
    if (other !== undefined) {
      return yield* Effect.fail(
        `runner ${other.address} runs Substrat ${other.version ?? "of an unknown version (it records none)"}, this one is ${j.version}: ` +
          `every runner of a cluster runs the same version (stop the others, upgrade, start them again)`
      )
    }
    yield* Effect.mapError(
      sql`INSERT INTO substrat_runners (address, runner_id, version, host, home)
          VALUES (${j.address}, ${id}, ${j.version}, ${hostname()}, ${j.home})
          ON CONFLICT (address) DO UPDATE SET runner_id = EXCLUDED.runner_id, version = EXCLUDED.version,
            host = EXCLUDED.host, home = EXCLUDED.home, draining = false`,
      fail
    )
  })
