// Daemon and CLI speed, each next to a baseline measured in the same run:
//   1. admin RPC round trip (`agent.list`, one open connection, sequential) through the stock
//      @effect/rpc stack vs a raw Node Unix-socket NDJSON server answering with the same bytes, in
//      a Node process of its own like the daemon — goal ≤ 3×. Also shown: the same raw server
//      inside the bench process (no process hop). Each block runs on a new connection; its first
//      round trip (which waits for the server's connection set-up) is reported in rows of its own;
//      Next to it, the floor of that stack: stock @effect/rpc with the same Rpc and Schemas but a
//      handler answering a constant, no transport guard, no daemon services
//      (scripts/bench-servers/rpc-floor.ts), also in its own process, bundled by esbuild the way
//      the daemon is (and, for reference, the same source run through tsx). CPU time per request
//      (all threads, from /proc/<pid>/task/*/schedstat) is reported for the daemon, the floor and
//      the echo server: on a loaded machine it is steadier than the wall-clock round trip; the
//      `_paired` ratios are medians over the interleaved blocks of one server's CPU per request
//      over another's in the same round;
//   2. wall time of a one-shot `substrat agent list` (real process, bundled CLI) vs `node -e 0`
//      — goal ≤ 1.5×; also their CPU time (user + system, from /proc/self/stat's children
//      fields), summed over the shots.
// SUBSTRAT_BENCH_BEFORE=<another checkout, built> runs that checkout's daemon and launcher in the
// same run, interleaved with these (before/after figures from one run).
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import * as net from "node:net"
import { loadavg, tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { buildOne } from "../build.js"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "daemon"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
// The package's bin (package.json "bin"): what `substrat` runs once installed.
const launcher = join(root, "scripts", "substrat.cjs")

const quantile = (xs: ReadonlyArray<number>, q: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!
}

/**
 * Sequential request/reply round trips over one new connection; microseconds each. `open`: the
 * `n` round trips on the open connection; `first`: the first one (id `n`), which also waits
 * for the server to set the connection up — reported apart.
 */
const roundTrips = async (
  socket: string,
  line: (i: number) => string,
  n: number,
  afterFirst?: () => void
): Promise<{ readonly first: number; readonly open: Array<number> }> => {
  const conn = net.createConnection({ path: socket })
  await new Promise<void>((r, j) => conn.once("connect", () => r()).once("error", j))
  let buf = ""
  let waiting: (() => void) | undefined
  conn.on("data", (d: Buffer) => {
    buf += d.toString("utf8")
    const nl = buf.indexOf("\n")
    if (nl >= 0) {
      buf = buf.slice(nl + 1)
      const w = waiting
      waiting = undefined
      w?.()
    }
  })
  const times: Array<number> = []
  for (let i = 0; i <= n; i++) {
    const t = process.hrtime.bigint()
    await new Promise<void>((r) => {
      waiting = r
      conn.write(line(i === 0 ? n : i - 1))
    })
    times.push(Number(process.hrtime.bigint() - t) / 1000)
    if (i === 0) afterFirst?.()
  }
  conn.destroy()
  return { first: times[0]!, open: times.slice(1) }
}

/** One request/reply on a fresh connection; the reply line, parsed. */
export const oneCall = async (socket: string, line: string): Promise<unknown> => {
  const conn = net.createConnection({ path: socket })
  let buf = ""
  const reply = await new Promise<string>((resolve, reject) => {
    conn.once("error", reject)
    conn.on("data", (d: Buffer) => {
      buf += d.toString("utf8")
      const nl = buf.indexOf("\n")
      if (nl >= 0) resolve(buf.slice(0, nl))
    })
    conn.write(line)
  })
  conn.destroy()
  return JSON.parse(reply)
}

/**
 * The baseline: a raw Node NDJSON server doing the same work at the byte level — it parses each
 * request line and answers with `result`, the daemon's own `agent.list` result (captured once
 * before the run), serialised per request: the same bytes as the daemon's reply. Plain JS source:
 * it runs in a Node process of its own, like the daemon (`-e`), and in the bench process.
 */
const echoSource = `(net, path, result, ready) => {
  const server = net.createServer((c) => {
    let buf = ""
    c.on("data", (d) => {
      buf += d.toString("utf8")
      let nl
      while ((nl = buf.indexOf("\\n")) >= 0) {
        const line = buf.slice(0, nl)
        buf = buf.slice(nl + 1)
        c.write(JSON.stringify({ jsonrpc: "2.0", id: JSON.parse(line).id, result }) + "\\n")
      }
    })
  })
  server.listen(path, ready)
  return server
}`

type Serve = (n: typeof net, path: string, result: unknown, ready: () => void) => net.Server

/** The echo server in the bench process: no process hop between client and server. */
const echoInProcess = (path: string, result: unknown): Promise<net.Server> =>
  new Promise((resolve) => {
    const serve = (0, eval)(echoSource) as Serve
    const server = serve(net, path, result, () => resolve(server))
  })

/** The echo server in a Node process of its own (what the daemon is); killed by the caller. */
const echoProcess = async (path: string, result: unknown): Promise<ChildProcess> => {
  const main = `(${echoSource})(require("node:net"), process.argv[1], JSON.parse(process.argv[2]), () => console.log("up"))`
  const child = spawn(process.execPath, ["-e", main, path, JSON.stringify(result)], { stdio: ["ignore", "pipe", "inherit"] })
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once("data", () => resolve())
    child.once("exit", (code) => reject(new Error(`echo server exited ${code}`)))
  })
  return child
}

