// The one transport wrapper in front of stock @effect/rpc, on the admin socket (Daemon.ts) and
// on every agent socket (src/mcp/AgentSocket.ts). Both serve an RpcGroup with
// `RpcServer.layerProtocolSocketServer` + `RpcSerialization.layerNdJsonRpc()` over
// `NodeSocketServer`; `layer` below replaces the `SocketServer` in between by one whose sockets
// only ever hand @effect/rpc well-formed request lines. It dispatches nothing: a valid line goes
// on to @effect/rpc unchanged, a bad one gets one JSON-RPC error line back. What it adds, because
// the stock stack cannot do it (docs/protocol.md, "Framing"):
//   - a line-length bound: an oversized line is answered with -32600 and skipped up to its
//     newline (the NDJSON parser would close the connection without a word);
//   - a JSON nesting-depth bound, checked by a scan of the raw line BEFORE JSON.parse and Schema
//     decoding: deeply nested values would overflow the stack in formatting or encoding;
//   - refusing garbage without dying: every bad line (not JSON, not a request object, a batch,
//     an id @effect/rpc cannot number, an unknown method, params the method's payload Schema
//     rejects) gets -32700/-32600/-32601/-32602 with the request's id when it has one, the
//     connection stays usable, and nothing a client sends can throw out of the data callback;
//   - half-close: a client that writes its requests and shuts down its side still gets every
//     answer (the platform socket ends the connection at the client's `end`, which would
//     interrupt requests in flight; here that `end` is passed on once they are answered);
//   - streams without acks: the stock socket protocol makes the server wait for an
//     `@effect/rpc/Ack` after every stream chunk, which a plain JSON-RPC client (socat) never
//     sends; `layerProtocol` is the stock protocol with `supportsAck: false`.
// It parses each line and decodes its params, and @effect/rpc then parses and decodes the same
// line again: @effect/rpc offers no way to take a parsed value (its `RpcSerialization` parser takes
// bytes or a string; `RpcServer.Protocol` hands the server encoded messages), and a line it
// cannot parse makes its NDJSON parser end the connection without a word, while a payload its
// Schema refuses is answered as a defect, not -32602 — so the checks must run before its parser.
// Measured (tsx, one core): the guard's parse + depth scan + decode costs 3.7 µs for an
// `agent.list` line, 7.4 µs for a 300-byte `agent.send`, 23 µs for a 2 KB `agent.create`
// (@effect/rpc's own parse of the same lines: 0.9, 3.2, 6.4 µs) — far below what any method does.
// Over 300 lines because the line check, the framer and the socket wrapper are one mechanism, and
// the brief for it is "one small documented wrapper".
import * as Socket from "@effect/platform/Socket"
import * as SocketServer from "@effect/platform/SocketServer"
import { NetSocket } from "@effect/platform-node/NodeSocket"
import type * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as RpcServer from "@effect/rpc/RpcServer"
import type * as Net from "node:net"
import { Effect, Either, Layer, Option, ParseResult, Schema } from "effect"

export const JsonRpcCode = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603
} as const

/** Deepest accepted nesting of arrays/objects in one line (the envelope counts as 1). */
export const maxJsonDepth = 64

type Decode = (u: unknown) => Either.Either<unknown, ParseResult.ParseError>

export interface GuardOptions {
  /** Longest accepted line in bytes (without the newline). */
  readonly maxLineBytes: number
  /** Deepest accepted JSON nesting (default `maxJsonDepth`). */
  readonly maxDepth?: number | undefined
  /** Method name → payload decoder (from the RpcGroup). */
  readonly methods: ReadonlyMap<string, Decode>
  /** Requests that may never finish on their own (live streams): they end with the client. */
  readonly openEnded?: ((method: string, params: unknown) => boolean) | undefined
}

/** Guard options for the methods of an RpcGroup (payload Schemas needing no services). */
export const optionsFromGroup = (
  group: { readonly requests: ReadonlyMap<string, { readonly payloadSchema: Schema.Schema.AnyNoContext }> },
  options: Omit<GuardOptions, "methods">
): GuardOptions => {
  const methods = new Map<string, Decode>()
  for (const [tag, rpc] of group.requests) {
    const schema = rpc.payloadSchema as Schema.Schema<unknown, unknown, never>
    methods.set(tag, Schema.decodeUnknownEither(schema, { errors: "all" }))
  }
  return { ...options, methods }
}

// ---------------------------------------------------------------------------------------------
// One line

type JsonId = number | string | null

const errorLine = (id: JsonId, code: number, message: string): string =>
  JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } }) + "\n"

const maxMessageChars = 8 * 1024

const clip = (s: string): string => (s.length <= maxMessageChars ? s : `${s.slice(0, maxMessageChars - 1)}…`)

