// The real Durable implementation (node:fs), provided by `Durable.layer` (../Durable.ts). Composite
// operations are written once, in `makeDurable`, over a small set of primitives (`Primitives`):
// the real ones here, the crash-injecting ones in ../DurableCrash.ts. Every call that changes the
// disk runs on the libuv pool (node:fs callbacks), so neither a slow flush nor a slow open or
// unlink blocks the event loop, and different files' fsyncs overlap (the EventLog relies on that
// across sessions). Only the recovery-time walks (readDir, rmTree, rmdir) are synchronous.
// Over 300 lines because the primitives and the composite operations written over them are one
// contract with DurableCrash.ts: each composite's order of sub-steps is what the crash tests
// enumerate, so they are kept beside the primitives they call.
import { Chunk, Effect, Option, type Scope, Stream } from "effect"
import * as fs from "node:fs"
import { dirname } from "node:path"
import { DurableError, storageFault, withFault } from "../../domain/errors.js"
import type { AppendHandle, DirEntry, DurableService } from "../Durable.js"

type Op = DurableError["op"]

/** How a primitive `open` opens a file. `append`/`truncate` create it (mode 0600). */
export type OpenMode = "append" | "truncate" | "readwrite"

/** The I/O sub-steps every composite Durable operation is made of. */
export interface Primitives {
  readonly open: (path: string, mode: OpenMode) => Effect.Effect<number, DurableError>
  /** Open for reading; None when absent. */
  readonly openRead: (path: string) => Effect.Effect<Option.Option<number>, DurableError>
  /** Write all of `bytes` at the fd's position (O_APPEND: at the end). */
  readonly write: (fd: number, path: string, bytes: Uint8Array) => Effect.Effect<void, DurableError>
  /** Write all of `bytes` at `position` (pwrite; the fd's position is not used). */
  readonly writeAt: (fd: number, path: string, bytes: Uint8Array, position: number) => Effect.Effect<void, DurableError>
  readonly fsync: (fd: number, path: string) => Effect.Effect<void, DurableError>
  readonly close: (fd: number, path: string) => Effect.Effect<void, DurableError>
  readonly ftruncate: (fd: number, path: string, size: number) => Effect.Effect<void, DurableError>
  readonly rename: (from: string, to: string) => Effect.Effect<void, DurableError>
  /** false when the file was absent. */
  readonly unlink: (path: string) => Effect.Effect<boolean, DurableError>
  /** Open the directory, fsync it, close it. */
  readonly fsyncDir: (path: string) => Effect.Effect<void, DurableError>
  /** mkdir -p; the first directory created, or undefined when it already existed. */
  readonly mkdir: (path: string, mode: number | undefined) => Effect.Effect<string | undefined, DurableError>
  readonly rmTree: (path: string) => Effect.Effect<void, DurableError>
  /** false when absent or not empty. */
  readonly rmdir: (path: string) => Effect.Effect<boolean, DurableError>
  readonly readFile: (path: string) => Effect.Effect<Option.Option<Uint8Array>, DurableError>
  readonly size: (path: string) => Effect.Effect<Option.Option<number>, DurableError>
  readonly fsize: (fd: number, path: string) => Effect.Effect<number, DurableError>
  /** Read up to `length` bytes at `position`; the bytes read (empty at EOF). */
  readonly read: (fd: number, path: string, position: number, length: number) => Effect.Effect<Uint8Array, DurableError>
  readonly readDir: (path: string) => Effect.Effect<ReadonlyArray<DirEntry>, DurableError>
}

const errno = (e: unknown): string | undefined =>
  typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? e.code : undefined

export const durableError = (op: Op, path: string, e: unknown): DurableError =>
  new DurableError({ op, path, ...withFault(storageFault(e)), message: e instanceof Error ? e.message : String(e) })

// Hot-path helpers are written without per-call named closures (`{ try, catch }` objects): under
// tsx (keepNames, which scripts/bench runs) each one costs an Object.defineProperty per call.
const attempt = <A>(op: Op, path: string, f: () => A): Effect.Effect<A, DurableError> =>
  Effect.suspend(() => {
    try {
      return Effect.succeed(f())
    } catch (e) {
      return Effect.fail(durableError(op, path, e))
    }
  })

/** A node:fs callback call as an Effect: runs on the libuv pool, the event loop does not wait. */
const call = <A>(op: Op, path: string, start: (done: (err: NodeJS.ErrnoException | null, a: A) => void) => void) =>
  Effect.async<A, DurableError>((resume) => {
    start((err, a) => resume(err ? Effect.fail(durableError(op, path, err)) : Effect.succeed(a)))
  })

const fsyncAsync = (fd: number, path: string, op: Op): Effect.Effect<void, DurableError> =>
  Effect.async<void, DurableError>((resume) => {
    fs.fsync(fd, (err) => resume(err ? Effect.fail(durableError(op, path, err)) : Effect.void))
  })

