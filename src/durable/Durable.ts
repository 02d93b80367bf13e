// Durable file writes (port). Every record and log write in the project goes through this
// service so the crash-injecting test layer can intercept each I/O sub-step
// (write, fsync, rename, unlink, dir fsync). Implementations: `layer` (real, node:fs) and
// `layerCrashing` (test: crashes at the Nth sub-step) — see DurableLive.ts / DurableCrash.ts.
import { Context, type Effect, type Scope } from "effect"
import type { DurableError } from "../domain/errors.js"

/** An open append-only file. `append` returns only after the bytes are fsync'd. */
export interface AppendHandle {
  readonly path: string
  readonly append: (bytes: Uint8Array) => Effect.Effect<void, DurableError>
}

export interface DurableService {
  /** Open (creating if absent) a file for durable appends; closed with the scope. */
  readonly openAppend: (path: string) => Effect.Effect<AppendHandle, DurableError, Scope.Scope>
  /** Create/truncate `path`, write `bytes`, fsync. Used for the WAL pending file. */
  readonly writeSync: (path: string, bytes: Uint8Array) => Effect.Effect<void, DurableError>
  /** Atomic replace: write `path.tmp` → fsync → rename over `path` → fsync the directory. */
  readonly replaceAtomic: (path: string, bytes: Uint8Array) => Effect.Effect<void, DurableError>
  /** Unlink (absent is fine) then fsync the directory. */
  readonly unlink: (path: string) => Effect.Effect<void, DurableError>
  /** Truncate to `size` bytes then fsync. Used to cut a torn trailing line. */
  readonly truncate: (path: string, size: number) => Effect.Effect<void, DurableError>
  /** mkdir -p with `mode`, then fsync the parent directory. */
  readonly mkdir: (path: string, mode?: number) => Effect.Effect<void, DurableError>
  /** Remove a directory tree, then fsync its parent. */
  readonly removeTree: (path: string) => Effect.Effect<void, DurableError>
}

export class Durable extends Context.Tag("substrat/Durable")<Durable, DurableService>() {}