/**
 * A Schema error as text, for any value: the formatter prints the offending value, and a value
 * it cannot print (too deep, too big) gives a fixed text instead of an exception.
 */
export const formatParseError = (e: ParseResult.ParseError): string => {
  try {
    return clip(ParseResult.TreeFormatter.formatErrorSync(e))
  } catch {
    return "the value does not match the method's params (too large or too deep to show)"
  }
}

/**
 * Deepest nesting of arrays/objects in a JSON text, counted on the raw characters (strings
 * skipped), stopping as soon as it passes `limit`. Never parses, never recurses.
 */
export const jsonDepthExceeds = (text: string, limit: number): boolean => {
  if (text.length <= limit) return false
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92) i++ // backslash: skip the escaped character
      else if (c === 34) inString = false
    } else if (c === 34) inString = true
    else if (c === 91 || c === 123) {
      if (++depth > limit) return true
    } else if (c === 93 || c === 125) depth--
  }
  return false
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const isRequestId = (u: unknown): u is number => typeof u === "number" && Number.isSafeInteger(u) && u >= 0

const isDigits = (u: unknown): boolean => (typeof u === "string" && /^\d{1,20}$/.test(u)) || isRequestId(u)

/** An id fit to echo in an error reply (JSON-RPC allows number, string or null). */
const echoId = (u: unknown): JsonId =>
  typeof u === "number" && Number.isFinite(u) ? u : typeof u === "string" ? u.slice(0, 256) : null

const controlMethods = new Set(["@effect/rpc/Ping", "@effect/rpc/Eof", "@effect/rpc/Ack", "@effect/rpc/Interrupt"])

/** Optional span-propagation fields of an @effect/rpc request and their JSON types. */
const traceFields = [["traceId", "string"], ["spanId", "string"], ["sampled", "boolean"]] as const

/** A line to pass on (`id` set for a request that expects an answer), or the error line to send back. */
export type Checked =
  | { readonly _tag: "Forward"; readonly id: number | undefined; readonly method: string; readonly params: unknown }
  | { readonly _tag: "Refuse"; readonly reply: string }

const refuse = (id: JsonId, code: number, message: string): Checked => ({ _tag: "Refuse", reply: errorLine(id, code, message) })

/** Check one line (without its newline). */
export const checkLine = (line: string, options: GuardOptions): Checked => {
  const maxDepth = options.maxDepth ?? maxJsonDepth
  if (jsonDepthExceeds(line, maxDepth)) {
    return refuse(null, JsonRpcCode.invalidRequest, `Invalid Request: JSON nested deeper than ${maxDepth} levels`)
  }
  let msg: unknown
  try {
    msg = JSON.parse(line)
  } catch (e) {
    return refuse(null, JsonRpcCode.parseError, clip(`Parse error: ${e instanceof Error ? e.message : "not JSON"}`))
  }
  if (Array.isArray(msg)) {
    return refuse(null, JsonRpcCode.invalidRequest, "Invalid Request: batches are not supported, send one request per line")
  }
  if (!isRecord(msg)) return refuse(null, JsonRpcCode.invalidRequest, "Invalid Request: expected a JSON object")
  const id = echoId(msg["id"])
  if (msg["jsonrpc"] !== undefined && msg["jsonrpc"] !== "2.0") {
    return refuse(id, JsonRpcCode.invalidRequest, "Invalid Request: jsonrpc must be \"2.0\"")
  }
  const method = msg["method"]
  if (typeof method !== "string") return refuse(id, JsonRpcCode.invalidRequest, "Invalid Request: method must be a string")
  const h = msg["headers"]
  if (h !== undefined) {
    if (!Array.isArray(h) || !h.every((p) => Array.isArray(p) && p.length === 2 && p.every((s) => typeof s === "string"))) {
      return refuse(id, JsonRpcCode.invalidRequest, "Invalid Request: headers must be [name, value] string pairs")
    }
  }
  for (const [k, t] of traceFields) {
    if (msg[k] !== undefined && typeof msg[k] !== t) {
      return refuse(id, JsonRpcCode.invalidRequest, `Invalid Request: ${k} must be a ${t}`)
    }
  }
  if (method.startsWith("@effect/rpc/")) {
    // Protocol control messages of @effect/rpc clients (keep-alive, stream acks, cancel).
    if (!controlMethods.has(method)) return refuse(id, JsonRpcCode.methodNotFound, `Method not found: ${clip(method)}`)
    if (method === "@effect/rpc/Ack" || method === "@effect/rpc/Interrupt") {
      const params = msg["params"]
      if (!isRecord(params) || !isDigits(params["requestId"])) {
        return refuse(id, JsonRpcCode.invalidParams, `Invalid params: ${method} needs {"requestId": <integer>}`)
      }
    }
    return { _tag: "Forward", id: undefined, method, params: msg["params"] }
  }
  if (!isRequestId(msg["id"])) {
    return refuse(id, JsonRpcCode.invalidRequest, "Invalid Request: id must be a non-negative integer (notifications are not supported)")
  }
  const decode = options.methods.get(method)
  if (decode === undefined) return refuse(id, JsonRpcCode.methodNotFound, `Method not found: ${clip(method)}`)
  const decoded = decode(msg["params"])
  if (Either.isLeft(decoded)) return refuse(id, JsonRpcCode.invalidParams, `Invalid params: ${formatParseError(decoded.left)}`)
  return { _tag: "Forward", id: msg["id"], method, params: msg["params"] }
}

