// The scoped process runner shared by the bwrap and unsafe layers (and git.ts).
//
// Children start in the spawner process (Spawner.ts), not through platform `Command`: spawn-to-exit
// of a trivial command cost more through `Command` (stdin pump fiber, channel-based stream readers,
// two finalizers, a forked exit-code fiber) than the spawn itself — docs/sandbox.md "Benchmark".
//
// - The child is spawned `detached` (its own process group, pgid = pid). Closing the scope SIGTERMs
//   the group, waits `graceMs`, then SIGKILLs it. Under bwrap the group is just bwrap itself: its
//   death takes the sandbox's pid namespace down (--die-with-parent + --unshare-pid), which is what
//   reaches setsid'd grandchildren.
// - stdin is /dev/null unless a stream is given (then a pipe, closed when the stream ends).
// - stdout/stderr are `Stream`s over the pipes (pull-based, so a slow consumer back-pressures the
//   child); the last 4 KiB of stderr feed limit attribution.
// - `exit` resolves on the child's `exit` event; the wall-clock limit is a plain timer.
//
// Over 300 lines because a child's start, its pipes, their collection and its group kill are one
// lifecycle around one child process.
import * as NodeSink from "@effect/platform-node/NodeSink"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import { Chunk, Deferred, Duration, Effect, Exit, Option, type Scope, Stream } from "effect"
import type { Readable } from "node:stream"
import type { ResourceLimits } from "../domain/workspace.js"
import { LimitExceededError, SandboxProcessError } from "./errors.js"
import { attributeExit, type CgroupEvents, type ExitStatus, normaliseExit } from "./Limits.js"
import { type GrowthBudget, treeBytes, watchGrowth } from "./WorkspaceGrowth.js"
import type { SandboxProcess, SandboxResult } from "./Sandbox.js"
import { type Child, killGroup, killPgrp, launch } from "./Spawner.js"

export { killGroup } from "./Spawner.js"

