// Cluster mode (docs/cluster.md "Handover and drain"): whether a runner is still connected to
// Postgres. The engine's heartbeat (`cluster_runners.last_heartbeat`) only says a runner is late:
// a runner on a loaded machine, or paused (a long GC, a stopped VM), misses it for longer than the
// lease and then goes on running turns and logging answers. So each runner also holds, on a
// connection of its own for as long as it runs, a session-level advisory lock keyed by its
// address; Postgres releases it when that connection closes (the process died, or Postgres sees
// its machine gone), as it does the engine's shard locks. A tree recorded on another runner is
// taken over only when that runner is both late and no longer holds its lock
// (ClusterTrees.layerTakeover): a late runner that still holds it may still be running the tree.
import { SqlClient, type SqlError } from "@effect/sql"
import { Context, Effect, Layer, Schedule } from "effect"

/** The first key of the runners' advisory locks (the second is `hashtext(address)`): apart from the engine's one-key shard locks. */
export const LOCK_SPACE = 1398096467

export class RunnerPresence extends Context.Tag("substrat/daemon/RunnerPresence")<RunnerPresence, {
  /** Of `runners` (host:port), those still connected to Postgres (holding their lock). */
  readonly connected: (runners: ReadonlyArray<string>) => Effect.Effect<ReadonlySet<string>, SqlError.SqlError>
}>() {}

/**
 * RunnerPresence on the runner's Postgres client; this runner (`self`) holds its own lock from
 * now on, taken again on a new connection whenever its connection is lost (Postgres restarted).
 */
export const layer = (self: string): Layer.Layer<RunnerPresence, never, SqlClient.SqlClient> =>
  Layer.scoped(RunnerPresence, Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // Held on a reserved connection: taken, then a query every second keeps watch on it (it fails
    // once the connection is gone, and the lock with it). Released before the connection goes
    // back to the pool, so that no pooled connection keeps it.
    const hold = Effect.scoped(Effect.gen(function*() {
      const conn = yield* sql.reserve
      const [row] = yield* conn.execute("SELECT pg_try_advisory_lock($1, hashtext($2)) AS held", [LOCK_SPACE, self], undefined)
      if (row?.held !== true) return yield* Effect.fail("held by another connection (this runner's previous process, not yet gone)")
      yield* Effect.addFinalizer(() => Effect.ignore(conn.execute("SELECT pg_advisory_unlock($1, hashtext($2))", [LOCK_SPACE, self], undefined)))
      return yield* Effect.forever(Effect.zipRight(Effect.sleep("1 second"), conn.execute("SELECT 1", [], undefined)))
    }))
    yield* Effect.forkScoped(Effect.retry(hold, Schedule.spaced("250 millis")))
    // Free (taken and let go of in one statement): its holder's connection is gone.
    const connected = (runners: ReadonlyArray<string>) =>
      Effect.map(
        Effect.forEach([...new Set(runners)], (r) =>
          Effect.map(
            sql<{ free: boolean }>`SELECT pg_try_advisory_xact_lock(${LOCK_SPACE}, hashtext(${r})) AS free`,
            (rows) => [r, rows[0]?.free === true] as const
          )),
        (checked) => new Set(checked.flatMap(([r, free]) => free ? [] : [r]))
      )
    return RunnerPresence.of({ connected })
  }))
