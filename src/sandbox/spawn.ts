// The scoped process runner shared by the bwrap and unsafe layers (and git.ts).
//
// `node:child_process` directly, not platform `Command`: spawn-to-exit of a trivial command cost
// ~5 ms more through `Command` (stdin pump fiber, channel-based stream readers, two finalizers,
// a forked exit-code fiber) than the spawn itself — see docs/sandbox.md "Benchmark".
//
// - The child is spawned `detached` (its own process group, pgid = pid). Closing the scope SIGTERMs
//   the group, waits `graceMs`, then SIGKILLs it. Under bwrap the group is just bwrap itself: its
//   death takes the sandbox's pid namespace down (--die-with-parent + --unshare-pid), which is what
//   reaches setsid'd grandchildren.
// - stdin is /dev/null unless a stream is given (then a pipe, closed when the stream ends).
// - stdout/stderr are `Stream`s over the pipes (pull-based, so a slow consumer back-pressures the
//   child); the last 4 KiB of stderr feed limit attribution.
// - `exit` resolves on the child's `exit` event; the wall-clock limit is a plain timer.
import * as NodeSink from "@effect/platform-node/NodeSink"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import { Chunk, Deferred, Duration, Effect, Exit, Option, type Scope, Stream } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import type { Readable } from "node:stream"
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

/** Signal a process group; false when there is no such group (any more). */
const killPgrp = (pid: number, signal: NodeJS.Signals): boolean => {
  try {
    process.kill(-pid, signal)
    return true
  } catch {
    return false
  }
}

/** Signal the group led by `pid`, or `pid` alone when it has no group of its own. */
export const killGroup = (pid: number, signal: NodeJS.Signals): void => {
  if (killPgrp(pid, signal)) return
  try {
    process.kill(pid, signal)
  } catch {
    // already gone
  }
}

const spawnError = (message: string) => new SandboxProcessError({ reason: "spawn", message })

/** Spawn and wait for the `spawn` (or `error`) event; interruption kills the half-started child. */
const startChild = (
  program: string,
  args: ReadonlyArray<string>,
  opts: SpawnOptions,
  status: Deferred.Deferred<ExitStatus>
) =>
  Effect.async<ChildProcess, SandboxProcessError>((resume) => {
    let child: ChildProcess
    try {
      child = spawn(program, args, {
        stdio: [opts.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
        env: opts.env,
        ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
        detached: true
      })
    } catch (e) {
      resume(Effect.fail(spawnError(`${program}: ${e instanceof Error ? e.message : String(e)}`)))
      return
    }
    let started = false
    child.on("error", (e) => {
      // Before `spawn`: the exec failed (ENOENT, EACCES, bad cwd). After: a failed kill(); ignored.
      if (!started) resume(Effect.fail(spawnError(`${program}: ${e.message}`)))
    })
    child.once("exit", (code, signal) => Deferred.unsafeDone(status, Exit.succeed({ code, signal })))
    child.once("spawn", () => {
      started = true
      resume(Effect.succeed(child))
    })
    return Effect.sync(() => {
      if (child.pid !== undefined) killGroup(child.pid, "SIGKILL")
    })
  })

/**
 * A pipe as a stream, pull-based: chunks are read only as fast as the consumer takes them (node
 * stops reading the pipe at its high-water mark, which back-pressures the child). The `readable`
 * listener is attached at once, not when the stream is first run: without one, node's child_process
 * resumes (= discards) unread stdio when the child exits. (`NodeStream.fromReadable` does the same
 * through a Channel loop and a latch; this direct loop costs a fraction of it per spawn.)
 */
const pipeStream = (readable: Readable, which: string): Stream.Stream<Uint8Array, SandboxProcessError> => {
  let ended = false
  let failure: SandboxProcessError | undefined
  let wake: (() => void) | undefined
  const notify = () => {
    const w = wake
    wake = undefined
    w?.()
  }
  readable.on("readable", notify)
  const onEnd = () => {
    ended = true
    notify()
  }
  readable.once("end", onEnd)
  readable.once("close", onEnd) // destroyed (scope closed) before the end was read
  readable.once("error", (e) => {
    failure = new SandboxProcessError({ reason: "io", message: `${which}: ${e.message}` })
    notify()
  })
  const pull: Effect.Effect<Chunk.Chunk<Uint8Array>, Option.Option<SandboxProcessError>> = Effect.suspend(() => {
    let item: Uint8Array | null = readable.read() as Uint8Array | null
    if (item !== null) {
      const out: Array<Uint8Array> = []
      while (item !== null) {
        out.push(item)
        item = readable.read() as Uint8Array | null
      }
      return Effect.succeed(Chunk.unsafeFromArray(out))
    }
    if (failure !== undefined) return Effect.fail(Option.some(failure))
    if (ended || readable.readableEnded || readable.destroyed) return Effect.fail(Option.none())
    return Effect.async<Chunk.Chunk<Uint8Array>, Option.Option<SandboxProcessError>>((resume) => {
      wake = () => resume(pull)
      return Effect.sync(() => {
        wake = undefined
      })
    })
  })
  return Stream.repeatEffectChunkOption(pull)
}

export const spawnScoped = (
  _executor: CommandExecutor.CommandExecutor | undefined,
  opts: SpawnOptions
): Effect.Effect<SandboxProcess, SandboxProcessError, Scope.Scope> =>
  Effect.gen(function*() {
    const [program, ...args] = opts.argv
    if (program === undefined) return yield* spawnError("empty argv")
    const status = yield* Deferred.make<ExitStatus>()
    let timedOut = false
    let timer: ReturnType<typeof setTimeout> | undefined

    const child = yield* Effect.acquireRelease(
      startChild(program, args, opts, status),
      (c) =>
        Effect.gen(function*() {
          if (timer !== undefined) clearTimeout(timer)
          const pid = c.pid!
          if (yield* Deferred.isDone(status)) {
            killPgrp(pid, "SIGKILL") // stragglers left in the group (unsandboxed mode)
          } else {
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
          }
          // Unread pipes would otherwise stay open (and keep their fds) until garbage-collected.
          c.stdout?.destroy()
          c.stderr?.destroy()
          c.stdin?.destroy()
        })
    )
    const pid = child.pid!

    const wall = opts.limits.wall_clock_seconds
    if (wall !== null) {
      timer = setTimeout(() => {
        if (child.exitCode === null && child.signalCode === null) {
          timedOut = true
          killGroup(pid, "SIGKILL")
        }
      }, Math.max(1, wall * 1000))
      child.once("exit", () => clearTimeout(timer))
    }

    if (opts.stdin !== undefined && child.stdin !== null) {
      const sink = child.stdin
      sink.on("error", () => {}) // EPIPE when the child exits without reading everything
      yield* Stream.run(
        opts.stdin,
        NodeSink.fromWritable(() => sink, (e) => new SandboxProcessError({ reason: "io", message: `stdin: ${String(e)}` }))
      ).pipe(Effect.ignore, Effect.forkScoped)
    }

    const tail = new Tail()
    const stdout = pipeStream(child.stdout!, "stdout")
    const stderr = pipeStream(child.stderr!, "stderr").pipe(Stream.tap((chunk) => Effect.sync(() => tail.push(chunk))))

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
