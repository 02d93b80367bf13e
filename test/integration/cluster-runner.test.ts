// requires: postgres
// Cluster mode's runner (docs/cluster.md): `daemon start --cluster <url> --listen <host:port>`
// refuses a bad or unreachable Postgres with exit 2 and starts nothing; two runners on one
// Postgres both list each other in `cluster status`, keep their session records and event logs
// in Postgres, and after a `kill -9` of one the engine drops it and the survivor is assigned and
// takes every shard. One Postgres server for the file; daemon output goes to each home's daemon.log.
import { SqlClient } from "@effect/sql"
import { Effect, Redacted } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import * as Postgres from "../../src/storage/Postgres.js"
import { type Agent, cli, cliJson, daemons, kill9, startDaemon, waitFor } from "./daemon.support.js"
import { freePort, freshDatabase, postgresPerFile } from "../support/postgres.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

interface Status {
  readonly self: string | null
  readonly shards: number
  readonly held: number
  readonly runners: ReadonlyArray<{ readonly address: string; readonly healthy: boolean; readonly shards: number; readonly self: boolean }>
}

const pg = postgresPerFile()
const owned = daemons()
const dir = makeTmpDir("substrat-cluster-")
const savedLease = process.env["SUBSTRAT_CLUSTER_LEASE_MS"]
// A short lease keeps the kill -9 detection quick (the default is 20 s).
process.env["SUBSTRAT_CLUSTER_LEASE_MS"] = "3000"
afterAll(async () => {
  await owned.killAll()
  if (savedLease === undefined) delete process.env["SUBSTRAT_CLUSTER_LEASE_MS"]
  else process.env["SUBSTRAT_CLUSTER_LEASE_MS"] = savedLease
  removeDir(dir)
})

const query = (url: string, text: string) =>
  Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<Record<string, unknown>>(text)).pipe(
      Effect.provide(Postgres.layer({ url: Redacted.make(url), maxConnections: 1 }))
    )
  )

describe("cluster runner", () => {
  it("a bad or unreachable Postgres: exit 2 naming the URL (password hidden) and the cause; nothing started", async () => {
    const home = join(dir, "refused")
    const port = await freePort()
    const bad = await cli(home, ["daemon", "start", "--cluster", "mysql://db/x", "--listen", `127.0.0.1:${port}`])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain("postgres://")
    const closed = await freePort()
    const unreachable = await cli(home, ["daemon", "start", "--cluster", `postgres://u:hunter2@127.0.0.1:${closed}/db`, "--listen", `127.0.0.1:${port}`])
    expect(unreachable.code).toBe(2)
    expect(unreachable.stderr).toContain(`cannot connect to Postgres at postgres://u:***@127.0.0.1:${closed}/db`)
    expect(unreachable.stderr).not.toContain("hunter2")
    const noListen = await cli(home, ["daemon", "start", "--cluster", pg.server().url])
    expect(noListen.code).toBe(2)
    expect(noListen.stderr).toContain("--listen")
    expect(fs.existsSync(join(home, "daemon.sock"))).toBe(false)
    expect(fs.existsSync(join(home, "daemon.pid")) && fs.readFileSync(join(home, "daemon.pid"), "utf8").trim() !== "").toBe(false)
  }, 60_000)

  it("two runners on one Postgres list each other; records and logs are in Postgres; kill -9 of one: the survivor takes every shard", async () => {
    const url = await freshDatabase(pg.server())
    const [pa, pb] = [await freePort(), await freePort()]
    const [homeA, homeB] = [join(dir, "a"), join(dir, "b")]
    const a = await startDaemon(homeA, ["--cluster", url, "--listen", `127.0.0.1:${pa}`])
    owned.track(a)
    const b = await startDaemon(homeB, ["--cluster", url, "--listen", `127.0.0.1:${pb}`])
    owned.track(b)
    const both = [`127.0.0.1:${pa}`, `127.0.0.1:${pb}`].sort()

    for (const home of [homeA, homeB]) {
      const s = await waitFor(`both runners healthy in ${home}`, async () => {
        const s = await cliJson<Status>(home, ["cluster", "status"])
        return s.runners.filter((r) => r.healthy).length === 2 ? s : undefined
      }, 60_000)
      expect(s.runners.map((r) => r.address)).toEqual(both)
      expect(s.runners.reduce((n, r) => n + r.shards, 0)).toBe(s.shards)
      expect(s.runners.filter((r) => r.self).map((r) => r.address)).toEqual([s.self])
    }
    const human = await cli(homeB, ["cluster", "status"])
    expect(human.code).toBe(0)
    expect(human.stdout).toContain(`127.0.0.1:${pb} (this)`)

    // The daemon's storage is Postgres: the record and the log are rows, not files under the home.
    const agent = await cliJson<Agent>(homeA, ["agent", "create", "--name", "r", "--provider", "scripted"])
    const sessions = await query(url, `SELECT id FROM substrat_sessions`)
    expect(sessions.map((r) => r["id"])).toContain(agent.session_id)
    const events = await query(url, `SELECT count(*)::int AS n FROM substrat_events WHERE session_id = '${agent.session_id}'`)
    expect(Number(events[0]?.["n"])).toBeGreaterThan(0)
    expect(fs.existsSync(join(homeA, "agents", agent.session_id, "events.jsonl"))).toBe(false)

    await kill9(a)
    const after = await waitFor("runner A dropped and B holding every shard", async () => {
      const s = await cliJson<Status>(homeB, ["cluster", "status"])
      const gone = s.runners.every((r) => r.address !== `127.0.0.1:${pa}` || !r.healthy)
      return gone && s.held === s.shards ? s : undefined
    }, 90_000)
    expect(after.runners.filter((r) => r.healthy).map((r) => r.address)).toEqual([`127.0.0.1:${pb}`])
    expect(after.runners.find((r) => r.self)?.shards).toBe(after.shards)
  }, 240_000)
})
