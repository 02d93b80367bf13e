// Crash-injecting Durable layer (tests, crash-recovery fuzzing). It wraps the real node:fs
// primitives — files really land on disk — and counts every mutating I/O sub-step (open for
// write, write, fsync, truncate, rename, unlink, dirsync, mkdir, remove). At step `crashAt`
// it "crashes": the step fails with a DurableError (a write first lands a torn prefix of its
// bytes), and from then on every I/O — reads included — is refused, as if the process had
// died. A test then reopens the same directory with the real layer and checks the invariants.
//
// Typical use (enumerate every crash point of a scenario):
//   const probe = makeCrashing()                      // count only
//   await run(scenario, probe.layer); const n = probe.control.stepCount()
//   for (let k = 1; k <= n; k++) { const c = makeCrashing({ crashAt: k }); … }
import { Effect, Layer } from "effect"
import { DurableError } from "../domain/errors.js"
import { Durable, type DurableService } from "./Durable.js"
import { makeDurable, nodePrimitives, type Primitives } from "./internal/durableNode.js"

export type StepKind =
  | "open"
  | "write"
  | "fsync"
  | "truncate"
  | "rename"
  | "unlink"
  | "dirsync"
  | "mkdir"
  | "remove"

export interface Step {
  /** 1-based index of the step. */
  readonly n: number
  readonly kind: StepKind
  readonly path: string
}

export interface CrashOptions {
  /** Crash at this 1-based step; undefined = never (count only). */
  readonly crashAt?: number | undefined
  /** At a crashing `write`, first write this fraction of the bytes (torn write). Default 0.5; 0 = nothing. */
  readonly tornFraction?: number
}

export interface CrashControl {
  /** Steps performed or attempted so far (the crashing one included). */
  readonly steps: () => ReadonlyArray<Step>
  readonly stepCount: () => number
  readonly crashed: () => boolean
  /** The step that crashed, if any. */
  readonly crashedAt: () => Step | undefined
  /** Forget the steps and the crash; optionally arm a new crash point. */
  readonly reset: (crashAt?: number) => void
}

export interface Crashing {
  readonly layer: Layer.Layer<Durable>
  readonly service: DurableService
  readonly control: CrashControl
}

const kindOp: Record<StepKind, DurableError["op"]> = {
  open: "open",
  write: "write",
  fsync: "fsync",
  truncate: "truncate",
  rename: "rename",
  unlink: "unlink",
  dirsync: "dirsync",
  mkdir: "mkdir",
  remove: "remove"
}

/** A crash-injecting Durable over the real filesystem, with its control handle. */
export const makeCrashing = (options: CrashOptions = {}, base: Primitives = nodePrimitives): Crashing => {
  let crashAt = options.crashAt
  const torn = options.tornFraction ?? 0.5
  let steps: Array<Step> = []
  let crashed: Step | undefined

  const dead = (op: DurableError["op"], path: string) =>
    new DurableError({ op, path, message: `injected crash: I/O refused after step ${crashed?.n ?? "?"}` })

  /** Refuse when dead (reads, close). */
  const alive = <A>(op: DurableError["op"], path: string, eff: Effect.Effect<A, DurableError>) =>
    Effect.suspend(() => crashed !== undefined ? Effect.fail(dead(op, path)) : eff)

  /** A counted step: crash here when armed, else run it. `partial` runs before failing (torn write). */
  const step = <A>(
    kind: StepKind,
    path: string,
    eff: Effect.Effect<A, DurableError>,
    partial?: Effect.Effect<unknown, DurableError>
  ): Effect.Effect<A, DurableError> =>
    Effect.suspend(() => {
      if (crashed !== undefined) return Effect.fail(dead(kindOp[kind], path))
      const s: Step = { n: steps.length + 1, kind, path }
      steps.push(s)
      if (crashAt !== undefined && s.n >= crashAt) {
        crashed = s
        const fail = Effect.fail(
          new DurableError({ op: kindOp[kind], path, message: `injected crash at step ${s.n} (${kind} ${path})` })
        )
        return partial ? Effect.zipRight(Effect.ignore(partial), fail) : fail
      }
      return eff
    })

  const p: Primitives = {
    open: (path, mode) => mode === "readwrite" ? alive("open", path, base.open(path, mode)) : step("open", path, base.open(path, mode)),
    openRead: (path) => alive("open", path, base.openRead(path)),
    write: (fd, path, bytes) => {
      const cut = Math.floor(bytes.length * torn)
      return step("write", path, base.write(fd, path, bytes), cut > 0 ? base.write(fd, path, bytes.subarray(0, cut)) : undefined)
    },
    fsync: (fd, path) => step("fsync", path, base.fsync(fd, path)),
    // Closing is not I/O that changes the disk; let finalizers release fds even after a crash.
    close: (fd, path) => base.close(fd, path),
    ftruncate: (fd, path, size) => step("truncate", path, base.ftruncate(fd, path, size)),
    rename: (from, to) => step("rename", to, base.rename(from, to)),
    unlink: (path) => step("unlink", path, base.unlink(path)),
    fsyncDir: (path) => step("dirsync", path, base.fsyncDir(path)),
    mkdir: (path, mode) => step("mkdir", path, base.mkdir(path, mode)),
    rmTree: (path) => step("remove", path, base.rmTree(path)),
    rmdir: (path) => step("remove", path, base.rmdir(path)),
    readFile: (path) => alive("read", path, base.readFile(path)),
    size: (path) => alive("read", path, base.size(path)),
    fsize: (fd, path) => alive("read", path, base.fsize(fd, path)),
    read: (fd, path, position, length) => alive("read", path, base.read(fd, path, position, length)),
    readDir: (path) => alive("read", path, base.readDir(path))
  }

  const service = makeDurable(p)
  const control: CrashControl = {
    steps: () => steps,
    stepCount: () => steps.length,
    crashed: () => crashed !== undefined,
    crashedAt: () => crashed,
    reset: (next) => {
      steps = []
      crashed = undefined
      crashAt = next
    }
  }
  return { layer: Layer.succeed(Durable, service), service, control }
}
