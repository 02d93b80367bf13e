// RPC handlers of the admin socket: one per method of Rpcs.ts.
import { Deferred, Effect, Stream } from "effect"
import { version } from "../cli/version.js"
import { DaemonControl } from "./DaemonControl.js"
import { AdminRpcs, Unavailable } from "./Rpcs.js"

const notYet = (what: string) => Effect.fail(new Unavailable({ message: `${what} is not available yet` }))

export const HandlersLive = AdminRpcs.toLayer(Effect.gen(function*() {
  const control = yield* DaemonControl

  return {
    "daemon.status": () =>
      Effect.sync(() => ({
        pid: control.pid,
        version,
        home: control.settings.home,
        socket: control.socket,
        started_at: control.startedAt.toISOString(),
        uptime_ms: Date.now() - control.startedAt.getTime(),
        slots: control.settings.slots,
        grace_ms: control.settings.graceMs,
        agents: 0,
        sessions: 0,
        connections: control.connections.open
      })),
    "daemon.stop": () =>
      // Answer first, then stop: the shutdown closes this very connection.
      Deferred.succeed(control.stop, undefined).pipe(
        Effect.delay("30 millis"),
        Effect.forkDaemon,
        Effect.as({ pid: control.pid, stopping: true })
      ),
    "agent.create": () => notYet("agent.create"),
    "agent.list": () => notYet("agent.list"),
    "agent.send": () => notYet("agent.send"),
    "agent.attach": () => Stream.fail(new Unavailable({ message: "agent.attach is not available yet" })),
    "agent.inspect": () => notYet("agent.inspect"),
    "agent.terminate": () => notYet("agent.terminate"),
    "agent.logs": () => Stream.fail(new Unavailable({ message: "agent.logs is not available yet" })),
    "session.list": () => notYet("session.list"),
    "session.suspend": () => notYet("session.suspend"),
    "session.resume": () => notYet("session.resume"),
    "session.delete": () => notYet("session.delete"),
    "workspace.create": () => notYet("workspace.create"),
    "workspace.list": () => notYet("workspace.list"),
    "workspace.link": () => notYet("workspace.link"),
    "workspace.delete": () => notYet("workspace.delete")
  }
}))
