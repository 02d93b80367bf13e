// Request bodies, bounded (docs/http.md "Limits"). Why not the platform's `request.text`/`json`
// with `withMaxBodySize`: on overflow it destroys the request stream, which resets the socket
// before any answer, so a client never sees 413; and it reads a body whose Content-Length already
// says it is too big. Here: a Content-Length over the limit fails before a byte is read; a chunked
// body is counted as it streams and reading stops at the limit, nothing kept. After the 413 the
// rest is discarded as it comes for at most `lingerMs`, then the connection is cut: closing at
// once, with the client's bytes unread, would make the kernel reset the connection and the client
// could lose the 413 itself. A parsed body nested deeper than `maxDepth` is refused (400) before
// any Schema walks it.
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Context, Data, Effect } from "effect"
import { InvalidInput } from "../protocol/AdminRpcs.js"

/** The largest body a route reads (bytes): `httpLimits.maxBodyBytes`, provided per listener. */
export class BodyLimit extends Context.Reference<BodyLimit>()("substrat/http/BodyLimit", { defaultValue: () => 1024 * 1024 }) {}

/** A body over the limit. */
export class PayloadTooLarge extends Data.TaggedError("PayloadTooLarge")<{ readonly limit: number }> {}

/** Deepest nesting of arrays/objects a JSON body may have. */
export const maxDepth = 64

/** How long the rest of a refused body is discarded before the connection is cut. */
export const lingerMs = 2_000

/**
 * 413. `connection: keep-alive` even when the client asked to close: Node would otherwise close
 * the socket the moment the reply is written, with the client's bytes unread (a reset); `linger`
 * cuts it instead, once the rest is discarded or `lingerMs` passed.
 */
export const tooLarge = (limit: number): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson(
    { error: { _tag: "PayloadTooLarge", code: 413, message: `the request body is over the limit of ${limit} bytes (httpLimits.maxBodyBytes)` } },
    { status: 413, headers: { connection: "keep-alive" } }
  )

/** After a 413: discard the rest of the body as it arrives, and cut the connection after `lingerMs` unless it ended. */
export const linger = (req: HttpServerRequest.HttpServerRequest): void => {
  const msg = NodeHttpServerRequest.toIncomingMessage(req)
  if (msg.readableEnded) return
  const socket = msg.socket
  const timer = setTimeout(() => socket.destroy(), lingerMs)
  const stop = () => clearTimeout(timer)
  msg.once("end", stop)
  socket.once("close", stop)
  msg.on("data", () => {})
  msg.resume()
}

/** The Content-Length header as a number, when there is one. */
export const declaredLength = (req: HttpServerRequest.HttpServerRequest): number | undefined => {
  const v = req.headers["content-length"]
  if (v === undefined) return undefined
  const n = Number(v)
  return Number.isFinite(n) ? n : undefined
}

/** The body as UTF-8 text, at most `BodyLimit` bytes. */
export const text: Effect.Effect<string, PayloadTooLarge | InvalidInput, HttpServerRequest.HttpServerRequest> = Effect.gen(function*() {
  const req = yield* HttpServerRequest.HttpServerRequest
  const limit = yield* BodyLimit
  const declared = declaredLength(req)
  if (declared !== undefined && declared > limit) {
    linger(req)
    return yield* new PayloadTooLarge({ limit })
  }
  const msg = NodeHttpServerRequest.toIncomingMessage(req)
  if (msg.readableEnded) return ""
  return yield* Effect.async<string, PayloadTooLarge | InvalidInput>((resume) => {
    const chunks: Array<Buffer> = []
    let size = 0
    const cleanup = () => {
      msg.off("data", onData)
      msg.off("end", onEnd)
      msg.off("error", onError)
      msg.off("aborted", onError)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        cleanup()
        chunks.length = 0
        linger(req)
        resume(Effect.fail(new PayloadTooLarge({ limit })))
      } else chunks.push(chunk)
    }
    const onEnd = () => {
      cleanup()
      resume(Effect.succeed(Buffer.concat(chunks).toString("utf8")))
    }
    const onError = () => {
      cleanup()
      resume(Effect.fail(new InvalidInput({ field: "body", message: "the request body was cut off" })))
    }
    msg.on("data", onData)
    msg.on("end", onEnd)
    msg.on("error", onError)
    msg.on("aborted", onError)
    return Effect.sync(cleanup)
  })
})

/** How deep arrays/objects nest in a parsed JSON value (iterative: a deep value cannot overflow the stack). */
export const depthOf = (value: unknown): number => {
  let deepest = 0
  const stack: Array<readonly [unknown, number]> = [[value, 0]]
  while (stack.length > 0) {
    const [v, d] = stack.pop()!
    if (typeof v !== "object" || v === null) continue
    const depth = d + 1
    if (depth > deepest) deepest = depth
    if (depth > maxDepth) return depth
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth])
  }
  return deepest
}

const notJson = new InvalidInput({ field: "body", message: "the body must be a JSON object" })

/** The body as JSON (`empty` when there is none), bounded in size and depth. */
export const json = (empty?: unknown): Effect.Effect<unknown, PayloadTooLarge | InvalidInput, HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(text, (t) => {
    if (t.trim() === "") return empty === undefined ? Effect.fail(notJson) : Effect.succeed(empty)
    let value: unknown
    try {
      value = JSON.parse(t)
    } catch {
      return Effect.fail(notJson)
    }
    return depthOf(value) > maxDepth
      ? Effect.fail(new InvalidInput({ field: "body", message: `the body nests deeper than ${maxDepth} levels` }))
      : Effect.succeed(value)
  })
