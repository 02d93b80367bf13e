// A thin framing guard in front of @effect/rpc on the admin socket. @effect/rpc does the
// dispatch; this only makes sure that what reaches it is one well-formed JSON-RPC request per
// line. Why: its NDJSON parser keeps a bad line in its buffer (one garbage line poisons the
// connection), closes the socket without a reply on an oversized line, answers unknown methods
// with a connection-wide "Defect" instead of an error for that id, and throws on non-numeric ids.
// Here every bad line gets a standard JSON-RPC 2.0 error (-32700/-32600/-32601/-32602) with the
// request's id when it has one, and the connection stays open.
// A valid request for a fast-lane method (FastLane.ts: read-only, answered from in-memory state)
// is answered here, synchronously, and never reaches @effect/rpc.
import * as Socket from "@effect/platform/Socket"
import * as SocketServer from "@effect/platform/SocketServer"
import type * as Rpc from "@effect/rpc/Rpc"
import { NetSocket } from "@effect/platform-node/NodeSocket"
import type * as Net from "node:net"
import { Effect, Either, Layer, Option, ParseResult, Schema } from "effect"
import type { FastLane } from "./FastLane.js"

export const JsonRpcCode = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602
} as const

export interface GuardOptions {
  /** Longest accepted line in bytes (without the newline). */
  readonly maxLineBytes: number
  /** Method name → payload decoder (from the RpcGroup). */
  readonly methods: ReadonlyMap<string, (u: unknown) => Either.Either<unknown, ParseResult.ParseError>>
  /** Requests that may never finish on their own (live streams); see `guardSocket`. */
  readonly openEnded: (method: string, params: unknown) => boolean
  /** Methods answered here without @effect/rpc (see FastLane.ts); none when omitted. */
  readonly fastLane?: FastLane | undefined
}

export const optionsFromGroup = (
  group: { readonly requests: ReadonlyMap<string, Rpc.AnyWithProps> },
  maxLineBytes: number,
  openEnded: (method: string, params: unknown) => boolean = () => false,
  fastLane?: FastLane
): GuardOptions => {
  const methods = new Map<string, (u: unknown) => Either.Either<unknown, ParseResult.ParseError>>()
  for (const [tag, rpc] of group.requests) {
    // Admin payload schemas need no services (plain Structs of Schemas).
    const schema = rpc.payloadSchema as Schema.Schema<unknown, unknown, never>
    methods.set(tag, Schema.decodeUnknownEither(schema, { errors: "all" }))
  }
  return { maxLineBytes, methods, openEnded, fastLane }
}

type JsonId = number | string | null

const errorLine = (id: JsonId, code: number, message: string): string =>
  JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } }) + "\n"

const isRecord = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

const isRequestId = (u: unknown): u is number => typeof u === "number" && Number.isSafeInteger(u) && u >= 0

const isDigits = (u: unknown): boolean =>
  (typeof u === "string" && /^\d{1,15}$/.test(u)) || isRequestId(u)

const echoId = (u: unknown): JsonId => (typeof u === "number" || typeof u === "string" ? u : null)

const controlMethods = new Set(["@effect/rpc/Ping", "@effect/rpc/Eof", "@effect/rpc/Ack", "@effect/rpc/Interrupt"])

/**
 * Check one line. `undefined` = forward it to @effect/rpc; a string = the line to send back (an
 * error, or a fast-lane answer). `onRequest` sees the id and method of every request that is forwarded.
 */
