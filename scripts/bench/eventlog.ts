// EventLog append throughput vs raw Node loops, measured in one run on the same directory.
//   (a) raw: write + fsync of a 200-byte line per iteration (log fd kept open)
//   (b) raw: the 3-step pending WAL of the seed design (EventLog.layerFile's append before the
//       group-commit journal), the reference for one session:
//       open(pending, O_CREAT|O_TRUNC) · write · fsync · close · write(log, O_APPEND) · fsync(log) · unlink(pending)
//       (open/write/close/unlink synchronous, fsync on the libuv pool)
//   (c) EventLog.append as the daemon makes it — the file layer (Durable live) under EventTap with
//       the file EventIndex — one session
//   (d) the same, 64 sessions appending concurrently (total throughput)
//   (e) SQLite, WAL journal, synchronous=FULL, one INSERT per transaction on the same disk (the
//       sqlite3 command line tool; skipped when it is not installed) — a single writer, as
//       SQLite has: 64 connections would only queue on its write lock
// `npm run bench` runs with UV_THREADPOOL_SIZE=64 unless set, as the daemon does (scripts/substrat.cjs):
// with the default 4 threads (d)'s 64 sessions' fsyncs queue for the pool.
// SUBSTRAT_BENCH_BEFORE=<another checkout> runs that checkout's src/ as a second (c) and (d) in
// the same run: its (c) joins the same interleaving, its (d) alternates with this one's.
// (b) and (c) alternate append by append (b,c,c,b,b,c,…) inside one fiber, each timed on its
// own, so a burst of fsync latency from other processes on the disk hits both alike: with
// block-wise rounds the c/b ratio swung 0.6–1.4 between runs on a shared machine. c/b is
// reported from the totals, from the medians of the per-append times, and as the median of the
// per-round ratios; c_minus_b_median_pair_us is the median of (c − b) over pairs. (a) runs in
// blocks between rounds (a reference, not part of a goal).
// Both sides write the same bytes: (b) a 200-byte line, (c) an entry that encodes to 200 bytes. (c)
// goes through the home's journal (docs/recovery.md): one journal write + fsync (shared with
// whatever other sessions append meanwhile, as in (d)) and one log write, all on the pool. The
// summary carries the fsync latency ((a) per op) and the 1-minute load average before and after,
// since both move c/b, and the main thread's CPU per append of (c) (median) and (d) (Linux:
// /proc/self/task/<pid>/schedstat, the thread's on-CPU time; what bounds (d) once the fsyncs are
// shared across sessions).
import { NodeContext } from "@effect/platform-node"
import { Effect, Layer, ManagedRuntime } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import type { LogEvent } from "../../src/domain/events.js"
import type { SessionId } from "../../src/domain/ids.js"
import type { EventLogService } from "../../src/storage/EventLog.js"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "eventlog"

const here = join(import.meta.dirname, "..", "..")

interface Modules {
  readonly Paths: typeof import("../../src/config/Paths.js")
  readonly Events: typeof import("../../src/domain/events.js")
  readonly Ids: typeof import("../../src/domain/ids.js")
  readonly Durable: typeof import("../../src/storage/Durable.js")
  readonly Log: typeof import("../../src/storage/EventLog.js")
  readonly Tap: typeof import("../../src/storage/EventTap.js")
  readonly Index: typeof import("../../src/storage/EventIndex.js")
}

const load = async (root: string): Promise<Modules> => {
  const m = (p: string) => import(pathToFileURL(join(root, "src", p)).href)
  return {
    Paths: await m("config/Paths.ts"),
    Events: await m("domain/events.ts"),
    Ids: await m("domain/ids.ts"),
    Durable: await m("storage/Durable.ts"),
    Log: await m("storage/EventLog.ts"),
    Tap: await m("storage/EventTap.ts"),
    Index: await m("storage/EventIndex.ts")
  }
}

