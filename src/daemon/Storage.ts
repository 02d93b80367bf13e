// The daemon's storage health (docs/reliability.md, "A full disk"). When $SUBSTRAT_HOME's file
// system is full or failing (ENOSPC, EDQUOT, EIO, EROFS) the daemon does not die and does not
// acknowledge what it cannot make durable: it goes read-only — every mutation is refused with
// `Unavailable` ("read-only: …"), reads keep being served — and says so in `daemon status`.
//  - At start-up: when the free space is under `minFreeBytes`, or recovery's writes fail with a
//    storage error, recovery runs read-only (nothing written, no turn started). That mode lasts
//    until the daemon is restarted (the writes recovery skipped must run first); `daemon status`
//    says when the space has come back.
//  - While running: a mutation that failed with a storage error, or a free-space probe under the
//    threshold, turns read-only; the probe (every few seconds) turns it back once space returns.
// This module owns that state; the daemon's handlers ask it before every mutation.
import { Effect } from "effect"
import * as fs from "node:fs"
import { storageFault } from "../domain/errors.js"
import type { StorageStatus } from "../protocol/AdminRpcs.js"

/** A runtime read-only mode ends once at least this much (or `minFreeBytes`, if more) is free. */
const LEAVE_READ_ONLY_BYTES = 1024 * 1024

export const freeBytes = (dir: string): number | null => {
  try {
    const s = fs.statfsSync(dir)
    return Number(s.bavail) * Number(s.bsize)
  } catch {
    return null
  }
}

export interface StorageState {
  readonly status: () => StorageStatus
  readonly readOnly: () => boolean
  /** Go read-only (idempotent; the first reason is kept). */
  readonly enterReadOnly: (reason: string, opts?: { readonly startup?: boolean }) => void
  /** Probe the free space; leave a runtime read-only mode once it is back over the threshold. */
  readonly probe: () => void
  /** A write to the daemon's own log (stdout/stderr, daemon.log) failed: remembered for `daemon status`, read-only on a storage error. */
  readonly logFailed: (error: unknown) => void
  /** The message a refused mutation answers with. */
  readonly refusal: () => string
}

export const makeStorageState = (home: string, minFreeBytes: number): StorageState => {
  let mode: "ok" | "read-only" = "ok"
  let reason: string | null = null
  let startup = false
  let free: number | null = freeBytes(home)
  let logError: string | null = null
  let logLost = 0
  const low = () => free !== null && free < minFreeBytes
  const enterReadOnly = (why: string, opts?: { readonly startup?: boolean }) => {
    if (mode === "ok") {
      mode = "read-only"
      reason = why
    }
    if (opts?.startup === true) startup = true
  }
  return {
    status: () => ({
      mode,
      reason,
      free_bytes: free,
      restart_needed: mode === "read-only" && startup,
      ...(logError === null ? {} : { log_error: `${logError} (${logLost} line(s) lost; later lines are lost until the daemon restarts)` })
    }),
    readOnly: () => mode === "read-only",
    enterReadOnly,
    probe: () => {
      free = freeBytes(home)
      if (low()) enterReadOnly(`only ${free} bytes free under ${home} (minimum ${minFreeBytes}; SUBSTRAT_MIN_FREE_BYTES)`)
      else if (mode === "read-only" && !startup && free !== null && free >= Math.max(minFreeBytes, LEAVE_READ_ONLY_BYTES)) {
        mode = "ok"
        reason = null
      }
    },
    logFailed: (error) => {
      logLost++
      if (logError !== null) return
      const message = error instanceof Error ? error.message : String(error)
      logError = `cannot write ${home}/daemon.log: ${message}`
      if (storageFault(error) !== undefined) enterReadOnly(logError)
    },
    refusal: () => {
      const back = startup && !low() && free !== null
        ? " Space is available again: restart the daemon (substrat daemon stop; substrat daemon start) to leave read-only mode."
        : " Free some space under the home; nothing was changed."
      return `read-only: ${reason ?? "storage unavailable"}.${back}`
    }
  }
}

/** Probe every `everyMs` until the scope closes. */
export const monitor = (state: StorageState, everyMs = 2000) =>
  Effect.sync(() => state.probe()).pipe(
    Effect.zipRight(Effect.sleep(everyMs)),
    Effect.forever,
    Effect.forkScoped
  )
