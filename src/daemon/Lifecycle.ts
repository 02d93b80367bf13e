// Start-up and shutdown chores of the daemon process: `$SUBSTRAT_HOME` (0700), the pid file
// (single-instance lock; a stale one is removed), the stale socket file, and the socket's mode.
// Each acquisition is scoped, so a failed start-up or any shutdown releases them the same way.
import { Data, Effect, type Scope } from "effect"
import * as fs from "node:fs"
import * as net from "node:net"
import type { Paths } from "../config/Paths.js"

export class DaemonError extends Data.TaggedError("DaemonError")<{
  readonly reason: "already-running" | "home" | "pidfile" | "socket"
  readonly message: string
  readonly pid?: number
}> {}

const errMessage = (e: unknown): string => (e instanceof Error ? e.message : String(e))

/** Is a process with this pid alive (EPERM = alive but not ours)? */
export const isAlive = (pid: number): boolean => {
  if (!Number.isInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** The pid in the pid file, if it is readable and well-formed. */
export const readPid = (pidFile: string): number | undefined => {
  try {
    const n = Number(fs.readFileSync(pidFile, "utf8").trim())
    return Number.isInteger(n) && n > 0 ? n : undefined
  } catch {
    return undefined
  }
}

/** Does something answer on this Unix socket? */
export const socketAnswers = (path: string, timeoutMs = 500): Effect.Effect<boolean> =>
  Effect.async<boolean>((resume) => {
    const conn = net.createConnection({ path })
    const done = (ok: boolean) => {
      clearTimeout(timer)
      conn.destroy()
      resume(Effect.succeed(ok))
    }
    const timer = setTimeout(() => done(false), timeoutMs)
    conn.once("connect", () => done(true))
    conn.once("error", () => done(false))
    return Effect.sync(() => {
      clearTimeout(timer)
      conn.destroy()
    })
  })

/** mkdir -p `$SUBSTRAT_HOME` and force mode 0700. */
export const prepareHome = (paths: Paths): Effect.Effect<void, DaemonError> =>
  Effect.try({
    try: () => {
      fs.mkdirSync(paths.home, { recursive: true, mode: 0o700 })
      fs.chmodSync(paths.home, 0o700)
      fs.mkdirSync(paths.agentsDir, { recursive: true, mode: 0o700 })
      fs.mkdirSync(paths.workspacesDir, { recursive: true, mode: 0o700 })
    },
    catch: (e) => new DaemonError({ reason: "home", message: `cannot prepare ${paths.home}: ${errMessage(e)}` })
  })

const alreadyRunning = (paths: Paths, pid: number | undefined) =>
  new DaemonError({
    reason: "already-running",
    message: pid === undefined
      ? `a daemon is already serving ${paths.socket}`
      : `a daemon is already running (pid ${pid}, socket ${paths.socket})`,
    ...(pid === undefined ? {} : { pid })
  })

/**
 * Take the single-instance lock: refuse if a live daemon holds it, remove a stale pid file and
 * socket, then create `daemon.pid` exclusively (two racing starts cannot both win). Released
 * with the scope: the pid file is removed if it is still ours.
 */
export const acquirePidFile = (paths: Paths): Effect.Effect<number, DaemonError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const existing = readPid(paths.pidFile)
      if (existing !== undefined && existing !== process.pid && isAlive(existing)) {
        return yield* alreadyRunning(paths, existing)
      }
      if (fs.existsSync(paths.socket) && (yield* socketAnswers(paths.socket))) {
        return yield* alreadyRunning(paths, existing)
      }
      // Stale: the process is gone (or the file is garbage). Remove the leftovers.
      yield* Effect.try({
        try: () => {
          fs.rmSync(paths.pidFile, { force: true })
          fs.rmSync(paths.socket, { force: true })
          for (const f of fs.readdirSync(paths.home)) {
            if (/^daemon\.sock\.\d+\.tmp$/.test(f)) fs.rmSync(`${paths.home}/${f}`, { force: true })
          }
        },
        catch: (e) => new DaemonError({ reason: "pidfile", message: `cannot remove stale files: ${errMessage(e)}` })
      })
      yield* Effect.try({
        try: () => fs.writeFileSync(paths.pidFile, `${process.pid}\n`, { flag: "wx", mode: 0o600 }),
        catch: (e) =>
          (e as NodeJS.ErrnoException).code === "EEXIST"
            ? alreadyRunning(paths, readPid(paths.pidFile))
            : new DaemonError({ reason: "pidfile", message: `cannot write ${paths.pidFile}: ${errMessage(e)}` })
      })
      return process.pid
    }),
    () =>
      Effect.sync(() => {
        if (readPid(paths.pidFile) === process.pid) fs.rmSync(paths.pidFile, { force: true })
      })
  )

/** Where the daemon listens first: chmod'ed there, then renamed into place (see `publishSocket`). */
export const stagingSocket = (paths: Paths): string => `${paths.socket}.${process.pid}.tmp`

/**
 * Publish the listening socket: chmod 0600 at its staging path, then rename it to
 * `daemon.sock`, so nobody can ever connect through a socket with a wider mode. Removed on
 * release (before the server closes: new clients are refused at once).
 */
export const publishSocket = (paths: Paths): Effect.Effect<void, DaemonError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.try({
      try: () => {
        fs.chmodSync(stagingSocket(paths), 0o600)
        fs.renameSync(stagingSocket(paths), paths.socket)
      },
      catch: (e) => new DaemonError({ reason: "socket", message: `cannot publish ${paths.socket}: ${errMessage(e)}` })
    }),
    () => Effect.sync(() => fs.rmSync(paths.socket, { force: true }))
  )
