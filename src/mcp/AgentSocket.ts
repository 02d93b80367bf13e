// The per-agent tool socket `agents/<sid>/agent.sock` (ARCHITECTURE §6): the tool methods of
// AgentRpcs, served for ONE agent. Identity is the socket: every call runs as `agent` — no
// payload carries an agent id (unknown keys are rejected), and admin methods do not exist here
// (the transport guard, src/protocol/SocketGuard.ts, answers them with JSON-RPC -32601
// "Method not found"; it also bounds line length and JSON nesting depth before decoding).
//
// Permissions: the socket listens at a staging name, is chmod 0600 (and chowned) there, then
// renamed into place (its directory under $SUBSTRAT_HOME is 0700 too). Connecting needs write permission on the socket inode, i.e. the connecting
// process must run as the socket's owner. With bwrap's default user namespace the sandboxed
// process is the daemon's own uid outside the namespace (inside it may look like any uid), so
// 0600 + daemon ownership is right. When the sandbox runs the agent as another uid (the
// `outer`/`inner` sandbox identities, daemon as root), pass `owner` and the socket is chowned
// to that uid: it alone (and root) can connect. A read-only bind mount does not stop connect().
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as RpcServer from "@effect/rpc/RpcServer"
import { Data, Effect, Layer, Schema, type Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { ToolHandler } from "../agent/ToolHandler.js"
import * as SocketGuard from "../protocol/SocketGuard.js"
import type { AgentId } from "../domain/ids.js"
import { isJsonValue } from "../domain/events.js"
import type { ToolInvoker } from "../provider/Provider.js"
import { ToolEndpoint, ToolEndpointError } from "../provider/ToolEndpoint.js"
import { AgentRpcs, ToolError } from "../protocol/AgentRpcs.js"
import { argsSchemaOf, type ToolName } from "../domain/tools.js"

export class AgentSocketError extends Data.TaggedError("AgentSocketError")<{
  readonly reason: "path" | "listen" | "permissions"
  readonly path: string
  readonly message: string
}> {}

export interface ServeOptions {
  /** Where to listen (the daemon uses `Paths.agentSocket(session_id)`). */
  readonly path: string
  /** Every call through this socket runs as this agent. */
  readonly agent: AgentId
  /** chown the socket to this uid/gid (sandbox identities `outer`/`inner`); default: keep the daemon's. */
  readonly owner?: { readonly uid: number; readonly gid: number } | undefined
  /** Longest accepted request line in bytes (default 1 MiB). */
  readonly maxLineBytes?: number | undefined
}

let stagingCounter = 0

/** sun_path holds 108 bytes including the terminating NUL. */
export const maxSocketPathBytes = 107

const errMessage = (e: unknown): string => (e instanceof Error ? e.message : String(e))

/** `{error: {type, message, ...}}` (the ToolHandler's failure shape) → ToolError. */
export const toToolError = (result: unknown): ToolError => {
  const inner = typeof result === "object" && result !== null && "error" in result ? result.error : result
  const rec = typeof inner === "object" && inner !== null ? (inner as Record<string, unknown>) : {}
  const type = typeof rec["type"] === "string" ? rec["type"] : "internal"
  const message = typeof rec["message"] === "string" ? rec["message"] : JSON.stringify(inner) ?? "tool failed"
  return new ToolError({ type, message, error: isJsonValue(inner) ? inner : { type, message } })
}

/** Run one tool as the socket's agent: re-encode the decoded payload, invoke, split success/failure. */
const invoke = (tools: ToolInvoker, tool: ToolName, payload: unknown): Effect.Effect<unknown, ToolError> =>
  Schema.encodeUnknown(argsSchemaOf(tool))(payload).pipe(
    Effect.mapError((e) => new ToolError({ type: "invalid_arguments", message: `${tool}: ${e.message}`, error: null })),
    Effect.flatMap((args) => tools.invoke(tool, args)),
    Effect.flatMap((r) => (r.is_error ? Effect.fail(toToolError(r.result)) : Effect.succeed(r.result)))
  )

const handlersFor = (tools: ToolInvoker) =>
  AgentRpcs.of({
    send_message: (p) => invoke(tools, "send_message", p),
    broadcast: (p) => invoke(tools, "broadcast", p),
    check_inbox: (p) => invoke(tools, "check_inbox", p),
    spawn_agent: (p) => invoke(tools, "spawn_agent", p),
    inspect_agent: (p) => invoke(tools, "inspect_agent", p),
    ask_human: (p) => invoke(tools, "ask_human", p)
  })

/** Remove a leftover socket at `p` (a dead daemon's); refuse to clobber anything else. */
const clearStale = (p: string) =>
  Effect.try({
    try: () => {
      const st = fs.lstatSync(p, { throwIfNoEntry: false })
      if (st === undefined) return
      if (!st.isSocket()) throw new Error(`${p} exists and is not a socket`)
      fs.rmSync(p, { force: true })
    },
    catch: (e) => new AgentSocketError({ reason: "path", path: p, message: errMessage(e) })
  })

export interface ServeToolsOptions extends Omit<ServeOptions, "agent"> {
  /** The agent's tools, identity already fixed (`ToolHandler.forAgent(id)`, or `ProviderContext.tools`). */
  readonly tools: ToolInvoker
}

/**
 * Serve the tool socket for `agent` until the scope closes; then the socket file is removed.
 * Returns once the socket accepts connections (with its final mode/owner).
 */
export const serve = Effect.fn("AgentSocket.serve")(function*(
  options: ServeOptions
): Effect.fn.Return<void, AgentSocketError, Scope.Scope | ToolHandler> {
  const tools = (yield* ToolHandler).forAgent(options.agent)
  return yield* serveTools({ ...options, tools })
})

/**
 * Like `serve`, for code that already holds the agent's ToolInvoker — e.g. a CLI provider's
 * factory, with `ctx.tools`, so the socket lives exactly as long as the provider instance.
 */
export const serveTools = Effect.fn("AgentSocket.serveTools")(function*(
  options: ServeToolsOptions
): Effect.fn.Return<void, AgentSocketError, Scope.Scope> {
  const p = options.path
  // Listen at a staging name in the same directory, set the mode and owner there, then rename
  // into place: the published path never has a wider mode.
  const staging = path.join(path.dirname(p), `.${process.pid.toString(36)}-${(++stagingCounter).toString(36)}.s`)
  const longest = Math.max(Buffer.byteLength(p), Buffer.byteLength(staging))
  if (longest > maxSocketPathBytes) {
    return yield* new AgentSocketError({
      reason: "path",
      path: p,
      message: `socket path is ${longest} bytes, more than a Unix socket allows (${maxSocketPathBytes}); use a shorter $SUBSTRAT_HOME`
    })
  }
  yield* Effect.try({
    try: () => fs.mkdirSync(path.dirname(p), { recursive: true, mode: 0o700 }),
    catch: (e) => new AgentSocketError({ reason: "path", path: p, message: errMessage(e) })
  })
  yield* clearStale(p)
  yield* clearStale(staging)

  const guard = SocketGuard.optionsFromGroup(AgentRpcs, { maxLineBytes: options.maxLineBytes ?? 1024 * 1024 })
  const server = RpcServer.layer(AgentRpcs, { disableFatalDefects: true, concurrency: "unbounded", disableTracing: true }).pipe(
    Layer.provide(AgentRpcs.toLayer(handlersFor(options.tools))),
    Layer.provide(SocketGuard.layerProtocol(guard)),
    // Half-open: a client that writes its requests and then shuts down its side still gets every answer.
    Layer.provide(NodeSocketServer.layer({ path: staging, allowHalfOpen: true })),
    Layer.provide(RpcSerialization.layerNdJsonRpc())
  )
  // On release remove what is ours: the staging name, and the published path unless another
  // server has taken it over since (same inode = still ours).
  let published: bigint | undefined
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      fs.rmSync(staging, { force: true })
      const st = fs.lstatSync(p, { throwIfNoEntry: false, bigint: true })
      if (published !== undefined && st !== undefined && st.ino === published) fs.rmSync(p, { force: true })
    })
  )
  // Interruptible: serve may run inside an acquire (e.g. a provider factory under the
  // Multiplexer's acquireUseRelease); the server's fibers inherit the region, and uninterruptible
  // socket fibers would hang every race inside @effect/rpc and the platform socket.
  yield* Layer.buildWithScope(server, yield* Effect.scope).pipe(
    Effect.interruptible,
    Effect.mapError((e) =>
      new AgentSocketError({ reason: "listen", path: p, message: `cannot listen on ${p}: ${errMessage(e.cause)}` })
    )
  )
  yield* Effect.try({
    try: () => {
      fs.chmodSync(staging, 0o600)
      if (options.owner !== undefined) fs.chownSync(staging, options.owner.uid, options.owner.gid)
      published = fs.lstatSync(staging, { bigint: true }).ino
      fs.renameSync(staging, p)
    },
    catch: (e) => new AgentSocketError({ reason: "permissions", path: p, message: errMessage(e) })
  })
})

/** `serve` as a layer (for embedders/tests that hold one agent's socket for a layer's lifetime). */
export const layer = (options: ServeOptions): Layer.Layer<never, AgentSocketError, ToolHandler> =>
  Layer.scopedDiscard(serve(options))

/** The ToolEndpoint port (src/provider/ToolEndpoint.ts) served by this module: what CLI providers' sandboxes connect to. */
export const toolEndpoint: Layer.Layer<ToolEndpoint> = Layer.succeed(ToolEndpoint, {
  serve: (path, tools) =>
    serveTools({ path, tools }).pipe(Effect.mapError((e) => new ToolEndpointError({ message: e.message })))
})
