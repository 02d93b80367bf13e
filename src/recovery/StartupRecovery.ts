// The recovery step of daemon start-up (ARCHITECTURE §10), as a hook the daemon calls after
// the orchestrator is built and before the socket serves. The fallback only does step 1
// (`SessionStore.recover`: ACTIVE → SUSPENDED); `layerStartupRecovery` (Startup.ts) runs the
// full recovery.
import { Context, Effect, Layer } from "effect"
import { SessionStore } from "../storage/SessionStore.js"

export interface RecoveryReport {
  readonly sessions: number
  readonly suspended: number
  readonly agents: number
  readonly notes: ReadonlyArray<string>
}

export class StartupRecovery extends Context.Tag("substrat/StartupRecovery")<StartupRecovery, {
  readonly run: Effect.Effect<RecoveryReport, unknown>
  /**
   * Rebuild the state without writing anything and without starting turns (a full or failing
   * disk: the daemon serves reads only). Absent: the fallback has no such mode.
   */
  readonly runReadOnly?: Effect.Effect<RecoveryReport, unknown>
}>() {}

/** Fallback: `SessionStore.recover` only; the tree is not rebuilt. */
export const layerSessionsOnly: Layer.Layer<StartupRecovery, never, SessionStore> = Layer.effect(
  StartupRecovery,
  Effect.map(SessionStore, (store) =>
    StartupRecovery.of({
      run: Effect.gen(function*() {
        const before = yield* store.scan
        const after = yield* store.recover
        const suspended = before.filter((s) => s.state === "active").length
        return {
          sessions: after.length,
          suspended,
          agents: 0,
          notes: ["tree rebuild and inbox re-injection not available (recovery module not installed)"]
        }
      })
    }))
)
