// The Postgres tables of cluster mode's storage layers (EventLog.layerSql, SessionStore.layerSql),
// created when a layer starts. Several runners may start at once against an empty database:
// the creation runs in one transaction under a transaction-scoped advisory lock, so they queue.
//   substrat_events(session_id, seq, line)  one row per log entry; `line` is exactly the JSON line
//                                           the file layer writes (without its newline); seq 1, 2, …;
//                                           its `agent.created` entries indexed by their parent
//                                           session (a takeover walks its trees down from the roots)
//   substrat_sessions(id, record)           one row per session record; `record` is session.json's text
//   substrat_trees(root_id, name, runner)   cluster mode's trees (daemon/ClusterTrees.ts): one row per
//                                           live root, its unique name and the runner it was last on
//   substrat_sends(message_id)              cluster mode: the ids of the `send`s that reached a tree's
//                                           owner through the engine (each is logged once)
//   substrat_runners(address, runner_id,     cluster mode: each runner's id (its home's runner.id),
//     version, host, home, draining)        Substrat version, machine and home (daemon/ClusterJoin.ts),
//                                           and whether it is draining (`cluster drain`, daemon/Cluster.ts)
//   substrat_workspaces(id, top_id,         cluster mode: each carried workspace's spec and the commit of
//     tree_root, spec, commit)              its family's last turn pushed to cluster.workspace_remote
//   substrat_provider_state(session_id,     cluster mode: each agent's packed provider state (its
//     tree_root, turn_id, state)            cli-resume.json and sandbox home) after its last turn
//                                           (both: daemon/ClusterCarry.ts)
import { SqlClient, type SqlError } from "@effect/sql"
import { Effect } from "effect"

/** pg_advisory_xact_lock key of the schema creation ("sbst" in ASCII). */
const SCHEMA_LOCK = 0x73627374

export const ensureSchema: Effect.Effect<void, SqlError.SqlError, SqlClient.SqlClient> = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.withTransaction(Effect.gen(function*() {
    yield* sql`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK})`
    yield* sql`CREATE TABLE IF NOT EXISTS substrat_events (
      session_id text NOT NULL,
      seq bigint NOT NULL,
      line text NOT NULL,
      PRIMARY KEY (session_id, seq)
    )`
    // Each log's `agent.created` entry by its parent's session (a root's: none): a takeover finds its
    // trees' sessions from their roots down (daemon/ClusterTrees.ts), not by reading every entry.
    yield* sql`DROP INDEX IF EXISTS substrat_events_created`
    yield* sql`CREATE INDEX IF NOT EXISTS substrat_events_parent ON substrat_events (((line::json)->'data'->>'parent_session_id'))
      WHERE line LIKE '{"event":"agent.created",%'`
    yield* sql`CREATE TABLE IF NOT EXISTS substrat_sessions (
      id text PRIMARY KEY,
      record text NOT NULL
    )`
    yield* sql`CREATE TABLE IF NOT EXISTS substrat_trees (
      root_id text PRIMARY KEY,
      name text NOT NULL UNIQUE,
      runner text NOT NULL
    )`
    yield* sql`CREATE TABLE IF NOT EXISTS substrat_runners (
      address text PRIMARY KEY,
      runner_id text NOT NULL,
      version text NOT NULL,
      host text NOT NULL,
      home text NOT NULL
    )`
    yield* sql`ALTER TABLE substrat_runners ADD COLUMN IF NOT EXISTS draining boolean NOT NULL DEFAULT false`
    yield* sql`CREATE TABLE IF NOT EXISTS substrat_sends (
      message_id text PRIMARY KEY
    )`
    yield* sql`CREATE TABLE IF NOT EXISTS substrat_workspaces (
      id text PRIMARY KEY,
      top_id text NOT NULL,
      tree_root text NOT NULL,
      spec text NOT NULL,
      commit text NOT NULL
    )`
    yield* sql`CREATE TABLE IF NOT EXISTS substrat_provider_state (
      session_id text PRIMARY KEY,
      tree_root text NOT NULL,
      turn_id text NOT NULL,
      state text NOT NULL
    )`
  }))
})

/** A SqlError's message with its cause's (the driver's) message. */
export const sqlMessage = (e: SqlError.SqlError): string => {
  const cause = e.cause instanceof Error ? e.cause.message : e.cause === undefined ? "" : String(e.cause)
  return cause === "" || cause === e.message ? e.message : `${e.message}: ${cause}`
}
