// Daemon and CLI speed, each next to a baseline measured in the same run:
//   1. admin RPC round trip (`agent.list`, one open connection, sequential) vs a raw Node
//      Unix-socket NDJSON server answering with the same bytes — goal ≤ 1.5×;
//   2. wall time of a one-shot `substrat agent list` (real process, bundled CLI) vs `node -e 0`
//      — goal ≤ 1.6×.
import { execFileSync, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "daemon"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const launcher = join(root, "scripts", "substrat.js")

const quantile = (xs: ReadonlyArray<number>, q: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!
}

/** Sequential request/reply round trips over one connection; microseconds each. */
const roundTrips = async (socket: string, line: (i: number) => string, n: number): Promise<Array<number>> => {
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
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint()
    await new Promise<void>((r) => {
      waiting = r
      conn.write(line(i))
    })
    times.push(Number(process.hrtime.bigint() - t) / 1000)
  }
  conn.destroy()
  return times
}

/** One request/reply on a fresh connection; the reply line, parsed. */
const oneCall = async (socket: string, line: string): Promise<unknown> => {
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
 * before the run), serialised per request: the same bytes as the daemon's reply.
 */
const echoServer = async (path: string, result: unknown): Promise<net.Server> => {
  const server = net.createServer((c) => {
    let buf = ""
    c.on("data", (d: Buffer) => {
      buf += d.toString("utf8")
      let nl: number
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl)
        buf = buf.slice(nl + 1)
        // Parse and re-serialise, like any JSON line server would.
        c.write(JSON.stringify({ jsonrpc: "2.0", id: (JSON.parse(line) as { id: number }).id, result }) + "\n")
      }
    })
  })
  await new Promise<void>((r) => server.listen(path, () => r()))
  return server
}

const wall = (cmd: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv): number => {
  const t = process.hrtime.bigint()
  const r = spawnSync(cmd, args, { env, stdio: "ignore" })
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} exited ${r.status}`)
  return Number(process.hrtime.bigint() - t) / 1e6
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const home = mkdtempSync(join(tmpdir(), "substrat-bench-"))
  const env = { ...process.env, SUBSTRAT_HOME: home }
  const cli = (...args: Array<string>) => execFileSync(process.execPath, [launcher, ...args], { env, encoding: "utf8" })
  const n = opts.quick ? 300 : 3000
  const shots = opts.quick ? 6 : 30
  cli("daemon", "start")
  try {
    cli("agent", "create", "--name", "bench", "--provider", "scripted")

    // 1. RPC round trip vs echo, interleaved in blocks so drift hits both alike.
    const echoPath = join(home, "echo.sock")
    const req = (i: number) => JSON.stringify({ jsonrpc: "2.0", id: i, method: "agent.list" }) + "\n"
    const answer = await oneCall(join(home, "daemon.sock"), req(0)) as { result?: unknown }
    if (answer.result === undefined) throw new Error(`agent.list failed: ${JSON.stringify(answer)}`)
    const echo = await echoServer(echoPath, answer.result)
    // Warm-up: both servers JIT-compiled before timing (the daemon's first thousand calls are
    // 2–3× slower than its steady state).
    await roundTrips(join(home, "daemon.sock"), req, 2000)
    await roundTrips(echoPath, req, 2000)
    const rpc: Array<number> = []
    const raw: Array<number> = []
    for (let block = 0; block < 10; block++) {
      rpc.push(...await roundTrips(join(home, "daemon.sock"), req, n / 10))
      raw.push(...await roundTrips(echoPath, req, n / 10))
    }
    echo.close()

    // 2. One-shot CLI vs bare node, alternating.
    wall(process.execPath, [launcher, "agent", "list"], env) // warm the code cache
    const oneShot: Array<number> = []
    const bare: Array<number> = []
    for (let i = 0; i < shots; i++) {
      oneShot.push(wall(process.execPath, [launcher, "agent", "list"], env))
      bare.push(wall(process.execPath, ["-e", "0"], env))
    }

    const rpcP50 = quantile(rpc, 0.5)
    const rawP50 = quantile(raw, 0.5)
    const cliP50 = quantile(oneShot, 0.5)
    const nodeP50 = quantile(bare, 0.5)
    return {
      rows: [
        { measure: "admin RPC agent.list (µs)", p50: rpcP50, p99: quantile(rpc, 0.99), n: rpc.length },
        { measure: "raw NDJSON echo (µs)", p50: rawP50, p99: quantile(raw, 0.99), n: raw.length },
        { measure: "substrat agent list (ms)", p50: cliP50, p99: quantile(oneShot, 0.99), n: oneShot.length },
        { measure: "node -e 0 (ms)", p50: nodeP50, p99: quantile(bare, 0.99), n: bare.length }
      ],
      summary: {
        response_bytes: JSON.stringify({ jsonrpc: "2.0", id: 0, result: answer.result }).length + 1,
        rpc_p50_us: Math.round(rpcP50),
        rpc_p99_us: Math.round(quantile(rpc, 0.99)),
        echo_p50_us: Math.round(rawP50),
        echo_p99_us: Math.round(quantile(raw, 0.99)),
        rpc_vs_echo_p50: Number((rpcP50 / rawP50).toFixed(2)),
        rpc_vs_echo_p99: Number((quantile(rpc, 0.99) / quantile(raw, 0.99)).toFixed(2)),
        cli_agent_list_ms: Math.round(cliP50),
        node_e0_ms: Math.round(nodeP50),
        cli_vs_node: Number((cliP50 / nodeP50).toFixed(2))
      }
    }
  } finally {
    try {
      cli("daemon", "stop")
    } catch {}
    rmSync(home, { recursive: true, force: true })
  }
}