/**
 * Write all of `bytes` at the fd's position (`at` null) or at byte `at`: one pool trip unless the
 * kernel takes part of it.
 */
const writeAll = (fd: number, path: string, bytes: Uint8Array, at: number | null): Effect.Effect<void, DurableError> =>
  Effect.async<void, DurableError>((resume) => {
    const from = (off: number): void =>
      fs.write(fd, bytes, off, bytes.length - off, at === null ? null : at + off, (err, n) => {
        if (err) resume(Effect.fail(durableError("write", path, err)))
        else if (off + n < bytes.length) from(off + n)
        else resume(Effect.void)
      })
    from(0)
  })

const absentAs = <A>(op: Op, path: string, absent: A, start: (done: (err: NodeJS.ErrnoException | null, a: A) => void) => void) =>
  Effect.async<A, DurableError>((resume) => {
    start((err, a) =>
      resume(err ? (err.code === "ENOENT" ? Effect.succeed(absent) : Effect.fail(durableError(op, path, err))) : Effect.succeed(a)))
  })

const openFlags: Record<OpenMode, string> = { append: "a", truncate: "w", readwrite: "r+" }

/**
 * The real primitives. Every call that changes the disk (and every read on the append path) is a
 * node:fs callback call, run on the libuv pool: the event loop never waits on the file system.
 * Only the recovery-time walks (readDir, rmTree, rmdir) stay synchronous.
 */
export const nodePrimitives: Primitives = {
  open: (path, mode) => call("open", path, (done) => fs.open(path, openFlags[mode], 0o600, done)),
  openRead: (path) => absentAs("open", path, Option.none<number>(), (done) => fs.open(path, "r", (err, fd) => done(err, Option.some(fd)))),
  write: (fd, path, bytes) => writeAll(fd, path, bytes, null),
  writeAt: (fd, path, bytes, position) => writeAll(fd, path, bytes, position),
  fsync: (fd, path) => fsyncAsync(fd, path, "fsync"),
  close: (fd, path) => call("close", path, (done) => fs.close(fd, (err) => done(err, undefined))),
  ftruncate: (fd, path, size) => call("truncate", path, (done) => fs.ftruncate(fd, size, (err) => done(err, undefined))),
  rename: (from, to) => call("rename", to, (done) => fs.rename(from, to, (err) => done(err, undefined))),
  unlink: (path) => absentAs("unlink", path, false, (done) => fs.unlink(path, (err) => done(err, true))),
  fsyncDir: (path) =>
    Effect.acquireUseRelease(
      call("dirsync", path, (done: (err: NodeJS.ErrnoException | null, fd: number) => void) => fs.open(path, "r", done)),
      (fd) => fsyncAsync(fd, path, "dirsync"),
      (fd) => Effect.ignore(call("close", path, (done) => fs.close(fd, (err) => done(err, undefined))))
    ),
  mkdir: (path, mode) =>
    call("mkdir", path, (done: (err: NodeJS.ErrnoException | null, first: string | undefined) => void) =>
      fs.mkdir(path, mode === undefined ? { recursive: true } : { recursive: true, mode }, done)),
  rmTree: (path) => attempt("remove", path, () => fs.rmSync(path, { recursive: true, force: true })),
  rmdir: (path) =>
    Effect.try({ try: () => (fs.rmdirSync(path), true), catch: (e) => e }).pipe(
      Effect.catchAll((e) => {
        const code = errno(e)
        return code === "ENOENT" || code === "ENOTEMPTY" || code === "EEXIST"
          ? Effect.succeed(false)
          : Effect.fail(durableError("remove", path, e))
      })
    ),
  readFile: (path) =>
    absentAs("read", path, Option.none<Uint8Array>(), (done) => fs.readFile(path, (err, b) => done(err, Option.some<Uint8Array>(b)))),
  size: (path) => absentAs("read", path, Option.none<number>(), (done) => fs.stat(path, (err, st) => done(err, Option.some(st?.size ?? 0)))),
  fsize: (fd, path) => call("read", path, (done: (err: NodeJS.ErrnoException | null, n: number) => void) =>
    fs.fstat(fd, (err, st) => done(err, st?.size ?? 0))),
  read: (fd, path, position, length) =>
    Effect.async<Uint8Array, DurableError>((resume) => {
      const buf = Buffer.allocUnsafe(length)
      fs.read(fd, buf, 0, length, position, (err, n) =>
        resume(err ? Effect.fail(durableError("read", path, err)) : Effect.succeed(buf.subarray(0, n))))
    }),
  readDir: (path) =>
    Effect.try({
      try: () => fs.readdirSync(path, { withFileTypes: true }).map((d) => ({ name: d.name, isDirectory: d.isDirectory() })),
      catch: (e) => e
    }).pipe(
      Effect.catchAll((e) =>
        errno(e) === "ENOENT" ? Effect.succeed<ReadonlyArray<DirEntry>>([]) : Effect.fail(durableError("read", path, e))
      )
    )
}

