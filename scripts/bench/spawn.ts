// What one child-process start costs the daemon's main thread as its heap grows: in a Node
// process holding ~50 MB and ~600 MB of live heap (RSS reported), the time the synchronous
// `child_process.spawn` call of /bin/true blocks (libuv forks the whole process there), median of
// many, the sizes interleaved in rounds so both see the same load. No spawner process is used by
// the daemon yet; this row is the cost such a spawner would take off the main thread.
import { execFileSync } from "node:child_process"
import { loadavg } from "node:os"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "spawn"

const child = `
const { spawn } = require("node:child_process")
const mb = Number(process.argv[1]), n = Number(process.argv[2])
const keep = []
for (let i = 0; i < mb; i++) { const a = new Array(131072); for (let j = 0; j < a.length; j++) a[j] = j + i; keep.push(a) }
const run = async () => {
  const xs = []
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint()
    const c = spawn("/bin/true", [], { stdio: ["ignore", "pipe", "pipe"], detached: true })
    xs.push(Number(process.hrtime.bigint() - t) / 1e6)
    c.stdout.resume(); c.stderr.resume()
    await new Promise((r) => c.on("close", r))
  }
  xs.sort((a, b) => a - b)
  console.log(JSON.stringify({ rss: process.memoryUsage().rss, median: xs[Math.floor(xs.length / 2)], keep: keep.length }))
}
run()
`

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const n = opts.quick ? 20 : 60
  const rounds = opts.quick ? 2 : 4
  const sizes = [{ label: "small heap", mb: 40 }, { label: "large heap", mb: 560 }]
  const out = new Map(sizes.map((s) => [s.label, [] as Array<{ rss: number; median: number }>]))
  const load0 = loadavg()
  for (let r = 0; r < rounds; r++) {
    for (const s of sizes) {
      const line = execFileSync(process.execPath, ["--max-old-space-size=2048", "-e", child, String(s.mb), String(n)], { encoding: "utf8" })
      out.get(s.label)!.push(JSON.parse(line.trim()) as { rss: number; median: number })
    }
  }
  const load1 = loadavg()
  const med = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const rows: Array<Record<string, string | number>> = []
  const summary: Record<string, number | string> = {}
  for (const s of sizes) {
    const xs = out.get(s.label)!
    const rss = Math.round(med(xs.map((x) => x.rss)) / 1e6)
    const ms = med(xs.map((x) => x.median))
    rows.push({ case: `spawn() blocks the main thread, ${s.label}`, rss_mb: rss, median_ms: ms, n: n * rounds })
    summary[`spawn_block_ms_${rss}mb`] = Number(ms.toFixed(2))
  }
  const [a, b] = sizes.map((s) => med(out.get(s.label)!.map((x) => x.median)))
  summary["large_vs_small"] = Number((b! / a!).toFixed(2))
  summary["goal_large_vs_small"] = 1
  rows.push({ case: `load average before: ${load0.map((x) => x.toFixed(2)).join(" ")}, after: ${load1.map((x) => x.toFixed(2)).join(" ")}`, n: 0 })
  summary["loadavg_1m"] = Number(load0[0]!.toFixed(2))
  return { rows, summary }
}
