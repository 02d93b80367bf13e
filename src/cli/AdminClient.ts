// A client of the daemon's whole admin group (every method of docs/protocol.md), for programs
// that embed Substrat (src/index.ts exports it as `AdminClient`). The CLI's commands use
// Client.ts with their own area's group instead, so they build only the Schemas they call.
import type * as RpcClient from "@effect/rpc/RpcClient"
import type * as RpcGroup from "@effect/rpc/RpcGroup"
import { Context, Effect, Layer, type Scope } from "effect"
import { AdminRpcs } from "../protocol/AdminRpcs.js"
import { type CliError, connect } from "./Client.js"

export * from "./Client.js"

export type Admin = RpcClient.RpcClient<RpcGroup.Rpcs<typeof AdminRpcs>>

export class AdminClient extends Context.Tag("substrat/cli/AdminClient")<AdminClient, Admin>() {}

/** A connected client of every admin method; fails with "daemon not running" when there is no socket. */
export const layer = (socket: string): Layer.Layer<AdminClient, CliError> => Layer.scoped(AdminClient, connect(AdminRpcs, socket))

/** Run `f` with a client of every admin method for `socket`. */
export const withClient = <A, R>(
  socket: string,
  f: (client: Admin) => Effect.Effect<A, CliError, R>
): Effect.Effect<A, CliError, Exclude<Exclude<R, AdminClient>, Scope.Scope>> =>
  Effect.flatMap(AdminClient, f).pipe(Effect.provide(layer(socket)), Effect.scoped)
