// A throwaway Postgres server for tests: `initdb` into a temp directory, then `postgres` started
// as a child process on a free port of 127.0.0.1 (no Unix socket), password authentication, its
// output in `<dir>/postgres.log`. Postgres refuses to run as root, and CI runs as root: there the
// server runs as the unprivileged user `nobody` (created as `substrat-pg` with useradd when the
// system has no `nobody`), and only the data directory is handed to it. The server is ours by pid:
// `stop` ends that pid (SIGINT, a fast shutdown), `kill` SIGKILLs it (a crash), `start` brings the
// same data directory back on the same port; `dispose` stops it and removes the directory.
// No test-runner import here: benchmarks (scripts/bench) start it too; postgresPerFile (./postgres.ts)
// ties one server to a vitest file. Test files using it declare `// requires: postgres` (scripts/system-tools.ts finds the binaries on
// PATH or in Debian's /usr/lib/postgresql/<major>/bin).
import { SqlClient } from "@effect/sql"
import { Effect, Redacted } from "effect"
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import { dirname, join } from "node:path"
import { locate } from "../../scripts/system-tools.js"
import * as Postgres from "../../src/storage/Postgres.js"
import { makeTmpDir, removeDir } from "./tmp.js"

export interface PgServer {
  /** `postgres://substrat:<password>@127.0.0.1:<port>/postgres` */
  readonly url: string
  readonly port: number
  readonly dir: string
  /** The running postmaster's pid, undefined while stopped. */
  readonly pid: () => number | undefined
  /** Start (again) on the same data directory and port; resolves once it accepts connections. */
  readonly start: () => Promise<void>
  /** Fast shutdown; resolves when the process has exited. */
  readonly stop: () => Promise<void>
  /** SIGKILL the postmaster (its backends see it die and exit); resolves when it has exited. */
  readonly kill: () => Promise<void>
  /** Stop and remove everything. */
  readonly dispose: () => Promise<void>
  /** The server's log so far (for failure messages). */
  readonly log: () => string
}

/** A free TCP port on 127.0.0.1 (closed again; the caller binds it next). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.once("error", reject)
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address()
      const port = typeof addr === "object" && addr !== null ? addr.port : 0
      srv.close(() => resolve(port))
    })
  })

const passwdEntry = (name: string): { uid: number; gid: number } | undefined => {
  const line = fs.readFileSync("/etc/passwd", "utf8").split("\n").find((l) => l.startsWith(`${name}:`))
  if (line === undefined) return undefined
  const [, , uid, gid] = line.split(":")
  return { uid: Number(uid), gid: Number(gid) }
}

/** Who runs the server: ourselves, or (as root) `nobody` / a created `substrat-pg`. */
const serverUser = (): { uid: number; gid: number } | undefined => {
  if (process.getuid?.() !== 0) return undefined
  const nobody = passwdEntry("nobody") ?? passwdEntry("substrat-pg")
  if (nobody !== undefined) return nobody
  const r = spawnSync("useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "substrat-pg"], {
    encoding: "utf8"
  })
  const created = passwdEntry("substrat-pg")
  if (created === undefined) throw new Error(`useradd substrat-pg failed: ${r.stderr}`)
  return created
}

/** Resolve once something accepts TCP on 127.0.0.1:port and postgres says it is ready in its log. */
const waitReady = async (port: number, logFile: string, child: ChildProcess): Promise<void> => {
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`postgres exited (${child.exitCode ?? child.signalCode}):\n${fs.readFileSync(logFile, "utf8")}`)
    }
    const text = fs.existsSync(logFile) ? fs.readFileSync(logFile, "utf8") : ""
    // The last "ready" line must follow the last start: a restart appends to the same log.
    if (text.lastIndexOf("ready to accept connections") > text.lastIndexOf("starting PostgreSQL")) {
      const ok = await new Promise<boolean>((resolve) => {
        const s = net.connect(port, "127.0.0.1", () => {
          s.destroy()
          resolve(true)
        })
        s.once("error", () => resolve(false))
      })
      if (ok) return
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`postgres did not become ready on port ${port}:\n${fs.readFileSync(logFile, "utf8")}`)
}

