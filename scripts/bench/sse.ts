// SSE fan-out: clients following GET /v1/events?from=end on http.sock while a scripted team works
// (roots on `scripted:demo`, each spawning two workers: 34 roots ≈ 100 agents). Per client and
// event: latency = arrival time − the entry's `ts` (the daemon's clock, same machine; ms
// resolution). Daemon CPU = utime+stime from /proc/<pid>/stat over the workload. The baseline,
// in the same run, is the same workload followed by ONE client; the summary gives the 50-client
// figures and their ratios to it, and the daemon CPU each extra client costs per event:
// (CPU with N clients − CPU with 1) / (N − 1) / events. With SUBSTRAT_BENCH_BEFORE=<another
// checkout, built> that checkout's daemon runs the same two workloads in the same run.
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import * as http from "node:http"
import { loadavg, tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "sse"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const launcher = join(root, "scripts", "substrat.cjs")
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

const quantile = (xs: ReadonlyArray<number>, q: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor(q * s.length))]!
}

const cpuMs = (pid: number): number => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = f.slice(f.lastIndexOf(")") + 2).split(" ")
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100
}

const call = (sock: string, method: string, path: string, body?: unknown): Promise<unknown> =>
  new Promise((resolve, reject) => {
    const req = http.request({ socketPath: sock, method, path, headers: { "content-type": "application/json" } }, (res) => {
      let d = ""
      res.on("data", (c: Buffer) => (d += c.toString("utf8")))
      res.on("end", () => resolve(d === "" ? {} : JSON.parse(d)))
    })
    req.on("error", reject)
    if (body !== undefined) req.write(JSON.stringify(body))
    req.end()
  })

interface Client {
  readonly latencies: Array<number>
  readonly live: Promise<void>
  readonly close: () => void
}

const follow = (sock: string): Client => {
  const latencies: Array<number> = []
  let onLive: () => void = () => {}
  const live = new Promise<void>((r) => (onLive = r))
  const req = http.request({ socketPath: sock, path: "/v1/events?from=end" }, (res) => {
    let buf = ""
    res.on("data", (c: Buffer) => {
      const now = Date.now()
      buf += c.toString("utf8")
      let i = buf.indexOf("\n\n")
      while (i >= 0) {
        const block = buf.slice(0, i)
        buf = buf.slice(i + 2)
        if (block.includes("event: live")) onLive()
        const data = block.split("\n").find((l) => l.startsWith("data: {\"position\""))
        if (data !== undefined) latencies.push(now - Date.parse((JSON.parse(data.slice(6)) as { ts: string }).ts))
        i = buf.indexOf("\n\n")
      }
    })
  })
  req.on("error", () => {})
  req.end()
  return { latencies, live, close: () => req.destroy() }
}

const workload = async (roots: number, clients: number, launcher: string) => {
  const home = mkdtempSync(join(tmpdir(), "substrat-bench-sse-"))
  const daemon: ChildProcess = spawn(process.execPath, [launcher, "daemon", "run", "--home", home, "--slots", "8"], {
    stdio: "ignore",
    env: { ...process.env, SUBSTRAT_HOME: home }
  })
  const sock = join(home, "http.sock")
  try {
    for (let t = 0; ; t++) {
      try {
        await call(sock, "GET", "/v1/daemon")
        break
      } catch {
        if (t > 2400) throw new Error("daemon did not start within 120 s")
        await sleep(50)
      }
    }
    const ids: Array<string> = []
    for (let i = 0; i < roots; i++) {
      const a = (await call(sock, "POST", "/v1/agents", { name: `lead${i}`, provider: "scripted:demo" })) as { id: string }
      ids.push(a.id)
    }
    const followers = Array.from({ length: clients }, () => follow(sock))
    await Promise.all(followers.map((f) => f.live))
    const cpu0 = cpuMs(daemon.pid!)
    const t0 = Date.now()
    await Promise.all(ids.map((id) => call(sock, "POST", `/v1/agents/${id}/messages`, { text: "Plan the project" })))
    // Quiet: every agent idle three polls in a row.
    let calm = 0
    let agents = 0
    while (calm < 3) {
      await sleep(200)
      const l = (await call(sock, "GET", "/v1/agents")) as { agents: ReadonlyArray<{ state: string }> }
      agents = l.agents.length
      calm = l.agents.length >= roots * 3 && l.agents.every((a) => a.state === "idle") ? calm + 1 : 0
      if (Date.now() - t0 > 300_000) throw new Error("team did not finish")
    }
    const wallMs = Date.now() - t0
    const cpu = cpuMs(daemon.pid!) - cpu0
    for (const f of followers) f.close()
    const all = followers.flatMap((f) => f.latencies)
    const perClient = followers.map((f) => f.latencies.length)
    return { agents, clients, events: Math.min(...perClient), p50: quantile(all, 0.5), p99: quantile(all, 0.99), cpuMs: cpu, wallMs }
  } finally {
    daemon.kill("SIGKILL")
    await new Promise((r) => daemon.once("exit", r))
    rmSync(home, { recursive: true, force: true })
  }
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const roots = opts.quick ? 10 : 34
  const fanout = opts.quick ? 10 : 50
  const load0 = loadavg()[0]!.toFixed(2)
  const beforeRoot = process.env["SUBSTRAT_BENCH_BEFORE"]
  const before = beforeRoot === undefined || beforeRoot === ""
    ? undefined
    : { base: await workload(roots, 1, join(beforeRoot, "scripts", "substrat.cjs")), many: await workload(roots, fanout, join(beforeRoot, "scripts", "substrat.cjs")) }
  const base = await workload(roots, 1, launcher)
  const many = await workload(roots, fanout, launcher)
  const perClientUs = (b: typeof base, m: typeof base) => Number((((m.cpuMs - b.cpuMs) * 1000) / (fanout - 1) / Math.max(1, m.events)).toFixed(1))
  const row = (label: string, r: typeof base) => ({
    case: label,
    agents: r.agents,
    clients: r.clients,
    "events/client": r.events,
    "p50 ms": r.p50,
    "p99 ms": r.p99,
    "daemon cpu ms": r.cpuMs,
    "wall ms": r.wallMs
  })
  return {
    rows: [
      row("baseline: 1 client", base),
      row(`${fanout} clients`, many),
      ...(before === undefined ? [] : [row("before: 1 client", before.base), row(`before: ${fanout} clients`, before.many)])
    ],
    summary: {
      load_avg_1m: `${load0} → ${loadavg()[0]!.toFixed(2)}`,
      cpu_us_per_extra_client_per_event: perClientUs(base, many),
      ...(before === undefined ? {} : {
        p50_ms_before: before.many.p50,
        p99_ms_before: before.many.p99,
        cpu_us_per_extra_client_per_event_before: perClientUs(before.base, before.many)
      }),
      agents: many.agents,
      clients: fanout,
      p50_ms: many.p50,
      p99_ms: many.p99,
      daemon_cpu_ms: many.cpuMs,
      p99_vs_1_client: Number((many.p99 / Math.max(1, base.p99)).toFixed(3)),
      cpu_vs_1_client: Number((many.cpuMs / Math.max(1, base.cpuMs)).toFixed(3))
    }
  }
}