/**
 * The same primitives with the page-cache calls synchronous (fsync still on the pool), as
 * `nodePrimitives` were before they moved off the event loop: for the crash-injecting layer
 * only (DurableCrash.makeCrashing), whose crash points are numbered by step and must come in the
 * same order on every run of a concurrent scenario — with every call on the pool, sessions'
 * steps interleave as the pool finishes them.
 */
export const nodePrimitivesOrdered: Primitives = {
  ...nodePrimitives,
  open: (path, mode) => attempt("open", path, () => fs.openSync(path, openFlags[mode], 0o600)),
  write: (fd, path, bytes) =>
    attempt("write", path, () => {
      let off = 0
      while (off < bytes.length) off += fs.writeSync(fd, bytes, off, bytes.length - off)
    }),
  writeAt: (fd, path, bytes, position) =>
    attempt("write", path, () => {
      let off = 0
      while (off < bytes.length) off += fs.writeSync(fd, bytes, off, bytes.length - off, position + off)
    }),
  close: (fd, path) => attempt("close", path, () => fs.closeSync(fd)),
  ftruncate: (fd, path, size) => attempt("truncate", path, () => fs.ftruncateSync(fd, size)),
  rename: (from, to) => attempt("rename", to, () => fs.renameSync(from, to)),
  unlink: (path) =>
    Effect.suspend(() => {
      try {
        fs.unlinkSync(path)
        return Effect.succeed(true)
      } catch (e) {
        return errno(e) === "ENOENT" ? Effect.succeed(false) : Effect.fail(durableError("unlink", path, e))
      }
    }),
  fsyncDir: (path) =>
    Effect.acquireUseRelease(
      attempt("dirsync", path, () => fs.openSync(path, "r")),
      (fd) => fsyncAsync(fd, path, "dirsync"),
      (fd) => Effect.sync(() => fs.closeSync(fd)).pipe(Effect.ignore)
    ),
  mkdir: (path, mode) =>
    attempt("mkdir", path, () => fs.mkdirSync(path, mode === undefined ? { recursive: true } : { recursive: true, mode })),
  size: (path) =>
    Effect.try({ try: () => Option.some(fs.statSync(path).size), catch: (e) => e }).pipe(
      Effect.catchAll((e) => errno(e) === "ENOENT" ? Effect.succeed(Option.none()) : Effect.fail(durableError("read", path, e)))
    ),
  readFile: (path) =>
    Effect.try({ try: () => Option.some<Uint8Array>(fs.readFileSync(path)), catch: (e) => e }).pipe(
      Effect.catchAll((e) => errno(e) === "ENOENT" ? Effect.succeed(Option.none()) : Effect.fail(durableError("read", path, e)))
    )
}

const closeQuietly = (p: Primitives, fd: number, path: string) => Effect.ignore(p.close(fd, path))

