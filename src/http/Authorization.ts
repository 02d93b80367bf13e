// Who may call the HTTP API (docs/http.md "Authentication"): the `Authorization` middleware of
// the API (src/protocol/HttpApi.ts), applied to every endpoint after routing, on the very route
// the router picked, so no spelling of a path reaches a handler without it.
//   - http.sock: every request (the socket file's 0600 mode is the access control);
//   - TCP: `Authorization: Bearer <token>` (http.token, compared in constant time), or the
//     dashboard's session cookie (Login.ts) — for a POST/PUT/PATCH/DELETE only with no Origin or
//     the daemon's own (SameSite does not tell ports of 127.0.0.1 apart). Else 401 with
//     `WWW-Authenticate: Bearer`.
// Each listener provides its `Credentials` to the requests it admits (Server.ts); a request that
// was given none is refused.
import { HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Context, Effect, Layer, Redacted } from "effect"
import { timingSafeEqual } from "node:crypto"
import { Authorization, Unauthorized } from "../protocol/HttpApi.js"
import * as Login from "./Login.js"

/** What a listener accepts. */
export interface Credentials {
  readonly token: (token: string) => boolean
  readonly session: (session: string, req: HttpServerRequest.HttpServerRequest) => boolean
}

/** The credentials of the listener a request came through (provided per listener; none: nothing passes). */
export class ListenerCredentials extends Context.Reference<ListenerCredentials>()("substrat/http/ListenerCredentials", {
  defaultValue: (): Credentials => ({ token: () => false, session: () => false })
}) {}

/** http.sock: its file mode is the access control. */
export const anyone: Credentials = { token: () => true, session: () => true }

const sameSecret = (a: string, b: string): boolean => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

const unsafeMethods = new Set(["POST", "PUT", "PATCH", "DELETE"])

/**
 * TCP: the bearer token, or a session cookie this daemon gave out — for a method that changes
 * something, with no Origin or the daemon's own (`origin.value`, set once the port is bound).
 */
export const tcp = (token: string, login: Login.Store, origin: { readonly value: string }): Credentials => ({
  token: (t) => sameSecret(t.trim(), token),
  session: (session, req) => {
    if (!login.isSession(session)) return false
    const from = req.headers["origin"]
    return !unsafeMethods.has(req.method) || from === undefined || (origin.value !== "" && from === origin.value)
  }
})

/** Whether a request carries credentials its listener accepts (the connection gate counts it as authenticated). */
export const accepts = (c: Credentials, req: HttpServerRequest.HttpServerRequest): boolean => {
  const auth = req.headers["authorization"] ?? ""
  if (auth.startsWith("Bearer ") && c.token(auth.slice(7))) return true
  const session = Login.sessionOf(req.headers["cookie"])
  return session !== undefined && c.session(session, req)
}

const message = "missing or wrong bearer token (see $SUBSTRAT_HOME/http.token)"

/** The refusal: 401, with the scheme to use. */
const refuse = Effect.zipRight(
  HttpApp.appendPreResponseHandler((_req, res) => Effect.succeed(HttpServerResponse.setHeader(res, "www-authenticate", "Bearer"))),
  Effect.fail(new Unauthorized({ message }))
)

/**
 * The middleware: the bearer token is tried first, then the cookie (the platform's security
 * middleware runs the second when the first fails); the cookie's refusal is the answer.
 */
export const layer: Layer.Layer<Authorization> = Layer.succeed(Authorization, {
  bearer: (token) =>
    Effect.gen(function*() {
      const c = yield* ListenerCredentials
      const req = yield* HttpServerRequest.HttpServerRequest
      if ((req.headers["authorization"] ?? "").startsWith("Bearer ") && c.token(Redacted.value(token))) return
      return yield* new Unauthorized({ message })
    }),
  session: (cookie) =>
    Effect.gen(function*() {
      const c = yield* ListenerCredentials
      const req = yield* HttpServerRequest.HttpServerRequest
      if (c.session(Redacted.value(cookie), req)) return
      return yield* refuse
    })
})
