// The HTTP API's handlers (the API is declared in src/protocol/HttpApi.ts; docs/http.md), built
// with HttpApiBuilder into one HttpApp. Each handler calls the matching admin RPC through the
// daemon's in-process client (src/daemon/Handlers.ts: the same middleware and handlers as the
// admin socket): one implementation of every operation for the CLI and HTTP alike, with the same
// errors and the same references (ids, names, unique id prefixes). What HTTP adds: the default wait
// of messages and the SSE streams (Sse.ts).
//
// Bodies are read by Body.ts (bounded in size and depth; a body over the limit is a 413 the client
// gets to see), not by the builder's reader, so endpoints with a body are `handleRaw` and decode the
// body with their RPC's payload Schema here. The dashboard's files and `POST /login` are the only
// routes outside the API (raw HttpRouter routes mounted beside it: they hold no data and need no
// credentials — /login is where a session cookie is got).
import { HttpApiBuilder, HttpRouter, HttpServerRequest, HttpServerResponse, OpenApi } from "@effect/platform"
import { Effect, Layer, Schema } from "effect"
import * as Cursor from "../feed/Cursor.js"
import { EventFeed } from "../feed/EventFeed.js"
import type { AdminClient } from "../protocol/AdminRpcs.js"
import {
  AgentCreateRpc,
  AgentSendRpc,
  BudgetPatch,
  CapsPatch,
  InvalidInput,
  SessionDeleteRpc,
  SwarmAgentsRpc,
  SwarmChatRpc,
  SwarmScheduleRpc,
  SwarmStartRpc,
  WorkspaceCreateRpc,
  WorkspaceDeleteRpc,
  WorkspaceDiffRpc,
  WorkspaceLogRpc,
  WorkspaceRevertRpc
} from "../protocol/AdminRpcs.js"
import { AnswerBody, SendBody, SubstratApi } from "../protocol/HttpApi.js"
import { version } from "../version.js"
import * as Authorization from "./Authorization.js"
import * as Body from "./Body.js"
import { invalidInput, wireError } from "./Errors.js"
import type * as Login from "./Login.js"
import * as Sse from "./Sse.js"

/** Longest wait of `POST /v1/agents/{ref}/messages` with `wait: true` (overridable per request). */
const defaultWaitSeconds = 600

const decode = <A, I>(schema: Schema.Schema<A, I>, field: string) => (u: unknown) =>
  Schema.decodeUnknown(schema)(u, { onExcessProperty: "ignore" }).pipe(Effect.mapError((e) => invalidInput(field, e)))

/** The JSON body (`empty` when there is none), bounded (Body.ts), decoded with `schema`. */
const body = <A, I>(schema: Schema.Schema<A, I>, empty: unknown = null) => Effect.flatMap(Body.json(empty), decode(schema, "body"))

const flag = (v: string | undefined) => v !== undefined && v !== "0" && v !== "false"

/**
 * Every handler's failures as the API's errors: the services' errors as their wire errors
 * (Errors.ts), a body over the limit as Body.ts's 413, a defect logged and Internal.
 */
const wire = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.catchAll((e) => e instanceof Body.PayloadTooLarge ? Effect.succeed(Body.tooLarge(e.limit)) : Effect.fail(wireError(e))),
    Effect.catchAllDefect((d) => Effect.zipRight(Effect.logError("http route defect", d), Effect.fail(wireError(d))))
  )

const encodeSent = Schema.encode(AgentSendRpc.successSchema)

const sessionRef = decode(SessionDeleteRpc.payloadSchema.fields.session, "session")

/** `{id}` of /swarm/agents/{id}: an agent id, or a node id / agent name, URL-encoded. */
const nodeOf = (raw: string): string => {
  try {
    return decodeURIComponent(raw)
  } catch {
    return raw
  }
}