export interface SpawnOptions {
  readonly argv: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly cwd?: string
  readonly stdin?: Stream.Stream<Uint8Array>
  readonly limits: ResourceLimits
  readonly graceMs: number
  /** stderr prefix that marks a failure of the sandbox tool itself (bwrap: "bwrap: "). */
  readonly setupErrorPrefix?: string
  /** cgroup counters for attribution (only when a cgroup sub-group was created). */
  readonly cgroupEvents?: Effect.Effect<CgroupEvents>
  /** Size of the sandbox's /tmp when bounded (ENOSPC attribution). */
  readonly tmpBytes?: number
  /** Kill the command when this directory grows past the budget (WorkspaceGrowth.ts). */
  readonly growth?: GrowthBudget
  /** Appended to the workspace-growth error: how to raise the limit. */
  readonly growthHint?: string
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

const spawnError = (message: string) => new SandboxProcessError({ reason: "spawn", message })

/** Start through the spawner (Spawner.ts); interruption kills the half-started child. */
const startChild = (
  program: string,
  args: ReadonlyArray<string>,
  opts: SpawnOptions,
  exited: (s: ExitStatus) => void
) =>
  Effect.async<Child, SandboxProcessError>((resume) => {
    const cancel = launch({
      program,
      args,
      env: opts.env,
      ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
      stdin: opts.stdin !== undefined,
      onExit: exited
    }, (r) => {
      if (r._tag === "failed") resume(Effect.fail(new SandboxProcessError({ reason: r.reason, message: `${program}: ${r.message}` })))
      else resume(Effect.succeed(r.child))
    })
    return Effect.sync(cancel)
  })

/**
 * One child pipe, read pull-based: chunks are taken only as fast as the consumer asks (node stops
 * reading the pipe at its high-water mark, which back-pressures the child). The `readable` listener
 * is attached at once, not when the stream is first run: without one, node's child_process resumes
 * (= discards) unread stdio when the child exits. One consumer at a time (the stream, or `collect`).
 */
class Pipe {
  private ended = false
  private failure: SandboxProcessError | undefined
  private wake: (() => void) | undefined
  constructor(private readonly readable: Readable, which: string, private readonly onChunk?: (c: Uint8Array) => void) {
    const notify = () => {
      const w = this.wake
      this.wake = undefined
      w?.()
    }
    const onEnd = () => {
      this.ended = true
      notify()
    }
    readable.on("readable", notify)
    readable.once("end", onEnd)
    readable.once("close", onEnd) // destroyed (scope closed) before the end was read
    readable.once("error", (e) => {
      this.failure = new SandboxProcessError({ reason: "io", message: `${which}: ${e.message}` })
      notify()
    })
  }
  /** Everything buffered now (possibly nothing). */
  take(): Array<Uint8Array> {
    const out: Array<Uint8Array> = []
    let item = this.readable.read() as Uint8Array | null
    while (item !== null) {
      this.onChunk?.(item)
      out.push(item)
      item = this.readable.read() as Uint8Array | null
    }
    return out
  }
  /** null while more may come; else how it ended. */
  done(): "end" | SandboxProcessError | null {
    if (this.failure !== undefined) return this.failure
    return this.ended || this.readable.readableEnded || this.readable.destroyed ? "end" : null
  }
  /** Call `f` once on the next readable/end/error event (replaces an earlier waiter). */
  onChange(f: (() => void) | undefined) {
    this.wake = f
  }
  readonly stream: Stream.Stream<Uint8Array, SandboxProcessError> = Stream.repeatEffectChunkOption(
    Effect.suspend(() => this.pull)
  )
  private readonly pull: Effect.Effect<Chunk.Chunk<Uint8Array>, Option.Option<SandboxProcessError>> = Effect.suspend(() => {
    const out = this.take()
    if (out.length > 0) return Effect.succeed(Chunk.unsafeFromArray(out))
    const d = this.done()
    if (d === "end") return Effect.fail(Option.none())
    if (d !== null) return Effect.fail(Option.some(d))
    return Effect.async<Chunk.Chunk<Uint8Array>, Option.Option<SandboxProcessError>>((resume) => {
      this.onChange(() => resume(this.pull))
      return Effect.sync(() => this.onChange(undefined))
    })
  })
}

/** Drain both pipes to text in one callback loop (what `runCollect` needs, without stream fibers). */
const collectText = (out: Pipe, err: Pipe): Effect.Effect<readonly [string, string], SandboxProcessError> =>
  Effect.async((resume) => {
    const d1 = new TextDecoder()
    const d2 = new TextDecoder()
    let s1 = ""
    let s2 = ""
    const step = () => {
      for (const c of out.take()) s1 += d1.decode(c, { stream: true })
      for (const c of err.take()) s2 += d2.decode(c, { stream: true })
      const a = out.done()
      const b = err.done()
      if (a instanceof SandboxProcessError) return resume(Effect.fail(a))
      if (b instanceof SandboxProcessError) return resume(Effect.fail(b))
      if (a === "end" && b === "end") return resume(Effect.succeed([s1 + d1.decode(), s2 + d2.decode()] as const))
      out.onChange(a === null ? step : undefined)
      err.onChange(b === null ? step : undefined)
    }
    step()
    return Effect.sync(() => {
      out.onChange(undefined)
      err.onChange(undefined)
    })
  })

/** Handles made here → their direct collector (runCollect's fast path). */
const collectors = new WeakMap<SandboxProcess, Effect.Effect<readonly [string, string], SandboxProcessError>>()

export const spawnScoped = (
  _executor: CommandExecutor.CommandExecutor | undefined,
  opts: SpawnOptions
): Effect.Effect<SandboxProcess, SandboxProcessError, Scope.Scope> =>
  Effect.gen(function*() {
    const [program, ...args] = opts.argv
    if (program === undefined) return yield* spawnError("empty argv")
    const status = yield* Deferred.make<ExitStatus>()
    let timedOut = false
    let grownBy: number | undefined
    let timer: ReturnType<typeof setTimeout> | undefined
    const lease = opts.growth === undefined
      ? undefined
      : opts.growth.baselines === undefined
      ? { bytes: yield* treeBytes(opts.growth.root), overBudget: () => {} }
      : yield* opts.growth.baselines.acquire(opts.growth.root)

    const child = yield* Effect.acquireRelease(
      startChild(program, args, opts, (s) => {
        if (timer !== undefined) clearTimeout(timer)
        Deferred.unsafeDone(status, Exit.succeed(s))
      }),
      (c) =>
        Effect.gen(function*() {
          if (timer !== undefined) clearTimeout(timer)
          const pid = c.pid
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
          c.stdout.destroy()
          c.stderr.destroy()
          c.stdin?.destroy()
        })
    )
    const pid = child.pid

    const wall = opts.limits.wall_clock_seconds
    if (wall !== null) {
      timer = setTimeout(() => {
        if (child.status() === undefined) {
          timedOut = true
          killGroup(pid, "SIGKILL")
        }
      }, Math.max(1, wall * 1000))
    }

    if (opts.growth !== undefined) {
      const running = () => child.status() === undefined
      yield* Effect.forkScoped(watchGrowth(opts.growth, lease?.bytes ?? 0, running, (n) => {
        grownBy = n
        lease?.overBudget()
        killGroup(pid, "SIGKILL")
      }))
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
    const out = new Pipe(child.stdout, "stdout")
    const err = new Pipe(child.stderr, "stderr", (chunk) => tail.push(chunk))
    const stdout = out.stream
    const stderr = err.stream

    const exit: Effect.Effect<ExitStatus, LimitExceededError | SandboxProcessError> = Effect.gen(function*() {
      const s = yield* Deferred.await(status)
      const text = tail.text()
      if (grownBy !== undefined && opts.growth !== undefined) {
        const n = normaliseExit(s)
        return yield* new LimitExceededError({
          limit: "workspace-growth",
          certainty: "certain",
          value: opts.growth.bytes,
          exit_code: n.code,
          signal: n.signal,
          message: `workspace-growth limit (${opts.growth.bytes} bytes) exceeded: the command grew /workspace by ${grownBy} bytes ` +
            `and was killed${opts.growthHint === undefined ? "" : `; ${opts.growthHint}`}`
        })
      }
      const cgroup = opts.cgroupEvents === undefined ? undefined : yield* opts.cgroupEvents
      const limit = attributeExit({
        status: s,
        limits: opts.limits,
        stderrTail: text,
        timedOut,
        ...(cgroup === undefined ? {} : { cgroup }),
        ...(opts.tmpBytes === undefined ? {} : { tmpBytes: opts.tmpBytes })
      })
      if (limit !== null) return yield* Effect.fail(limit)
      if (opts.setupErrorPrefix !== undefined && s.code === 1 && text.startsWith(opts.setupErrorPrefix)) {
        return yield* new SandboxProcessError({ reason: "setup", message: text.trim() })
      }
      return normaliseExit(s)
    })

    const kill = (signal: NodeJS.Signals = "SIGTERM") => Effect.sync(() => killGroup(pid, signal))
    const handle: SandboxProcess = { pid, stdout, stderr, exit, kill }
    collectors.set(handle, collectText(out, err))
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
      const direct = collectors.get(p)
      const [stdout, stderr] = direct !== undefined
        ? yield* direct
        : yield* Effect.all([decodeAll(p.stdout), decodeAll(p.stderr)], { concurrency: 2 })
      const exit = yield* p.exit
      const result: SandboxResult = { exit, stdout, stderr }
      return result
    })
  )