// ---------------------------------------------------------------------------------------------
// One connection

/** What one read of a connection yields: lines for @effect/rpc, error lines for the client. */
export interface Framed {
  readonly forward: string
  readonly replies: string
}

/**
 * Per-connection line framer: bounded buffering, oversized lines skipped up to their newline.
 * `onForward` sees every request passed on. Never throws: a failure of its own answers -32603.
 */
export const makeFramer = (options: GuardOptions, onForward: (checked: Checked & { _tag: "Forward" }) => void = () => {}) => {
  let parts: Array<Buffer> = []
  let size = 0
  let skipping = false
  const tooLong = (n: number) =>
    errorLine(null, JsonRpcCode.invalidRequest, `Invalid Request: line longer than ${options.maxLineBytes} bytes (${n}+), discarded`)
  const frame = (chunk: Uint8Array | string): Framed => {
    const buf = typeof chunk === "string"
      ? Buffer.from(chunk, "utf8")
      : Buffer.isBuffer(chunk)
      ? chunk
      : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    let forward = ""
    let replies = ""
    let start = 0
    while (start <= buf.length) {
      const nl = buf.indexOf(10, start)
      if (nl === -1) {
        const rest = buf.subarray(start)
        if (!skipping && rest.length > 0) {
          if (size + rest.length > options.maxLineBytes) {
            replies += tooLong(size + rest.length)
            parts = []
            size = 0
            skipping = true
          } else {
            parts.push(Buffer.from(rest))
            size += rest.length
          }
        }
        break
      }
      const from = start
      start = nl + 1
      if (skipping) {
        skipping = false
        continue
      }
      if (size + nl - from > options.maxLineBytes) {
        replies += tooLong(size + nl - from)
        parts = []
        size = 0
        continue
      }
      let line = parts.length === 0 ? buf.toString("utf8", from, nl) : Buffer.concat([...parts, buf.subarray(from, nl)]).toString("utf8")
      if (line.charCodeAt(line.length - 1) === 13) line = line.slice(0, -1) // CRLF
      parts = []
      size = 0
      if (line.trim().length === 0) continue
      const checked = checkLine(line, options)
      if (checked._tag === "Refuse") replies += checked.reply
      else {
        forward += line + "\n"
        onForward(checked)
      }
    }
    return { forward, replies }
  }
  return (chunk: Uint8Array | string): Framed => {
    try {
      return frame(chunk)
    } catch {
      parts = []
      size = 0
      return { forward: "", replies: errorLine(null, JsonRpcCode.internalError, "Internal error: the input could not be read") }
    }
  }
}

/** The id of a final response line as `RpcSerialization.layerNdJsonRpc()` writes it (chunks start with "chunk"). */
const finalResponseId = (line: string): number | undefined => {
  const prefix = "{\"jsonrpc\":\"2.0\",\"id\":"
  if (!line.startsWith(prefix)) return undefined
  let n = 0
  let i = prefix.length
  for (; i < line.length; i++) {
    const c = line.charCodeAt(i)
    if (c < 48 || c > 57) break
    n = n * 10 + (c - 48)
  }
  return i > prefix.length ? n : undefined
}

/** How long the client's `end` waits for answers at most. */
const endDrainMs = 60_000

/**
 * Hold the client's `end` until every request passed on is answered: the `end` listeners the
 * platform socket installs for this run are taken off and called once nothing is in flight.
 */