/** Where an SSE stream starts: after Last-Event-ID (or ?last_event_id), at the end (?from=end), or at the start. */
const fromCursor = (req: HttpServerRequest.HttpServerRequest, q: { readonly from?: string | undefined; readonly last_event_id?: string | undefined }) =>
  Effect.gen(function*() {
    const lastId = req.headers["last-event-id"] ?? q.last_event_id
    const from = lastId !== undefined ? Cursor.decode(lastId) : q.from === "end" ? "end" as const : Cursor.empty
    if (from === undefined) {
      return yield* new InvalidInput({ field: "Last-Event-ID", message: `not an event id of this stream: ${lastId}` })
    }
    return from
  })

/**
 * `GET /openapi.json`: the API's OpenAPI document (`OpenApi.fromApi`), with the package version.
 * The generator gives every operation an empty `security` list, which in OpenAPI would mean "no
 * credentials needed" and override the document's own; those are dropped, so each operation has
 * the document's (the bearer token or the session cookie).
 */
export const openApiDocument = (): OpenApi.OpenAPISpec => {
  const doc = OpenApi.fromApi(SubstratApi)
  const paths = Object.fromEntries(Object.entries(doc.paths).map(([path, item]) => [
    path,
    Object.fromEntries(Object.entries(item).map(([method, op]) => {
      if (typeof op !== "object" || op === null || !("security" in op) || !Array.isArray(op.security) || op.security.length > 0) return [method, op]
      const { security: _, ...rest } = op
      return [method, rest]
    }))
  ]))
  return { ...doc, info: { ...doc.info, version }, paths }
}

