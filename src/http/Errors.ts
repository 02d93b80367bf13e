// HTTP errors: the admin protocol's four wire errors (src/protocol/AdminRpcs.ts: same `_tag`, `code` and
// words as the CLI shows, messages cut to a few hundred characters) plus Unauthorized, PayloadTooLarge (Body.ts), as JSON `{"error": {...}}` with a status per kind.
import { HttpServerResponse } from "@effect/platform"
import { Data, ParseResult, Schema } from "effect"
import { toRpcError } from "../protocol/WireErrors.js"
import { Internal, InvalidInput, NotFound, RpcError, Unavailable } from "../protocol/AdminRpcs.js"
import { PayloadTooLarge, tooLarge } from "./Body.js"

/** The HTTP server could not start: a bad address, a socket or file it cannot make, its files missing. */
export class HttpStartError extends Data.TaggedError("HttpStartError")<{
  readonly reason: "socket" | "files"
  readonly message: string
}> {}

const status: Record<RpcError["_tag"], number> = {
  NotFound: 404,
  InvalidInput: 400,
  Unavailable: 503,
  Internal: 500
}

/** A Schema failure of a request's params or body, in words (path: what was expected). */
export const invalidInput = (field: string, e: ParseResult.ParseError): InvalidInput => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(e)
  const message = issues.map((i) => (i.path.length > 0 ? `${i.path.join(".")}: ${i.message}` : i.message)).join("; ")
  const first = issues[0]?.path[0]
  return new InvalidInput({ field: first === undefined ? field : String(first), message })
}

const encodeError = Schema.encodeSync(RpcError)

/** Longest error message a reply carries: a message quoting input (a Schema's `actual …`) is cut. */
export const maxMessageChars = 300

const cut = (s: string): string => (s.length <= maxMessageChars ? s : `${s.slice(0, maxMessageChars)}… (cut)`)

const reasonOf = (e: InvalidInput | Unavailable) => (e.reason === undefined ? {} : { reason: e.reason })

/** A failure as the wire error HTTP answers with: never more than a few hundred bytes of message. */
export const wireError = (e: unknown): RpcError => {
  const err = toRpcError(e)
  if (err.message.length <= maxMessageChars) return err
  const message = cut(err.message)
  switch (err._tag) {
    case "NotFound":
      return new NotFound({ code: err.code, kind: err.kind, id: err.id, message })
    case "InvalidInput":
      return new InvalidInput({ code: err.code, field: err.field, message, ...reasonOf(err) })
    case "Unavailable":
      return new Unavailable({ code: err.code, message, ...reasonOf(err) })
    case "Internal":
      return new Internal({ code: err.code, message })
  }
}

/**
 * A failure before routing (PathRules.ts) or outside the API (`POST /login`) → its JSON response,
 * as the API's errors are (src/protocol/HttpApi.ts).
 */
export const errorResponse = (e: unknown): HttpServerResponse.HttpServerResponse => {
  if (e instanceof PayloadTooLarge) return tooLarge(e.limit)
  const err = wireError(e)
  return HttpServerResponse.unsafeJson({ error: encodeError(err) }, { status: status[err._tag] })
}


/** `POST /login` with an unknown, used or expired code (the API's own refusals: Authorization.ts). */
export const unauthorized: HttpServerResponse.HttpServerResponse = HttpServerResponse.unsafeJson(
  { error: { _tag: "Unauthorized", code: 401, message: "missing or wrong bearer token (see $SUBSTRAT_HOME/http.token)" } },
  { status: 401, headers: { "www-authenticate": "Bearer" } }
)
