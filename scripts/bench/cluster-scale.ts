// Cluster mode at scale (docs/cluster.md): a throwaway Postgres (test/support/pg-server.ts) and 3
// runner daemons (the built bundle, real processes, each its own home, niced), started with
// `daemon start --cluster <url> --listen 127.0.0.1:<port>`. T trees of A scripted agents each are
// created through runner A's admin socket: a root (role `fanroot`, placed by the engine) whose
// first turn spawns its A-1 children with spawn_agent (the book `scripted:fan` in every home).
// Sizes: SUBSTRAT_BENCH_SCALE_TREES × SUBSTRAT_BENCH_SCALE_AGENTS (default 100 × 100; --quick
// 3 × 5). Then:
//   rss         each runner's VmRSS, and its trees and agents (Postgres' substrat_trees)
//   send→start  `agent.send` on runner A's admin socket to the root of a tree on runner B, until
//               that message's `turn.start` (its `ts`, read from substrat_events): p50/p99 over
//               50 sends (--quick 10), one at a time
//   re-homing   `kill -9` of runner C; until no substrat_trees row names C, and until every tree
//               that was C's has answered a message (`agent.send --wait` through A) from a survivor
// The lease (SUBSTRAT_CLUSTER_LEASE_MS, default here 5000; the daemon's own default is 20 s) bounds
// how soon the survivors notice; it is in the summary. The runners' spawn quota is off (a root
// spawns all its children in one turn).
// SUBSTRAT_BENCH_BEFORE=<another checkout, built> runs the same scenario with that checkout's
// runners first (its own database on the same Postgres), so before and after come from one run.
// SUBSTRAT_BENCH_PROFILE=<dir> keeps, per scenario, each runner's CPU profile (--cpu-prof; the
// survivors are stopped with SIGTERM at the end so theirs are written), its daemon.log, the
// Postgres log with every statement's duration from just before the kill on
// (log_min_duration_statement=0), and window.json: the kill, rows-moved and answered instants
// on the monotonic clock the profiles use (µs).
import { SqlClient } from "@effect/sql"
import { Effect, ManagedRuntime, Redacted } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Postgres from "../../src/storage/Postgres.js"
import { freePort, freshDatabase, type PgServer, startPostgres } from "../../test/support/pg-server.js"
import { connect } from "./scale.js"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "cluster-scale"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
const quantile = (xs: ReadonlyArray<number>, q: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!
}
const rssKb = (pid: number): number => {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
  return m ? Number(m[1]) : Number.NaN
}
const intEnv = (k: string, d: number): number => {
  const v = Number(process.env[k])
  return Number.isInteger(v) && v > 0 ? v : d
}

/** The book: a `fanroot` spawns c0…c(A-2); the children (by name) echo. */
const book = (agents: number): string => {
  const spawns = Array.from({ length: agents - 1 }, (_, j) => ({ tool: "spawn_agent", args: { name: `c${j}`, instructions: "You are a worker." } }))
  const b: Record<string, unknown> = { "role:fanroot": { steps: [{ tools: spawns, text: "spawned" }], after: "echo" }, "*": { steps: [{ text: "ready" }], after: "echo" } }
  for (let j = 0; j < agents - 1; j++) b[`c${j}`] = { steps: [{ text: "ready" }], after: "echo" }
  return JSON.stringify(b)
}

interface Runner {
  readonly label: string
  readonly home: string
  readonly address: string
  pid: number
}

type Conn = Awaited<ReturnType<typeof connect>>
type Query = (text: string) => Promise<ReadonlyArray<Record<string, unknown>>>

interface Sizes {
  readonly trees: number
  readonly agents: number
  readonly sends: number
  readonly lease: string
}

const exited = async (pid: number, ms: number): Promise<boolean> => {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(100)) {
    try {
      process.kill(pid, 0)
    } catch {
      return true
    }
  }
  return false
}

