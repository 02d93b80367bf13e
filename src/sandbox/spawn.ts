// The scoped process runner shared by the bwrap and unsafe layers.
//
// Why platform `Command` + an extra finalizer: `Command.start` (NodeCommandExecutor) spawns
// detached (own process group), gives stdout/stderr as streams and, on scope close, sends SIGTERM to
// the group and waits. It never escalates, so a child that ignores SIGTERM would hang the release;
// we add a finalizer (runs first: finalizers are LIFO) that SIGTERMs the group, waits `graceMs`,
// then SIGKILLs it. Under bwrap the group is just bwrap itself: its death takes the sandbox's pid
// namespace down (--die-with-parent + --unshare-pid), which is what reaches setsid'd grandchildren.
import * as Command from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import { Deferred, Duration, Effect, Option, type Scope, Stream } from "effect"
import type { ResourceLimits } from "../domain/workspace.js"
import { type LimitExceededError, SandboxProcessError } from "./errors.js"
import { attributeExit, type CgroupEvents, type ExitStatus, normaliseExit } from "./Limits.js"
import type { SandboxProcess, SandboxResult } from "./Sandbox.js"

export interface SpawnOptions {
  readonly argv: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly cwd?: string
  readonly stdin?: Stream.Stream<Uint8Array>
  readonly limits: ResourceLimits
  readonly graceMs: number
  /** stderr prefix that marks a failure of the sandbox tool itself (bwrap: "bwrap: "). */
  readonly setupErrorPrefix?: string
  /** cgroup v2 counters for attribution (only when a cgroup sub-group was created). */
  readonly cgroupEvents?: Effect.Effect<CgroupEvents>
}

const TAIL = 4096

/** Keeps the last TAIL bytes written to it. */
class Tail {
  private buf = new Uint8Array(0)
  push(chunk: Uint8Array) {
    const merged = new Uint8Array(Math.min(TAIL, this.buf.length + chunk.length))
    const all = this.buf.length + chunk.length
    const skip = all - merged.length
    // copy the suffix of (buf ++ chunk) of length merged.length
    let o = 0
    for (let i = skip; i < this.buf.length; i++) merged[o++] = this.buf[i]!
    const from = Math.max(0, skip - this.buf.length)
    merged.set(chunk.subarray(from), o)
    this.buf = merged
  }
  text() {
    return new TextDecoder().decode(this.buf)
  }
}

const signalOf = (message: string): string | null => /signal:\s*(SIG[A-Z0-9]+)/.exec(message)?.[1] ?? null

export const killGroup = (pid: number, signal: NodeJS.Signals): void => {
  try {
    process.kill(-pid, signal)
  } catch {
    try {
      process.kill(pid, signal)
    } catch {
      // already gone
    }
  }
}

export const spawnScoped = (executor: CommandExecutor.CommandExecutor, opts: SpawnOptions) =>
  Effect.gen(function*() {
    const [program, ...args] = opts.argv
    if (program === undefined) return yield* new SandboxProcessError({ reason: "spawn", message: "empty argv" })
    let cmd = Command.make(program, ...args).pipe(
      Command.env(opts.env, { extendEnv: false }),
      Command.stdin(opts.stdin ?? Stream.empty)
    )
    if (opts.cwd !== undefined) cmd = Command.workingDirectory(cmd, opts.cwd)
    const proc = yield* executor.start(cmd).pipe(
      Effect.mapError((e) => new SandboxProcessError({ reason: "spawn", message: e.message }))
    )
    const pid: number = proc.pid
    const status = yield* Deferred.make<ExitStatus>()
    yield* proc.exitCode.pipe(
      Effect.map((code): ExitStatus => ({ code, signal: null })),
      Effect.catchAll((e) => Effect.succeed<ExitStatus>({ code: null, signal: signalOf(e.message) ?? "UNKNOWN" })),
      Effect.flatMap((s) => Deferred.succeed(status, s)),
      Effect.forkScoped
    )
    let timedOut = false
    const tail = new Tail()

    // Escalating kill on scope close (runs before the platform's own SIGTERM-and-wait finalizer).
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        if (yield* Deferred.isDone(status)) {
          killGroup(pid, "SIGKILL") // stragglers in the group (unsandboxed mode)
          return
        }
        killGroup(pid, "SIGTERM")
        // Finalizers are uninterruptible; the await must be interruptible or the timeout can never fire.
        const done = yield* Deferred.await(status).pipe(
          Effect.interruptible,
          Effect.timeout(Duration.millis(opts.graceMs)),
          Effect.option
        )
        if (Option.isNone(done)) {
          killGroup(pid, "SIGKILL")
          yield* Deferred.await(status).pipe(Effect.interruptible, Effect.timeout(Duration.seconds(10)), Effect.ignore)
        }
      })
    )

    const wall = opts.limits.wall_clock_seconds
    if (wall !== null) {
      yield* Effect.sleep(Duration.millis(Math.max(1, wall * 1000))).pipe(
        Effect.zipRight(Effect.gen(function*() {
          if (!(yield* Deferred.isDone(status))) {
            timedOut = true
            killGroup(pid, "SIGKILL")
          }
        })),
        Effect.forkScoped
      )
    }

    const io = (which: string) => (e: { readonly message: string }) =>
      new SandboxProcessError({ reason: "io", message: `${which}: ${e.message}` })
    const stdout = proc.stdout.pipe(Stream.mapError(io("stdout")))
    const stderr = proc.stderr.pipe(
      Stream.mapError(io("stderr")),
      Stream.tap((chunk) => Effect.sync(() => tail.push(chunk)))
    )

    const exit: Effect.Effect<ExitStatus, LimitExceededError | SandboxProcessError> = Effect.gen(function*() {
      const s = yield* Deferred.await(status)
      const text = tail.text()
      const cgroup = opts.cgroupEvents === undefined ? undefined : yield* opts.cgroupEvents
      const limit = attributeExit({
        status: s,
        limits: opts.limits,
        stderrTail: text,
        timedOut,
        ...(cgroup === undefined ? {} : { cgroup })
      })
      if (limit !== null) return yield* Effect.fail(limit)
      if (opts.setupErrorPrefix !== undefined && s.code === 1 && text.startsWith(opts.setupErrorPrefix)) {
        return yield* new SandboxProcessError({ reason: "setup", message: text.trim() })
      }
      return normaliseExit(s)
    })

    const kill = (signal: NodeJS.Signals = "SIGTERM") => Effect.sync(() => killGroup(pid, signal))
    const handle: SandboxProcess = { pid, stdout, stderr, exit, kill }
    return handle
  })

const decodeAll = (s: Stream.Stream<Uint8Array, SandboxProcessError>) =>
  s.pipe(Stream.decodeText(), Stream.runFold("", (acc, x) => acc + x))

/** Start, drain both streams concurrently, then wait for the exit. */
export const runCollect = <E>(
  start: Effect.Effect<SandboxProcess, E, Scope.Scope>
): Effect.Effect<SandboxResult, E | SandboxProcessError | LimitExceededError> =>
  Effect.scoped(
    Effect.gen(function*() {
      const p = yield* start
      const [stdout, stderr] = yield* Effect.all([decodeAll(p.stdout), decodeAll(p.stderr)], { concurrency: 2 })
      const exit = yield* p.exit
      const result: SandboxResult = { exit, stdout, stderr }
      return result
    })
  )
