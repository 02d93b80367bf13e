// The floor of the admin socket's stack, for `npm run bench daemon`: stock @effect/rpc
// (`RpcServer.layerProtocolSocketServer` + `RpcSerialization.layerNdJsonRpc()` over
// `NodeSocketServer`) serving `agent.list` with the daemon's own Rpc definition and Schemas, but
// a handler that answers a constant (no daemon services, no transport guard). What it costs per
// request is what any daemon on this stack pays before its own code runs.
// The bench bundles it with esbuild like dist/daemon.cjs and runs the bundle with plain `node`
// (and, for reference, this source through tsx).
// Usage: node <bundle> <socket path> <agent.list result as JSON> [guard]
//    or: tsx scripts/bench-servers/rpc-floor.ts <socket path> <agent.list result as JSON> [guard]
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as RpcServer from "@effect/rpc/RpcServer"
import { Effect, Layer, Schema } from "effect"
import { AgentListRpc } from "../../src/protocol/AdminRpcs.js"
import * as SocketGuard from "../../src/protocol/SocketGuard.js"

const [path, json] = process.argv.slice(2)
if (path === undefined || json === undefined) throw new Error("usage: rpc-floor.ts <socket> <result json>")
const Floor = RpcGroup.make(AgentListRpc)
const answer = Schema.decodeUnknownSync(AgentListRpc.successSchema)(JSON.parse(json))

const guarded = process.argv[4] === "guard"
const protocol = guarded ? SocketGuard.layerProtocol(SocketGuard.optionsFromGroup(Floor, { maxLineBytes: 1 << 20 })) : RpcServer.layerProtocolSocketServer

const Live = RpcServer.layer(Floor, { disableFatalDefects: true, concurrency: "unbounded", disableTracing: true }).pipe(
  Layer.provide(Floor.toLayer({ "agent.list": () => Effect.succeed(answer) })),
  Layer.provide(protocol),
  Layer.provide(NodeSocketServer.layer({ path })),
  Layer.provide(RpcSerialization.layerNdJsonRpc())
)

NodeRuntime.runMain(Effect.scoped(Effect.gen(function*() {
  yield* Layer.build(Live)
  console.log("up")
  return yield* Effect.never
})))
