// Requests that must not grow with the number of agents, and what an idle agent holds. A daemon
// (the built bundle) gets idle roots (scripted provider, one shared workspace) in two steps, 100
// then N (4,000; --quick 1,000; SUBSTRAT_BENCH_SCALE_AGENTS=<N> sets it, e.g. 10000 for the
// issue's 10,000 idle roots); at each size every request below is timed (p50 of sequential
// round trips on one admin-socket connection, raw NDJSON):
//   inspect known    `agent.inspect` of a live agent by name
//   inspect unknown  `agent.inspect` of a name no agent has (a typo)
//   daemon status    `daemon.status`
//   session list     `session.list`
//   agent list       `agent.list` (the whole list: O(answer))
//   agent list page  `agent.list` with `limit: 100` (one page: O(page))
//   session list page  `session.list` with `limit: 100` (one page, oldest first: O(page))
// The figure per request is its p50 at N over its p50 at 100 (target ≤ 2). Also a one-shot
// `substrat agent list` at 100 and at N (target < 0.5 s at N): wall time and the CLI process's CPU
// (user+sys), beside `substrat --version` (the CLI's start-up alone) as the floor; and, after the agents have been idle for
// 3 s, the daemon's open fds and what an idle agent holds: the growth per agent from N/4 to N
// agents of the daemon's heap and RSS after a full GC (heldMemory.ts), beside the RSS growth from
// 100 to N read 3 s after the creates without one (garbage and allocator high-water marks). With
// SUBSTRAT_BENCH_BEFORE=<another checkout, built> that checkout's daemon is measured in the same
// run, the two interleaved request by request (paired ratios).
import { execFileSync, spawnSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import * as net from "node:net"
import { loadavg, tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { type Held, held, inspectable } from "./heldMemory.js"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "scale"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
const quantile = (xs: ReadonlyArray<number>, q: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!
}

/** One connection to a daemon's admin socket; `call` sends one request and waits for its reply line. */
export const connect = async (socket: string) => {
  const conn = net.createConnection({ path: socket })
  await new Promise<void>((r, j) => conn.once("connect", () => r()).once("error", j))
  const chunks: Array<string> = []
  let waiting: ((line: string) => void) | undefined
  conn.on("data", (d: Buffer) => {
    const s = d.toString("utf8")
    const nl = s.indexOf("\n")
    if (nl < 0) {
      chunks.push(s)
      return
    }
    chunks.push(s.slice(0, nl))
    const line = chunks.join("")
    chunks.length = 0
    if (nl + 1 < s.length) chunks.push(s.slice(nl + 1))
    const w = waiting
    waiting = undefined
    w?.(line)
  })
  let id = 0
  const call = (method: string, params?: unknown): Promise<string> =>
    new Promise((resolve) => {
      waiting = resolve
      conn.write(JSON.stringify({ jsonrpc: "2.0", id: id++, method, ...(params === undefined ? {} : { params }) }) + "\n")
    })
  return { call, close: () => conn.destroy() }
}

interface Subject {
  readonly label: string
  readonly launcher: string
  readonly env: NodeJS.ProcessEnv
  readonly pid: number
  /** The daemon's inspector port (heldMemory.ts). */
  readonly port: number
  readonly conn: Awaited<ReturnType<typeof connect>>
  workspace: string
  agents: number
}

const start = async (label: string, checkout: string): Promise<Subject> => {
  const home = mkdtempSync(join(tmpdir(), "substrat-bench-scale-"))
  const { env, port } = await inspectable({ ...process.env, SUBSTRAT_HOME: home })
  const launcher = join(checkout, "scripts", "substrat.cjs")
  execFileSync(process.execPath, [launcher, "daemon", "start"], { env, encoding: "utf8" })
  const pid = Number(readFileSync(join(home, "daemon.pid"), "utf8").trim())
  const conn = await connect(join(home, "daemon.sock"))
  const ws = JSON.parse(await conn.call("workspace.create", { name: "shared" })) as { result?: { id: string } }
  if (ws.result === undefined) throw new Error(`workspace.create failed: ${JSON.stringify(ws)}`)
  return { label, launcher, env, pid, port, conn, workspace: ws.result.id, agents: 0 }
}

const grow = async (s: Subject, to: number) => {
  for (; s.agents < to; s.agents++) {
    const r = await s.conn.call("agent.create", { name: `a${s.agents}`, provider: "scripted", workspace_id: s.workspace })
    if (!r.includes("\"result\"")) throw new Error(`agent.create failed: ${r.slice(0, 300)}`)
  }
}

const statusKb = (pid: number, field: string): number => {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  return m ? Number(m[1]) : Number.NaN
}

/** CPU (user+sys, ms) of this process's waited-for children so far (/proc/self/stat cutime+cstime). */
const childCpuMs = (): number => {
  const f = readFileSync("/proc/self/stat", "utf8")
  const x = f.slice(f.lastIndexOf(")") + 2).split(" ")
  return (Number(x[13]) + Number(x[14])) * 10
}

/** p50 wall and CPU (ms) of a one-shot CLI command, `n` runs. */
const oneShot = (s: Subject, args: ReadonlyArray<string>, n: number) => {
  const wall: Array<number> = []
  const cpu: Array<number> = []
  for (let i = 0; i < n; i++) {
    const c = childCpuMs()
    const t = process.hrtime.bigint()
    const r = spawnSync(process.execPath, [s.launcher, ...args], { env: s.env, stdio: "ignore" })
    if (r.status !== 0) throw new Error(`substrat ${args.join(" ")} exited ${r.status}`)
    wall.push(Number(process.hrtime.bigint() - t) / 1e6)
    cpu.push(childCpuMs() - c)
  }
  return { wall: Math.round(quantile(wall, 0.5)), cpu: Math.round(quantile(cpu, 0.5)) }
}

const requests: ReadonlyArray<readonly [string, string, (s: Subject) => unknown]> = [
  ["inspect known", "agent.inspect", (s) => ({ agent: `a${Math.floor(s.agents / 2)}` })],
  ["inspect unknown", "agent.inspect", () => ({ agent: "no-such-agent" })],
  ["daemon status", "daemon.status", () => undefined],
  ["session list", "session.list", () => undefined],
  ["agent list", "agent.list", () => undefined],
  ["agent list page", "agent.list", () => ({ limit: 100 })],
  ["session list page", "session.list", () => ({ limit: 100 })]
]

/** p50 µs of each request (label → µs), subjects interleaved request by request. */
const measure = async (subjects: ReadonlyArray<Subject>, reps: number) => {
  const out = new Map<string, Map<string, number>>(subjects.map((s) => [s.label, new Map()]))
  for (const [label, method, params] of requests) {
    const times = new Map<string, Array<number>>(subjects.map((s) => [s.label, []]))
    for (const s of subjects) for (let i = 0; i < 3; i++) await s.conn.call(method, params(s)) // warm
    for (let i = 0; i < reps; i++) {
      for (const s of subjects) {
        const t = process.hrtime.bigint()
        await s.conn.call(method, params(s))
        times.get(s.label)!.push(Number(process.hrtime.bigint() - t) / 1000)
      }
    }
    for (const s of subjects) out.get(s.label)!.set(label, quantile(times.get(s.label)!, 0.5))
  }
  return out
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const asked = Number(process.env["SUBSTRAT_BENCH_SCALE_AGENTS"] ?? "")
  const big = Number.isInteger(asked) && asked > 100 ? asked : opts.quick ? 1000 : 4000
  const reps = opts.quick ? 15 : 40
  const before = process.env["SUBSTRAT_BENCH_BEFORE"]
  const subjects: Array<Subject> = [await start("after", root)]
  if (before !== undefined && before !== "") subjects.push(await start("before", before))
  try {
    const load: Array<string> = [loadavg()[0]!.toFixed(2)]
    for (const s of subjects) await grow(s, 100)
    await sleep(3000)
    const small = await measure(subjects, reps)
    const shots = opts.quick ? 3 : 7
    const listSmall = new Map(subjects.map((s) => [s.label, oneShot(s, ["agent", "list"], shots)]))
    const rssSmall = new Map(subjects.map((s) => [s.label, statusKb(s.pid, "VmRSS")]))
    load.push(loadavg()[0]!.toFixed(2))
    // Memory is compared between N/4 and N agents, both past the first creates' one-time costs
    // (compiled code, caches, pools). The inspector's own fds are counted once and left out.
    const mid = big / 4
    let growMs = 0
    const growAll = async (to: number) => {
      const t = Date.now()
      for (const s of subjects) await grow(s, to)
      growMs += Date.now() - t
    }
    const fdCount = (s: Subject) => readdirSync(`/proc/${s.pid}/fd`).length
    await growAll(mid)
    await sleep(3000)
    const heldMid = new Map<string, Held>()
    const inspectorFds = new Map<string, number>()
    for (const s of subjects) {
      const before = fdCount(s)
      heldMid.set(s.label, await held(s.pid, s.port))
      inspectorFds.set(s.label, fdCount(s) - before)
    }
    await growAll(big)
    const createMs = growMs / subjects.length / (big - 100)
    await sleep(3000)
    const rssLarge = new Map(subjects.map((s) => [s.label, statusKb(s.pid, "VmRSS")]))
    const fdsLarge = new Map(subjects.map((s) => [s.label, fdCount(s) - inspectorFds.get(s.label)!]))
    const heldLarge = new Map<string, Held>()
    for (const s of subjects) heldLarge.set(s.label, await held(s.pid, s.port))
    const large = await measure(subjects, reps)
    load.push(loadavg()[0]!.toFixed(2))
    const rows: Array<Record<string, string | number>> = []
    const summary: Record<string, number | string> = { agents: big, create_ms_per_agent: Number(createMs.toFixed(1)) }
    for (const [label] of requests) {
      for (const s of subjects) {
        const a = small.get(s.label)!.get(label)!
        const b = large.get(s.label)!.get(label)!
        rows.push({ request: `${label}, ${s.label}`, "p50 µs at 100": Math.round(a), [`p50 µs at ${big}`]: Math.round(b), ratio: Number((b / a).toFixed(2)) })
        const key = label.replace(/[^a-z0-9]+/g, "_")
        summary[`${key}_us_${s.label}`] = Math.round(b)
        summary[`${key}_ratio_${s.label}`] = Number((b / a).toFixed(2))
      }
    }
    for (const s of subjects) {
      const list = oneShot(s, ["agent", "list"], shots)
      const at100 = listSmall.get(s.label)!
      const floor = oneShot(s, ["--version"], shots)
      const fds = fdsLarge.get(s.label)!
      const perAgent = ((rssLarge.get(s.label)! - rssSmall.get(s.label)!) * 1024) / (big - 100)
      const [h0, h1] = [heldMid.get(s.label)!, heldLarge.get(s.label)!]
      const heapPerAgent = (h1.heapUsed - h0.heapUsed) / (big - mid)
      const rssHeldPerAgent = (h1.rss - h0.rss) / (big - mid)
      rows.push({
        request: `substrat agent list (one shot, ms wall / cpu), ${s.label}`,
        "p50 µs at 100": `${at100.wall} / ${at100.cpu}`,
        [`p50 µs at ${big}`]: `${list.wall} / ${list.cpu}`,
        ratio: Number((list.cpu / Math.max(1, at100.cpu)).toFixed(2))
      })
      rows.push({ request: `substrat --version (floor, ms wall / cpu), ${s.label}`, [`p50 µs at ${big}`]: `${floor.wall} / ${floor.cpu}` })
      summary[`cli_agent_list_ms_${s.label}`] = list.wall
      summary[`cli_agent_list_cpu_ms_${s.label}`] = list.cpu
      summary[`cli_agent_list_cpu_ms_at_100_${s.label}`] = at100.cpu
      summary[`cli_version_cpu_ms_${s.label}`] = floor.cpu
      if (s.label === "after") {
        const page = oneShot(s, ["agent", "list", "--limit", "500"], shots)
        rows.push({ request: `substrat agent list --limit 500 (one shot, ms wall / cpu), ${s.label}`, [`p50 µs at ${big}`]: `${page.wall} / ${page.cpu}` })
        summary[`cli_agent_list_page_ms_${s.label}`] = page.wall
      }
      rows.push({
        request: `an idle agent holds, bytes (RSS / heap after a full GC, ${mid} → ${big} agents; target ≤ 4096), ${s.label}`,
        [`p50 µs at ${big}`]: `${Math.round(rssHeldPerAgent)} / ${Math.round(heapPerAgent)}`
      })
      rows.push({ request: `RSS growth per agent, 100 → ${big} agents, 3 s after the creates, no GC (bytes), ${s.label}`, [`p50 µs at ${big}`]: Math.round(perAgent) })
      summary[`idle_fds_${s.label}`] = fds
      summary[`held_rss_bytes_per_idle_agent_${s.label}`] = Math.round(rssHeldPerAgent)
      summary[`held_heap_bytes_per_idle_agent_${s.label}`] = Math.round(heapPerAgent)
      summary[`rss_no_gc_bytes_per_idle_agent_${s.label}`] = Math.round(perAgent)
    }
    summary["load_avg_1m"] = load.join(" → ")
    return { rows, summary }
  } finally {
    for (const s of subjects) {
      s.conn.close()
      try {
        execFileSync(process.execPath, [s.launcher, "daemon", "stop"], { env: s.env, encoding: "utf8" })
      } catch {}
      rmSync(s.env["SUBSTRAT_HOME"]!, { recursive: true, force: true })
    }
  }
}
