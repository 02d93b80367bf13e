// The REST routes under /v1/ (docs/http.md). Each route decodes its params/body with the payload
// Schema of the matching admin RPC (src/protocol/AdminRpcs.ts) and calls that RPC through the daemon's
// in-process client (src/daemon/Handlers.ts: the same middleware and handlers as the admin
// socket): one implementation of every operation for the CLI and HTTP alike, with the same errors and the same references (ids, names,
// unique id prefixes: src/daemon/Resolver.ts). What HTTP adds: the default wait of messages and the SSE stream (Sse.ts).
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Schema } from "effect"
import * as Cursor from "../feed/Cursor.js"
import { EventFeed } from "../feed/EventFeed.js"
import type { AdminClient } from "../protocol/AdminRpcs.js"
import {
  AgentCreateRpc,
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
import * as Body from "./Body.js"
import { errorResponse, invalidInput } from "./Errors.js"
import * as OpenApi from "./OpenApi.js"
import * as Sse from "./Sse.js"

/** Longest wait of `POST /v1/agents/{ref}/messages` with `wait: true` (overridable per request). */
const defaultWaitSeconds = 600

const decode = <A, I>(schema: Schema.Schema<A, I>, field: string) => (u: unknown) =>
  Schema.decodeUnknown(schema)(u, { onExcessProperty: "ignore" }).pipe(Effect.mapError((e) => invalidInput(field, e)))

/** The JSON body (null when empty), bounded in size and depth (Body.ts). */
const body = Body.json(null)

/** The JSON body, `{}` when empty. */
const bodyOrEmpty = Body.json({})

const param = (name: string) => Effect.map(HttpRouter.params, (p) => p[name] ?? "")

const query = Effect.map(HttpServerRequest.HttpServerRequest, (r) => new URL(r.url, "http://x").searchParams)

const flag = (v: string | null) => v !== null && v !== "0" && v !== "false"

const json = (status = 200) => (a: unknown) => HttpServerResponse.unsafeJson(a, { status })

/** Run a route; every failure becomes its JSON error response. */
const respond = <E, R>(effect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>) =>
  effect.pipe(
    Effect.catchAll((e) => Effect.succeed(errorResponse(e))),
    Effect.catchAllDefect((d) => Effect.as(Effect.logError("http route defect", d), errorResponse(d)))
  )


export const make = (admin: AdminClient) => Effect.gen(function*() {
  const feed = yield* EventFeed
  const status = admin.daemon.status
  const create = admin.agent.create
  const list = admin.agent.list
  const send = admin.agent.send
  const wait = admin.agent.wait
  const inspect = admin.agent.inspect
  const terminate = admin.agent.terminate
  const sessionList = admin.session.list
  const suspend = admin.session.suspend
  const resume = admin.session.resume
  const sessionDelete = admin.session.delete
  const wsCreate = admin.workspace.create
  const wsList = admin.workspace.list
  const wsDelete = admin.workspace.delete
  const wsDiff = admin.workspace.diff
  const wsRevert = admin.workspace.revert
  const wsLog = admin.workspace.log
  const swarmStart = admin.swarm.start
  const swarmStop = admin.swarm.stop
  const swarmStatus = admin.swarm.status
  const swarmAgents = admin.swarm.agents
  const swarmAgent = admin.swarm.agent
  const swarmSource = admin.swarm.source
  const swarmChat = admin.swarm.chat
  const swarmTrigger = admin.swarm.trigger
  const swarmSchedule = admin.swarm.schedule
  const swarmUnschedule = admin.swarm.unschedule
  const swarmSchedules = admin.swarm.schedules
  const swarmLog = admin.swarm.log
  const inboxList = admin.inbox.list
  const inboxAnswer = admin.inbox.answer
  const budgetShow = admin.budget.show
  const budgetSet = admin.budget.set
  const capsShow = admin.caps.show
  const capsSet = admin.caps.set
  const openapi = OpenApi.document()


  /** Where an SSE stream starts: after Last-Event-ID (or ?last_event_id), at the end (?from=end), or at the start. */
  const fromCursor = Effect.gen(function*() {
    const q = yield* query
    const req = yield* HttpServerRequest.HttpServerRequest
    const lastId = req.headers["last-event-id"] ?? q.get("last_event_id") ?? undefined
    const from = lastId !== undefined ? Cursor.decode(lastId) : q.get("from") === "end" ? "end" as const : Cursor.empty
    if (from === undefined) {
      return yield* new InvalidInput({ field: "Last-Event-ID", message: `not an event id of this stream: ${lastId}` })
    }
    return from
  })

  /** The swarm's events: the feed of its root agent's tree (every node agent that has a session). */
  const swarmEvents = Effect.gen(function*() {
    const root = yield* swarmAgent({ node: ".#dir" })
    return Sse.response(feed.stream({ scope: { _tag: "tree", agent: root.agent_id }, from: yield* fromCursor, keepAlive: true }))
  })

  /** `{id}` of /swarm/agents/{id}: an agent id, or a node id / agent name, URL-encoded. */
  const nodeParam = Effect.map(param("id"), (raw) => {
    try {
      return decodeURIComponent(raw)
    } catch {
      return raw
    }
  })

  /** A /swarm/agents/{id}/… body decoded with its RPC's payload Schema, `node` from the path. */
  const nodeBody = <A, I>(schema: Schema.Schema<A, I>) =>
    Effect.gen(function*() {
      const b = yield* body
      return yield* decode(schema, "body")({ ...(typeof b === "object" && b !== null ? b : {}), node: yield* nodeParam })
    })

  const events = Effect.gen(function*() {
    const q = yield* query
    const agent = q.get("agent")
    const tree = q.get("tree")
    const ref = tree ?? agent
    // A live agent by name or id; else an agent id or session id from the logs (terminated).
    // (One live agent is followed by its session id: the feed then reads that log alone.)
    const target = ref === null
      ? null
      : yield* inspect({ agent: ref }).pipe(
        Effect.map((i) => (tree === null ? i.agent.session_id : i.agent.id) as string),
        Effect.catchTag("NotFound", (nf) =>
          // Not live: an agent id or session id of a session on disk, or 404 now (not in the stream).
          Effect.flatMap(sessionList(), (l) =>
            l.sessions.some((s) => s.id === ref || s.agent_id === ref) ? Effect.succeed(ref) : Effect.fail(nf)))
      )
    const from = yield* fromCursor
    const scope = target === null
      ? { _tag: "all" as const }
      : tree !== null
      ? { _tag: "tree" as const, agent: target }
      : { _tag: "agent" as const, agent: target }
    return Sse.response(feed.stream({ scope, from, keepAlive: true }))
  })

  // Swarm mode (docs/swarm.md, docs/http.md): the swarm.* admin handlers.
  const swarmRoutes = HttpRouter.empty.pipe(
    HttpRouter.post(
      "/swarm/start",
      respond(Effect.gen(function*() {
        const p = yield* Effect.flatMap(body, decode(SwarmStartRpc.payloadSchema, "body"))
        return json()(yield* swarmStart(p))
      }))
    ),
    HttpRouter.post("/swarm/stop", respond(Effect.map(swarmStop(), json()))),
    HttpRouter.get("/swarm", respond(Effect.map(swarmStatus(), json()))),
    HttpRouter.get(
      "/swarm/agents",
      respond(Effect.gen(function*() {
        const q = yield* query
        const parent = q.get("parent")
        const status = q.getAll("status").flatMap((v) => v.split(",")).filter((v) => v !== "")
        const p = yield* decode(SwarmAgentsRpc.payloadSchema, "query")({
          ...(parent === null ? {} : { parent }),
          ...(status.length === 0 ? {} : { status })
        })
        return json()(yield* swarmAgents(p))
      }))
    ),
    HttpRouter.get("/swarm/agents/:id", respond(Effect.flatMap(nodeParam, (node) => Effect.map(swarmAgent({ node }), json())))),
    HttpRouter.get("/swarm/agents/:id/source", respond(Effect.flatMap(nodeParam, (node) => Effect.map(swarmSource({ node }), json())))),
    HttpRouter.post(
      "/swarm/agents/:id/chat",
      respond(Effect.flatMap(nodeBody(SwarmChatRpc.payloadSchema), (p) => Effect.map(swarmChat(p), json())))
    ),
    HttpRouter.post("/swarm/agents/:id/trigger", respond(Effect.flatMap(nodeParam, (node) => Effect.map(swarmTrigger({ node }), json())))),
    // Schedules and the per-node history (the CLI's `swarm schedule/unschedule/schedules/log --json`).
    HttpRouter.get("/swarm/schedules", respond(Effect.map(swarmSchedules(), json()))),
    HttpRouter.put(
      "/swarm/agents/:id/schedule",
      respond(Effect.flatMap(nodeBody(SwarmScheduleRpc.payloadSchema), (p) => Effect.map(swarmSchedule(p), json())))
    ),
    HttpRouter.del("/swarm/agents/:id/schedule", respond(Effect.flatMap(nodeParam, (node) => Effect.map(swarmUnschedule({ node }), json())))),
    HttpRouter.get("/swarm/log", respond(Effect.map(swarmLog({}), json()))),
    HttpRouter.get("/swarm/agents/:id/log", respond(Effect.flatMap(nodeParam, (node) => Effect.map(swarmLog({ node }), json())))),
    HttpRouter.get("/swarm/events", respond(swarmEvents))
  )

  // Budgets and the human inbox (docs/budgets.md); waiting (again) for an answer.
  const budgetRoutes = HttpRouter.empty.pipe(
    HttpRouter.get(
      "/v1/agents/:ref/messages/:id/answer",
      respond(Effect.gen(function*() {
        const ref = yield* param("ref")
        const id = yield* param("id")
        const t = (yield* query).get("timeout_s")
        const timeout_s = t === null ? defaultWaitSeconds : Number(t)
        if (!Number.isFinite(timeout_s) || timeout_s <= 0) {
          return yield* new InvalidInput({ field: "timeout_s", message: `timeout_s wants a positive number of seconds, not ${JSON.stringify(t)}` })
        }
        // The same daemon operation as `agent wait` (Handlers.ts "agent.wait").
        return json()(yield* wait({ agent: ref, message_id: id, timeout_s }))
      }))
    ),
    HttpRouter.get("/v1/inbox", respond(Effect.map(inboxList(), json()))),
    HttpRouter.post(
      "/v1/inbox/:id/answer",
      respond(Effect.gen(function*() {
        const id = yield* param("id")
        const p = yield* Effect.flatMap(body, decode(OpenApi.AnswerBody, "body"))
        return json()(yield* inboxAnswer({ id, text: p.text }))
      }))
    ),
    HttpRouter.get("/v1/agents/:ref/budget", respond(Effect.flatMap(param("ref"), (ref) => Effect.map(budgetShow({ agent: ref }), json())))),
    HttpRouter.post(
      "/v1/agents/:ref/budget",
      respond(Effect.gen(function*() {
        const ref = yield* param("ref")
        const p = yield* Effect.flatMap(body, decode(BudgetPatch, "body"))
        return json()(yield* budgetSet({ agent: ref, ...p }))
      }))
    ),
    HttpRouter.get("/v1/agents/:ref/caps", respond(Effect.flatMap(param("ref"), (ref) => Effect.map(capsShow({ agent: ref }), json())))),
    HttpRouter.put(
      "/v1/agents/:ref/caps",
      respond(Effect.gen(function*() {
        const ref = yield* param("ref")
        const p = yield* Effect.flatMap(body, decode(CapsPatch, "body"))
        return json()(yield* capsSet({ agent: ref, ...p }))
      }))
    )
  )

  return HttpRouter.concat(HttpRouter.concat(HttpRouter.empty.pipe(
    HttpRouter.get("/v1/daemon", respond(Effect.map(status(), json()))),
    HttpRouter.get("/v1/agents", respond(Effect.flatMap(query, (q) => Effect.map(list({ all: flag(q.get("all")) }), json())))),
    HttpRouter.post(
      "/v1/agents",
      respond(Effect.gen(function*() {
        const p = yield* Effect.flatMap(bodyOrEmpty, decode(AgentCreateRpc.payloadSchema, "body"))
        return json(201)(yield* create(p))
      }))
    ),
    HttpRouter.get("/v1/agents/:ref", respond(Effect.flatMap(param("ref"), (ref) => Effect.map(inspect({ agent: ref }), (i) => json()(i.agent))))),
    HttpRouter.get("/v1/agents/:ref/inspect", respond(Effect.flatMap(param("ref"), (ref) => Effect.map(inspect({ agent: ref }), json())))),
    HttpRouter.del("/v1/agents/:ref", respond(Effect.flatMap(param("ref"), (ref) => Effect.map(terminate({ agent: ref }), json())))),
    HttpRouter.post(
      "/v1/agents/:ref/messages",
      respond(Effect.gen(function*() {
        const ref = yield* param("ref")
        const p = yield* Effect.flatMap(body, decode(OpenApi.SendBody, "body"))
        // The same daemon operation as `agent send --wait` (Handlers.ts "agent.send").
        if (p.wait === true) return json()(yield* send({ agent: ref, text: p.text, sync: true, wait: true, timeout_s: p.timeout_s ?? defaultWaitSeconds }))
        return json(202)(yield* send({ agent: ref, text: p.text, sync: true }))
      }))
    ),
    HttpRouter.get("/v1/sessions", respond(Effect.map(sessionList(), json()))),
    HttpRouter.post(
      "/v1/sessions/:session/suspend",
      respond(Effect.flatMap(Effect.flatMap(param("session"), decode(SessionDeleteRpc.payloadSchema.fields.session, "session")), (session) =>
        Effect.map(suspend({ session }), json())))
    ),
    HttpRouter.post(
      "/v1/sessions/:session/resume",
      respond(Effect.flatMap(Effect.flatMap(param("session"), decode(SessionDeleteRpc.payloadSchema.fields.session, "session")), (session) =>
        Effect.map(resume({ session }), json())))
    ),
    HttpRouter.del(
      "/v1/sessions/:session",
      respond(Effect.flatMap(Effect.flatMap(param("session"), decode(SessionDeleteRpc.payloadSchema.fields.session, "session")), (session) =>
        Effect.map(sessionDelete({ session }), json())))
    ),
    HttpRouter.get("/v1/workspaces", respond(Effect.map(wsList(), json()))),
    HttpRouter.post(
      "/v1/workspaces",
      respond(Effect.gen(function*() {
        const p = yield* Effect.flatMap(bodyOrEmpty, decode(WorkspaceCreateRpc.payloadSchema, "body"))
        return json(201)(yield* wsCreate(p))
      }))
    ),
    HttpRouter.del(
      "/v1/workspaces/:workspace",
      respond(Effect.gen(function*() {
        const q = yield* query
        const p = yield* decode(WorkspaceDeleteRpc.payloadSchema, "workspace")({ workspace: yield* param("workspace"), force: flag(q.get("force")) })
        return json()(yield* wsDelete(p))
      }))
    ),
    HttpRouter.get(
      "/v1/workspaces/:workspace/turns",
      respond(Effect.gen(function*() {
        const q = yield* query
        const limit = q.get("limit")
        const p = yield* decode(WorkspaceLogRpc.payloadSchema, "workspace")({
          workspace: yield* param("workspace"),
          ...(limit === null ? {} : { limit: Number(limit) })
        })
        return json()(yield* wsLog(p))
      }))
    ),
    HttpRouter.get(
      "/v1/workspaces/:workspace/diff",
      respond(Effect.gen(function*() {
        const p = yield* decode(WorkspaceDiffRpc.payloadSchema, "workspace")({ workspace: yield* param("workspace") })
        return json()(yield* wsDiff(p))
      }))
    ),
    HttpRouter.get(
      "/v1/workspaces/:workspace/turns/:turn/diff",
      respond(Effect.gen(function*() {
        const p = yield* decode(WorkspaceDiffRpc.payloadSchema, "turn")({ workspace: yield* param("workspace"), turn: yield* param("turn") })
        return json()(yield* wsDiff(p))
      }))
    ),
    HttpRouter.post(
      "/v1/workspaces/:workspace/turns/:turn/revert",
      respond(Effect.gen(function*() {
        const p = yield* decode(WorkspaceRevertRpc.payloadSchema, "turn")({ workspace: yield* param("workspace"), turn: yield* param("turn") })
        return json()(yield* wsRevert(p))
      }))
    ),
    HttpRouter.get("/v1/events", respond(events)),
    HttpRouter.get("/openapi.json", Effect.sync(() => HttpServerResponse.unsafeJson(openapi)))
  ), swarmRoutes), budgetRoutes)
})
