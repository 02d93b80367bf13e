// Crash-injecting Durable layer (tests, crash-recovery fuzzing). It wraps the real node:fs
// primitives — files really land on disk — and counts every mutating I/O sub-step (open for
// write, write, fsync, truncate, rename, unlink, dirsync, mkdir, remove). At step `crashAt`
// it "crashes": the step fails with a DurableError (a write first lands a torn prefix of its
// bytes), and from then on every I/O — reads included — is refused, as if the process had
// died. A test then reopens the same directory with the real layer and checks the invariants.
//
// Two crash modes. `process` (default): the process dies, the kernel keeps everything it was
// given (page cache included). `powerLoss: true` (as LazyFS does): the machine loses power, so
// at the crash the directories touched are rewritten to their *durable* state — every write
// not covered by an fsync of its file is lost (or, with `tornFraction`, a prefix of the
// unsynced appended tail survives), and every directory entry created, renamed or removed
// since the last fsync of its directory is undone (a new file or directory vanishes with all it
// holds; an unlinked or renamed-over file comes back with its durable bytes).
//
// Typical use (enumerate every crash point of a scenario):
//   const probe = makeCrashing()                      // count only
//   await run(scenario, probe.layer); const n = probe.control.stepCount()
//   for (let k = 1; k <= n; k++) { const c = makeCrashing({ crashAt: k }); … }
//
// Over 300 lines because the step counter and the power-loss tracker share one view of what is
// durable (every write, fsync and directory change feeds both), so they are kept in one file.
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import { dirname, join } from "node:path"
import { DurableError } from "../domain/errors.js"
import { Durable, type DurableService } from "./Durable.js"
import { makeDurable, nodePrimitivesOrdered, type Primitives } from "./internal/durableNode.js"

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
  /**
   * At a crashing `write`, first write this fraction of the bytes (torn write). Default 0.5; 0 =
   * nothing. Under `powerLoss`, also the fraction of each file's unsynced appended tail that survives.
   */
  readonly tornFraction?: number
  /** Model a power loss, not a process crash: unsynced data and directory entries are lost at the crash. */
  readonly powerLoss?: boolean
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


// ── Power loss: what the disk holds durably ──────────────────────────────────────────────────
// A model of the touched part of the file system: each file or directory is a node; a file
// node holds the bytes of its last fsync, a directory node the entries of its last fsync (each
// pointing at a node). `live` maps the current paths to nodes. Paths are observed (read from
// disk, deeply) the first time an operation touches them or their directory: what is on disk
// before the test's first I/O counts as durable.

type Node =
  | { readonly kind: "file"; durable: Uint8Array }
  | { readonly kind: "dir"; durable: Map<string, Node> }

export interface PowerLossTracker {
  readonly wrap: (base: Primitives) => Primitives
  /** Rewrite the touched directories to their durable state. */
  readonly lose: (tornFraction: number) => void
}

