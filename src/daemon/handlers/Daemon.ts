// Handlers of the `daemon.*` methods (src/protocol/admin/daemon.ts): status, and stop.
import { Deferred, Effect } from "effect"
import { Orchestrator } from "../../agent/Orchestrator.js"
import { SessionStore } from "../../storage/SessionStore.js"
import { version } from "../../version.js"
import { DaemonControl } from "../DaemonControl.js"
import { DaemonGroup } from "../../protocol/AdminRpcs.js"
import { handlersOf, served } from "./Middleware.js"

export const DaemonHandlers = served(DaemonGroup, Effect.gen(function*() {
  const control = yield* DaemonControl
  const orchestrator = yield* Orchestrator
  const store = yield* SessionStore
  const stopSoon = Deferred.succeed(control.stop, undefined).pipe(Effect.delay("30 millis"), Effect.forkDaemon)

  return handlersOf(DaemonGroup)({
    "daemon.status": () =>
      Effect.gen(function*() {
        const sessions = yield* store.count
        return {
          pid: control.pid,
          version,
          home: control.settings.home,
          socket: control.socket,
          started_at: control.startedAt.toISOString(),
          uptime_ms: Date.now() - control.startedAt.getTime(),
          slots: control.settings.slots,
          grace_ms: control.settings.graceMs,
          agents: orchestrator.lookup.size(),
          sessions,
          connections: control.connections.open,
          storage: control.storage.status()
        }
      }),

    // Answer first, then stop: the shutdown closes this very connection.
    "daemon.stop": () => Effect.as(stopSoon, { pid: control.pid, stopping: true })
  })
}))