export const checkLine = (
  line: string,
  options: GuardOptions,
  onRequest?: (id: number, method: string, params: unknown) => void,
  fastLane: FastLane | undefined = options.fastLane
): string | undefined => {
  let msg: unknown
  try {
    msg = JSON.parse(line)
  } catch (e) {
    return errorLine(null, JsonRpcCode.parseError, `Parse error: ${e instanceof Error ? e.message : String(e)}`)
  }
  if (Array.isArray(msg)) {
    return errorLine(null, JsonRpcCode.invalidRequest, "Invalid Request: batches are not supported, send one request per line")
  }
  if (!isRecord(msg)) return errorLine(null, JsonRpcCode.invalidRequest, "Invalid Request: expected a JSON object")
  const id = echoId(msg["id"])
  if (msg["jsonrpc"] !== undefined && msg["jsonrpc"] !== "2.0") {
    return errorLine(id, JsonRpcCode.invalidRequest, "Invalid Request: jsonrpc must be \"2.0\"")
  }
  const method = msg["method"]
  if (typeof method !== "string") return errorLine(id, JsonRpcCode.invalidRequest, "Invalid Request: method must be a string")
  const h = msg["headers"]
  if (h !== undefined) {
    if (!Array.isArray(h) || !h.every((p) => Array.isArray(p) && p.length === 2 && p.every((s) => typeof s === "string"))) {
      return errorLine(id, JsonRpcCode.invalidRequest, "Invalid Request: headers must be [name, value] string pairs")
    }
  }
  for (const [k, t] of [["traceId", "string"], ["spanId", "string"], ["sampled", "boolean"]] as const) {
    if (msg[k] !== undefined && typeof msg[k] !== t) {
      return errorLine(id, JsonRpcCode.invalidRequest, `Invalid Request: ${k} must be a ${t}`)
    }
  }
  if (method.startsWith("@effect/rpc/")) {
    // Protocol control messages from @effect/rpc clients (keep-alive, stream acks, cancel).
    if (!controlMethods.has(method)) return errorLine(id, JsonRpcCode.methodNotFound, `Method not found: ${method}`)
    if (method === "@effect/rpc/Ack" || method === "@effect/rpc/Interrupt") {
      const params = msg["params"]
      if (!isRecord(params) || !isDigits(params["requestId"])) {
        return errorLine(id, JsonRpcCode.invalidParams, `Invalid params: ${method} needs {"requestId": <integer>}`)
      }
    }
    return undefined
  }
  if (!isRequestId(msg["id"])) {
    return errorLine(
      id,
      JsonRpcCode.invalidRequest,
      "Invalid Request: id must be a non-negative integer (notifications are not supported)"
    )
  }
  const decode = options.methods.get(method)
  if (decode === undefined) return errorLine(id, JsonRpcCode.methodNotFound, `Method not found: ${method}`)
  const decoded = decode(msg["params"])
  if (Either.isLeft(decoded)) {
    return errorLine(id, JsonRpcCode.invalidParams, `Invalid params: ${ParseResult.TreeFormatter.formatErrorSync(decoded.left)}`)
  }
  // Fast lane: plain requests only; requests with headers stay on @effect/rpc (it hands them to
  // the handlers).
  if (fastLane !== undefined && (h === undefined || (Array.isArray(h) && h.length === 0))) {
    const result = fastLane(method, decoded.right)
    if (result !== undefined) return `{"jsonrpc":"2.0","id":${msg["id"]},"result":${result}}\n`
  }
  onRequest?.(msg["id"], method, msg["params"])
  return undefined
}

/**
 * How many bytes of fast-lane answers one read may produce. The answers of a read are written
 * together from the socket's data callback, without yielding; past this budget the read's
 * remaining fast-lane requests go to @effect/rpc instead (same bytes, one fiber each), so a client
 * pipelining thousands of `agent.list` lines cannot make the daemon build one giant string or
 * hold the event loop for the whole batch.
 */
export const fastLaneBytesPerRead = 256 * 1024

/** Per-connection line framer: bounded buffering, oversized lines skipped up to their newline. */
export const makeFramer = (options: GuardOptions, onRequest?: (id: number, method: string, params: unknown) => void) => {
  let parts: Array<Buffer> = []
  let size = 0
  let skipping = false
  let fastLeft = 0
  const lane = options.fastLane
  // The fast lane within this read's budget; a lane that throws leaves the request to @effect/rpc.
  const budgeted: FastLane | undefined = lane === undefined ? undefined : (method, params) => {
    if (fastLeft <= 0) return undefined
    let result: string | undefined
    try {
      result = lane(method, params)
    } catch {
      return undefined
    }
    if (result !== undefined) fastLeft -= result.length
    return result
  }
  const tooLong = (n: number) =>
    errorLine(null, JsonRpcCode.invalidRequest, `Invalid Request: line longer than ${options.maxLineBytes} bytes (${n}+), discarded`)
  return (chunk: Uint8Array | string): { readonly forward: string; readonly replies: string } => {
    const buf = typeof chunk === "string" ? Buffer.from(chunk, "utf8") : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    let forward = ""
    let replies = ""
    let start = 0
    fastLeft = fastLaneBytesPerRead
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
      const piece = buf.subarray(start, nl)
      start = nl + 1
      if (skipping) {
        skipping = false
        continue
      }
      if (size + piece.length > options.maxLineBytes) {
        replies += tooLong(size + piece.length)
        parts = []
        size = 0
        continue
      }
      const line = (parts.length === 0 ? piece.toString("utf8") : Buffer.concat([...parts, piece]).toString("utf8"))
        .replace(/\r$/, "")
      parts = []
      size = 0
      if (line.trim().length === 0) continue
      const error = checkLine(line, options, onRequest, budgeted)
      if (error === undefined) forward += line + "\n"
      else replies += error
    }
    return { forward, replies }
  }
}

