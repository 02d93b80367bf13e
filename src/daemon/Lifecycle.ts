// Start-up and shutdown chores of the daemon process: `$SUBSTRAT_HOME` (0700), the pid file
// (single-instance lock: an exclusive flock(2) the kernel drops when the daemon dies), the stale
// socket file, and the socket's mode. Each acquisition is scoped, so a failed start-up or any
// shutdown releases them the same way.
import { Data, Effect, type Scope } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import type { Paths } from "../config/Paths.js"
import { storageFault } from "../domain/errors.js"

export class DaemonError extends Data.TaggedError("DaemonError")<{
  readonly reason: "already-running" | "home" | "pidfile" | "socket" | "cluster"
  readonly message: string
  readonly pid?: number
}> {}

const errMessage = (e: unknown): string => (e instanceof Error ? e.message : String(e))

/** Has this process exited but not been reaped yet (state Z in /proc)? */
const isZombie = (pid: number): boolean => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    // "pid (comm) S …": comm may hold spaces and parentheses, the state follows the last ")".
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) === "Z"
  } catch {
    return false
  }
}

/** Is a process with this pid alive (EPERM = alive but not ours; a zombie is dead)? */
export const isAlive = (pid: number): boolean => {
  if (!Number.isInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false
  }
  return !isZombie(pid)
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

// The lock. Node has no flock(2); util-linux `flock(1)` takes it for us on a descriptor we pass
// as its fd 3. A flock belongs to the open file description, which the daemon keeps open after
// the helper exits, so the lock lives exactly as long as the daemon's descriptor: the kernel
// drops it when the daemon dies, whether or not anybody reaps the dead process (a zombie has
// already closed its files). Node opens every descriptor close-on-exec, so sandboxes and other
// children never inherit it. docs/cli.md ("Single instance") says why this and not the others.
// It is the one child the daemon forks itself, not through the spawner (sandbox/Spawner.ts): Node
// cannot send a file's descriptor over the spawner's channel, and a lock held by the spawner
// would die with a spawner the daemon outlives. It runs once, before the daemon serves anything,
// while its heap is small (docs/sandbox.md, "The one fork the daemon keeps", has the figures).

/** flock(1)'s exit code when the lock is held elsewhere (its -E option; 1 is also its usage error). */
const CONFLICT = 75

type LockResult = "locked" | "held" | { readonly error: string }

/** flock(1) on `fd`: exclusive (waiting up to `waitSeconds`) or shared (not waiting). */
const flockFd = (fd: number, mode: "exclusive" | "probe", waitSeconds = 0): LockResult => {
  const r = spawnSync(
    "flock",
    [mode === "exclusive" ? "--exclusive" : "--shared", ...(waitSeconds > 0 ? ["--timeout", String(waitSeconds)] : ["--nonblock"]), "--conflict-exit-code", String(CONFLICT), "3"],
    { stdio: ["ignore", "ignore", "pipe", fd], timeout: 10_000 }
  )
  if (r.status === 0) return "locked"
  if (r.status === CONFLICT) return "held"
  const why = r.error !== undefined ? errMessage(r.error) : `exit ${r.status ?? r.signal}: ${r.stderr.toString("utf8").trim()}`
  return { error: `flock(1) (util-linux) failed: ${why}` }
}

/**
 * Does a daemon hold the lock of this home? Probes with a shared lock taken and dropped at once
 * (a starting daemon waits briefly for its exclusive one, so a probe never makes it fail).
 * Returns the holder's pid when a daemon runs (or `true` if its pid file is not written yet).
 */
export const lockHolder = (paths: Paths): Effect.Effect<number | true | undefined, DaemonError> =>
  Effect.suspend(() => {
    let fd: number
    try {
      fd = fs.openSync(paths.pidFile, "r")
    } catch (e) {
      return (e as NodeJS.ErrnoException).code === "ENOENT"
        ? Effect.succeed(undefined)
        : Effect.fail(new DaemonError({ reason: "pidfile", message: `cannot open ${paths.pidFile}: ${errMessage(e)}` }))
    }
    try {
      const r = flockFd(fd, "probe")
      if (r === "locked") return Effect.succeed(undefined)
      if (r === "held") return Effect.succeed(readPid(paths.pidFile) ?? true)
      return Effect.fail(new DaemonError({ reason: "pidfile", message: r.error }))
    } finally {
      fs.closeSync(fd)
    }
  })

/** Open `daemon.pid` and take its exclusive lock; the descriptor is returned to be kept open. */
const lockPidFile = (paths: Paths): Effect.Effect<number, DaemonError> =>
  Effect.suspend(() => {
    // Retried when the locked file is no longer the one at the path: a daemon that stopped
    // between our open and our lock unlinked it, and the next start would create a new one.
    for (let attempt = 0; attempt < 10; attempt++) {
      let fd: number
      try {
        fd = fs.openSync(paths.pidFile, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600)
      } catch (e) {
        return Effect.fail(new DaemonError({ reason: "pidfile", message: `cannot open ${paths.pidFile}: ${errMessage(e)}` }))
      }
      const r = flockFd(fd, "exclusive", 0.5)
      if (r !== "locked") {
        fs.closeSync(fd)
        return Effect.fail(
          r === "held" ? alreadyRunning(paths, readPid(paths.pidFile)) : new DaemonError({ reason: "pidfile", message: r.error })
        )
      }
      let same = false
      try {
        same = fs.statSync(paths.pidFile).ino === fs.fstatSync(fd).ino
      } catch {
        same = false
      }
      if (same) return Effect.succeed(fd)
      fs.closeSync(fd)
    }
    return Effect.fail(new DaemonError({ reason: "pidfile", message: `${paths.pidFile} keeps changing under us` }))
  })

/**
 * Take the single-instance lock: an exclusive flock on `daemon.pid` (refused while another
 * daemon holds it — only a live process can), then the leftovers of a dead daemon (stale socket,
 * staging sockets) are removed and our pid is written. On a full or failing disk the pid cannot
 * be written: `unwritten` says why, the file stays empty and the lock is held all the same. Released with the scope: the pid file is
 * removed while the lock is still held, then the descriptor (and so the lock) is closed.
 */
export const acquirePidFile = (
  paths: Paths
): Effect.Effect<{ readonly pid: number; readonly unwritten: string | null }, DaemonError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const fd = yield* lockPidFile(paths)
      return yield* Effect.gen(function*() {
        // A daemon of a build without the lock would still answer on the socket.
        if (fs.existsSync(paths.socket) && (yield* socketAnswers(paths.socket))) {
          return yield* alreadyRunning(paths, readPid(paths.pidFile))
        }
        // The lock is ours, so whoever left these is dead. Remove the leftovers.
        yield* Effect.try({
          try: () => {
            fs.rmSync(paths.socket, { force: true })
            for (const f of fs.readdirSync(paths.home)) {
              if (/^daemon\.sock\.\d+\.tmp$/.test(f)) fs.rmSync(`${paths.home}/${f}`, { force: true })
            }
          },
          catch: (e) => new DaemonError({ reason: "pidfile", message: `cannot remove stale files: ${errMessage(e)}` })
        })
        // A disk with no free block cannot take even these few bytes. The lock is what makes this
        // daemon the only one, and it is held: go on without the pid (the daemon will run
        // read-only; `daemon start` then recognises it by the lock and its socket).
        const unwritten = yield* Effect.try({
          try: () => {
            fs.ftruncateSync(fd, 0)
            fs.writeSync(fd, `${process.pid}\n`, 0)
            return null
          },
          catch: (e) => e
        }).pipe(Effect.catchAll((e) =>
          storageFault(e) !== undefined
            ? Effect.succeed(`cannot write ${paths.pidFile}: ${errMessage(e)}`)
            : Effect.fail(new DaemonError({ reason: "pidfile", message: `cannot write ${paths.pidFile}: ${errMessage(e)}` }))
        ))
        return { fd, unwritten }
      }).pipe(Effect.tapError(() => Effect.sync(() => fs.closeSync(fd))))
    }),
    ({ fd }) =>
      Effect.sync(() => {
        // Ours while the lock is held: with our pid, or empty when it could not be written.
        const pid = readPid(paths.pidFile)
        if (pid === process.pid || pid === undefined) fs.rmSync(paths.pidFile, { force: true })
        fs.closeSync(fd)
      })
  ).pipe(Effect.map(({ unwritten }) => ({ pid: process.pid, unwritten })))

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