/** One whole run (3 runners of the checkout at `checkout`, a fresh database): its rows and figures. */
const scenario = async (
  label: string,
  checkout: string,
  pg: PgServer,
  sizes: Sizes,
  profile: string | undefined
): Promise<{ rows: Array<Record<string, string | number>>; summary: Record<string, number | string> }> => {
  const { trees, agents, sends, lease } = sizes
  const launcher = join(checkout, "scripts", "substrat.cjs")
  const dir = fs.mkdtempSync(join(tmpdir(), "substrat-bench-cluster-scale-"))
  const runners: Array<Runner> = []
  const conns: Array<Conn> = []
  const prof = profile === undefined ? undefined : join(profile, label)
  if (prof !== undefined) for (const name of ["a", "b", "c"]) fs.mkdirSync(join(prof, name), { recursive: true })
  let db: ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown> | undefined
  try {
    const url = await freshDatabase(pg)
    db = ManagedRuntime.make(Postgres.layer({ url: Redacted.make(url), maxConnections: 2 }))
    const q: Query = (text) => db!.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<Record<string, unknown>>(text)))
    for (const name of ["a", "b", "c"]) {
      const home = join(dir, name)
      fs.mkdirSync(join(home, "scripts"), { recursive: true, mode: 0o700 })
      fs.writeFileSync(join(home, "scripts", "fan.json"), book(agents))
      const address = `127.0.0.1:${await freePort()}`
      // A root spawns A-1 children in one turn: past the default spawn quota (30 a minute, then parked).
      const env: NodeJS.ProcessEnv = { ...process.env, SUBSTRAT_HOME: home, SUBSTRAT_CLUSTER_LEASE_MS: lease, SUBSTRAT_QUOTAS_SPAWNS_PER_MINUTE: "0" }
      // `daemon start` passes its node flags on to the daemon it starts.
      const flags = prof === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${join(prof, name)}`]
      execFileSync("nice", ["-n", "10", process.execPath, ...flags, launcher, "daemon", "start", "--cluster", url, "--listen", address], { env, encoding: "utf8" })
      runners.push({ label: name, home, address, pid: Number(fs.readFileSync(join(home, "daemon.pid"), "utf8").trim()) })
      conns.push(await connect(join(home, "daemon.sock")))
    }
    const [ra, rb, rc] = runners as [Runner, Runner, Runner]
    const [ca] = conns as [Conn]
    // Every runner healthy and holding its shards before trees are placed.
    for (let i = 0; ; i++) {
      const st = JSON.parse(await ca.call("cluster.status")) as { result?: { runners: ReadonlyArray<{ healthy: boolean; shards: number }>; held: number } }
      const rs = st.result?.runners ?? []
      if (rs.length === 3 && rs.every((r) => r.healthy && r.shards > 0)) break
      if (i > 600) throw new Error(`runners not all healthy: ${JSON.stringify(st)}`)
      await sleep(200)
    }
    const rss0 = runners.map((r) => rssKb(r.pid))
    const t0 = Date.now()
    const names = Array.from({ length: trees }, (_, t) => `r${t}`)
    for (const n of names) {
      const r = await ca.call("agent.create", { name: n, provider: "scripted:fan", role: "fanroot" })
      if (!r.includes("\"result\"")) throw new Error(`agent.create failed: ${r.slice(0, 300)}`)
      const s = await ca.call("agent.send", { agent: n, text: "spawn your team" })
      if (!s.includes("\"result\"")) throw new Error(`agent.send failed: ${s.slice(0, 300)}`)
    }
    const total = trees * agents
    for (let last = -1, since = Date.now(); ; ) {
      const n = Number((await q("SELECT count(*)::int AS n FROM substrat_sessions"))[0]?.["n"])
      if (n >= total) break
      if (n !== last) [last, since] = [n, Date.now()]
      if (Date.now() - since > 300_000) throw new Error(`creation stalled at ${n} of ${total} agents`)
      await sleep(1000)
    }
    const createS = (Date.now() - t0) / 1000
    await sleep(5000)
    const placed = await q("SELECT root_id, runner FROM substrat_trees")
    const rootRunner = new Map<string, string>()
    for (const n of names) {
      const ins = JSON.parse(await ca.call("agent.inspect", { agent: n })) as { result?: { agent: { id: string }; session: { id: string } | null } }
      const id = ins.result?.agent.id
      const row = placed.find((p) => p["root_id"] === id)
      if (row !== undefined) rootRunner.set(n, String(row["runner"]))
    }
    const rows: Array<Record<string, string | number>> = []
    const summary: Record<string, number | string> = { create_s: Number(createS.toFixed(1)) }
    const row = (measure: string, r: Record<string, string | number>) => rows.push({ measure: `${measure}, ${label}`, ...r })
    runners.forEach((r, i) => {
      const mine = names.filter((n) => rootRunner.get(n) === r.address).length
      const kb = rssKb(r.pid)
      row(`runner ${"ABC"[i]} RSS (MB)`, { value: Math.round(kb / 1024), trees: mine, agents: mine * agents, "empty RSS (MB)": Math.round(rss0[i]! / 1024) })
      summary[`rss_mb_${r.label}`] = Math.round(kb / 1024)
      summary[`trees_${r.label}`] = mine
    })

    // send on A → turn.start on B
    const onB = names.filter((n) => rootRunner.get(n) === rb.address)
    if (onB.length === 0) throw new Error("no tree was placed on runner B")
    const lat: Array<number> = []
    for (let i = 0; i < sends; i++) {
      const target = onB[i % onB.length]!
      const marker = `latency-${i}-${Date.now()}`
      const sent = Date.now()
      const r = await ca.call("agent.send", { agent: target, text: marker })
      if (!r.includes("\"result\"")) throw new Error(`agent.send failed: ${r.slice(0, 300)}`)
      for (let k = 0; ; k++) {
        const ev = await q(`SELECT line FROM substrat_events WHERE line LIKE '%"turn.start"%' AND line LIKE '%${marker}%' LIMIT 1`)
        const line = ev[0]?.["line"]
        if (typeof line === "string") {
          lat.push(Date.parse((JSON.parse(line) as { ts: string }).ts) - sent)
          break
        }
        if (k > 3000) throw new Error(`no turn.start for ${marker}`)
        await sleep(20)
      }
    }
    summary["send_to_turn_start_p50_ms"] = quantile(lat, 0.5)
    summary["send_to_turn_start_p99_ms"] = quantile(lat, 0.99)
    row("send on A → turn.start on B, p50 (ms)", { value: quantile(lat, 0.5), sends })
    row("send on A → turn.start on B, p99 (ms)", { value: quantile(lat, 0.99), sends })

    // kill -9 of C: re-homing
    if (prof !== undefined) await q("ALTER SYSTEM SET log_min_duration_statement = 0").then(() => q("SELECT pg_reload_conf()"))
    const loadAtKill = loadavg()[0]!
    const onC = names.filter((n) => rootRunner.get(n) === rc.address)
    const killedNs = process.hrtime.bigint()
    const killed = Date.now()
    process.kill(rc.pid, "SIGKILL")
    for (let k = 0; ; k++) {
      const left = Number((await q(`SELECT count(*)::int AS n FROM substrat_trees WHERE runner = '${rc.address}' OR runner IS NULL`))[0]?.["n"])
      if (left === 0) break
      if (k > 6000) throw new Error(`${left} tree(s) still on the killed runner`)
      await sleep(100)
    }
    const movedNs = process.hrtime.bigint()
    const movedMs = Date.now() - killed
    for (const n of onC) {
      for (let k = 0; ; k++) {
        const r = await ca.call("agent.send", { agent: n, text: `after the kill ${n}`, sync: true, wait: true, timeout_s: 120 })
        if (r.includes("\"answer\"")) break
        if (k > 100) throw new Error(`${n} did not answer after the kill: ${r.slice(0, 300)}`)
        await sleep(200)
      }
    }
    const answeredNs = process.hrtime.bigint()
    const answeredMs = Date.now() - killed
    if (prof !== undefined) await q("ALTER SYSTEM RESET log_min_duration_statement").then(() => q("SELECT pg_reload_conf()"))
    summary["rehome_trees"] = onC.length
    summary["rehome_agents"] = onC.length * agents
    summary["rehome_rows_moved_ms"] = movedMs
    summary["rehome_all_answered_ms"] = answeredMs
    row("kill -9 of C → no tree row names C (ms)", { value: movedMs, trees: onC.length, agents: onC.length * agents })
    row("kill -9 of C → every C tree answered via A (ms)", { value: answeredMs, trees: onC.length, agents: onC.length * agents })
    summary["rss_mb_a_after"] = Math.round(rssKb(ra.pid) / 1024)
    summary["rss_mb_b_after"] = Math.round(rssKb(rb.pid) / 1024)
    summary["load_avg_1m_at_kill"] = loadAtKill.toFixed(2)
    summary["load_avg_1m"] = loadavg()[0]!.toFixed(2)
    if (prof !== undefined) {
      const us = (ns: bigint) => Number(ns / 1000n)
      fs.writeFileSync(join(prof, "window.json"), JSON.stringify({ kill_us: us(killedNs), moved_us: us(movedNs), answered_us: us(answeredNs) }) + "\n")
    }
    return { rows, summary }
  } finally {
    for (const c of conns) c.close()
    if (prof !== undefined) {
      // The survivors stop on SIGTERM, which writes their profiles; their logs are kept beside them.
      for (const r of runners) {
        try {
          process.kill(r.pid, "SIGTERM")
        } catch {}
      }
      for (const r of runners) await exited(r.pid, 60_000)
      for (const r of runners) fs.copyFileSync(join(r.home, "daemon.log"), join(prof, r.label, "daemon.log"))
      fs.writeFileSync(join(prof, "postgres.log"), pg.log())
    }
    for (const r of runners) {
      try {
        process.kill(r.pid, "SIGKILL")
      } catch {}
    }
    await db?.dispose()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const sizes: Sizes = {
    trees: opts.quick ? 3 : intEnv("SUBSTRAT_BENCH_SCALE_TREES", 100),
    agents: opts.quick ? 5 : intEnv("SUBSTRAT_BENCH_SCALE_AGENTS", 100),
    sends: opts.quick ? 10 : 50,
    lease: process.env["SUBSTRAT_CLUSTER_LEASE_MS"] ?? "5000"
  }
  const before = process.env["SUBSTRAT_BENCH_BEFORE"]
  const profile = process.env["SUBSTRAT_BENCH_PROFILE"]
  const subjects: Array<[string, string]> = [...(before === undefined || before === "" ? [] : [["before", before] as [string, string]]), ["after", root]]
  const pg = await startPostgres()
  try {
    const rows: Array<Record<string, string | number>> = []
    const summary: Record<string, number | string> = {
      trees: sizes.trees,
      agents_per_tree: sizes.agents,
      agents: sizes.trees * sizes.agents,
      lease_ms: Number(sizes.lease)
    }
    for (const [label, checkout] of subjects) {
      const r = await scenario(label, checkout, pg, sizes, profile)
      rows.push(...r.rows)
      for (const [k, v] of Object.entries(r.summary)) summary[subjects.length > 1 ? `${k}_${label}` : k] = v
    }
    return { rows, summary }
  } finally {
    await pg.dispose()
  }
}
