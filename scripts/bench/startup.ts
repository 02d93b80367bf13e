// Daemon start-up and shutdown as a user meets them, each next to baselines measured in the same
// run, interleaved:
//   - `substrat daemon start` in a fresh home (until it prints: the daemon answers on its socket)
//     and `substrat daemon stop` (until the daemon process is gone), through the package's bin;
//   - the same with the daemon bundle's V8 code cache (dist/daemon.cjs.cache) moved aside, so the
//     daemon compiles its bundle from scratch (the cache it writes at exit is thrown away);
//   - `substrat --version` (a one-shot client command: the CLI's own share of start and stop)
//     and `node -e 0`.
// SUBSTRAT_BENCH_BEFORE=<another checkout, built> adds that checkout's start and stop.
import { execFileSync } from "node:child_process"
import { existsSync, mkdtempSync, renameSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "startup"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const launcher = join(root, "scripts", "substrat.cjs")
const cache = join(root, "dist", "daemon.cjs.cache")

const median = (xs: ReadonlyArray<number>): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const timed = (f: () => void): number => {
  const t = performance.now()
  f()
  return performance.now() - t
}

/** One start and one stop in a fresh home; wall ms of each. */
const startStop = (bin: string): { readonly start: number; readonly stop: number } => {
  const home = mkdtempSync(join(tmpdir(), "substrat-bench-start-"))
  const env = { ...process.env, SUBSTRAT_HOME: home }
  try {
    const start = timed(() => execFileSync(process.execPath, [bin, "daemon", "start"], { env, stdio: "ignore" }))
    const stop = timed(() => execFileSync(process.execPath, [bin, "daemon", "stop"], { env, stdio: "ignore" }))
    return { start, stop }
  } finally {
    rmSync(home, { recursive: true, force: true })
  }
}

/** The same without the daemon's code cache: moved aside, and the one written at exit removed. */
const withoutCache = (): { readonly start: number; readonly stop: number } => {
  const kept = `${cache}.bench-kept`
  const had = existsSync(cache)
  if (had) renameSync(cache, kept)
  try {
    return startStop(launcher)
  } finally {
    rmSync(cache, { force: true })
    if (had) renameSync(kept, cache)
  }
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const shots = opts.quick ? 3 : 10
  const beforeRoot = process.env["SUBSTRAT_BENCH_BEFORE"]
  const before = beforeRoot !== undefined && beforeRoot !== "" ? join(beforeRoot, "scripts", "substrat.cjs") : undefined
  // Warm-up: the cache exists and the file system holds the bundles.
  startStop(launcher)
  const load1 = loadavg()[0]!
  const sides = new Map<string, { start: Array<number>; stop: Array<number> }>()
  const add = (label: string, r: { readonly start: number; readonly stop: number }) => {
    const s = sides.get(label) ?? { start: [], stop: [] }
    s.start.push(r.start)
    s.stop.push(r.stop)
    sides.set(label, s)
  }
  const version: Array<number> = []
  const node: Array<number> = []
  for (let i = 0; i < shots; i++) {
    add("now", startStop(launcher))
    add("now, no daemon code cache", withoutCache())
    if (before !== undefined) add("before", startStop(before))
    version.push(timed(() => execFileSync(process.execPath, [launcher, "--version"], { stdio: "ignore" })))
    node.push(timed(() => execFileSync(process.execPath, ["-e", "0"], { stdio: "ignore" })))
  }
  const nodeMs = median(node)
  const nowStart = median(sides.get("now")!.start)
  const nowStop = median(sides.get("now")!.stop)
  const rows: Array<Record<string, string | number>> = [...sides].map(([label, s]) => ({
    side: label,
    start_ms: Math.round(median(s.start)),
    start_vs_now: median(s.start) / nowStart,
    stop_ms: Math.round(median(s.stop)),
    stop_vs_now: median(s.stop) / nowStop,
    start_vs_node: median(s.start) / nodeMs
  }))
  rows.push({ side: "substrat --version", start_ms: Math.round(median(version)), start_vs_node: median(version) / nodeMs })
  rows.push({ side: "node -e 0", start_ms: Math.round(nodeMs), start_vs_node: 1 })
  const summary: Record<string, number | string> = {
    start_ms: Math.round(nowStart),
    stop_ms: Math.round(nowStop),
    start_no_cache_ms: Math.round(median(sides.get("now, no daemon code cache")!.start)),
    start_vs_version: nowStart / median(version),
    load1: Number(load1.toFixed(1))
  }
  if (before !== undefined) {
    summary["start_before_ms"] = Math.round(median(sides.get("before")!.start))
    summary["stop_before_ms"] = Math.round(median(sides.get("before")!.stop))
  }
  return { rows, summary }
}
