// The daemon's HTTP surface (ARCHITECTURE §6, docs/http.md): the API (declared in
// src/protocol/HttpApi.ts, built by Api.ts; SSE included) and beside it the dashboard's files
// (Static.ts) and `POST /login`, served
//   - always on `$SUBSTRAT_HOME/http.sock` (0600: listened at a staging path, chmod'ed, renamed —
//     like daemon.sock), no token: the file mode is the access control;
//   - with `--http HOST:PORT`, on TCP too, every API request needing `Authorization: Bearer <token>`
//     (`$SUBSTRAT_HOME/http.token`, 0600, made once and kept) or the dashboard's session cookie
//     (Login.ts: `substrat ui`'s one-time code traded at `POST /login`) — 401 otherwise
//     (Authorization.ts, the API's middleware). No CORS headers, so browsers refuse cross-origin calls.
// Before routing, each listener's `admit` refuses ambiguous paths and declared oversize bodies and
// gives the request its listener's credentials rules.
import { HttpApp, HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Config, Context, Effect, Layer, Option, Schema } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { createServer } from "node:http"
import { join } from "node:path"
import type { Paths } from "../config/Paths.js"
import { parseAddress, type TcpAddress } from "../domain/address.js"
import { DaemonConfig } from "../config/DaemonConfig.js"
import type { AdminClient } from "../protocol/AdminRpcs.js"
import { EventFeed } from "../feed/EventFeed.js"
import { InvalidInput } from "../protocol/AdminRpcs.js"
import * as Api from "./Api.js"
import * as Authorization from "./Authorization.js"
import * as Body from "./Body.js"
import * as Connections from "./Connections.js"
import { errorResponse, HttpStartError, invalidInput, unauthorized } from "./Errors.js"
import * as Login from "./Login.js"
import * as PathRules from "./PathRules.js"
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

/** How one listener admits requests. */
interface Admission {
  /** Who may call the API through it (Authorization.ts). */
  readonly credentials: Authorization.Credentials
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
    if (Authorization.accepts(admission.credentials, req)) gate.authenticated(NodeHttpServerRequest.toIncomingMessage(req).socket)
    return app.pipe(
      Effect.provideService(Body.BodyLimit, admission.maxBodyBytes),
      Effect.provideService(Authorization.ListenerCredentials, admission.credentials)
    )
  })

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
    // The daemon's one feed reads every log once (positions the index lacks, owners): in the
    // background now, so no client's first stream (HTTP or admin socket) waits for it.
    yield* Effect.forkScoped(Effect.flatMap(EventFeed, (feed) => feed.warm))
    const files = yield* Static.load
    const ttl = yield* Config.integer("SUBSTRAT_UI_CODE_TTL_MS").pipe(
      Config.withDefault(Login.defaultCodeTtlMs),
      Effect.mapError((e) => fail(`SUBSTRAT_UI_CODE_TTL_MS: ${String(e)}`))
    )
    const login = Login.make(ttl)
    // The API (Api.ts) with the public routes beside it: the dashboard's files and the code exchange.
    const api = yield* Api.make(admin, login, HttpRouter.concat(Static.routes(files), exchangeRoute(login)))
    const app = (gate: Connections.Gate) => admit({ credentials: Authorization.anyone, maxBodyBytes: limits.maxBodyBytes }, gate, api)

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
    const credentials = Authorization.tcp(token, login, origin)
    const tcpApp = (gate: Connections.Gate) => admit({ credentials, maxBodyBytes: limits.maxBodyBytes }, gate, api)
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
