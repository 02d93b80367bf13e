// Real-process helpers for the daemon/CLI suites: run the built `substrat` CLI (scripts/substrat.js,
// bundle in dist/ — `npm test` builds it first; a stale bundle is rebuilt by the launcher), start
// and kill daemons we own, talk raw NDJSON JSON-RPC to the socket.
import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

export const repoRoot = fileURLToPath(new URL("../..", import.meta.url))
export const launcher = join(repoRoot, "scripts", "substrat.js")

export interface CliResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Run one CLI command to completion. */
export const cli = (home: string, args: ReadonlyArray<string>, input?: string): Promise<CliResult> =>
  new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [launcher, ...args],
      { env: { ...process.env, SUBSTRAT_HOME: home }, maxBuffer: 64 * 1024 * 1024, timeout: 120_000 },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === "number" ? err.code : 1
        resolve({ code, stdout, stderr })
      }
    )
    if (input !== undefined) child.stdin?.end(input)
    else child.stdin?.end()
  })

/** Run a CLI command that must succeed with `--json`, and parse its output. */
export const cliJson = async <A = unknown>(home: string, args: ReadonlyArray<string>): Promise<A> => {
  const r = await cli(home, [...args, "--json"])
  if (r.code !== 0) throw new Error(`substrat ${args.join(" ")} → ${r.code}: ${r.stderr}`)
  return JSON.parse(r.stdout) as A
}

/** A CLI process left running (attach, logs -f), with its output accumulated. */
export interface Running {
  readonly child: ChildProcess
  readonly out: () => string
  readonly err: () => string
  readonly exit: Promise<number>
}

export const spawnCli = (
  home: string,
  args: ReadonlyArray<string>,
  command = process.execPath,
  prefix: ReadonlyArray<string> = [launcher],
  env: Readonly<Record<string, string>> = {}
): Running => {
  const child = spawn(command, [...prefix, ...args], { env: { ...process.env, ...env, SUBSTRAT_HOME: home }, stdio: ["pipe", "pipe", "pipe"] })
  let out = ""
  let err = ""
  child.stdout!.on("data", (d: Buffer) => (out += d.toString("utf8")))
  child.stderr!.on("data", (d: Buffer) => (err += d.toString("utf8")))
  // Settled once the output is read too: 'exit' can come before the last of stderr (a loaded CI
  // once saw exit 3 with its message not read yet). 'close' waits for the pipes; a grandchild
  // holding them open would delay it, so at most 5 s after 'exit'.
  const closed = new Promise<void>((resolve) => child.on("close", () => resolve()))
  const exit = new Promise<number>((resolve) =>
    child.on("exit", (code, signal) => {
      void Promise.race([closed, sleep(5_000)]).then(() => resolve(code ?? (signal ? 128 : 1)))
    })
  )
  return { child, out: () => out, err: () => err, exit }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Poll until `f` returns a value (not undefined), or fail after `timeoutMs`. */
export const waitFor = async <A>(what: string, f: () => Promise<A | undefined> | A | undefined, timeoutMs = 30_000): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = await f()
    if (v !== undefined) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

/** Has `pid` not exited? A zombie (exited, not yet reaped by its parent) counts as exited. */
export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z"
  } catch {
    return false
  }
}

/** SIGKILL a daemon we started and wait until it is gone. */
export const kill9 = async (pid: number): Promise<void> => {
  // 0 or a negative number would signal a whole process group (the test runner's own).
  if (!(pid > 0)) throw new Error(`kill9: not a pid: ${pid}`)
  process.kill(pid, "SIGKILL")
  await waitFor(`daemon ${pid} gone`, () => (isAlive(pid) ? undefined : true), 10_000)
}

/** Daemons started by a suite; `killAll` SIGKILLs the ones still alive (by pid, ours only). */
export const daemons = () => {
  const pids = new Set<number>()
  return {
    track: (pid: number) => pids.add(pid),
    killAll: async () => {
      for (const pid of pids) if (isAlive(pid)) process.kill(pid, "SIGKILL")
      for (const pid of pids) await waitFor(`pid ${pid} gone`, () => (isAlive(pid) ? undefined : true), 10_000)
      pids.clear()
    }
  }
}