const exited = (child: ChildProcess): Promise<void> =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((resolve) => child.once("exit", () => resolve()))

/** initdb a fresh cluster and start it. Throws (with initdb's/postgres's output) when it cannot. */
export const startPostgres = async (): Promise<PgServer> => {
  const initdb = locate("postgres")
  if (initdb === undefined) throw new Error("postgres is not installed (initdb/postgres); install: apt-get install postgresql")
  const bin = dirname(initdb)
  const dir = makeTmpDir("substrat-pg-")
  const user = serverUser()
  // `nobody` must reach the data directory through ours; nothing else in it is theirs.
  fs.chmodSync(dir, 0o711)
  const data = join(dir, "data")
  const logFile = join(dir, "postgres.log")
  const password = randomBytes(18).toString("hex")
  const pwfile = join(dir, "pwfile")
  fs.mkdirSync(data, { mode: 0o700 })
  fs.writeFileSync(pwfile, `${password}\n`, { mode: 0o600 })
  if (user !== undefined) {
    fs.chownSync(data, user.uid, user.gid)
    fs.chownSync(pwfile, user.uid, user.gid)
  }
  const asUser = user === undefined ? {} : { uid: user.uid, gid: user.gid }
  const init = spawnSync(
    join(bin, "initdb"),
    ["-D", data, "-U", "substrat", "--auth=scram-sha-256", `--pwfile=${pwfile}`, "-E", "UTF8", "--no-locale"],
    { ...asUser, encoding: "utf8", cwd: dir, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LANG: "C" } }
  )
  fs.rmSync(pwfile, { force: true })
  if (init.status !== 0) {
    removeDir(dir)
    throw new Error(`initdb failed (${init.status}):\n${init.stdout}\n${init.stderr}`)
  }
  const port = await freePort()
  let child: ChildProcess | undefined
  const start = async () => {
    if (child !== undefined && child.exitCode === null && child.signalCode === null) return
    // A killed postmaster's backends may hold its shared memory for a moment: bounded retries.
    for (let attempt = 0; ; attempt++) {
      const out = fs.openSync(logFile, "a", 0o600)
      const c = spawn(
        join(bin, "postgres"),
        ["-D", data, "-p", String(port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "fsync=on"],
        { ...asUser, cwd: dir, stdio: ["ignore", out, out], env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LANG: "C" } }
      )
      fs.closeSync(out)
      child = c
      try {
        await waitReady(port, logFile, c)
        return
      } catch (e) {
        if (attempt >= 20) throw e
        await exited(c)
        await new Promise((r) => setTimeout(r, 250))
      }
    }
  }
  const signal = async (sig: NodeJS.Signals) => {
    const c = child
    if (c === undefined || c.pid === undefined) return
    if (c.exitCode === null && c.signalCode === null) c.kill(sig)
    await exited(c)
    child = undefined
  }
  const stop = () => signal("SIGINT")
  const kill = async () => {
    await signal("SIGKILL")
    // Its backends exit when they notice; wait (bounded) until none is attached to the data directory.
    for (let i = 0; i < 200; i++) {
      const r = spawnSync("fuser", [data], { encoding: "utf8" })
      if (r.error !== undefined || r.status !== 0) return
      await new Promise((res) => setTimeout(res, 50))
    }
  }
  try {
    await start()
  } catch (e) {
    removeDir(dir)
    throw e
  }
  return {
    url: `postgres://substrat:${password}@127.0.0.1:${port}/postgres`,
    port,
    dir,
    pid: () => child?.pid,
    start,
    stop,
    kill,
    dispose: async () => {
      await stop()
      removeDir(dir)
    },
    log: () => fs.existsSync(logFile) ? fs.readFileSync(logFile, "utf8") : ""
  }
}

let databases = 0

/** A new, empty database on `server`; its URL. */
export const freshDatabase = async (server: PgServer): Promise<string> => {
  const name = `t${process.pid}_${++databases}`
  await Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`CREATE DATABASE ${name}`)).pipe(
      Effect.provide(Postgres.layer({ url: Redacted.make(server.url), maxConnections: 1 }))
    )
  )
  const u = new URL(server.url)
  u.pathname = `/${name}`
  return u.toString()
}