export const powerLossTracker = (): PowerLossTracker => {
  const live = new Map<string, Node>()
  const roots = new Map<string, Node>()

  const observe = (path: string): Node | undefined => {
    const known = live.get(path)
    if (known !== undefined) return known
    const st = fs.statSync(path, { throwIfNoEntry: false })
    if (st === undefined) return undefined
    let node: Node
    if (st.isDirectory()) {
      const entries = new Map<string, Node>()
      node = { kind: "dir", durable: entries }
      live.set(path, node)
      for (const name of fs.readdirSync(path)) {
        const child = observe(join(path, name))
        if (child !== undefined) entries.set(name, child)
      }
    } else {
      node = { kind: "file", durable: new Uint8Array(fs.readFileSync(path)) }
      live.set(path, node)
    }
    if (!live.has(dirname(path)) && !roots.has(path)) roots.set(path, node)
    return node
  }
  /** Observe the directory holding `path` (and so `path` itself, when it exists). */
  const observeParent = (path: string) => {
    observe(dirname(path))
  }
  const forget = (path: string) => {
    for (const p of [...live.keys()]) if (p === path || p.startsWith(path + "/")) live.delete(p)
  }
  const fileNode = (path: string): Node => {
    const n = live.get(path)
    if (n !== undefined) return n
    const fresh: Node = { kind: "file", durable: new Uint8Array(0) }
    live.set(path, fresh)
    return fresh
  }
  const before = <A>(pre: () => void, eff: Effect.Effect<A, DurableError>, post?: (a: A) => void) =>
    Effect.suspend(() => {
      pre()
      return post === undefined ? eff : Effect.tap(eff, (a) => Effect.sync(() => post(a)))
    })

  const wrap = (base: Primitives): Primitives => ({
    ...base,
    open: (path, mode) =>
      mode === "readwrite"
        ? before(() => observeParent(path), base.open(path, mode)) // an existing file: its bytes now are its durable ones
        : before(() => observeParent(path), base.open(path, mode), () => {
          fileNode(path) // a created file: nothing of it is durable yet
        }),
    fsync: (fd, path) =>
      Effect.tap(base.fsync(fd, path), () =>
        Effect.sync(() => {
          const n = fileNode(path)
          if (n.kind === "file") n.durable = new Uint8Array(fs.readFileSync(path))
        })),
    rename: (from, to) =>
      before(() => {
        observeParent(from)
        observeParent(to)
      }, base.rename(from, to), () => {
        const n = live.get(from)
        forget(to)
        forget(from)
        if (n !== undefined) live.set(to, n)
      }),
    unlink: (path) => before(() => observeParent(path), base.unlink(path), () => forget(path)),
    fsyncDir: (path) =>
      Effect.tap(base.fsyncDir(path), () =>
        Effect.sync(() => {
          const n = observe(path)
          if (n === undefined || n.kind !== "dir") return
          const entries = new Map<string, Node>()
          for (const name of fs.readdirSync(path)) {
            const child = observe(join(path, name))
            if (child !== undefined) entries.set(name, child)
          }
          n.durable = entries
        })),
    mkdir: (path, mode) =>
      before(() => {
        let first = path
        while (!fs.existsSync(dirname(first)) && dirname(first) !== first) first = dirname(first)
        observeParent(first)
      }, base.mkdir(path, mode), (first) => {
        if (first === undefined) return
        // Every directory created is new and empty as far as the disk knows.
        for (let d = path; d.length >= first.length; d = dirname(d)) {
          live.set(d, { kind: "dir", durable: new Map() })
          if (d === first || d === dirname(d)) break
        }
      }),
    rmTree: (path) => before(() => observeParent(path), base.rmTree(path), () => forget(path)),
    rmdir: (path) => before(() => observeParent(path), base.rmdir(path), (removed) => {
      if (removed) forget(path)
    })
  })

  const lose = (tornFraction: number) => {
    const pathOf = new Map<Node, string>()
    for (const [p, n] of live) pathOf.set(n, p)
    const bytesOf = (n: Node & { kind: "file" }): Uint8Array => {
      const now = pathOf.get(n)
      const current = now === undefined ? undefined : fs.readFileSync(now, { flag: "r" })
      const d = n.durable
      if (current === undefined || current.length <= d.length || !Buffer.from(current.subarray(0, d.length)).equals(Buffer.from(d))) return d
      const keep = Math.floor((current.length - d.length) * tornFraction)
      return new Uint8Array(current.subarray(0, d.length + keep))
    }
    // Compute every file's surviving bytes first: restoring rewrites the paths they are read from.
    const contents = new Map<Node, Uint8Array>()
    const collect = (n: Node) => {
      if (n.kind === "file") {
        if (!contents.has(n)) contents.set(n, bytesOf(n))
      } else for (const c of n.durable.values()) collect(c)
    }
    for (const r of roots.values()) collect(r)
    const restore = (path: string, n: Node) => {
      if (n.kind === "file") {
        const st = fs.statSync(path, { throwIfNoEntry: false })
        if (st?.isDirectory()) fs.rmSync(path, { recursive: true, force: true })
        fs.writeFileSync(path, contents.get(n) ?? n.durable)
        return
      }
      const st = fs.statSync(path, { throwIfNoEntry: false })
      if (st !== undefined && !st.isDirectory()) fs.rmSync(path, { force: true })
      if (st === undefined || !st.isDirectory()) fs.mkdirSync(path)
      for (const name of fs.readdirSync(path)) {
        if (!n.durable.has(name)) fs.rmSync(join(path, name), { recursive: true, force: true })
      }
      for (const [name, child] of n.durable) restore(join(path, name), child)
    }
    for (const [p, r] of roots) restore(p, r)
  }

  return { wrap, lose }
}

/** A crash-injecting Durable over the real filesystem, with its control handle. */
export const makeCrashing = (options: CrashOptions = {}, real: Primitives = nodePrimitivesOrdered): Crashing => {
  let crashAt = options.crashAt
  const torn = options.tornFraction ?? 0.5
  const power = options.powerLoss === true ? powerLossTracker() : undefined
  const base = power === undefined ? real : power.wrap(real)
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
        const lost = power === undefined ? fail : Effect.zipRight(Effect.sync(() => power.lose(torn)), fail)
        return partial ? Effect.zipRight(Effect.ignore(partial), lost) : lost
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
    writeAt: (fd, path, bytes, position) => {
      const cut = Math.floor(bytes.length * torn)
      return step(
        "write",
        path,
        base.writeAt(fd, path, bytes, position),
        cut > 0 ? base.writeAt(fd, path, bytes.subarray(0, cut), position) : undefined
      )
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