/** CPU ms of this process's children that have ended and been waited for (Linux, 10 ms ticks). */
const childrenCpuMs = (): number => {
  // /proc/self/stat: the fields after the ")" that ends the command name; cutime, cstime = 16, 17.
  const fields = readFileSync("/proc/self/stat", "utf8").split(")").pop()!.trim().split(" ")
  return ((Number(fields[13]) + Number(fields[14])) * 1000) / 100
}

const wall = (cmd: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv): number => {
  const t = process.hrtime.bigint()
  const r = spawnSync(cmd, args, { env, stdio: "ignore" })
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} exited ${r.status}`)
  return Number(process.hrtime.bigint() - t) / 1e6
}

/**
 * The stock-stack floor (scripts/bench-servers/rpc-floor.ts) in a Node process of its own. `bundle`:
 * the esbuild bundle built the way dist/daemon.cjs is (scripts/build.ts), run by plain `node` like
 * the daemon — the fair floor. Otherwise the source through tsx, as a reference: tsx compiles with
 * esbuild's keepNames, whose per-closure `__name` calls cost on every request.
 */
const floorProcess = async (path: string, result: unknown, bundle: string | undefined): Promise<ChildProcess> => {
  const script = join(root, "scripts", "bench-servers", "rpc-floor.ts")
  const args = bundle === undefined ? ["--import", "tsx", script] : [bundle]
  const child = spawn(process.execPath, [...args, path, JSON.stringify(result)], {
    cwd: root,
    stdio: ["ignore", "pipe", "inherit"]
  })
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once("data", () => resolve())
    child.once("exit", (code) => reject(new Error(`rpc floor server exited ${code}`)))
  })
  return child
}

/** Nanoseconds a process has spent on a CPU so far, all its threads (Linux). */
const cpuNs = (pid: number): number => {
  let ns = 0
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, "utf8").split(" ")[0])
    } catch {} // a thread that ended meanwhile
  }
  return ns
}

/** One daemon under test: its launcher, home and socket. */
export interface Subject {
  readonly label: string
  readonly launcher: string
  readonly env: NodeJS.ProcessEnv
  readonly socket: string
  readonly pid: number
}

export const startSubject = (label: string, launcherPath: string): Subject => {
  const home = mkdtempSync(join(tmpdir(), "substrat-bench-"))
  const env = { ...process.env, SUBSTRAT_HOME: home }
  execFileSync(process.execPath, [launcherPath, "daemon", "start"], { env, encoding: "utf8" })
  execFileSync(process.execPath, [launcherPath, "agent", "create", "--name", "bench", "--provider", "scripted"], { env, encoding: "utf8" })
  const pid = Number(readFileSync(join(home, "daemon.pid"), "utf8").trim())
  return { label, launcher: launcherPath, env, socket: join(home, "daemon.sock"), pid }
}

export const stopSubject = (s: Subject) => {
  try {
    execFileSync(process.execPath, [s.launcher, "daemon", "stop"], { env: s.env, encoding: "utf8" })
  } catch {}
  rmSync(s.env["SUBSTRAT_HOME"]!, { recursive: true, force: true })
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const n = opts.quick ? 300 : 6000
  /** Blocks per server, interleaved: short blocks pair each server's figures with the others' at the same load. */
  const blocks = 30
  const shots = opts.quick ? 6 : 30
  const beforeRoot = process.env["SUBSTRAT_BENCH_BEFORE"]
  const subjects: Array<Subject> = [startSubject("after", launcher)]
  try {
    if (beforeRoot !== undefined && beforeRoot !== "") subjects.push(startSubject("before", join(beforeRoot, "scripts", "substrat.cjs")))
    const home = subjects[0]!.env["SUBSTRAT_HOME"]!
    const req = (i: number) => JSON.stringify({ jsonrpc: "2.0", id: i, method: "agent.list" }) + "\n"
    const answer = await oneCall(subjects[0]!.socket, req(0)) as { result?: unknown }
    if (answer.result === undefined) throw new Error(`agent.list failed: ${JSON.stringify(answer)}`)
    const echoPath = join(home, "echo.sock")
    const localPath = join(home, "echo-local.sock")
    const floorPath = join(home, "floor.sock")
    const floorTsxPath = join(home, "floor-tsx.sock")
    const floorBundle = join(home, "rpc-floor.cjs")
    await buildOne("scripts/bench-servers/rpc-floor.ts", floorBundle)
    const echo = await echoProcess(echoPath, answer.result)
    const floor = await floorProcess(floorPath, answer.result, floorBundle)
    const floorTsx = await floorProcess(floorTsxPath, answer.result, undefined)
    const local = await echoInProcess(localPath, answer.result)
    const load1 = loadavg()[0]!
    const rpc = new Map(subjects.map((s) => [s.label, [] as Array<number>]))
    const first = new Map(subjects.map((s) => [s.label, [] as Array<number>]))
    const raw: Array<number> = []
    const rawLocal: Array<number> = []
    const firstRaw: Array<number> = []
    const floorTimes: Array<number> = []
    const floorTsxTimes: Array<number> = []
    /** CPU nanoseconds spent by each server process on its open connections (label → ns). */
    const cpu = new Map<string, number>()
    /** The same per block, in block order (label → ns per block): paired ratios between servers. */
    const cpuBlocks = new Map<string, Array<number>>()
    /** One block on a new connection: open-connection times into `into`, the first into `firstInto`. */
    const block = async (path: string, into: Array<number>, firstInto?: Array<number>, cpuOf?: { label: string; pid: number }) => {
      let before = 0
      const r = await roundTrips(path, req, n / blocks, () => {
        if (cpuOf !== undefined) before = cpuNs(cpuOf.pid)
      })
      if (cpuOf !== undefined) {
        const ns = cpuNs(cpuOf.pid) - before
        cpu.set(cpuOf.label, (cpu.get(cpuOf.label) ?? 0) + ns)
        cpuBlocks.set(cpuOf.label, [...(cpuBlocks.get(cpuOf.label) ?? []), ns])
      }
      into.push(...r.open)
      firstInto?.push(r.first)
    }
    try {
      // Warm-up: every server JIT-compiled before timing.
      for (const s of subjects) await roundTrips(s.socket, req, 2000)
      await roundTrips(echoPath, req, 2000)
      await roundTrips(floorPath, req, 2000)
      await roundTrips(floorTsxPath, req, 2000)
      await roundTrips(localPath, req, 2000)
      for (let b = 0; b < blocks; b++) {
        for (const s of subjects) await block(s.socket, rpc.get(s.label)!, first.get(s.label)!, s)
        await block(echoPath, raw, firstRaw, { label: "echo", pid: echo.pid! })
        await block(floorPath, floorTimes, undefined, { label: "floor", pid: floor.pid! })
        await block(floorTsxPath, floorTsxTimes, undefined, { label: "floor_tsx", pid: floorTsx.pid! })
        await block(localPath, rawLocal)
      }
    } finally {
      echo.kill()
      floor.kill()
      floorTsx.kill()
      local.close()
    }
    // Reaped before the one-shot runs, so none of their CPU lands in the children's counters.
    for (const child of [echo, floor, floorTsx]) {
      if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once("exit", r))
    }
    /** Server CPU per request on the open connection (µs). */
    const cpuPer = (label: string) => Number(((cpu.get(label) ?? 0) / 1000 / n).toFixed(1))
    /**
     * Median over the blocks of `label`'s CPU per request divided by `base`'s in the same block
     * round: the two ran seconds apart, at about the same load, so this ratio moves less with the
     * machine's load than the ratio of the totals.
     */
    const pairedCpu = (label: string, base: string) => {
      const a = cpuBlocks.get(label) ?? []
      const b = cpuBlocks.get(base) ?? []
      return ratio(quantile(a.map((x, i) => x / b[i]!), 0.5), 1)
    }
    const load2 = loadavg()[0]!

    // 2. One-shot CLI vs bare node, alternating.
    const shot = new Map(subjects.map((s) => [s.label, [] as Array<number>]))
    for (const s of subjects) wall(process.execPath, [s.launcher, "agent", "list"], s.env) // warm the code cache
    const bare: Array<number> = []
    /** CPU ms (user + system) of every shot, summed per command (label → ms). */
    const shotCpu = new Map<string, number>()
    const timed = (label: string, run: () => number): number => {
      const before = childrenCpuMs()
      const ms = run()
      shotCpu.set(label, (shotCpu.get(label) ?? 0) + childrenCpuMs() - before)
      return ms
    }
    for (let i = 0; i < shots; i++) {
      for (const s of subjects) {
        shot.get(s.label)!.push(timed(s.label, () => wall(process.execPath, [s.launcher, "agent", "list"], s.env)))
      }
      bare.push(timed("node", () => wall(process.execPath, ["-e", "0"], subjects[0]!.env)))
    }

    const p50 = (xs: ReadonlyArray<number>) => quantile(xs, 0.5)
    const p99 = (xs: ReadonlyArray<number>) => quantile(xs, 0.99)
    const ratio = (a: number, b: number) => Number((a / b).toFixed(2))
    const row = (measure: string, xs: ReadonlyArray<number>) => ({ measure, p50: p50(xs), p99: p99(xs), n: xs.length })
    const summary: Record<string, number | string> = {
      response_bytes: JSON.stringify({ jsonrpc: "2.0", id: 0, result: answer.result }).length + 1,
      echo_p50_us: Math.round(p50(raw)),
      echo_p99_us: Math.round(p99(raw)),
      echo_in_bench_process_p50_us: Math.round(p50(rawLocal)),
      first_request_echo_p50_us: Math.round(p50(firstRaw)),
      floor_p50_us: Math.round(p50(floorTimes)),
      floor_vs_echo_p50: ratio(p50(floorTimes), p50(raw)),
      echo_cpu_us_per_request: cpuPer("echo"),
      floor_cpu_us_per_request: cpuPer("floor"),
      floor_vs_echo_cpu: ratio(cpuPer("floor"), cpuPer("echo")),
      floor_vs_echo_cpu_paired: pairedCpu("floor", "echo"),
      floor_tsx_p50_us: Math.round(p50(floorTsxTimes)),
      floor_tsx_vs_echo_p50: ratio(p50(floorTsxTimes), p50(raw)),
      floor_tsx_cpu_us_per_request: cpuPer("floor_tsx"),
      load_avg_1m: `${load1.toFixed(2)} → ${load2.toFixed(2)}`,
      node_e0_ms: Math.round(p50(bare)),
      node_e0_cpu_ms: Math.round((shotCpu.get("node") ?? 0) / shots)
    }
    const rows: Array<Record<string, string | number>> = []
    for (const s of subjects) {
      const r = rpc.get(s.label)!
      const suffix = s.label === "after" ? "" : `_${s.label}`
      rows.push(row(`admin RPC agent.list, ${s.label} (µs)`, r))
      rows.push(row(`first request on a new connection, ${s.label} (µs)`, first.get(s.label)!))
      summary[`rpc_p50_us${suffix}`] = Math.round(p50(r))
      summary[`rpc_p99_us${suffix}`] = Math.round(p99(r))
      summary[`rpc_vs_echo_p50${suffix}`] = ratio(p50(r), p50(raw))
      summary[`rpc_vs_echo_p99${suffix}`] = ratio(p99(r), p99(raw))
      summary[`first_request_p50_us${suffix}`] = Math.round(p50(first.get(s.label)!))
      summary[`rpc_cpu_us_per_request${suffix}`] = cpuPer(s.label)
      summary[`rpc_vs_echo_cpu${suffix}`] = ratio(cpuPer(s.label), cpuPer("echo"))
      summary[`rpc_vs_echo_cpu_paired${suffix}`] = pairedCpu(s.label, "echo")
      summary[`rpc_vs_floor_cpu_paired${suffix}`] = pairedCpu(s.label, "floor")
      summary[`cli_agent_list_ms${suffix}`] = Math.round(p50(shot.get(s.label)!))
      summary[`cli_vs_node${suffix}`] = ratio(p50(shot.get(s.label)!), p50(bare))
      summary[`cli_agent_list_cpu_ms${suffix}`] = Math.round((shotCpu.get(s.label) ?? 0) / shots)
      summary[`cli_vs_node_cpu${suffix}`] = ratio(shotCpu.get(s.label) ?? 0, shotCpu.get("node") ?? 1)
    }
    rows.push(row("stock @effect/rpc floor, constant handler, bundled like the daemon (µs)", floorTimes))
    rows.push(row("the same floor from source through tsx (µs)", floorTsxTimes))
    rows.push(row("raw NDJSON echo, own process (µs)", raw))
    rows.push(row("raw NDJSON echo, bench process (µs)", rawLocal))
    rows.push(row("first request on a new connection, raw echo own process (µs)", firstRaw))
    for (const s of subjects) rows.push(row(`substrat agent list, ${s.label} (ms)`, shot.get(s.label)!))
    rows.push(row("node -e 0 (ms)", bare))
    return { rows, summary }
  } finally {
    for (const s of subjects) stopSubject(s)
  }
}
