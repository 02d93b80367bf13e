// Durable file writes (port). Every record and log write in the project goes through this
// service so the crash-injecting test layer can intercept each I/O sub-step
// (write, fsync, rename, unlink, dir fsync). Layers: `Durable.layer` (real, node:fs;
// internal/durableNode.ts) and `makeCrashing` (test: crashes at the Nth sub-step) in DurableCrash.ts.
// Both are built from the same `makeDurable(primitives)`, so the composite operations
// (replaceAtomic, …) are byte-for-byte the same code in production and under crash injection.
import { Context, type Effect, Layer, type Option, type Scope, type Stream } from "effect"
import { live } from "./internal/durableNode.js"
import type { DurableError } from "../domain/errors.js"

/** An open append-only file. `append` returns only after the bytes are fsync'd. */
export interface AppendHandle {
  readonly path: string
  /** The file's size in bytes when it was opened (0 when this created it). */
  readonly sizeAtOpen: number
  readonly append: (bytes: Uint8Array) => Effect.Effect<void, DurableError>
  /** Write `bytes` at the end of the file, no fsync (the event log's journal makes them durable first). */
  readonly write: (bytes: Uint8Array) => Effect.Effect<void, DurableError>
  /** Cut the file to `size` bytes (ftruncate) and fsync it: the event log's journal, emptied or cut back. */
  readonly truncateTo: (size: number) => Effect.Effect<void, DurableError>
}

/** A directory entry as returned by `readDir`. */
export interface DirEntry {
  readonly name: string
  readonly isDirectory: boolean
}

export interface DurableService {
  /** Open (creating if absent: then its directory is fsync'd) a file for durable appends; closed with the scope. */
  readonly openAppend: (path: string) => Effect.Effect<AppendHandle, DurableError, Scope.Scope>
  /** Create/truncate `path`, write `bytes`, fsync, close. Used for the WAL pending file. */
  readonly writeSync: (path: string, bytes: Uint8Array) => Effect.Effect<void, DurableError>
  /** Atomic replace: write `path.tmp` → fsync → rename over `path` → fsync the directory. */
  readonly replaceAtomic: (path: string, bytes: Uint8Array) => Effect.Effect<void, DurableError>
  /**
   * Unlink (absent is fine) then fsync the directory. `syncDir: false` skips the directory
   * fsync (for a file whose resurrection after a power loss is harmless).
   */
  readonly unlink: (path: string, options?: { readonly syncDir?: boolean }) => Effect.Effect<void, DurableError>
  /**
   * Open an existing file, write each edit's bytes at its offset (pwrite), fsync, close. With no
   * edits it only fsyncs (open · fsync · close). false, and nothing done, when the file is absent.
   */
  readonly patch: (
    path: string,
    edits: ReadonlyArray<{ readonly offset: number; readonly bytes: Uint8Array }>
  ) => Effect.Effect<boolean, DurableError>
  /** Truncate to `size` bytes then fsync. Used to cut a torn trailing line. */
  readonly truncate: (path: string, size: number) => Effect.Effect<void, DurableError>
  /** mkdir -p with `mode` (applied to every directory it creates), then fsync the parent directory. */
  readonly mkdir: (path: string, mode?: number) => Effect.Effect<void, DurableError>
  /** Remove a directory tree (absent is fine), then fsync its parent. */
  readonly removeTree: (path: string) => Effect.Effect<void, DurableError>
  /** Remove a directory if it is empty (absent or non-empty: no-op), then fsync its parent. */
  readonly removeEmptyDir: (path: string) => Effect.Effect<void, DurableError>

  // Reads. They are not crash points (they change nothing) but go through the port so a
  // crashed test layer refuses them too, like a dead process would.
  /** The whole file, or None when absent. For small records only. */
  readonly readFile: (path: string) => Effect.Effect<Option.Option<Uint8Array>, DurableError>
  /** Size in bytes, or None when absent. */
  readonly size: (path: string) => Effect.Effect<Option.Option<number>, DurableError>
  /** Bytes `[start, end)` of a file (shorter if the file is). */
  readonly readRange: (path: string, start: number, end: number) => Effect.Effect<Uint8Array, DurableError>
  /** Entries of a directory; empty when it does not exist. */
  readonly readDir: (path: string) => Effect.Effect<ReadonlyArray<DirEntry>, DurableError>
  /** The file's bytes `[0, end)` (default: to EOF at open time) as a stream of chunks; absent file = empty. */
  readonly stream: (
    path: string,
    options?: { readonly end?: number; readonly chunkSize?: number }
  ) => Stream.Stream<Uint8Array, DurableError>
}

export class Durable extends Context.Tag("substrat/Durable")<Durable, DurableService>() {
  /** The real layer: node:fs, fsync on the libuv pool (internal/durableNode.ts). */
  static readonly layer: Layer.Layer<Durable> = Layer.succeed(Durable, live)
}

export { live, makeDurable, nodePrimitives, nodePrimitivesOrdered, type OpenMode, type Primitives } from "./internal/durableNode.js"