/**
 * A daemon for `home` (extra: `daemon start`'s options, e.g. `--http 127.0.0.1:0`); returns its
 * pid. Started as `daemon start` starts it — `substrat daemon run` detached, output appended to
 * `daemon.log` — and awaited here (its pid file names it and its socket answers), without a CLI
 * process polling in between: a suite starts hundreds. `startDaemonCli` goes through the CLI
 * (the files that test `daemon start` itself).
 */
export const startDaemon = async (home: string, extra: ReadonlyArray<string> = []): Promise<number> => {
  fs.mkdirSync(home, { recursive: true, mode: 0o700 })
  const socket = join(home, "daemon.sock")
  const log = fs.openSync(join(home, "daemon.log"), "a", 0o600)
  const child = spawn(process.execPath, [launcher, "daemon", "run", "--home", home, ...extra], {
    detached: true,
    stdio: ["ignore", log, log],
    env: { ...process.env, SUBSTRAT_HOME: home }
  })
  fs.closeSync(log)
  child.unref()
  const pid = child.pid
  if (pid === undefined) throw new Error(`cannot start the daemon in ${home}`)
  const pidFile = join(home, "daemon.pid")
  const tail = () => fs.readFileSync(join(home, "daemon.log"), "utf8").trim().split("\n").slice(-3).join(" | ")
  const deadline = Date.now() + 45_000
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`the daemon exited during start-up (code ${child.exitCode ?? child.signalCode}); daemon.log: ${tail()}`)
    }
    // An empty pid file: a disk too full to take it (the daemon starts read-only). It was emptied
    // under the daemon's lock, which a previous daemon of this home released only when gone
    // (its listening socket with it): the socket answering is our child's.
    const written = fs.existsSync(pidFile) ? fs.readFileSync(pidFile, "utf8").trim() : undefined
    if ((written === String(pid) || written === "") && (await connects(socket))) return pid
    if (Date.now() > deadline) {
      process.kill(pid, "SIGKILL")
      throw new Error(`the daemon did not answer within 45 s; daemon.log: ${tail()}`)
    }
    await sleep(25)
  }
}

/** Does a Unix socket accept a connection within a second? */
const connects = (path: string): Promise<boolean> =>
  new Promise((resolve) => {
    const conn = net.createConnection({ path })
    const done = (ok: boolean) => {
      clearTimeout(timer)
      conn.destroy()
      resolve(ok)
    }
    const timer = setTimeout(() => done(false), 1_000)
    conn.once("connect", () => done(true))
    conn.once("error", () => done(false))
  })

/** `substrat daemon start --json` in `home`; returns the daemon's pid. */
export const startDaemonCli = async (home: string, extra: ReadonlyArray<string> = []): Promise<number> => {
  const pidFile = join(home, "daemon.pid")
  const pidIn = () => (fs.existsSync(pidFile) ? Number(fs.readFileSync(pidFile, "utf8").trim()) : NaN)
  const before = pidIn() // a daemon already running here is never the one ended below
  try {
    const r = await cliJson<{ pid: number }>(home, ["daemon", "start", ...extra])
    return r.pid
  } catch (e) {
    // `daemon start` gave up waiting (a loaded machine): the daemon it launched may still come up
    // afterwards, untracked. Give it a few seconds to write its pid file and end it, then fail.
    for (let i = 0; i < 50; i++) {
      const pid = pidIn()
      if (pid > 0 && pid !== before && isAlive(pid)) {
        process.kill(pid, "SIGKILL")
        break
      }
      await sleep(100)
    }
    throw e
  }
}

export interface Agent {
  readonly id: string
  readonly name: string
  readonly session_id: string
  readonly parent_id: string | null
  readonly provider: string
  readonly role: string
  readonly state: string
}

export interface Inspect {
  readonly agent: Agent
  readonly parent: string | null
  readonly children: ReadonlyArray<Agent>
  readonly inbox: number
  readonly queued_turns: number
  readonly waiting_for_replies: number
}

/**
 * Every agent idle with nothing queued or awaited, three polls in a row (over one raw connection).
 * `parked` names agents parked by a spent budget (docs/budgets.md): idle, awaiting nothing, but
 * their interrupted turn stays queued until a raise, so their queued turns are not outstanding work.
 */
