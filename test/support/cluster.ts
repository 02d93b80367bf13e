// The cluster test harness (docs/cluster.md): one throwaway Postgres for the file, the runners it
// starts (ended after its last test), a short lease in the environment the runners inherit (restored
// after), raw SQL on the cluster's database, and what the tests read there (where a tree is, the
// USER messages in an agent's log with their answers, turn starts). Daemon output goes to each
// home's daemon.log.
import { SqlClient } from "@effect/sql"
import { afterAll } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import * as Postgres from "../../src/storage/Postgres.js"
import { type Agent, cliJson, daemons, rpcOnce, startDaemon, waitFor } from "../integration/daemon.support.js"
import { postgresPerFile } from "./postgres.js"
import { makeTmpDir, removeDir } from "./tmp.js"

/** The lease the cluster tests give their runners: a kill -9 is seen in seconds (the default is 20 s). */
export const LEASE_MS = "3000"

/** `cluster status --json`. */
export interface ClusterStatus {
  readonly self: string | null
  readonly shards: number
  readonly held: number
  readonly trees: number
  readonly runners: ReadonlyArray<{
    readonly address: string
    readonly healthy: boolean
    readonly shards: number
    readonly self: boolean
    readonly trees: number
    readonly draining: boolean
    readonly version: string | null
  }>
}

/** What `cluster status --json` prints, asked over the admin socket: polls start no CLI process. */
export const statusOf = (home: string) => rpcOnce<ClusterStatus>(home, "cluster.status")

/** true once `call` succeeds (undefined, for `waitFor`, while it fails). */
export const succeeds = (call: Promise<unknown>): Promise<true | undefined> => call.then(() => true as const, () => undefined)

/** Rows of one SQL statement on the database at `url` (a connection of its own). */
export const query = (url: string, text: string) =>
  Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<Record<string, unknown>>(text)).pipe(
      Effect.provide(Postgres.layer({ url: Redacted.make(url), maxConnections: 1 }))
    )
  )

/**
 * Set up a cluster test file: its Postgres server, its daemons (`owned.track`), a temp directory,
 * and the environment (`SUBSTRAT_CLUSTER_LEASE_MS` = LEASE_MS plus `env(dir)`) the CLI and the runners it
 * starts inherit. After the file's last test the daemons are killed, the environment restored and
 * the directory removed.
 */
export const clusterFile = (prefix: string, env: (dir: string) => Readonly<Record<string, string>> = () => ({})) => {
  const pg = postgresPerFile()
  const owned = daemons()
  const dir = makeTmpDir(prefix)
  const set = { SUBSTRAT_CLUSTER_LEASE_MS: LEASE_MS, ...env(dir) }
  const saved = Object.fromEntries(Object.keys(set).map((k) => [k, process.env[k]]))
  Object.assign(process.env, set)
  afterAll(async () => {
    await owned.killAll()
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
    removeDir(dir)
  })
  return { pg, owned, dir }
}

/** Resolves once `home`'s runner sees `healthy` healthy runners and holds the lock of every shard it is assigned. */
export const waitRunnerReady = (home: string, healthy: number) =>
  waitFor(`${home}: ${healthy} runner(s) healthy, its shards held`, async () => {
    const st = await statusOf(home)
    return st.runners.filter((r) => r.healthy).length === healthy && st.held > 0 && st.held === st.runners.find((r) => r.self)?.shards
      ? st
      : undefined
  }, 60_000)

/** A runner daemon on `home` at 127.0.0.1:`port` (tracked by `owned`); its pid, once it is ready (waitRunnerReady). */
export const startRunner = async (
  owned: { readonly track: (pid: number) => unknown },
  home: string,
  url: string,
  port: number,
  healthy: number,
  extra: ReadonlyArray<string> = []
) => {
  const pid = await startDaemon(home, ["--cluster", url, "--listen", `127.0.0.1:${port}`, ...extra])
  owned.track(pid)
  await waitRunnerReady(home, healthy)
  return pid
}

/** The runner (`host:port`) `substrat_trees` records for a root; "undefined" when it has no row. */
export const runnerOf = async (url: string, root: string) =>
  String((await query(url, `SELECT runner FROM substrat_trees WHERE root_id = '${root}'`))[0]?.["runner"])

/** A `message.enqueued` entry as the tests read it from `substrat_events`. */
export interface Enqueued {
  readonly id?: string
  readonly kind?: string
  readonly sender?: string
  readonly recipient?: string
  readonly reply_to?: string | null
  readonly payload?: string
}

/** The `message.enqueued` entries of a session's log, in order. */
export const enqueued = async (url: string, session: string): Promise<ReadonlyArray<Enqueued>> =>
  (await query(url, `SELECT line FROM substrat_events WHERE session_id = '${session}' ORDER BY seq`))
    .map((r) => JSON.parse(String(r["line"])) as { event: string; data: Enqueued })
    .filter((l) => l.event === "message.enqueued")
    .map((l) => l.data)

/** USER's messages with this text in the session's log, and how many answers (to USER, replying to it) each has. */
export const userMessages = async (url: string, session: string, text: string) => {
  const lines = await enqueued(url, session)
  return lines.filter((l) => l.sender === "USER" && l.payload === text)
    .map((l) => ({ id: l.id, answers: lines.filter((r) => r.recipient === "USER" && r.reply_to === l.id).length }))
}

/** How many turns the session's log has started. */
export const turnStarts = async (url: string, session: string) =>
  Number((await query(url, `SELECT count(*)::int AS n FROM substrat_events WHERE session_id = '${session}' AND line LIKE '%"event":"turn.start"%'`))[0]?.["n"])

/** Resolves once the session's log has at least `n` turn starts. */
export const waitTurnStarted = (url: string, session: string, n = 1, what = `turn ${n} of ${session} started`) =>
  waitFor(what, async () => (await turnStarts(url, session)) >= n ? true : undefined, 60_000)

/**
 * Roots created through `home` (`agent create --name <prefix><i> …args`) until the engine places
 * one on `runner` (each lands there with p = 1/runners); that one. The others stay where they are.
 */
export const createOn = async (url: string, home: string, runner: string, prefix: string, args: ReadonlyArray<string>) => {
  for (let i = 0; i < 24; i++) {
    const created = await cliJson<Agent>(home, ["agent", "create", "--name", `${prefix}${i}`, ...args])
    if (await runnerOf(url, created.id) === runner) return created
  }
  throw new Error(`24 roots made through ${home}, none placed on ${runner}`)
}