/** The composite operations of the port, over any set of primitives. */
export const makeDurable = (p: Primitives): DurableService => {
  // writeSync and unlink are on the EventLog append path (inside its `EventLog.append` span):
  // untraced, no generator (a span per sub-step shows in scripts/bench/eventlog.ts).
  const writeSync = (path: string, bytes: Uint8Array): Effect.Effect<void, DurableError> =>
    Effect.acquireUseRelease(
      p.open(path, "truncate"),
      (fd) => Effect.zipRight(p.write(fd, path, bytes), p.fsync(fd, path)),
      (fd) => closeQuietly(p, fd, path)
    )

  // A file this creates gets its directory fsync'd: the appends' fsyncs make the bytes durable,
  // not the name they are reached by (a power loss would otherwise take the whole log).
  const openAppend = (path: string): Effect.Effect<AppendHandle, DurableError, Scope.Scope> =>
    Effect.flatMap(p.size(path), (before) =>
      Effect.acquireRelease(p.open(path, "append"), (fd) => closeQuietly(p, fd, path)).pipe(
        Effect.tap(() => Option.isNone(before) ? p.fsyncDir(dirname(path)) : Effect.void),
        Effect.map((fd) => [fd, before] as const)
      )).pipe(
      Effect.map(([fd, before]): AppendHandle => ({
        path,
        sizeAtOpen: Option.getOrElse(before, () => 0),
        // Hot path (the event log's journal and logs): no span, one or two primitives.
        append: (bytes) => Effect.zipRight(p.write(fd, path, bytes), p.fsync(fd, path)),
        write: (bytes) => p.write(fd, path, bytes),
        truncateTo: (size) => Effect.zipRight(p.ftruncate(fd, path, size), p.fsync(fd, path))
      }))
    )

  const replaceAtomic = Effect.fn("Durable.replaceAtomic")(function*(path: string, bytes: Uint8Array) {
    const tmp = `${path}.tmp`
    // A failed write (a full disk) leaves no partial tmp file holding the space.
    yield* Effect.onError(
      Effect.zipRight(writeSync(tmp, bytes), p.rename(tmp, path)),
      () => Effect.ignore(p.unlink(tmp))
    )
    yield* p.fsyncDir(dirname(path))
  })

  const unlink = (path: string, options?: { readonly syncDir?: boolean }): Effect.Effect<void, DurableError> =>
    options?.syncDir === false
      ? Effect.asVoid(p.unlink(path))
      : Effect.flatMap(p.unlink(path), (existed) => existed ? p.fsyncDir(dirname(path)) : Effect.void)

  // Absent: nothing to do (the event log's journal may name a log since removed).
  const patch = (path: string, edits: ReadonlyArray<{ readonly offset: number; readonly bytes: Uint8Array }>) =>
    Effect.flatMap(p.size(path), (size) =>
      Option.isNone(size)
        ? Effect.succeed(false)
        : Effect.acquireUseRelease(
          p.open(path, "readwrite"),
          (fd) =>
            Effect.zipRight(
              Effect.forEach(edits, (e) => p.writeAt(fd, path, e.bytes, e.offset), { discard: true }),
              p.fsync(fd, path)
            ),
          (fd) => closeQuietly(p, fd, path)
        ).pipe(Effect.as(true)))

  const truncate = Effect.fn("Durable.truncate")(function*(path: string, size: number) {
    yield* Effect.acquireUseRelease(
      p.open(path, "readwrite"),
      (fd) => Effect.zipRight(p.ftruncate(fd, path, size), p.fsync(fd, path)),
      (fd) => closeQuietly(p, fd, path)
    )
  })

  const mkdir = Effect.fn("Durable.mkdir")(function*(path: string, mode?: number) {
    const first = yield* p.mkdir(path, mode)
    // Make every new directory entry durable: fsync the parent of the first one created and
    // each created directory below it (they each gained an entry).
    if (first !== undefined) {
      yield* p.fsyncDir(dirname(first))
      let dir = path
      const chain: Array<string> = []
      while (dir.length >= first.length && dir !== dirname(dir)) {
        chain.push(dir)
        if (dir === first) break
        dir = dirname(dir)
      }
      for (const d of chain.reverse().slice(0, -1)) yield* p.fsyncDir(d)
    }
  })

  const removeTree = Effect.fn("Durable.removeTree")(function*(path: string) {
    yield* p.rmTree(path)
    yield* p.fsyncDir(dirname(path))
  })

  const removeEmptyDir = Effect.fn("Durable.removeEmptyDir")(function*(path: string) {
    const removed = yield* p.rmdir(path)
    if (removed) yield* p.fsyncDir(dirname(path))
  })

  const readRange = (path: string, start: number, end: number) =>
    Effect.acquireUseRelease(
      p.openRead(path),
      (fd) => Option.isNone(fd) || end <= start ? Effect.succeed(new Uint8Array(0)) : p.read(fd.value, path, start, end - start),
      (fd) => Option.isSome(fd) ? closeQuietly(p, fd.value, path) : Effect.void
    )

  const stream = (path: string, options?: { readonly end?: number; readonly chunkSize?: number }) =>
    Stream.unwrapScoped(Effect.gen(function*() {
      const fd = yield* Effect.acquireRelease(
        p.openRead(path),
        (o) => Option.isSome(o) ? closeQuietly(p, o.value, path) : Effect.void
      )
      if (Option.isNone(fd)) return Stream.empty
      const end = options?.end ?? (yield* p.fsize(fd.value, path))
      const chunkSize = options?.chunkSize ?? 256 * 1024
      if (end <= 0) return Stream.empty
      return Stream.paginateChunkEffect(0, (pos: number) =>
        p.read(fd.value, path, pos, Math.min(chunkSize, end - pos)).pipe(
          Effect.map((bytes) => {
            const next = pos + bytes.length
            return [
              bytes.length > 0 ? Chunk.of(bytes) : Chunk.empty<Uint8Array>(),
              bytes.length > 0 && next < end ? Option.some(next) : Option.none()
            ] as const
          })
        ))
    }))

  return {
    openAppend,
    writeSync,
    replaceAtomic,
    unlink,
    patch,
    truncate,
    mkdir,
    removeTree,
    removeEmptyDir,
    readFile: p.readFile,
    size: p.size,
    readRange,
    readDir: p.readDir,
    stream
  }
}

/** The real, node:fs-backed Durable service. */
export const live: DurableService = makeDurable(nodePrimitives)