export const waitQuiet = async (home: string, parked: ReadonlyArray<string> = []): Promise<ReadonlyArray<Agent>> => {
  const c = await rpcClient(join(home, "daemon.sock"))
  try {
    let calm = 0
    return await waitFor("quiescence", async () => {
      const { agents } = await c.call<{ agents: ReadonlyArray<Agent> }>("agent.list")
      const infos = await Promise.all(agents.map((a) => c.call<Inspect>("agent.inspect", { agent: a.id })))
      const busy = infos.some((i) =>
        i.agent.state !== "idle" || (i.queued_turns > 0 && !parked.includes(i.agent.name)) || i.waiting_for_replies > 0
      )
      calm = busy ? 0 : calm + 1
      return calm >= 3 ? agents : undefined
    }, 60_000)
  } finally {
    c.close()
  }
}

/** JSON-RPC calls over one raw connection (ids assigned here; replies matched by id). */
export const rpcClient = async (socket: string) => {
  const conn = await rawConnection(socket)
  let nextId = 1
  const pending = new Map<number, (reply: { result?: unknown; error?: { code: number; message: string; data?: unknown } }) => void>()
  let pumping = false
  const pump = async () => {
    if (pumping) return
    pumping = true
    while (pending.size > 0) {
      const line = await conn.next(60_000)
      const msg = JSON.parse(line) as { id: number; result?: unknown; error?: { code: number; message: string; data?: unknown }; chunk?: boolean }
      if (msg.chunk) continue
      const f = pending.get(msg.id)
      pending.delete(msg.id)
      f?.(msg)
    }
    pumping = false
  }
  return {
    call: <A>(method: string, params?: unknown): Promise<A> =>
      new Promise<A>((resolve, reject) => {
        const id = nextId++
        // The error's data (the daemon's typed error, its message included) goes into the Error's message.
        pending.set(id, (r) =>
          r.error
            ? reject(new Error(`${method}: ${r.error.code} ${r.error.message}${r.error.data === undefined ? "" : ` ${JSON.stringify(r.error.data)}`}`))
            : resolve(r.result as A))
        conn.write(JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) }) + "\n")
        void pump()
      }),
    close: conn.close
  }
}

/**
 * One admin RPC over a fresh raw connection, answered as the daemon encodes it (what the CLI's
 * `--json` prints): for polls and lookups, which need no CLI process of their own.
 */
export const rpcOnce = async <A>(home: string, method: string, params?: unknown): Promise<A> => {
  const c = await rpcClient(join(home, "daemon.sock"))
  try {
    return await c.call<A>(method, params)
  } finally {
    c.close()
  }
}

/** The human inbox's items as `inbox --json` prints them, over the admin socket: for polls (no CLI process each). */
export const inboxItems = async <I>(home: string): Promise<ReadonlyArray<I>> =>
  (await rpcOnce<{ items: ReadonlyArray<I> }>(home, "inbox.list")).items

/** Does the daemon of `home` answer `daemon.status`? (true, or undefined for `waitFor`) */
export const answers = (home: string): Promise<true | undefined> =>
  rpcOnce(home, "daemon.status").then(() => true as const, () => undefined)

export const modeOf = (path: string): number => fs.statSync(path).mode & 0o777

/** A raw NDJSON connection to the admin socket: write lines, read reply lines one by one. */
export const rawConnection = (socket: string): Promise<{
  readonly write: (data: string) => void
  readonly next: (timeoutMs?: number) => Promise<string>
  readonly close: () => void
  readonly closed: () => boolean
}> =>
  new Promise((resolve, reject) => {
    const conn = net.createConnection({ path: socket })
    const lines: Array<string> = []
    const waiters: Array<(l: string) => void> = []
    let buf = ""
    let isClosed = false
    conn.on("data", (d: Buffer) => {
      buf += d.toString("utf8")
      let nl: number
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl)
        buf = buf.slice(nl + 1)
        const w = waiters.shift()
        if (w) w(line)
        else lines.push(line)
      }
    })
    conn.on("close", () => (isClosed = true))
    conn.once("error", reject)
    conn.once("connect", () =>
      resolve({
        write: (data) => conn.write(data),
        next: (timeoutMs = 10_000) =>
          new Promise((res, rej) => {
            const l = lines.shift()
            if (l !== undefined) return res(l)
            const timer = setTimeout(() => rej(new Error("no reply line")), timeoutMs)
            waiters.push((line) => {
              clearTimeout(timer)
              res(line)
            })
          }),
        close: () => conn.destroy(),
        closed: () => isClosed
      }))
  })
