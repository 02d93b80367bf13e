// The CLI side of the admin socket: an @effect/rpc client over the platform Unix socket,
// NDJSON JSON-RPC framing, and the mapping of every failure to one line + an exit code.
// A command's client serves the group of its own area (src/protocol/admin/: `AgentGroup`, …), a
// subset of the daemon's AdminRpcs with the same wire format, so a command builds only the
// Schemas of the methods it can call. The whole group: AdminClient.ts.
import * as Socket from "@effect/platform/Socket"
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import type * as Rpc from "@effect/rpc/Rpc"
import * as RpcClient from "@effect/rpc/RpcClient"
import type { RpcClientError } from "@effect/rpc/RpcClientError"
import type * as RpcGroup from "@effect/rpc/RpcGroup"
import { Cause, Data, Effect, Layer, Match, Option, type Scope } from "effect"
import * as fs from "node:fs"
import type { RpcError } from "../protocol/admin/common.js"
import * as WholeLines from "../protocol/WholeLines.js"
import { type CliErrorKind, isNotRunningCode, lostConnectionMessage, notRunningMessage } from "./Exit.js"

export { type CliErrorKind, exitCodeOf, ExitCode } from "./Exit.js"

/**
 * Everything a command can fail with: printed as `substrat: <message>`, exit code by kind.
 * `reason` is what a command decides on: the daemon's (its wire error's `reason`), or
 * `lost-connection` when the daemon went away mid-call.
 */
export class CliError extends Data.TaggedError("CliError")<{
  readonly kind: CliErrorKind
  readonly message: string
  readonly reason?: string
}> {}

const notRunning = (socket: string) => new CliError({ kind: "daemon-not-running", message: notRunningMessage(socket) })

const lost = (socket: string, detail: string) =>
  new CliError({ kind: "daemon-not-running", message: lostConnectionMessage(socket, detail), reason: "lost-connection" })

const codeIn = (u: unknown, depth = 0): string | undefined => {
  if (depth > 6 || typeof u !== "object" || u === null) return undefined
  if ("code" in u && typeof u.code === "string") return u.code
  return "cause" in u ? codeIn(u.cause, depth + 1) : undefined
}

/** A transport failure: the daemon is not there (no socket, refused) or went away mid-call. */
export const fromClientError = (socket: string) => (e: RpcClientError): CliError => {
  return isNotRunningCode(codeIn(e.cause)) ? notRunning(socket) : lost(socket, e.message)
}

/** A typed error the daemon answered with, by its kind (exit codes: docs/cli.md). */
export const fromRpcError = (e: RpcError): CliError =>
  new CliError({
    kind: Match.value(e).pipe(
      Match.tagsExhaustive({
        NotFound: (): CliErrorKind => "not-found",
        InvalidInput: (): CliErrorKind => "invalid-input",
        Unavailable: (): CliErrorKind => "unavailable",
        Internal: (): CliErrorKind => "internal"
      })
    ),
    message: e.message,
    ...(e._tag === "InvalidInput" || e._tag === "Unavailable") && e.reason !== undefined ? { reason: e.reason } : {}
  })

/**
 * Map both kinds of failure of one RPC call. A write to a socket whose daemon just died
 * surfaces from @effect/rpc as a defect (SocketError): that too is "the daemon went away".
 */
export const call = <A, R>(
  socket: string,
  effect: Effect.Effect<A, RpcError | RpcClientError, R>
): Effect.Effect<A, CliError, R> =>
  effect.pipe(
    Effect.mapError((e) => (e._tag === "RpcClientError" ? fromClientError(socket)(e) : fromRpcError(e))),
    Effect.catchSomeDefect((d) => Socket.isSocketError(d) ? Option.some(Effect.fail(lost(socket, d.message))) : Option.none())
  )

/**
 * A connected client of `group` (requests without middleware) for one command; fails fast with
 * "daemon not running" when there is no socket.
 */
export const connect = <Rs extends Rpc.Any>(
  group: RpcGroup.RpcGroup<Rs>,
  socket: string
): Effect.Effect<RpcClient.RpcClient<Rs>, CliError, Scope.Scope> =>
  Effect.gen(function*() {
    if (!fs.existsSync(socket)) return yield* notRunning(socket)
    // Built in the caller's scope: the connection lives as long as the client.
    const protocol = yield* Layer.build(
      RpcClient.layerProtocolSocket().pipe(
        Layer.provide(NodeSocket.layerNet({ path: socket })),
        Layer.provide(WholeLines.layerNdJsonRpc)
      )
    ).pipe(Effect.mapError(() => notRunning(socket)))
    // Admin methods have no client middleware, so the group's middleware requirement is empty.
    const make = RpcClient.make(group) as Effect.Effect<RpcClient.RpcClient<Rs>, never, RpcClient.Protocol | Scope.Scope>
    return yield* Effect.provide(make, protocol)
  })

/** Run `f` with a client of `group` (an area's methods, e.g. `AgentGroup`) for `socket`. */
export const withClient = <Rs extends Rpc.Any, A, R>(
  group: RpcGroup.RpcGroup<Rs>,
  socket: string,
  f: (client: RpcClient.RpcClient<Rs>) => Effect.Effect<A, CliError, R>
): Effect.Effect<A, CliError, Exclude<R, Scope.Scope>> => Effect.scoped(Effect.flatMap(connect(group, socket), f))

/**
 * Run a follow stream (`logs -f`, `agent logs -f`, `agent list -w`). It never ends by itself, so
 * when it does — the daemon ended it at shutdown — or the connection drops, the daemon went away:
 * exit 3 with a line saying so (`resume`: how to pick up where it stopped). Ctrl-C interrupts
 * this fiber instead, which is no error.
 */
export const following = <R>(
  socket: string,
  run: Effect.Effect<void, CliError, R>,
  resume?: () => string | undefined
): Effect.Effect<never, CliError, R> => {
  const gone = (detail: string) =>
    Effect.suspend(() => {
      const hint = resume?.()
      return Effect.fail(
        new CliError({
          kind: "daemon-not-running",
          message: `${detail}${hint === undefined ? "" : `; ${hint}`}`
        })
      )
    })
  return run.pipe(
    Effect.catchAllCause((cause) => {
      if (Cause.isInterruptedOnly(cause)) return Effect.void
      const failure = Cause.failureOption(cause)
      return Option.isSome(failure) && failure.value.kind === "daemon-not-running"
        ? gone(failure.value.message)
        : Effect.failCause(cause)
    }),
    Effect.zipRight(gone(`the daemon stopped (${socket})`))
  )
}
