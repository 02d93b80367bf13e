// The admin methods' handlers: one layer per area (handlers/), all behind the one middleware
// (handlers/Middleware.ts: wire errors, the read-only gate, request spans). The socket server
// (Daemon.ts) and the HTTP API (through `inProcessClient`) serve the same handlers.
import * as RpcClient from "@effect/rpc/RpcClient"
import type { FromServer } from "@effect/rpc/RpcMessage"
import * as RpcServer from "@effect/rpc/RpcServer"
import type * as RpcGroup from "@effect/rpc/RpcGroup"
import type * as Rpc from "@effect/rpc/Rpc"
import { Effect, Layer, type Scope } from "effect"
import { AgentHandlers } from "./handlers/Agents.js"
import { BudgetHandlers } from "./handlers/Budgets.js"
import { ClusterHandlers } from "./handlers/Cluster.js"
import { DaemonHandlers } from "./handlers/Daemon.js"
import { EventsHandlers } from "./handlers/Events.js"
import { AdminMiddlewareLive } from "./handlers/Middleware.js"
import { SessionHandlers } from "./handlers/Sessions.js"
import { SwarmHandlers } from "./handlers/Swarm.js"
import { WorkspaceHandlers } from "./handlers/Workspaces.js"
import { type AdminClient, AdminRpcs } from "../protocol/AdminRpcs.js"
import { ResolverService } from "./Resolver.js"

export const HandlersLive = Layer.mergeAll(
  DaemonHandlers,
  AgentHandlers,
  EventsHandlers,
  SessionHandlers,
  WorkspaceHandlers,
  SwarmHandlers,
  BudgetHandlers,
  ClusterHandlers,
  AdminMiddlewareLive
).pipe(Layer.provide(ResolverService.layer))

type Admin = RpcGroup.Rpcs<typeof AdminRpcs>

/**
 * A client of the admin methods in this process: the stock RpcServer and RpcClient joined
 * without serialization (as `RpcTest.makeClient`, with tracing off like the socket's server), so
 * every call passes the same middleware and handlers as a call over `daemon.sock`.
 */
export const inProcessClient: Effect.Effect<AdminClient, never, Scope.Scope | Rpc.ToHandler<Admin> | Rpc.Middleware<Admin>> = Effect.gen(function*() {
  const toClient: { write: (message: FromServer<Admin>) => Effect.Effect<void> } = { write: () => Effect.void }
  const server = yield* RpcServer.makeNoSerialization(AdminRpcs, {
    onFromServer: (message) => toClient.write(message),
    disableTracing: true,
    disableFatalDefects: true,
    concurrency: "unbounded"
  })
  const client = yield* RpcClient.makeNoSerialization(AdminRpcs, {
    supportsAck: true,
    disableTracing: true,
    onFromClient: ({ message }) => server.write(0, message)
  })
  toClient.write = client.write
  return client.client
})

