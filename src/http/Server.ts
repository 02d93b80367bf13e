// The daemon's HTTP surface (ARCHITECTURE §6, docs/http.md): the routes (Routes.ts), the SSE feed
// and the dashboard (Static.ts), served
//   - always on `$SUBSTRAT_HOME/http.sock` (0600: listened at a staging path, chmod'ed, renamed —
//     like daemon.sock), no token: the file mode is the access control;
//   - with `--http HOST:PORT`, on TCP too, every /v1 request needing `Authorization: Bearer <token>`
//     (`$SUBSTRAT_HOME/http.token`, 0600, made once and kept) or the dashboard's session cookie
//     (Login.ts: `substrat ui`'s one-time code traded at `POST /login`) — 401 otherwise. A
//     cookie-authenticated POST/PUT/PATCH/DELETE whose Origin is not the daemon's own is 401 too
//     (SameSite does not tell ports of 127.0.0.1 apart). No CORS headers, so browsers refuse
//     cross-origin calls.
// Routes call the admin methods through the daemon's in-process client (daemon/Handlers.ts): the
// same middleware and handlers the admin socket serves.
import { HttpApp, HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Config, Context, Effect, Layer, Option, Schema } from "effect"
import { randomBytes, timingSafeEqual } from "node:crypto"
import * as fs from "node:fs"
import { createServer } from "node:http"
import { join } from "node:path"
import type { Paths } from "../config/Paths.js"
import { parseAddress, type TcpAddress } from "../domain/address.js"
import { DaemonConfig } from "../config/DaemonConfig.js"
import type { AdminClient } from "../protocol/AdminRpcs.js"
import { EventFeed } from "../feed/EventFeed.js"
import { InvalidInput } from "../protocol/AdminRpcs.js"
import * as Body from "./Body.js"
import * as Connections from "./Connections.js"
import { errorResponse, HttpStartError, invalidInput, unauthorized } from "./Errors.js"
import * as Login from "./Login.js"
import * as PathRules from "./PathRules.js"
import * as Routes from "./Routes.js"
import * as Static from "./Static.js"

export const socketPath = (paths: Paths): string => join(paths.home, "http.sock")
export const tokenPath = (paths: Paths): string => join(paths.home, "http.token")
/** Where the TCP listener is, for `substrat ui` (removed on shutdown). */
export const urlPath = (paths: Paths): string => join(paths.home, "http.url")

const fail = (message: string) => new HttpStartError({ reason: "socket", message })

/** The bearer token: kept in http.token (0600), made on first use. */
export const ensureToken = (paths: Paths): Effect.Effect<string, HttpStartError> =>
  Effect.try({
    try: () => {
      const file = tokenPath(paths)
      try {
        const t = fs.readFileSync(file, "utf8").trim()
        if (t.length >= 32) return t
      } catch {
        // none yet
      }
      const token = randomBytes(32).toString("base64url")
      fs.writeFileSync(`${file}.tmp`, token + "\n", { mode: 0o600 })
      fs.renameSync(`${file}.tmp`, file)
      return token
    },
    catch: (e) => fail(`cannot write ${tokenPath(paths)}: ${String(e)}`)
  })

const sameSecret = (a: string, b: string): boolean => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/** The bearer token of a TCP request, checked in constant time. */
const hasToken = (req: HttpServerRequest.HttpServerRequest, token: string): boolean => {
  const auth = req.headers["authorization"] ?? ""
  return auth.startsWith("Bearer ") && sameSecret(auth.slice(7).trim(), token)
}

const unsafeMethods = new Set(["POST", "PUT", "PATCH", "DELETE"])

/**
 * The dashboard's session cookie: valid, and for a method that changes something, no Origin or
 * the daemon's own (`origin.value`, set once the port is bound).
 */
const hasSession = (req: HttpServerRequest.HttpServerRequest, login: Login.Store, origin: { value: string }): boolean => {
  const session = Login.sessionOf(req.headers["cookie"])
  if (session === undefined || !login.isSession(session)) return false
  const from = req.headers["origin"]
  return !unsafeMethods.has(req.method) || from === undefined || (origin.value !== "" && from === origin.value)
}

const CodeBody = Schema.Struct({ code: Schema.String.pipe(Schema.maxLength(200)) })

