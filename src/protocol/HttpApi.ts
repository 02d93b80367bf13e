// The HTTP API (docs/http.md), declared once with @effect/platform's HttpApi: every path, its
// parameters, body, answers and errors, from the admin RPCs' own Schemas (src/protocol/admin/), so
// the routes (src/http/Api.ts builds them with HttpApiBuilder) and the OpenAPI document
// (`OpenApi.fromApi`, served at /openapi.json) cannot drift from each other or from the CLI's wire.
//
// Errors are the admin protocol's four wire errors as `{"error": {...}}`, one HTTP status each,
// plus Unauthorized (401) and PayloadTooLarge (413). Authentication is one `HttpApiMiddleware`
// (`Authorization`: the bearer token or the dashboard's session cookie) applied to the whole API,
// so every endpoint is behind it; http.sock's listener lets every request through it (its file
// mode is the access control). Path and query parameters are declared as strings: each handler
// decodes them with its RPC's field Schema, as the admin socket does, so a bad value is the same
// InvalidInput with the same words on both.
//
// Over 300 lines because it is the API's one declaration: every endpoint, group by group.
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSchema, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { AgentNodeOnWire } from "./admin/agent.js"
import {
  AgentCreateRpc,
  AgentInspectRpc,
  AgentListRpc,
  AgentSendRpc,
  AgentTerminateRpc,
  AgentWaitRpc,
  BudgetPatch,
  BudgetSetRpc,
  BudgetShowRpc,
  CapsPatch,
  CapsSetRpc,
  CapsShowRpc,
  DaemonStatusRpc,
  InboxAnswerRpc,
  InboxListRpc,
  Internal,
  InvalidInput,
  NotFound,
  SessionDeleteRpc,
  SessionListRpc,
  SessionResumeRpc,
  SessionSuspendRpc,
  SwarmAgentRpc,
  SwarmAgentsRpc,
  SwarmChatRpc,
  SwarmLogRpc,
  SwarmScheduleRpc,
  SwarmSchedulesRpc,
  SwarmSourceRpc,
  SwarmStartRpc,
  SwarmStatusRpc,
  SwarmStopRpc,
  SwarmTriggerRpc,
  SwarmUnscheduleRpc,
  Unavailable,
  WorkspaceCreateRpc,
  WorkspaceDeleteRpc,
  WorkspaceDiffRpc,
  WorkspaceListRpc,
  WorkspaceLogRpc,
  WorkspaceRevertRpc
} from "./AdminRpcs.js"

/** The dashboard's session cookie (src/http/Login.ts gives them out). */
export const sessionCookie = "substrat_session"

/** No or wrong credentials on the TCP listener. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {
  code: Schema.optionalWith(Schema.Number, { default: () => 401 }),
  message: Schema.String
}) {}

/** A request body over `httpLimits.maxBodyBytes` (src/http/Body.ts answers it). */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", {
  code: Schema.optionalWith(Schema.Number, { default: () => 413 }),
  message: Schema.String
}) {}

/** An error as HTTP sends it: `{"error": <the wire error>}`, with its status. */
const onHttp = <A, I>(schema: Schema.Schema<A, I>, status: number): Schema.Schema<A, { readonly error: I }> =>
  Schema.transform(Schema.Struct({ error: schema }), Schema.typeSchema(schema), {
    strict: true,
    decode: (w) => w.error,
    encode: (error) => ({ error })
  }).annotations(HttpApiSchema.annotations({ status }))

/** Every request passes it: the bearer token, or the dashboard's session cookie (docs/http.md). */
export class Authorization extends HttpApiMiddleware.Tag<Authorization>()("substrat/http/Authorization", {
  failure: onHttp(Unauthorized, 401),
  security: {
    bearer: HttpApiSecurity.bearer,
    session: HttpApiSecurity.apiKey({ in: "cookie", key: sessionCookie })
  }
}) {}

/** The body of `POST /v1/agents/{ref}/messages`. */
export const SendBody = Schema.Struct({
  text: AgentSendRpc.payloadSchema.fields.text,
  wait: Schema.optional(Schema.Boolean).annotations({ description: "wait for the agent's answer (as agent send --wait)" }),
  timeout_s: Schema.optional(Schema.Number.pipe(Schema.positive())).annotations({ description: "with wait: seconds to wait (default 600)" })
})

