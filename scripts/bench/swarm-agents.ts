// Swarm node agents in a real daemon (the built bundle, started as a user would):
//   memory   daemon RSS (VmRSS) of an empty daemon, of one with a small swarm (grammars loaded),
//            and of one with a generated tree of ~100k nodes (5,000 files; --quick: 1,000) —
//            after `swarm start` (cold) and after a restart (the swarm resumed from its
//            saved nodes): the settled RSS (once V8 has returned the start-up heap) and the peak
//            (VmHWM). Per-agent bytes = (big − small) / (node difference).
//   latency  file save → the changed function's `turn.start` (its ts in the log against the
//            wall-clock time of the write), on a copy of node_modules/effect/src, scripted:echo.
// Baselines are measured in the same run (the empty daemon, the small swarm).
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import { loadavg, tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "swarm-agents"

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const launcher = join(repoRoot, "scripts", "substrat.js")
const effectSrc = join(dirname(createRequire(import.meta.url).resolve("effect/package.json")), "src")

const substrat = (home: string, args: ReadonlyArray<string>): string =>
  execFileSync(process.execPath, [launcher, ...args], {
    env: { ...process.env, SUBSTRAT_HOME: home },
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
    timeout: 600_000
  })

const json = <A>(home: string, args: ReadonlyArray<string>): A => JSON.parse(substrat(home, [...args, "--json"])) as A

const statusKb = (pid: number, field: string): number => {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
  return m ? Number(m[1]) * 1024 : Number.NaN
}
const rssOf = (pid: number): number => statusKb(pid, "VmRSS")
/** The highest RSS the process has had (its start-up peak). */
const peakOf = (pid: number): number => statusKb(pid, "VmHWM")

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/**
 * RSS once it stops falling: V8 gives the heap of the start-up work back to the system only
 * after some idle time (its memory reducer: 15–30 s after a large start here), so the lowest of
 * samples once a second until 10 s pass without a new low by more than 1% (at most 90 s).
 */
const settledRss = async (pid: number): Promise<number> => {
  let low = rssOf(pid)
  let quiet = 0
  for (let i = 0; i < 90 && quiet < 10; i++) {
    await sleep(1000)
    const now = rssOf(pid)
    quiet = now < low * 0.99 ? 0 : quiet + 1
    low = Math.min(low, now)
  }
  return low
}

/** `files` TS files of 1 class × 5 methods + 14 functions (≈ 21 nodes each) in 50 directories. */
const generate = (root: string, files: number) => {
  for (let f = 0; f < files; f++) {
    const lines: Array<string> = []
    lines.push(`export class Model${f} {`)
    for (let m = 0; m < 5; m++) lines.push(`  method${m}(a: number): number {`, `    return a * ${m} + ${f}`, `  }`)
    lines.push("}", "")
    for (let g = 0; g < 14; g++) lines.push(`export function fn${g}(a: number): number {`, `  return a + ${g}`, `}`, "")
    const rel = `pkg${f % 50}/mod${f}.ts`
    fs.mkdirSync(dirname(join(root, rel)), { recursive: true })
    fs.writeFileSync(join(root, rel), lines.join("\n"))
  }
}

interface Started {
  readonly pid: number
}
interface Status {
  readonly nodes: number
}

const withDaemon = async <A>(f: (home: string, pid: number) => Promise<A>): Promise<A> => {
  const home = fs.mkdtempSync(join(tmpdir(), "substrat-bench-swarm-"))
  let pid = json<Started>(home, ["daemon", "start"]).pid
  try {
    return await f(home, pid)
  } finally {
    try {
      pid = Number(fs.readFileSync(join(home, "daemon.pid"), "utf8").trim().split("\n")[0])
      process.kill(pid, "SIGKILL")
    } catch {
      // already gone
    }
    fs.rmSync(home, { recursive: true, force: true })
  }
}

const percentile = (xs: ReadonlyArray<number>, p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const rows: Array<Record<string, string | number>> = []
  const summary: Record<string, number | string> = { load1: Number(loadavg()[0]!.toFixed(1)) }
  const work = fs.mkdtempSync(join(tmpdir(), "substrat-bench-trees-"))
  try {
    const small = join(work, "small")
    const big = join(work, "big")
    generate(small, 10)
    generate(big, opts.quick ? 1000 : 5000)

    const empty = await withDaemon(async (_home, pid) => settledRss(pid))
    rows.push({ daemon: "empty", nodes: 0, rss_mb: Number((empty / 2 ** 20).toFixed(1)) })

    const smallRss = await withDaemon(async (home, pid) => {
      const s = json<Status>(home, ["swarm", "start", small, "--provider", "scripted:echo"])
      const rss = await settledRss(pid)
      rows.push({ daemon: "small swarm", nodes: s.nodes, rss_mb: Number((rss / 2 ** 20).toFixed(1)) })
      return { rss, nodes: s.nodes }
    })

    await withDaemon(async (home, pid) => {
      const t0 = performance.now()
      const s = json<Status>(home, ["swarm", "start", big, "--provider", "scripted:echo"])
      const startMs = performance.now() - t0
      const cold = await settledRss(pid)
      const coldPeak = peakOf(pid)
      rows.push({ daemon: "big swarm, after start", nodes: s.nodes, rss_mb: Number((cold / 2 ** 20).toFixed(1)), peak_mb: Number((coldPeak / 2 ** 20).toFixed(1)), ms: Math.round(startMs), "nodes/s": Math.round(s.nodes / (startMs / 1000)) })
      substrat(home, ["daemon", "stop"])
      const t1 = performance.now()
      const pid2 = json<Started>(home, ["daemon", "start"]).pid
      const restartMs = performance.now() - t1
      const warm = await settledRss(pid2)
      const warmPeak = peakOf(pid2)
      rows.push({ daemon: "big swarm, after restart", nodes: s.nodes, rss_mb: Number((warm / 2 ** 20).toFixed(1)), peak_mb: Number((warmPeak / 2 ** 20).toFixed(1)), ms: Math.round(restartMs), "nodes/s": Math.round(s.nodes / (restartMs / 1000)) })
      const per = (rss: number) => Math.round((rss - smallRss.rss) / (s.nodes - smallRss.nodes))
      summary.nodes = s.nodes
      summary.empty_rss_mb = Number((empty / 2 ** 20).toFixed(1))
      summary.small_swarm_rss_mb = Number((smallRss.rss / 2 ** 20).toFixed(1))
      summary.big_rss_after_start_mb = Number((cold / 2 ** 20).toFixed(1))
      summary.big_rss_after_restart_mb = Number((warm / 2 ** 20).toFixed(1))
      summary.big_peak_rss_start_mb = Number((coldPeak / 2 ** 20).toFixed(1))
      summary.big_peak_rss_restart_mb = Number((warmPeak / 2 ** 20).toFixed(1))
      summary.bytes_per_agent_after_start = per(cold)
      summary.bytes_per_agent_after_restart = per(warm)
      summary.bytes_per_agent_over_empty_after_restart = Math.round((warm - empty) / s.nodes)
      summary.start_cold_ms = Math.round(startMs)
      summary.restart_warm_ms = Math.round(restartMs)
    })

    // Save → turn.start on a copy of effect/src.
    const tree = join(work, "effect-src")
    fs.cpSync(effectSrc, tree, { recursive: true })
    await withDaemon(async (home) => {
      json(home, ["swarm", "start", tree, "--provider", "scripted:echo"])
      const list = json<{ agents: ReadonlyArray<{ node_id: string; session_id: string }> }>(home, ["swarm", "agents", "--parent", "Duration.ts#file"])
      const target = list.agents.find((a) => a.node_id === "Duration.ts#function:millis")!
      const file = join(tree, "Duration.ts")
      const original = fs.readFileSync(file, "utf8")
      const log = join(home, "agents", target.session_id, "events.jsonl")
      const starts = () => fs.existsSync(log) ? fs.readFileSync(log, "utf8").split("\n").filter((l) => l.includes('"turn.start"')) : []
      const n = opts.quick ? 8 : 30
      // `gap`: the quiet time before each save. A user's saves are seconds apart (1 s here);
      // 300 ms is a burst, where @parcel/watcher holds each event ≥ 50 ms (its previous batch
      // was under 500 ms ago): both are reported, the user's cadence as the headline figure.
      const saves = async (gap: number, from: number, count = n) => {
        const samples: Array<number> = []
        for (let i = 0; i < count; i++) {
          const before = starts().length
          await sleep(gap)
          const wrote = Date.now()
          fs.writeFileSync(file, original.replace("=> make(millis)\n", `=> make(millis + ${from + i + 1})\n`))
          for (let w = 0; w < 400 && starts().length <= before; w++) await sleep(5)
          const line = starts()[before]
          if (line === undefined) continue
          samples.push(Date.parse((JSON.parse(line) as { ts: string }).ts) - wrote)
        }
        return samples
      }
      // The first save materializes the agent and its ancestors: measured apart.
      const first = await saves(1000, 0, 1)
      const user = await saves(1000, 1)
      const burst = await saves(300, 1 + n)
      rows.push({ daemon: "effect/src, first save → turn.start", nodes: 1, p50_ms: first[0] ?? Number.NaN })
      rows.push({ daemon: "effect/src, save → turn.start, 1 s apart", nodes: user.length, p50_ms: percentile(user, 50), p99_ms: percentile(user, 99) })
      rows.push({ daemon: "effect/src, save → turn.start, 300 ms apart", nodes: burst.length, p50_ms: percentile(burst, 50), p99_ms: percentile(burst, 99) })
      summary.save_to_turn_start_p50_ms = percentile(user, 50)
      summary.save_to_turn_start_p99_ms = percentile(user, 99)
      summary.save_samples = user.length
      summary.burst_save_to_turn_start_p50_ms = percentile(burst, 50)
      summary.burst_save_to_turn_start_p99_ms = percentile(burst, 99)
    })
  } finally {
    fs.rmSync(work, { recursive: true, force: true })
  }
  return { rows, summary }
}
