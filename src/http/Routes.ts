// The REST routes under /v1/ (docs/http.md). Each route decodes its params/body with the payload
// Schema of the matching admin RPC (src/daemon/Rpcs.ts) and calls that RPC's own handler
// (`AdminRpcs.accessHandler`, built from src/daemon/Handlers.ts): one implementation of every
// operation for the CLI and HTTP alike, with the same errors and the same references (ids, names,
// unique id prefixes: src/daemon/Resolver.ts). What HTTP adds: the default wait of messages and the SSE stream (Sse.ts).
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Schema } from "effect"
import * as Cursor from "../feed/Cursor.js"
import { EventFeed } from "../feed/EventFeed.js"
import {
  AdminRpcs,
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
} from "../daemon/Rpcs.js"
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


export const make = Effect.gen(function*() {
  const feed = yield* EventFeed
  const status = yield* AdminRpcs.accessHandler("daemon.status")
  const create = yield* AdminRpcs.accessHandler("agent.create")
  const list = yield* AdminRpcs.accessHandler("agent.list")
  const send = yield* AdminRpcs.accessHandler("agent.send")
  const wait = yield* AdminRpcs.accessHandler("agent.wait")
  const inspect = yield* AdminRpcs.accessHandler("agent.inspect")
  const terminate = yield* AdminRpcs.accessHandler("agent.terminate")
  const sessionList = yield* AdminRpcs.accessHandler("session.list")
  const suspend = yield* AdminRpcs.accessHandler("session.suspend")
  const resume = yield* AdminRpcs.accessHandler("session.resume")
  const sessionDelete = yield* AdminRpcs.accessHandler("session.delete")
  const wsCreate = yield* AdminRpcs.accessHandler("workspace.create")
  const wsList = yield* AdminRpcs.accessHandler("workspace.list")
  const wsDelete = yield* AdminRpcs.accessHandler("workspace.delete")
  const wsDiff = yield* AdminRpcs.accessHandler("workspace.diff")
  const wsRevert = yield* AdminRpcs.accessHandler("workspace.revert")
  const wsLog = yield* AdminRpcs.accessHandler("workspace.log")
  const swarmStart = yield* AdminRpcs.accessHandler("swarm.start")
  const swarmStop = yield* AdminRpcs.accessHandler("swarm.stop")
  const swarmStatus = yield* AdminRpcs.accessHandler("swarm.status")
  const swarmAgents = yield* AdminRpcs.accessHandler("swarm.agents")
  const swarmAgent = yield* AdminRpcs.accessHandler("swarm.agent")
  const swarmChat = yield* AdminRpcs.accessHandler("swarm.chat")
  const swarmTrigger = yield* AdminRpcs.accessHandler("swarm.trigger")
  const swarmSchedule = yield* AdminRpcs.accessHandler("swarm.schedule")
  const swarmUnschedule = yield* AdminRpcs.accessHandler("swarm.unschedule")
  const swarmSchedules = yield* AdminRpcs.accessHandler("swarm.schedules")
  const swarmLog = yield* AdminRpcs.accessHandler("swarm.log")
  const inboxList = yield* AdminRpcs.accessHandler("inbox.list")
  const inboxAnswer = yield* AdminRpcs.accessHandler("inbox.answer")
  const budgetShow = yield* AdminRpcs.accessHandler("budget.show")
  const budgetSet = yield* AdminRpcs.accessHandler("budget.set")
  const capsShow = yield* AdminRpcs.accessHandler("caps.show")
  const capsSet = yield* AdminRpcs.accessHandler("caps.set")
  const headers = {} as Parameters<typeof status>[1]
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
    const root = yield* swarmAgent({ node: ".#dir" }, headers)
    return Sse.response(feed.stream({ scope: { _tag: "tree", agent: root.agent_id }, from: yield* fromCursor }))
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
      : yield* inspect({ agent: ref }, headers).pipe(
        Effect.map((i) => (tree === null ? i.agent.session_id : i.agent.id) as string),
        Effect.catchTag("NotFound", (nf) =>
          // Not live: an agent id or session id of a session on disk, or 404 now (not in the stream).
          Effect.flatMap(sessionList(undefined, headers), (l) =>
            l.sessions.some((s) => s.id === ref || s.agent_id === ref) ? Effect.succeed(ref) : Effect.fail(nf)))
      )
    const from = yield* fromCursor
    const scope = target === null
      ? { _tag: "all" as const }
      : tree !== null
      ? { _tag: "tree" as const, agent: target }
      : { _tag: "agent" as const, agent: target }
    const items = feed.stream({ scope, from })
    return Sse.response(items)
  })

  // Swarm mode (docs/swarm.md, docs/http.md): the swarm.* admin handlers.
  const swarmRoutes = HttpRouter.empty.pipe(
    HttpRouter.post(
      "/swarm/start",
      respond(Effect.gen(function*() {
        const p = yield* Effect.flatMap(body, decode(SwarmStartRpc.payloadSchema, "body"))
        return json()(yield* swarmStart(p, headers))
      }))
    ),
    HttpRouter.post("/swarm/stop", respond(Effect.map(swarmStop(undefined, headers), json()))),
    HttpRouter.get("/swarm", respond(Effect.map(swarmStatus(undefined, headers), json()))),
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
        return json()(yield* swarmAgents(p, headers))
      }))
    ),
    HttpRouter.get("/swarm/agents/:id", respond(Effect.flatMap(nodeParam, (node) => Effect.map(swarmAgent({ node }, headers), json())))),
    HttpRouter.post(
      "/swarm/agents/:id/chat",
      respond(Effect.flatMap(nodeBody(SwarmChatRpc.payloadSchema), (p) => Effect.map(swarmChat(p, headers), json())))
    ),
    HttpRouter.post("/swarm/agents/:id/trigger", respond(Effect.flatMap(nodeParam, (node) => Effect.map(swarmTrigger({ node }, headers), json())))),
    // Schedules and the per-node history (the CLI's `swarm schedule/unschedule/schedules/log --json`).
    HttpRouter.get("/swarm/schedules", respond(Effect.map(swarmSchedules(undefined, headers), json()))),
    HttpRouter.put(
      "/swarm/agents/:id/schedule",
      respond(Effect.flatMap(nodeBody(SwarmScheduleRpc.payloadSchema), (p) => Effect.map(swarmSchedule(p, headers), json())))
    ),
    HttpRouter.del("/swarm/agents/:id/schedule", respond(Effect.flatMap(nodeParam, (node) => Effect.map(swarmUnschedule({ node }, headers), json())))),
    HttpRouter.get("/swarm/log", respond(Effect.map(swarmLog({}, headers), json()))),
    HttpRouter.get("/swarm/agents/:id/log", respond(Effect.flatMap(nodeParam, (node) => Effect.map(swarmLog({ node }, headers), json())))),
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
        return json()(yield* wait({ agent: ref, message_id: id, timeout_s }, headers))
      }))
    ),
    HttpRouter.get("/v1/inbox", respond(Effect.map(inboxList(undefined, headers), json()))),
    HttpRouter.post(
      "/v1/inbox/:id/answer",
      respond(Effect.gen(function*() {
        const id = yield* param("id")
        const p = yield* Effect.flatMap(body, decode(OpenApi.AnswerBody, "body"))
        return json()(yield* inboxAnswer({ id, text: p.text }, headers))
      }))
    ),
    HttpRouter.get("/v1/agents/:ref/budget", respond(Effect.flatMap(param("ref"), (ref) => Effect.map(budgetShow({ agent: ref }, headers), json())))),
    HttpRouter.post(
      "/v1/agents/:ref/budget",
      respond(Effect.gen(function*() {
        const ref = yield* param("ref")
        const p = yield* Effect.flatMap(body, decode(BudgetPatch, "body"))
        return json()(yield* budgetSet({ agent: ref, ...p }, headers))
      }))
    ),
    HttpRouter.get("/v1/agents/:ref/caps", respond(Effect.flatMap(param("ref"), (ref) => Effect.map(capsShow({ agent: ref }, headers), json())))),
    HttpRouter.put(
      "/v1/agents/:ref/caps",
      respond(Effect.gen(function*() {
        const ref = yield* param("ref")
        const p = yield* Effect.flatMap(body, decode(CapsPatch, "body"))
        return json()(yield* capsSet({ agent: ref, ...p }, headers))
      }))
    )
  )

  return HttpRouter.concat(HttpRouter.concat(HttpRouter.empty.pipe(
    HttpRouter.get("/v1/daemon", respond(Effect.map(status(undefined, headers), json()))),
    HttpRouter.get("/v1/agents", respond(Effect.flatMap(query, (q) => Effect.map(list({ all: flag(q.get("all")) }, headers), json())))),
    HttpRouter.post(
      "/v1/agents",
      respond(Effect.gen(function*() {
        const p = yield* Effect.flatMap(bodyOrEmpty, decode(AgentCreateRpc.payloadSchema, "body"))
        return json(201)(yield* create(p, headers))
      }))
    ),
    HttpRouter.get("/v1/agents/:ref", respond(Effect.flatMap(param("ref"), (ref) => Effect.map(inspect({ agent: ref }, headers), (i) => json()(i.agent))))),
    HttpRouter.get("/v1/agents/:ref/inspect", respond(Effect.flatMap(param("ref"), (ref) => Effect.map(inspect({ agent: ref }, headers), json())))),
    HttpRouter.del("/v1/agents/:ref", respond(Effect.flatMap(param("ref"), (ref) => Effect.map(terminate({ agent: ref }, headers), json())))),
    HttpRouter.post(
      "/v1/agents/:ref/messages",
      respond(Effect.gen(function*() {
        const ref = yield* param("ref")
        const p = yield* Effect.flatMap(body, decode(OpenApi.SendBody, "body"))
        // The same daemon operation as `agent send --wait` (Handlers.ts "agent.send").
        if (p.wait === true) return json()(yield* send({ agent: ref, text: p.text, sync: true, wait: true, timeout_s: p.timeout_s ?? defaultWaitSeconds }, headers))
        return json(202)(yield* send({ agent: ref, text: p.text, sync: true }, headers))
      }))
    ),
    HttpRouter.get("/v1/sessions", respond(Effect.map(sessionList(undefined, headers), json()))),
    HttpRouter.post(
      "/v1/sessions/:session/suspend",
      respond(Effect.flatMap(Effect.flatMap(param("session"), decode(SessionDeleteRpc.payloadSchema.fields.session, "session")), (session) =>
        Effect.map(suspend({ session }, headers), json())))
    ),
    HttpRouter.post(
      "/v1/sessions/:session/resume",
      respond(Effect.flatMap(Effect.flatMap(param("session"), decode(SessionDeleteRpc.payloadSchema.fields.session, "session")), (session) =>
        Effect.map(resume({ session }, headers), json())))
    ),
    HttpRouter.del(
      "/v1/sessions/:session",
      respond(Effect.flatMap(Effect.flatMap(param("session"), decode(SessionDeleteRpc.payloadSchema.fields.session, "session")), (session) =>
        Effect.map(sessionDelete({ session }, headers), json())))
    ),
    HttpRouter.get("/v1/workspaces", respond(Effect.map(wsList(undefined, headers), json()))),
    HttpRouter.post(
      "/v1/workspaces",
      respond(Effect.gen(function*() {
        const p = yield* Effect.flatMap(bodyOrEmpty, decode(WorkspaceCreateRpc.payloadSchema, "body"))
        return json(201)(yield* wsCreate(p, headers))
      }))
    ),
    HttpRouter.del(
      "/v1/workspaces/:workspace",
      respond(Effect.gen(function*() {
        const q = yield* query
        const p = yield* decode(WorkspaceDeleteRpc.payloadSchema, "workspace")({ workspace: yield* param("workspace"), force: flag(q.get("force")) })
        return json()(yield* wsDelete(p, headers))
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
        return json()(yield* wsLog(p, headers))
      }))
    ),
    HttpRouter.get(
      "/v1/workspaces/:workspace/diff",
      respond(Effect.gen(function*() {
        const p = yield* decode(WorkspaceDiffRpc.payloadSchema, "workspace")({ workspace: yield* param("workspace") })
        return json()(yield* wsDiff(p, headers))
      }))
    ),
    HttpRouter.get(
      "/v1/workspaces/:workspace/turns/:turn/diff",
      respond(Effect.gen(function*() {
        const p = yield* decode(WorkspaceDiffRpc.payloadSchema, "turn")({ workspace: yield* param("workspace"), turn: yield* param("turn") })
        return json()(yield* wsDiff(p, headers))
      }))
    ),
    HttpRouter.post(
      "/v1/workspaces/:workspace/turns/:turn/revert",
      respond(Effect.gen(function*() {
        const p = yield* decode(WorkspaceRevertRpc.payloadSchema, "turn")({ workspace: yield* param("workspace"), turn: yield* param("turn") })
        return json()(yield* wsRevert(p, headers))
      }))
    ),
    HttpRouter.get("/v1/events", respond(events)),
    HttpRouter.get("/openapi.json", Effect.sync(() => HttpServerResponse.unsafeJson(openapi)))
  ), swarmRoutes), budgetRoutes)
})