/** The body of `POST /v1/inbox/{id}/answer`. */
export const AnswerBody = Schema.Struct({
  text: InboxAnswerRpc.payloadSchema.fields.text.annotations({
    description: "the answer (for a spent budget: stop; for a queued spawn: cancel; for an answer to USER: any text marks it read)"
  })
})

/** A Server-Sent Events stream (src/http/Sse.ts). */
const EventStream = HttpApiSchema.Text({ contentType: "text/event-stream" })

const q = (description: string) => Schema.optional(Schema.String).annotations({ description })

const ref = Schema.Struct({ ref: Schema.String })
const session = Schema.Struct({ session: Schema.String })
const workspace = Schema.Struct({ workspace: Schema.String })
const turn = Schema.Struct({ workspace: Schema.String, turn: Schema.String })
const node = Schema.Struct({ id: Schema.String.annotations({ description: "an agent id, or a node id / agent name, URL-encoded" }) })

const summary = (s: string) => OpenApi.annotations({ summary: s })

/** Where an SSE stream starts. */
const streamParams = {
  from: q("end: only what happens from now"),
  last_event_id: q("same as the Last-Event-ID header")
}

export class DaemonApi extends HttpApiGroup.make("daemon").add(
  HttpApiEndpoint.get("status", "/v1/daemon").addSuccess(DaemonStatusRpc.successSchema).annotateContext(summary("Daemon status"))
).add(
  HttpApiEndpoint.post("uiCode", "/v1/ui/code")
    .addSuccess(Schema.Struct({ code: Schema.String }), { status: 201 })
    .annotateContext(summary("A one-time code for the dashboard's login (substrat ui)"))
) {}

export class AgentsApi extends HttpApiGroup.make("agents").add(
  HttpApiEndpoint.get("list", "/v1/agents")
    .setUrlParams(Schema.Struct({ all: q("1: include terminated agents") }))
    .addSuccess(AgentListRpc.successSchema)
    .annotateContext(summary("The agent tree (live agents; all=1 adds those of the other sessions, as terminated)"))
).add(
  HttpApiEndpoint.post("create", "/v1/agents")
    .setPayload(AgentCreateRpc.payloadSchema)
    .addSuccess(AgentCreateRpc.successSchema, { status: 201 })
    .annotateContext(summary("Create a root agent"))
).add(
  HttpApiEndpoint.get("get", "/v1/agents/:ref").setPath(ref).addSuccess(AgentNodeOnWire).annotateContext(summary("One live agent (id or unique name)"))
).add(
  HttpApiEndpoint.get("inspect", "/v1/agents/:ref/inspect").setPath(ref).addSuccess(AgentInspectRpc.successSchema).annotateContext(summary("Inspect an agent"))
).add(
  HttpApiEndpoint.del("terminate", "/v1/agents/:ref")
    .setPath(ref)
    .addSuccess(AgentTerminateRpc.successSchema)
    .annotateContext(summary("Terminate an agent and its subtree"))
).add(
  HttpApiEndpoint.post("send", "/v1/agents/:ref/messages")
    .setPath(ref)
    .setPayload(SendBody)
    .addSuccess(AgentSendRpc.successSchema, { status: 202 })
    .addSuccess(AgentSendRpc.successSchema.annotations({ description: "with wait: true, the answer" }))
    .annotateContext(summary("Send a message (202); with wait: true, 200 with the answer"))
).add(
  HttpApiEndpoint.get("wait", "/v1/agents/:ref/messages/:id/answer")
    .setPath(Schema.Struct({ ref: Schema.String, id: Schema.String }))
    .setUrlParams(Schema.Struct({ timeout_s: q("seconds to wait (default 600); 503 Unavailable when they pass first") }))
    .addSuccess(AgentWaitRpc.successSchema)
    .annotateContext(summary("The answer to a message sent with wait or without (as agent wait): at once if it came, else when it comes"))
).add(
  HttpApiEndpoint.get("budget", "/v1/agents/:ref/budget").setPath(ref).addSuccess(BudgetShowRpc.successSchema).annotateContext(summary("The agent's subtree budget"))
).add(
  HttpApiEndpoint.post("setBudget", "/v1/agents/:ref/budget")
    .setPath(ref)
    .setPayload(BudgetPatch)
    .addSuccess(BudgetSetRpc.successSchema)
    .annotateContext(summary("Set (raise) the agent's subtree budget"))
).add(
  HttpApiEndpoint.get("caps", "/v1/agents/:ref/caps").setPath(ref).addSuccess(CapsShowRpc.successSchema).annotateContext(summary("The caps of the agent's tree (its root's)"))
).add(
  HttpApiEndpoint.put("setCaps", "/v1/agents/:ref/caps")
    .setPath(ref)
    .setPayload(CapsPatch)
    .addSuccess(CapsSetRpc.successSchema)
    .annotateContext(summary("Set a root's tree caps (a raise starts queued spawns that fit; 0: no cap; null: the config's)"))
) {}

