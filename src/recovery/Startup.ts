// The daemon's start-up recovery hook (StartupRecovery.ts) backed by the full
// Recovery: tree rebuild, orphan cleanup, message re-injection, lost replies, root resume.
// Use in place of `layerSessionsOnly`; needs the orchestration and storage services.
import { Effect, Layer } from "effect"
import { StartupRecovery } from "./StartupRecovery.js"
import { describeReport, Recovery, type RecoveryReport } from "./Recovery.js"

export const layerStartupRecovery = Layer.effect(
  StartupRecovery,
  Effect.map(Recovery, (recovery) => {
    const summary = (r: RecoveryReport) => ({
      sessions: r.sessions,
      suspended: r.suspended,
      agents: r.agents,
      notes: [describeReport(r), ...r.notes]
    })
    return StartupRecovery.of({
      run: Effect.map(recovery.run(), summary),
      runReadOnly: Effect.map(recovery.run({ resume: false, readOnly: true }), summary)
    })
  })
).pipe(Layer.provide(Recovery.Default))
