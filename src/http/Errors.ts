// HTTP errors: the admin protocol's four wire errors (src/protocol/AdminRpcs.ts: same `_tag`, `code` and
// words as the CLI shows, messages cut to a few hundred characters) plus Unauthorized, PayloadTooLarge (Body.ts), as JSON `{"error": {...}}` with a status per kind.
import { HttpServerResponse } from "@effect/platform"
import { Data, ParseResult, Schema } from "effect"
import { toRpcError } from "../protocol/WireErrors.js"
import { InvalidInput, RpcError } from "../protocol/AdminRpcs.js"
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

/** Any failure of a route → its JSON response (never a defect); never more than a few hundred bytes of message. */
export const errorResponse = (e: unknown): HttpServerResponse.HttpServerResponse => {
  if (e instanceof PayloadTooLarge) return tooLarge(e.limit)
  const err = toRpcError(e)
  const encoded = encodeError(err)
  return HttpServerResponse.unsafeJson({ error: { ...encoded, message: cut(encoded.message) } }, { status: status[err._tag] })
}

export const unauthorized: HttpServerResponse.HttpServerResponse = HttpServerResponse.unsafeJson(
  { error: { _tag: "Unauthorized", code: 401, message: "missing or wrong bearer token (see $SUBSTRAT_HOME/http.token)" } },
  { status: 401, headers: { "www-authenticate": "Bearer" } }
)