export class SessionsApi extends HttpApiGroup.make("sessions").add(
  HttpApiEndpoint.get("list", "/v1/sessions").addSuccess(SessionListRpc.successSchema).annotateContext(summary("Sessions"))
).add(
  HttpApiEndpoint.post("suspend", "/v1/sessions/:session/suspend").setPath(session).addSuccess(SessionSuspendRpc.successSchema).annotateContext(summary("Suspend a session"))
).add(
  HttpApiEndpoint.post("resume", "/v1/sessions/:session/resume").setPath(session).addSuccess(SessionResumeRpc.successSchema).annotateContext(summary("Resume a session"))
).add(
  HttpApiEndpoint.del("delete", "/v1/sessions/:session").setPath(session).addSuccess(SessionDeleteRpc.successSchema).annotateContext(summary("Delete a session"))
) {}

export class WorkspacesApi extends HttpApiGroup.make("workspaces").add(
  HttpApiEndpoint.get("list", "/v1/workspaces").addSuccess(WorkspaceListRpc.successSchema).annotateContext(summary("Workspaces"))
).add(
  HttpApiEndpoint.post("create", "/v1/workspaces")
    .setPayload(WorkspaceCreateRpc.payloadSchema)
    .addSuccess(WorkspaceCreateRpc.successSchema, { status: 201 })
    .annotateContext(summary("Create a workspace"))
).add(
  HttpApiEndpoint.del("delete", "/v1/workspaces/:workspace")
    .setPath(workspace)
    .setUrlParams(Schema.Struct({ force: q("1: even while in use, with its children") }))
    .addSuccess(WorkspaceDeleteRpc.successSchema)
    .annotateContext(summary("Delete a workspace"))
).add(
  HttpApiEndpoint.get("turns", "/v1/workspaces/:workspace/turns")
    .setPath(workspace)
    .setUrlParams(Schema.Struct({ limit: q("at most this many (default 100)") }))
    .addSuccess(WorkspaceLogRpc.successSchema)
    .annotateContext(summary("Recorded turns, newest first"))
).add(
  HttpApiEndpoint.get("diff", "/v1/workspaces/:workspace/diff").setPath(workspace).addSuccess(WorkspaceDiffRpc.successSchema).annotateContext(summary("Changes not yet recorded"))
).add(
  HttpApiEndpoint.get("turnDiff", "/v1/workspaces/:workspace/turns/:turn/diff").setPath(turn).addSuccess(WorkspaceDiffRpc.successSchema).annotateContext(summary("What one turn changed"))
).add(
  HttpApiEndpoint.post("revert", "/v1/workspaces/:workspace/turns/:turn/revert").setPath(turn).addSuccess(WorkspaceRevertRpc.successSchema).annotateContext(summary("Undo one turn"))
) {}

export class InboxApi extends HttpApiGroup.make("inbox").add(
  HttpApiEndpoint.get("list", "/v1/inbox").addSuccess(InboxListRpc.successSchema).annotateContext(summary("What waits for the human, oldest first"))
).add(
  HttpApiEndpoint.post("answer", "/v1/inbox/:id/answer")
    .setPath(Schema.Struct({ id: Schema.String }))
    .setPayload(AnswerBody)
    .addSuccess(InboxAnswerRpc.successSchema)
    .annotateContext(summary("Answer a question (the agent resumes with it) or stop a spent subtree"))
) {}

export class EventsApi extends HttpApiGroup.make("events").add(
  HttpApiEndpoint.get("events", "/v1/events")
    .setUrlParams(Schema.Struct({ agent: q("one agent (id, name, or session id)"), tree: q("an agent and its subtree"), ...streamParams }))
    .addSuccess(EventStream)
    .annotateContext(summary("Server-Sent Events of the event logs; id = cursor, Last-Event-ID resumes"))
) {}