/** The daemon's append path of one checkout: the file EventLog under EventTap, the file EventIndex. */
const tappedLog = (M: Modules, home: string) => {
  fs.mkdirSync(home, { recursive: true, mode: 0o700 })
  const base = Layer.mergeAll(M.Durable.Durable.layer, M.Paths.SubstratPaths.layer(home), NodeContext.layer)
  const layer = M.Tap.layer.pipe(
    Layer.provide(Layer.mergeAll(M.Log.EventLog.layerFile, M.Index.EventIndex.layerFile)),
    Layer.provide(base),
    Layer.orDie
  )
  const runtime = ManagedRuntime.make(layer)
  return { runtime, log: runtime.runPromise(M.Log.EventLog as unknown as Effect.Effect<EventLogService, never, never>) }
}

/** SQLite WAL + synchronous=FULL, `n` one-row transactions of a LINE-byte line; ms, or undefined without sqlite3. */
export const sqliteFull = (dir: string, n: number): number | undefined => {
  const db = join(dir, "bench.sqlite")
  const line = "a".repeat(LINE)
  const setup = "PRAGMA journal_mode=WAL;\nPRAGMA synchronous=FULL;\nCREATE TABLE IF NOT EXISTS e(id INTEGER PRIMARY KEY, s TEXT, line TEXT);\n"
  const body = `BEGIN;\nINSERT INTO e(s, line) VALUES('${"s".repeat(36)}', '${line}');\nCOMMIT;\n`.repeat(n)
  const run = (sql: string): number | undefined => {
    const t0 = performance.now()
    const r = spawnSync("sqlite3", [db], { input: sql, stdio: ["pipe", "ignore", "pipe"] })
    if (r.error !== undefined || r.status !== 0) return undefined
    return performance.now() - t0
  }
  const empty = run(setup)
  const full = run(setup + body)
  return empty === undefined || full === undefined ? undefined : Math.max(0, full - empty)
}

const LINE = 200

const fsyncP = (fd: number) => new Promise<void>((res, rej) => fs.fsync(fd, (e) => (e ? rej(e) : res())))

const rawFsync = async (dir: string, n: number, line: Buffer): Promise<number> => {
  const fd = fs.openSync(join(dir, "raw-a.jsonl"), "a", 0o600)
  const t0 = performance.now()
  for (let i = 0; i < n; i++) {
    fs.writeSync(fd, line)
    await fsyncP(fd)
  }
  const ms = performance.now() - t0
  fs.closeSync(fd)
  return ms
}

/** The three WAL steps of one append (the pending-file WAL's syscalls). */
const walSteps = async (fd: number, pending: string, line: Buffer): Promise<void> => {
  const p = fs.openSync(pending, "w", 0o600)
  fs.writeSync(p, line)
  await fsyncP(p)
  fs.closeSync(p)
  fs.writeSync(fd, line)
  await fsyncP(fd)
  fs.unlinkSync(pending)
}

/** One raw WAL append; its wall time in ms. */
const rawWalOnce = async (fd: number, pending: string, line: Buffer): Promise<number> => {
  const t0 = performance.now()
  await walSteps(fd, pending, line)
  return performance.now() - t0
}

const rawWal = async (dir: string, n: number, line: Buffer): Promise<number> => {
  const log = join(dir, "raw-b.jsonl")
  const pending = join(dir, "raw-b.pending")
  const fd = fs.openSync(log, "a", 0o600)
  const t0 = performance.now()
  for (let i = 0; i < n; i++) await walSteps(fd, pending, line)
  const ms = performance.now() - t0
  fs.closeSync(fd)
  return ms
}

/** An event whose encoded line (with newline) is exactly LINE bytes for this session. */
const eventOfSize = (M: Modules, session: SessionId): LogEvent => {
  const probe = (prompt: string) =>
    JSON.stringify({
      event: "turn.start",
      data: { turn_id: "00000000-0000-4000-8000-000000000000", prompt },
      ts: new Date().toISOString(),
      session_id: session
    }).length + 1
  const pad = Math.max(0, LINE - probe(""))
  return M.Events.makeEvent("turn.start", { turn_id: M.Ids.newTurnId(), prompt: "x".repeat(pad) })
}