/** `POST /login`: a code of `substrat ui` for the session cookie; 401 for an unknown, used or expired code. */
const exchangeRoute = (login: Login.Store): HttpRouter.HttpRouter =>
  HttpRouter.post(
    HttpRouter.empty,
    "/login",
    Body.json(null).pipe(
      Effect.flatMap((u) => Schema.decodeUnknown(CodeBody)(u, { onExcessProperty: "ignore" }).pipe(Effect.mapError((e) => invalidInput("code", e)))),
      Effect.map(({ code }) => {
        const session = login.exchange(code)
        return session === undefined ? unauthorized : HttpServerResponse.empty({
          status: 204,
          headers: { "set-cookie": `${Login.cookieName}=${session}; HttpOnly; SameSite=Strict; Path=/`, "cache-control": "no-store" }
        })
      }),
      Effect.catchAll((e) => Effect.succeed(errorResponse(e)))
    )
  )

/** `POST /v1/ui/code`: a one-time code for `substrat ui` (owner only: http.sock, or the token on TCP). */
const codeRoute = (login: Login.Store): HttpRouter.HttpRouter =>
  HttpRouter.post(HttpRouter.empty, "/v1/ui/code", Effect.sync(() => HttpServerResponse.unsafeJson({ code: login.mint() }, { status: 201 })))

/** What a TCP request is checked against. */
interface Credentials {
  readonly ok: (req: HttpServerRequest.HttpServerRequest) => boolean
}

/**
 * TCP only: the check every API route's handler is wrapped in (`HttpRouter.use` on the whole API
 * router, in `appOf`): it runs after routing, on the very route the router picked, so no spelling
 * of a path can reach a handler without it.
 */
const requireCredentials = (credentials: Credentials) => <E, R>(handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (req) => credentials.ok(req) ? handler : Effect.succeed(unauthorized))

/** What a routed handler's context holds besides the request. */
type RouteScope = HttpRouter.RouteContext | HttpServerRequest.ParsedSearchParams

/** How one listener admits requests. */
interface Admission {
  /** TCP: the credentials every API route needs; absent on http.sock (its file mode is the access control). */
  readonly credentials: Credentials | undefined
  readonly maxBodyBytes: number
}

/**
 * Before routing: a request target that is not one unambiguous path is 400 (PathRules.ts); a
 * declared body over the limit is 413 (Body.ts); a request with valid credentials marks its
 * connection authenticated (Connections.ts).
 */
const admit = <E, R>(admission: Admission, gate: Connections.Gate, app: HttpApp.Default<E, R>): HttpApp.Default<E, R | HttpServerRequest.HttpServerRequest> =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (req) => {
    const why = PathRules.refusal(req.url)
    if (why !== undefined) return Effect.succeed(errorResponse(new InvalidInput({ field: "path", message: why })))
    const declared = Body.declaredLength(req)
    if (declared !== undefined && declared > admission.maxBodyBytes) {
      Body.linger(req)
      return Effect.succeed(Body.tooLarge(admission.maxBodyBytes))
    }
    if (admission.credentials?.ok(req) === true) gate.authenticated(NodeHttpServerRequest.toIncomingMessage(req).socket)
    return Effect.provideService(app, Body.BodyLimit, admission.maxBodyBytes)
  })

/**
 * The app of one listener: `admit`, then the router. Public: the dashboard's files only
 * (Static.ts, a fixed list). Every API route (Routes.ts) is behind the credentials check as one
 * router, so a route added there is behind it too.
 */
const appOf = (files: Static.Files, api: HttpRouter.HttpRouter<never, never>, login: Login.Store, admission: Admission) => {
  const c = admission.credentials
  const all = HttpRouter.concat(api, codeRoute(login))
  const guarded = c === undefined ? all : HttpRouter.use(all, (h): HttpApp.Default<never, RouteScope> => requireCredentials(c)(h))
  const router = HttpRouter.concat(HttpRouter.concat(Static.routes(files), exchangeRoute(login)), guarded)
  return (gate: Connections.Gate) => admit(admission, gate, router)
}

/**
 * Serve the app `make` builds for this listener's connection gate. On release, open connections
 * (SSE streams never end by themselves) are cut first: Node's `server.close` alone would wait for
 * them, and the daemon's shutdown with it.
 */
