// What one child-process start costs the daemon's main thread as its heap grows, before/after the
// spawner (src/sandbox/Spawner.ts). In a Node process holding ~50 MB and ~600 MB (RSS reported),
// /bin/true is started many times one after another, its pipes drained, its exit awaited, by:
//   direct   `child_process.spawn` in the process itself (libuv forks the whole process there);
//   spawner  a request to the long-lived spawner process, which forks and hands the pipes back.
// Per spawn: the synchronous call (median); the main thread's CPU time (its schedstat, which a
// loaded machine does not inflate) and its active time (event-loop utilisation, which counts
// preemption too), both over the whole loop divided by the spawns, so every callback, message and
// pipe read of a start counts; and spawn-to-exit wall time. Sizes and modes are interleaved in rounds so all
// see the same load.
import * as esbuild from "esbuild"
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "spawn"

/** Spawner.ts as one plain module, so the measured process loads nothing else (no tsx). */
const bundle = (dir: string): string => {
  const out = join(dir, "spawner.mjs")
  esbuild.buildSync({
    entryPoints: [join(fileURLToPath(import.meta.url), "../../../src/sandbox/Spawner.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    outfile: out,
    logLevel: "silent"
  })
  return pathToFileURL(out).href
}

const child = (spawnerModule: string) => `
import { readFileSync } from "node:fs"
const [mode, mbArg, nArg] = process.argv.slice(1)
const mb = Number(mbArg), n = Number(nArg)
const S = await import(${JSON.stringify(spawnerModule)})
// CPU time of the main thread alone (ns), whatever the load: first field of its schedstat.
const cpu = () => Number(readFileSync("/proc/self/task/" + process.pid + "/schedstat", "utf8").split(" ")[0])
if (mode === "spawner") S.warm()
const keep = []
for (let i = 0; i < mb; i++) { const a = new Array(131072); for (let j = 0; j < a.length; j++) a[j] = j + i; keep.push(a) }
const launch = mode === "spawner" ? S.launch : S.launchDirect
const once = () => new Promise((resolve, reject) => {
  let exited = false, ends = 0
  const check = () => { if (exited && ends === 2) resolve() }
  const t0 = process.hrtime.bigint()
  launch({ program: "/bin/true", args: [], env: { PATH: "/usr/bin:/bin" }, stdin: false, onExit: () => { exited = true; check() } }, (r) => {
    if (r._tag === "failed") return reject(new Error(r.message))
    for (const s of [r.child.stdout, r.child.stderr]) {
      if (s.readableEnded) ends++
      else { s.on("end", () => { ends++; check() }); s.resume() }
    }
    check()
  })
  calls.push(Number(process.hrtime.bigint() - t0) / 1e6)
})
let calls = []
for (let i = 0; i < 5; i++) await once()
calls = []
const walls = []
const elu0 = performance.eventLoopUtilization()
const cpu0 = cpu()
for (let i = 0; i < n; i++) {
  const t = process.hrtime.bigint()
  await once()
  walls.push(Number(process.hrtime.bigint() - t) / 1e6)
}
const cpuNs = cpu() - cpu0
const elu = performance.eventLoopUtilization(elu0)
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
console.log(JSON.stringify({ rss: process.memoryUsage().rss, call: med(calls), cpu: cpuNs / 1e6 / n, active: elu.active / n, wall: med(walls), keep: keep.length }))
S.stop()
`

interface Sample {
  readonly rss: number
  readonly call: number
  readonly cpu: number
  readonly active: number
  readonly wall: number
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const n = opts.quick ? 20 : 150
  const rounds = opts.quick ? 2 : 4
  const sizes = [{ label: "small heap", mb: 8 }, { label: "large heap", mb: 560 }]
  const modes = ["direct", "spawner"] as const
  const key = (mode: string, label: string) => `${mode}/${label}`
  const out = new Map<string, Array<Sample>>()
  const dir = mkdtempSync(join(tmpdir(), "substrat-bench-spawn-"))
  const script = child(bundle(dir))
  const load0 = loadavg()
  try {
  for (let r = 0; r < rounds; r++) {
    for (const s of sizes) {
      for (const mode of modes) {
        const line = execFileSync(
          process.execPath,
          ["--max-old-space-size=2048", "--input-type=module", "-e", script, mode, String(s.mb), String(n)],
          { encoding: "utf8" }
        )
        const k = key(mode, s.label)
        out.set(k, [...(out.get(k) ?? []), JSON.parse(line.trim().split("\n").at(-1)!) as Sample])
      }
    }
  }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  const load1 = loadavg()
  const med = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const rows: Array<Record<string, string | number>> = []
  const summary: Record<string, number | string> = {}
  const fig = new Map<string, { call: number; cpu: number; active: number }>()
  for (const mode of modes) {
    for (const s of sizes) {
      const xs = out.get(key(mode, s.label))!
      const rss = Math.round(med(xs.map((x) => x.rss)) / 1e6)
      const call = med(xs.map((x) => x.call))
      const active = med(xs.map((x) => x.active))
      const cpu = med(xs.map((x) => x.cpu))
      const wall = med(xs.map((x) => x.wall))
      fig.set(key(mode, s.label), { call, cpu, active })
      rows.push({ case: `${mode}, ${s.label}`, rss_mb: rss, call_ms: call, main_cpu_ms: cpu, main_active_ms: active, spawn_to_exit_ms: wall, n: n * rounds })
      const tag = s.mb < 100 ? "50mb" : "600mb"
      summary[`${mode}_call_ms_${tag}`] = Number(call.toFixed(3))
      summary[`${mode}_main_cpu_ms_${tag}`] = Number(cpu.toFixed(3))
      summary[`${mode}_main_active_ms_${tag}`] = Number(active.toFixed(3))
      summary[`${mode}_spawn_to_exit_ms_${tag}`] = Number(wall.toFixed(2))
      summary[`${mode}_rss_mb_${tag}`] = rss
    }
  }
  const ratio = (mode: string, what: "call" | "cpu" | "active") =>
    Number((fig.get(key(mode, "large heap"))![what] / fig.get(key(mode, "small heap"))![what]).toFixed(2))
  summary["direct_main_cpu_large_vs_small"] = ratio("direct", "cpu")
  summary["spawner_main_cpu_large_vs_small"] = ratio("spawner", "cpu")
  summary["spawner_main_active_large_vs_small"] = ratio("spawner", "active")
  summary["spawner_call_large_vs_small"] = ratio("spawner", "call")
  summary["goal_large_vs_small"] = 1
  rows.push({ case: `load average before: ${load0.map((x) => x.toFixed(2)).join(" ")}, after: ${load1.map((x) => x.toFixed(2)).join(" ")}`, n: 0 })
  summary["loadavg_1m"] = Number(load0[0]!.toFixed(2))
  return { rows, summary }
}