const schedstat = `/proc/self/task/${process.pid}/schedstat`
/** The main thread's on-CPU time in µs (NaN where /proc has no schedstat). */
const mainCpuUs = (): number => {
  try {
    return Number(fs.readFileSync(schedstat, "latin1").split(" ")[0]) / 1000
  } catch {
    return Number.NaN
  }
}

const median = (xs: ReadonlyArray<number>) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? 0
const sum = (xs: ReadonlyArray<number>) => xs.reduce((x, y) => x + y, 0)

interface Side {
  readonly label: string
  readonly M: Modules
  readonly runtime: ManagedRuntime.ManagedRuntime<never, never>
  readonly log: EventLogService
  readonly one: SessionId
  readonly ev: LogEvent
  readonly times: Array<number>
  readonly pairs: Array<number>
  readonly cpu: Array<number>
  many: { appends: number; ms: number; cpuUs: number }
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const dir = fs.mkdtempSync(join(tmpdir(), "substrat-bench-eventlog-"))
  const rounds = opts.quick ? 4 : 10
  const perRound = opts.quick ? 50 : 200
  const concSessions = 64
  const perSession = opts.quick ? 5 : 30
  const line = Buffer.alloc(LINE, 0x61)
  line[LINE - 1] = 0x0a
  const beforeRoot = process.env["SUBSTRAT_BENCH_BEFORE"]
  const roots: Array<readonly [string, string]> = [["after", here]]
  if (beforeRoot !== undefined && beforeRoot !== "") roots.unshift(["before", beforeRoot])
  const sides: Array<Side> = []
  for (const [label, root] of roots) {
    const M = await load(root)
    const { runtime, log } = tappedLog(M, join(dir, `home-${label}`))
    const one = M.Ids.newSessionId()
    sides.push({ label, M, runtime, log: await log, one, ev: eventOfSize(M, one), times: [], pairs: [], cpu: [], many: { appends: 0, ms: 0, cpuUs: 0 } })
  }
  try {
    const load1 = loadavg()[0]!
    // Warm-up: JIT, first open + repair of the session, directory creation.
    await rawWal(dir, 20, line)
    for (const side of sides) {
      for (let i = 0; i < 20; i++) await side.runtime.runPromise(side.log.append(side.one, side.ev))
    }

    // (b) and each side's (c) interleaved append by append, the order rotating; (a), (d) and
    // (e) in blocks after each round.
    const rawLog = join(dir, "raw-b.jsonl")
    const rawPending = join(dir, "raw-b.pending")
    const rawFd = fs.openSync(rawLog, "a", 0o600)
    const bTimes: Array<number> = []
    let a = 0
    let e: number | undefined = 0
    const eN = perSession * 4
    const variants = sides.length + 1
    try {
      for (let r = 0; r < rounds; r++) {
        for (let i = 0; i < perRound; i++) {
          const group: Array<number> = []
          for (let k = 0; k < variants; k++) {
            const v = (k + i + r) % variants
            const cpu0 = v === 0 ? 0 : mainCpuUs()
            const t0 = performance.now()
            if (v === 0) await rawWalOnce(rawFd, rawPending, line)
            else await sides[v - 1]!.runtime.runPromise(sides[v - 1]!.log.append(sides[v - 1]!.one, sides[v - 1]!.ev))
            group[v] = performance.now() - t0
            if (v > 0) sides[v - 1]!.cpu.push(mainCpuUs() - cpu0)
          }
          bTimes.push(group[0]!)
          sides.forEach((side, k) => {
            side.times.push(group[k + 1]!)
            side.pairs.push(group[k + 1]! - group[0]!)
          })
        }
        a += await rawFsync(dir, perRound, line)
        for (const side of r % 2 === 0 ? sides : [...sides].reverse()) {
          const ids = Array.from({ length: concSessions }, () => side.M.Ids.newSessionId())
          const evs = ids.map((s) => eventOfSize(side.M, s))
          // First appends (directory creation, open) are not part of the figure.
          await side.runtime.runPromise(Effect.forEach(ids, (s, j) => side.log.append(s, evs[j]!), { concurrency: "unbounded", discard: true }))
          const cpu0 = mainCpuUs()
          const t0 = performance.now()
          await side.runtime.runPromise(Effect.forEach(ids, (s, j) => Effect.repeatN(side.log.append(s, evs[j]!), perSession - 1), {
            concurrency: "unbounded",
            discard: true
          }))
          side.many.ms += performance.now() - t0
          side.many.cpuUs += mainCpuUs() - cpu0
          side.many.appends += concSessions * perSession
        }
        if (e !== undefined) {
          const ms = sqliteFull(dir, eN)
          e = ms === undefined ? undefined : e + ms
        }
      }
    } finally {
      fs.closeSync(rawFd)
    }
    const load2 = loadavg()[0]!
    const n = rounds * perRound
    const b = sum(bTimes)
    const ops = (count: number, ms: number) => count / (ms / 1000)
    const rows: Array<Record<string, string | number>> = [
      { variant: "(a) raw write+fsync", appends: n, total_ms: a, us_per_op: (a * 1000) / n, ops_per_s: ops(n, a) },
      { variant: "(b) raw 3-step WAL", appends: n, total_ms: b, us_per_op: (b * 1000) / n, ops_per_s: ops(n, b) }
    ]
    const eOps = e === undefined ? undefined : ops(rounds * eN, e)
    if (e !== undefined) {
      rows.push({ variant: "(e) SQLite WAL synchronous=FULL", appends: rounds * eN, total_ms: e, us_per_op: (e * 1000) / (rounds * eN), ops_per_s: eOps! })
    }
    const summary: Record<string, number | string> = {
      line_bytes: LINE,
      uv_threadpool_size: process.env["UV_THREADPOOL_SIZE"] ?? "4",
      a_ops_per_s: Math.round(ops(n, a)),
      b_ops_per_s: Math.round(ops(n, b)),
      b_median_append_us: Math.round(median(bTimes) * 1000),
      b_over_a: Number((ops(n, b) / ops(n, a)).toFixed(3)),
      a_write_fsync_us: Math.round((a * 1000) / n)
    }
    if (eOps !== undefined) summary["e_sqlite_full_ops_per_s"] = Math.round(eOps)
    for (const side of sides) {
      const c = sum(side.times)
      const d = side.many.ms
      const nd = side.many.appends
      const tag = sides.length > 1 ? ` [${side.label}]` : ""
      rows.push({ variant: `(c) EventLog.append x1${tag}`, appends: n, total_ms: c, us_per_op: (c * 1000) / n, ops_per_s: ops(n, c) })
      rows.push({ variant: `(d) EventLog.append x${concSessions}${tag}`, appends: nd, total_ms: d, us_per_op: (d * 1000) / nd, ops_per_s: ops(nd, d) })
      const k = sides.length > 1 ? `_${side.label}` : ""
      summary[`c_ops_per_s${k}`] = Math.round(ops(n, c))
      summary[`d_ops_per_s${k}`] = Math.round(ops(nd, d))
      summary[`c_over_b${k}`] = Number((ops(n, c) / ops(n, b)).toFixed(3))
      summary[`c_over_b_median_append${k}`] = Number((median(bTimes) / median(side.times)).toFixed(3))
      // (b) and (c) of the same group ran back to back: the median of their differences is what
      // (c) adds per append, least disturbed by bursts that hit a whole stretch of groups.
      summary[`c_minus_b_median_pair_us${k}`] = Math.round(median(side.pairs) * 1000)
      summary[`d_over_b${k}`] = Number((ops(nd, d) / ops(n, b)).toFixed(3))
      // The main thread's CPU per append: (c) the median over its appends, (d) the total over its appends.
      summary[`c_main_cpu_us_median${k}`] = Math.round(median(side.cpu))
      summary[`d_main_cpu_us_per_append${k}`] = Math.round(side.many.cpuUs / nd)
      if (eOps !== undefined) summary[`d_over_sqlite_full${k}`] = Number((ops(nd, d) / eOps).toFixed(3))
    }
    summary["load_avg_1m"] = `${load1.toFixed(2)} → ${load2.toFixed(2)}`
    return { rows, summary }
  } finally {
    for (const side of sides) await side.runtime.dispose()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
