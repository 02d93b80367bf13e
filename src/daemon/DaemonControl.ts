// Process-level state of a running daemon: when it started, its settings, the shutdown signal
// that `daemon.stop` completes, and the live connection count.
import { Context, Deferred, Effect, Layer } from "effect"
import type { DaemonSettings } from "../config/DaemonConfig.js"
import { makeStorageState, type StorageState } from "./Storage.js"

export interface DaemonControlService {
  readonly pid: number
  readonly startedAt: Date
  readonly settings: DaemonSettings
  readonly socket: string
  /** Completed by `daemon.stop`; the daemon's main fiber awaits it, then its scope closes. */
  readonly stop: Deferred.Deferred<void>
  readonly connections: { open: number }
  /** Storage health: read-only when the home's disk is full or failing (Storage.ts). */
  readonly storage: StorageState
}

export class DaemonControl extends Context.Tag("substrat/DaemonControl")<DaemonControl, DaemonControlService>() {
  static readonly make = (settings: DaemonSettings, socket: string): Effect.Effect<DaemonControlService> =>
    Effect.map(Deferred.make<void>(), (stop) => ({
      pid: process.pid,
      startedAt: new Date(),
      settings,
      socket,
      stop,
      connections: { open: 0 },
      storage: makeStorageState(settings.home, settings.minFreeBytes)
    }))
  static readonly layer = (control: DaemonControlService): Layer.Layer<DaemonControl> =>
    Layer.succeed(DaemonControl, control)
}
