// Handlers of the `cluster.*` methods (src/protocol/admin/cluster.ts). A daemon that is not a
// cluster runner answers `cluster.status` with no runners and `self: null`, and refuses
// `cluster.drain` / `cluster.undrain`.
import { Effect, Option } from "effect"
import { Internal, InvalidInput } from "../../protocol/admin/common.js"
import { ClusterGroup } from "../../protocol/AdminRpcs.js"
import { ClusterRunner } from "../Cluster.js"
import { handlersOf, served } from "./Middleware.js"

const notRunner = () =>
  Effect.fail(new InvalidInput({ field: "runner", message: "this daemon is not a cluster runner (start it with --cluster <postgres url> --listen <host:port>)" }))

export const ClusterHandlers = served(ClusterGroup, Effect.gen(function*() {
  const runner = yield* Effect.serviceOption(ClusterRunner)
  return handlersOf(ClusterGroup)({
    "cluster.status": () =>
      Option.match(runner, {
        onNone: () => Effect.succeed({ self: null, lease_ms: 0, shards: 0, held: 0, runners: [], trees: 0 }),
        onSome: (r) => Effect.mapError(r.status, (message) => new Internal({ message }))
      }),
    "cluster.drain": () => Option.match(runner, { onNone: notRunner, onSome: (r) => r.drain }),
    "cluster.undrain": () => Option.match(runner, { onNone: notRunner, onSome: (r) => r.undrain })
  })
}))