/** The id of a final response line (`{"jsonrpc":"2.0","id":N,…}`; stream chunks start with "chunk"). */
const finalResponseId = /^\{"jsonrpc":"2\.0","id":(\d+)[,}]/

/**
 * Half-close: a client that writes its requests and then shuts its side down (`printf … | socat`)
 * still gets its answers. The platform socket ends the connection on the first `end` event, which
 * would interrupt requests in flight; so `end` is held back until every forwarded request has
 * been answered (or `drainMs` passes) — except open-ended ones (attach, logs -f), which end
 * with the client.
 */
const holdEndWhileAnswering = (conn: Net.Socket, drainMs: number) => {
  const inFlight = new Set<number>()
  let held = false
  let timer: NodeJS.Timeout | undefined
  const emit = conn.emit.bind(conn)
  const release = () => {
    if (!held) return
    held = false
    if (timer) clearTimeout(timer)
    emit("end")
  }
  conn.emit = ((event: string | symbol, ...args: Array<unknown>): boolean => {
    if (event === "end" && inFlight.size > 0) {
      held = true
      timer = setTimeout(release, drainMs)
      return true
    }
    return emit(event, ...args)
  }) as typeof conn.emit
  return {
    started: (id: number) => void inFlight.add(id),
    answered: (line: string) => {
      const m = finalResponseId.exec(line)
      if (m && inFlight.delete(Number(m[1])) && inFlight.size === 0) release()
    }
  }
}

/** How long a held `end` waits for the answers at most. */
const endDrainMs = 60_000

/** The framer's `onRequest` that counts the requests the held `end` waits for. */
const trackRequests = (tracker: ReturnType<typeof holdEndWhileAnswering>, options: GuardOptions) =>
(id: number, method: string, params: unknown) => {
  if (!options.openEnded(method, params)) tracker.started(id)
}

/**
 * The guard of one Node connection without a platform Socket (SocketProtocol.ts): `read` frames
 * a chunk, writes the guard's own replies (errors, fast-lane answers) on `conn` at once and
 * returns the lines for @effect/rpc; `answered` must see every line @effect/rpc writes (it
 * releases a held `end`).
 */
export const guardConnection = (conn: Net.Socket, options: GuardOptions) => {
  const tracker = holdEndWhileAnswering(conn, endDrainMs)
  const framer = makeFramer(options, trackRequests(tracker, options))
  return {
    read: (chunk: Uint8Array): string => {
      const { forward, replies } = framer(chunk)
      if (replies.length > 0 && conn.writable) conn.write(replies)
      return forward
    },
    answered: tracker.answered
  }
}

/** Wrap one accepted socket so its reader only ever hands well-formed request lines on. */
export const guardSocket = (socket: Socket.Socket, options: GuardOptions, conn?: Net.Socket): Socket.Socket => {
  const tracker = conn === undefined ? undefined : holdEndWhileAnswering(conn, endDrainMs)
  const onRequest = tracker === undefined ? undefined : trackRequests(tracker, options)
  const runRaw = <_, E, R>(
    handler: (_: string | Uint8Array) => Effect.Effect<_, E, R> | void,
    opts?: { readonly onOpen?: Effect.Effect<void> | undefined }
  ): Effect.Effect<void, Socket.SocketError | E, R> =>
    Effect.scoped(Effect.gen(function*() {
      const write = yield* socket.writer
      const framer = makeFramer(options, onRequest)
      return yield* socket.runRaw((chunk) => {
        const { forward, replies } = framer(chunk)
        // Replies of the guard (errors, fast-lane answers) go straight onto the connection from
        // this data callback: no fiber. Without the Node socket, through the platform writer.
        let reply: Effect.Effect<void> | undefined
        if (replies.length > 0) {
          if (conn === undefined) reply = Effect.ignore(write(replies))
          else if (conn.writable) conn.write(replies)
        }
        if (forward.length === 0) return reply
        const handled = handler(forward)
        if (!Effect.isEffect(handled)) return reply
        return reply === undefined ? handled : Effect.zipRight(reply, handled)
      }, opts)
    }))
  const encoder = new TextEncoder()
  const writer = tracker === undefined
    ? socket.writer
    : Effect.map(socket.writer, (write) => (chunk: Uint8Array | string | Socket.CloseEvent) =>
      Effect.tap(write(chunk), () => {
        if (typeof chunk === "string") tracker.answered(chunk)
      }))
  return Socket.Socket.of({
    [Socket.TypeId]: Socket.TypeId,
    run: (handler, opts) => runRaw((data) => handler(typeof data === "string" ? encoder.encode(data) : data), opts),
    runRaw,
    writer
  })
}

/** Replace the SocketServer in context by one whose sockets are guarded. */
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