const listen = <E, R>(
  make: (gate: Connections.Gate) => HttpApp.Default<E, R>,
  options: { readonly path: string } | TcpAddress,
  limits: Connections.Limits
) =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const server = createServer({ keepAliveTimeout: 5_000, connectionsCheckingInterval: 1_000 })
    const gate = Connections.install(server, limits, !("path" in options))
    // Built after the listener, so released before it (finalizers run in reverse).
    const cut = Layer.scopedDiscard(Effect.addFinalizer(() =>
      Effect.sync(() => {
        server.close()
        server.closeAllConnections()
      })
    ))
    return HttpServer.serve(make(gate)).pipe(
      Layer.provideMerge(cut.pipe(Layer.provideMerge(NodeHttpServer.layer(() => server, options))))
    )
  }))

/**
 * Serve HTTP until the scope closes, calling the admin methods through `admin`. Needs the daemon's
 * runtime services (EventFeed among them). Returns the TCP address actually bound (port 0 picks one), if any.
 */
export const serve = (paths: Paths, tcp: string | undefined, admin: AdminClient) =>
  Effect.gen(function*() {
    const limits = (yield* DaemonConfig).httpLimits
    const address = tcp === undefined ? undefined : parseAddress(tcp)
    if (tcp !== undefined && address === undefined) return yield* fail(`--http wants HOST:PORT (e.g. 127.0.0.1:8080), not ${tcp}`)
    const routes = yield* Routes.make(admin)
    // The daemon's one feed reads every log once (positions the index lacks, owners): in the
    // background now, so no client's first stream (HTTP or admin socket) waits for it.
    yield* Effect.forkScoped(Effect.flatMap(EventFeed, (feed) => feed.warm))
    const files = yield* Static.load
    const ttl = yield* Config.integer("SUBSTRAT_UI_CODE_TTL_MS").pipe(
      Config.withDefault(Login.defaultCodeTtlMs),
      Effect.mapError((e) => fail(`SUBSTRAT_UI_CODE_TTL_MS: ${String(e)}`))
    )
    const login = Login.make(ttl)
    const app = appOf(files, routes, login, { credentials: undefined, maxBodyBytes: limits.maxBodyBytes })

    const sock = socketPath(paths)
    const staging = `${sock}.${process.pid}.tmp`
    fs.rmSync(staging, { force: true })
    yield* Layer.build(listen(app, { path: staging }, limits)).pipe(Effect.mapError((e) => fail(`cannot listen on ${sock}: ${String(e)}`)))
    yield* Effect.acquireRelease(
      Effect.try({
        try: () => {
          fs.chmodSync(staging, 0o600)
          fs.renameSync(staging, sock)
        },
        catch: (e) => fail(`cannot publish ${sock}: ${String(e)}`)
      }),
      () => Effect.sync(() => fs.rmSync(sock, { force: true }))
    )

    if (address === undefined) {
      fs.rmSync(urlPath(paths), { force: true })
      return Option.none<TcpAddress>()
    }
    const token = yield* ensureToken(paths)
    const origin = { value: "" }
    const credentials: Credentials = { ok: (req) => hasToken(req, token) || hasSession(req, login, origin) }
    const tcpApp = appOf(files, routes, login, { credentials, maxBodyBytes: limits.maxBodyBytes })
    const ctx = yield* Layer.build(listen(tcpApp, address, limits)).pipe(Effect.mapError((e) => fail(`cannot listen on ${tcp}: ${String(e)}`)))
    const bound = Context.get(ctx, HttpServer.HttpServer).address
    const actual: TcpAddress = bound._tag === "TcpAddress" ? { host: address.host, port: bound.port } : address
    origin.value = `http://${actual.host.includes(":") ? `[${actual.host}]` : actual.host}:${actual.port}`
    const url = `${origin.value}/`
    yield* Effect.acquireRelease(
      Effect.try({
        try: () => {
          fs.writeFileSync(`${urlPath(paths)}.tmp`, url + "\n", { mode: 0o600 })
          fs.renameSync(`${urlPath(paths)}.tmp`, urlPath(paths))
        },
        catch: (e) => fail(`cannot write ${urlPath(paths)}: ${String(e)}`)
      }),
      () => Effect.sync(() => fs.rmSync(urlPath(paths), { force: true }))
    )
    return Option.some(actual)
  })