/** Swarm mode (docs/swarm.md): the swarm.* admin methods. */
export class SwarmApi extends HttpApiGroup.make("swarm").add(
  HttpApiEndpoint.post("start", "/swarm/start").setPayload(SwarmStartRpc.payloadSchema).addSuccess(SwarmStartRpc.successSchema).annotateContext(summary("Start the swarm"))
).add(
  HttpApiEndpoint.post("stop", "/swarm/stop").addSuccess(SwarmStopRpc.successSchema).annotateContext(summary("Stop the swarm"))
).add(
  HttpApiEndpoint.get("status", "/swarm").addSuccess(SwarmStatusRpc.successSchema).annotateContext(summary("The swarm's status"))
).add(
  HttpApiEndpoint.get("agents", "/swarm/agents")
    .setUrlParams(Schema.Struct({
      parent: q("only the children of this node"),
      status: Schema.optional(Schema.Union(Schema.String, Schema.Array(Schema.String))).annotations({ description: "statuses, comma-separated or repeated" })
    }))
    .addSuccess(SwarmAgentsRpc.successSchema)
    .annotateContext(summary("The swarm's nodes"))
).add(
  HttpApiEndpoint.get("agent", "/swarm/agents/:id").setPath(node).addSuccess(SwarmAgentRpc.successSchema).annotateContext(summary("One node"))
).add(
  HttpApiEndpoint.get("source", "/swarm/agents/:id/source").setPath(node).addSuccess(SwarmSourceRpc.successSchema).annotateContext(summary("A node's lines of its file"))
).add(
  HttpApiEndpoint.post("chat", "/swarm/agents/:id/chat")
    .setPath(node)
    .setPayload(SwarmChatRpc.payloadSchema.omit("node"))
    .addSuccess(SwarmChatRpc.successSchema)
    .annotateContext(summary("Send a node's agent a message"))
).add(
  HttpApiEndpoint.post("trigger", "/swarm/agents/:id/trigger").setPath(node).addSuccess(SwarmTriggerRpc.successSchema).annotateContext(summary("Wake a node's agent now"))
).add(
  HttpApiEndpoint.get("schedules", "/swarm/schedules").addSuccess(SwarmSchedulesRpc.successSchema).annotateContext(summary("Every schedule"))
).add(
  HttpApiEndpoint.put("schedule", "/swarm/agents/:id/schedule")
    .setPath(node)
    .setPayload(SwarmScheduleRpc.payloadSchema.omit("node"))
    .addSuccess(SwarmScheduleRpc.successSchema)
    .annotateContext(summary("Schedule a node's agent"))
).add(
  HttpApiEndpoint.del("unschedule", "/swarm/agents/:id/schedule").setPath(node).addSuccess(SwarmUnscheduleRpc.successSchema).annotateContext(summary("Remove a node's schedule"))
).add(
  HttpApiEndpoint.get("log", "/swarm/log").addSuccess(SwarmLogRpc.successSchema).annotateContext(summary("Every node's history"))
).add(
  HttpApiEndpoint.get("nodeLog", "/swarm/agents/:id/log").setPath(node).addSuccess(SwarmLogRpc.successSchema).annotateContext(summary("One node's history"))
).add(
  HttpApiEndpoint.get("events", "/swarm/events")
    .setUrlParams(Schema.Struct(streamParams))
    .addSuccess(EventStream)
    .annotateContext(summary("Server-Sent Events of the swarm's tree"))
) {}

/** `GET /openapi.json`: this document, behind the same authorization (not listed in itself). */
export class DocumentApi extends HttpApiGroup.make("document").add(
  HttpApiEndpoint.get("openapi", "/openapi.json").addSuccess(Schema.Unknown)
).annotate(OpenApi.Exclude, true) {}

export class SubstratApi extends HttpApi.make("substrat")
  .add(DaemonApi)
  .add(AgentsApi)
  .add(SessionsApi)
  .add(WorkspacesApi)
  .add(InboxApi)
  .add(EventsApi)
  .add(SwarmApi)
  .add(DocumentApi)
  .addError(onHttp(NotFound, 404))
  .addError(onHttp(InvalidInput, 400))
  .addError(onHttp(Unavailable, 503))
  .addError(onHttp(Internal, 500))
  .addError(onHttp(PayloadTooLarge, 413))
  .middleware(Authorization)
  .annotateContext(OpenApi.annotations({ title: "substrat daemon HTTP API" }))
{}