const holdEnd = (conn: Net.Socket, ownListeners: ReadonlyArray<Function>) => {
  const inFlight = new Set<number>()
  let ended = false
  let passed = false
  let timer: NodeJS.Timeout | undefined
  let platform: Array<(...args: Array<unknown>) => void> = []
  const pass = () => {
    if (passed) return
    passed = true
    if (timer !== undefined) clearTimeout(timer)
    for (const l of platform) l()
  }
  return {
    /** Called once the platform's listeners are installed (the socket's `onOpen`). */
    takeOver: () => {
      platform = conn.listeners("end").filter((l) => !ownListeners.includes(l)) as Array<(...args: Array<unknown>) => void>
      for (const l of platform) conn.off("end", l)
      conn.on("end", () => {
        ended = true
        if (inFlight.size === 0) return pass()
        timer = setTimeout(pass, endDrainMs)
        timer.unref()
      })
      conn.once("close", () => {
        if (timer !== undefined) clearTimeout(timer)
      })
    },
    started: (id: number) => void inFlight.add(id),
    answered: (line: string) => {
      const id = finalResponseId(line)
      if (id !== undefined && inFlight.delete(id) && ended && inFlight.size === 0) pass()
    }
  }
}

/** Wrap one accepted socket so its reader only ever hands well-formed request lines on. */
export const guardSocket = (socket: Socket.Socket, options: GuardOptions, conn: Net.Socket | undefined): Socket.Socket => {
  const openEnded = options.openEnded ?? (() => false)
  const hold = conn === undefined ? undefined : holdEnd(conn, conn.listeners("end"))
  const runRaw = <_, E, R>(
    handler: (_: string | Uint8Array) => Effect.Effect<_, E, R> | void,
    opts?: { readonly onOpen?: Effect.Effect<void> | undefined }
  ): Effect.Effect<void, Socket.SocketError | E, R> =>
    Effect.scoped(Effect.gen(function*() {
      const write = yield* socket.writer
      const framer = makeFramer(options, (c) => {
        if (hold !== undefined && c.id !== undefined && !openEnded(c.method, c.params)) hold.started(c.id)
      })
      const onOpen = hold === undefined ? opts?.onOpen : Effect.zipRight(Effect.sync(hold.takeOver), opts?.onOpen ?? Effect.void)
      return yield* socket.runRaw((chunk) => {
        const { forward, replies } = framer(chunk)
        // Error replies go onto the connection from this data callback, without a fiber.
        let reply: Effect.Effect<void> | undefined
        if (replies.length > 0) {
          if (conn === undefined) reply = Effect.ignore(write(replies))
          else if (conn.writable) conn.write(replies)
        }
        if (forward.length === 0) return reply
        const handled = handler(forward)
        if (!Effect.isEffect(handled)) return reply
        return reply === undefined ? handled : Effect.zipRight(reply, handled)
      }, { onOpen })
    }))
  const encoder = new TextEncoder()
  const writer = hold === undefined
    ? socket.writer
    : Effect.map(socket.writer, (write) => (chunk: Uint8Array | string | Socket.CloseEvent) =>
      Effect.tap(write(chunk), () => {
        if (typeof chunk === "string") hold.answered(chunk)
      }))
  return Socket.Socket.of({
    [Socket.TypeId]: Socket.TypeId,
    run: (handler, opts) => runRaw((data) => handler(typeof data === "string" ? encoder.encode(data) : data), opts),
    runRaw,
    writer
  })
}

/**
 * Replace the `SocketServer` in context by one whose sockets are guarded; `counter.open` counts
 * the open connections (`daemon.status`).
 */
export const layer = (
  options: GuardOptions,
  counter: { open: number } = { open: 0 }
): Layer.Layer<SocketServer.SocketServer, never, SocketServer.SocketServer> =>
  Layer.effect(
    SocketServer.SocketServer,
    Effect.map(SocketServer.SocketServer, (inner) =>
      SocketServer.SocketServer.of({
        address: inner.address,
        run: (handler) =>
          inner.run((socket) =>
            Effect.acquireUseRelease(
              Effect.sync(() => counter.open++),
              () =>
                Effect.flatMap(
                  Effect.serviceOption(NetSocket),
                  (conn) => handler(guardSocket(socket, options, Option.getOrUndefined(conn)))
                ),
              () => Effect.sync(() => counter.open--)
            )
          )
      }))
  )

/**
 * The RpcServer protocol of a guarded socket server: `RpcServer.layerProtocolSocketServer` over
 * `layer(options, counter)`, streams sent without waiting for client acks. Needs the
 * `SocketServer` (e.g. `NodeSocketServer.layer`) and the serialization (`layerNdJsonRpc`).
 */
export const layerProtocol = (
  options: GuardOptions,
  counter?: { open: number }
): Layer.Layer<RpcServer.Protocol, never, SocketServer.SocketServer | RpcSerialization.RpcSerialization> =>
  Layer.effect(RpcServer.Protocol, Effect.map(RpcServer.Protocol, (p) => RpcServer.Protocol.of({ ...p, supportsAck: false }))).pipe(
    Layer.provide(RpcServer.layerProtocolSocketServer),
    Layer.provide(layer(options, counter))
  )