/** The handlers of every group, calling the admin methods through `admin`. */
const groups = (admin: AdminClient, login: Login.Store) => {
  const daemon = HttpApiBuilder.group(SubstratApi, "daemon", (h) =>
    h
      .handle("status", () => wire(admin.daemon.status()))
      .handle("uiCode", () => Effect.succeed({ code: login.mint() })))

  const agents = HttpApiBuilder.group(SubstratApi, "agents", (h) =>
    h
      .handle("list", ({ urlParams }) => wire(admin.agent.list({ all: flag(urlParams.all) })))
      .handleRaw("create", () => wire(Effect.flatMap(body(AgentCreateRpc.payloadSchema, {}), admin.agent.create)))
      .handle("get", ({ path }) => wire(Effect.map(admin.agent.inspect({ agent: path.ref }), (i) => i.agent)))
      .handle("inspect", ({ path }) => wire(admin.agent.inspect({ agent: path.ref })))
      .handle("terminate", ({ path }) => wire(admin.agent.terminate({ agent: path.ref })))
      .handleRaw("send", ({ path }) =>
        wire(Effect.gen(function*() {
          const p = yield* body(SendBody)
          // The same daemon operation as `agent send --wait` (Handlers.ts "agent.send"); 202 without wait.
          const sent = p.wait === true
            ? yield* admin.agent.send({ agent: path.ref, text: p.text, sync: true, wait: true, timeout_s: p.timeout_s ?? defaultWaitSeconds })
            : yield* admin.agent.send({ agent: path.ref, text: p.text, sync: true })
          // Two statuses for one Schema: the endpoint's encoding would always pick the first.
          return HttpServerResponse.unsafeJson(yield* encodeSent(sent), { status: p.wait === true ? 200 : 202 })
        })))
      .handle("wait", ({ path, urlParams }) =>
        wire(Effect.gen(function*() {
          const t = urlParams.timeout_s
          const timeout_s = t === undefined ? defaultWaitSeconds : Number(t)
          if (!Number.isFinite(timeout_s) || timeout_s <= 0) {
            return yield* new InvalidInput({ field: "timeout_s", message: `timeout_s wants a positive number of seconds, not ${JSON.stringify(t)}` })
          }
          // The same daemon operation as `agent wait` (Handlers.ts "agent.wait").
          return yield* admin.agent.wait({ agent: path.ref, message_id: path.id, timeout_s })
        })))
      .handle("budget", ({ path }) => wire(admin.budget.show({ agent: path.ref })))
      .handleRaw("setBudget", ({ path }) => wire(Effect.flatMap(body(BudgetPatch), (p) => admin.budget.set({ agent: path.ref, ...p }))))
      .handle("caps", ({ path }) => wire(admin.caps.show({ agent: path.ref })))
      .handleRaw("setCaps", ({ path }) => wire(Effect.flatMap(body(CapsPatch), (p) => admin.caps.set({ agent: path.ref, ...p })))))

  const sessions = HttpApiBuilder.group(SubstratApi, "sessions", (h) =>
    h
      .handle("list", () => wire(admin.session.list(undefined)))
      .handle("suspend", ({ path }) => wire(Effect.flatMap(sessionRef(path.session), (session) => admin.session.suspend({ session }))))
      .handle("resume", ({ path }) => wire(Effect.flatMap(sessionRef(path.session), (session) => admin.session.resume({ session }))))
      .handle("delete", ({ path }) => wire(Effect.flatMap(sessionRef(path.session), (session) => admin.session.delete({ session })))))

  const workspaces = HttpApiBuilder.group(SubstratApi, "workspaces", (h) =>
    h
      .handle("list", () => wire(admin.workspace.list()))
      .handleRaw("create", () => wire(Effect.flatMap(body(WorkspaceCreateRpc.payloadSchema, {}), admin.workspace.create)))
      .handle("delete", ({ path, urlParams }) =>
        wire(Effect.flatMap(
          decode(WorkspaceDeleteRpc.payloadSchema, "workspace")({ workspace: path.workspace, force: flag(urlParams.force) }),
          admin.workspace.delete
        )))
      .handle("turns", ({ path, urlParams }) =>
        wire(Effect.flatMap(
          decode(WorkspaceLogRpc.payloadSchema, "workspace")({
            workspace: path.workspace,
            ...(urlParams.limit === undefined ? {} : { limit: Number(urlParams.limit) })
          }),
          admin.workspace.log
        )))
      .handle("diff", ({ path }) =>
        wire(Effect.flatMap(decode(WorkspaceDiffRpc.payloadSchema, "workspace")({ workspace: path.workspace }), admin.workspace.diff)))
      .handle("turnDiff", ({ path }) =>
        wire(Effect.flatMap(decode(WorkspaceDiffRpc.payloadSchema, "turn")({ workspace: path.workspace, turn: path.turn }), admin.workspace.diff)))
      .handle("revert", ({ path }) =>
        wire(Effect.flatMap(decode(WorkspaceRevertRpc.payloadSchema, "turn")({ workspace: path.workspace, turn: path.turn }), admin.workspace.revert))))

  const inbox = HttpApiBuilder.group(SubstratApi, "inbox", (h) =>
    h
      .handle("list", () => wire(admin.inbox.list()))
      .handleRaw("answer", ({ path }) => wire(Effect.flatMap(body(AnswerBody), (p) => admin.inbox.answer({ id: path.id, text: p.text })))))

  const events = HttpApiBuilder.group(SubstratApi, "events", (h) =>
    Effect.map(EventFeed, (feed) =>
      h.handle("events", ({ request, urlParams }) =>
        wire(Effect.gen(function*() {
          const ref = urlParams.tree ?? urlParams.agent
          // A live agent by name or id; else an agent id or session id from the logs (terminated).
          // (One live agent is followed by its session id: the feed then reads that log alone.)
          const target = ref === undefined
            ? undefined
            : yield* admin.agent.inspect({ agent: ref }).pipe(
              Effect.map((i) => (urlParams.tree === undefined ? i.agent.session_id : i.agent.id) as string),
              Effect.catchTag("NotFound", (nf) =>
                // Not live: an agent id or session id of a session on disk, or 404 now (not in the stream).
                Effect.flatMap(admin.session.list(undefined), (l) =>
                  l.sessions.some((s) => s.id === ref || s.agent_id === ref) ? Effect.succeed(ref) : Effect.fail(nf)))
            )
          const from = yield* fromCursor(request, urlParams)
          const scope = target === undefined
            ? { _tag: "all" as const }
            : urlParams.tree !== undefined
            ? { _tag: "tree" as const, agent: target }
            : { _tag: "agent" as const, agent: target }
          return yield* Sse.response(feed, { scope, from })
        })))))

  const swarm = HttpApiBuilder.group(SubstratApi, "swarm", (h) =>
    Effect.map(EventFeed, (feed) => {
      const s = admin.swarm
      /** A /swarm/agents/{id}/… body decoded with its RPC's payload Schema, `node` from the path. */
      const nodeBody = <A, I>(schema: Schema.Schema<A, I>, id: string) =>
        Effect.flatMap(Body.json(null), (b) => decode(schema, "body")({ ...(typeof b === "object" && b !== null ? b : {}), node: nodeOf(id) }))
      return h
        .handleRaw("start", () => wire(Effect.flatMap(body(SwarmStartRpc.payloadSchema), s.start)))
        .handle("stop", () => wire(s.stop()))
        .handle("status", () => wire(s.status()))
        .handle("agents", ({ urlParams }) =>
          wire(Effect.gen(function*() {
            const raw = urlParams.status
            const status = (raw === undefined ? [] : typeof raw === "string" ? [raw] : raw).flatMap((v) => v.split(",")).filter((v) => v !== "")
            const p = yield* decode(SwarmAgentsRpc.payloadSchema, "query")({
              ...(urlParams.parent === undefined ? {} : { parent: urlParams.parent }),
              ...(status.length === 0 ? {} : { status })
            })
            return yield* s.agents(p)
          })))
        .handle("agent", ({ path }) => wire(s.agent({ node: nodeOf(path.id) })))
        .handle("source", ({ path }) => wire(s.source({ node: nodeOf(path.id) })))
        .handleRaw("chat", ({ path }) => wire(Effect.flatMap(nodeBody(SwarmChatRpc.payloadSchema, path.id), s.chat)))
        .handle("trigger", ({ path }) => wire(s.trigger({ node: nodeOf(path.id) })))
        .handle("schedules", () => wire(s.schedules()))
        .handleRaw("schedule", ({ path }) => wire(Effect.flatMap(nodeBody(SwarmScheduleRpc.payloadSchema, path.id), s.schedule)))
        .handle("unschedule", ({ path }) => wire(s.unschedule({ node: nodeOf(path.id) })))
        .handle("log", () => wire(s.log({})))
        .handle("nodeLog", ({ path }) => wire(s.log({ node: nodeOf(path.id) })))
        // The swarm's events: the feed of its root agent's tree (every node agent that has a session).
        .handle("events", ({ request, urlParams }) =>
          wire(Effect.gen(function*() {
            const root = yield* s.agent({ node: ".#dir" })
            const from = yield* fromCursor(request, urlParams)
            return yield* Sse.response(feed, { scope: { _tag: "tree", agent: root.agent_id }, from })
          })))
    }))

  const document = HttpApiBuilder.group(SubstratApi, "document", (h) => {
    const response = HttpServerResponse.unsafeJson(openApiDocument())
    return h.handle("openapi", () => Effect.succeed(response))
  })

  return Layer.mergeAll(daemon, agents, sessions, workspaces, inbox, events, swarm, document)
}

/**
 * The HttpApp of the API, and before it `outside`: the routes that need no credentials (the
 * API's middleware wraps every route of the API's router, so they cannot be mounted on it). A
 * request none of them matches goes to the API. Each listener provides
 * `Authorization.ListenerCredentials` to its requests.
 */
export const make = (admin: AdminClient, login: Login.Store, outside: HttpRouter.HttpRouter) =>
  Effect.gen(function*() {
    const api = yield* HttpApiBuilder.httpApp.pipe(
      Effect.provide(
        HttpApiBuilder.api(SubstratApi).pipe(
          Layer.provide(groups(admin, login)),
          Layer.provide(Authorization.layer),
          Layer.provideMerge(HttpApiBuilder.Router.Live),
          Layer.provideMerge(HttpApiBuilder.Middleware.layer)
        )
      )
    )
    const first = yield* HttpRouter.toHttpApp(outside)
    return Effect.catchTag(first, "RouteNotFound", () => api)
  })
