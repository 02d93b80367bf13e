// GET /openapi.json: the /v1 routes (Routes.ts) described from the admin RPCs' own Schemas
// (src/protocol/AdminRpcs.ts) — the same Schemas that decode the requests — so the document cannot
// drift from what the routes accept and return. Built once, at start-up.
import { OpenApiJsonSchema } from "@effect/platform"
import { Schema } from "effect"
import { version } from "../version.js"
import {
  BudgetPatch,
  BudgetSetRpc,
  BudgetShowRpc,
  CapsPatch,
  CapsSetRpc,
  CapsShowRpc,
  InboxAnswerRpc,
  InboxListRpc,
  AgentCreateRpc,
  AgentInspectRpc,
  AgentListRpc,
  AgentSendRpc,
  AgentWaitRpc,
  AgentTerminateRpc,
  DaemonStatusRpc,
  RpcError,
  SessionDeleteRpc,
  SessionListRpc,
  SessionResumeRpc,
  SessionSuspendRpc,
  WorkspaceCreateRpc,
  WorkspaceDeleteRpc,
  WorkspaceDiffRpc,
  WorkspaceListRpc,
  WorkspaceLogRpc,
  WorkspaceRevertRpc
} from "../protocol/AdminRpcs.js"
import { AgentNode } from "../domain/agent.js"

interface Route {
  readonly method: "get" | "post" | "put" | "delete"
  readonly path: string
  readonly summary: string
  readonly tag: string
  readonly status?: number
  readonly body?: Schema.Schema.Any
  readonly success?: Schema.Schema.Any
  readonly query?: ReadonlyArray<{ readonly name: string; readonly description: string }>
  readonly sse?: boolean
}

/** The body of POST /v1/agents/{ref}/messages (Routes.ts decodes with it). */
export const SendBody = Schema.Struct({
  text: AgentSendRpc.payloadSchema.fields.text,
  wait: Schema.optional(Schema.Boolean).annotations({ description: "wait for the agent's answer (as agent send --wait)" }),
  timeout_s: Schema.optional(Schema.Number.pipe(Schema.positive())).annotations({ description: "with wait: seconds to wait (default 600)" })
})

/** `POST /v1/inbox/{id}/answer`. */
export const AnswerBody = Schema.Struct({
  text: InboxAnswerRpc.payloadSchema.fields.text.annotations({ description: "the answer (for a spent budget: stop; for a queued spawn: cancel; for an answer to USER: any text marks it read)" })
})

const SendResult = AgentSendRpc.successSchema

const ErrorBody = Schema.Struct({ error: RpcError })

const routes: ReadonlyArray<Route> = [
  { method: "get", path: "/v1/daemon", summary: "Daemon status", tag: "daemon", success: DaemonStatusRpc.successSchema },
  {
    method: "get",
    path: "/v1/agents",
    summary: "The agent tree (live agents; all=1 adds those of the other sessions, as terminated)",
    tag: "agents",
    success: AgentListRpc.successSchema,
    query: [{ name: "all", description: "1: include terminated agents" }]
  },
  { method: "post", path: "/v1/agents", summary: "Create a root agent", tag: "agents", status: 201, body: AgentCreateRpc.payloadSchema, success: AgentNode },
  { method: "get", path: "/v1/agents/{ref}", summary: "One live agent (id or unique name)", tag: "agents", success: AgentNode },
  { method: "get", path: "/v1/agents/{ref}/inspect", summary: "Inspect an agent", tag: "agents", success: AgentInspectRpc.successSchema },
  { method: "delete", path: "/v1/agents/{ref}", summary: "Terminate an agent and its subtree", tag: "agents", success: AgentTerminateRpc.successSchema },
  {
    method: "post",
    path: "/v1/agents/{ref}/messages",
    summary: "Send a message (202); with wait: true, 200 with the answer",
    tag: "agents",
    body: SendBody,
    success: SendResult
  },
  {
    method: "get",
    path: "/v1/agents/{ref}/messages/{id}/answer",
    summary: "The answer to a message sent with wait or without (as agent wait): at once if it came, else when it comes",
    tag: "agents",
    success: AgentWaitRpc.successSchema,
    query: [{ name: "timeout_s", description: "seconds to wait (default 600); 503 Unavailable when they pass first" }]
  },
  { method: "get", path: "/v1/sessions", summary: "Sessions", tag: "sessions", success: SessionListRpc.successSchema },
  { method: "post", path: "/v1/sessions/{session}/suspend", summary: "Suspend a session", tag: "sessions", success: SessionSuspendRpc.successSchema },
  { method: "post", path: "/v1/sessions/{session}/resume", summary: "Resume a session", tag: "sessions", success: SessionResumeRpc.successSchema },
  { method: "delete", path: "/v1/sessions/{session}", summary: "Delete a session", tag: "sessions", success: SessionDeleteRpc.successSchema },
  { method: "get", path: "/v1/workspaces", summary: "Workspaces", tag: "workspaces", success: WorkspaceListRpc.successSchema },
  { method: "post", path: "/v1/workspaces", summary: "Create a workspace", tag: "workspaces", status: 201, body: WorkspaceCreateRpc.payloadSchema, success: WorkspaceCreateRpc.successSchema },
  {
    method: "delete",
    path: "/v1/workspaces/{workspace}",
    summary: "Delete a workspace",
    tag: "workspaces",
    success: WorkspaceDeleteRpc.successSchema,
    query: [{ name: "force", description: "1: even while in use, with its children" }]
  },
  {
    method: "get",
    path: "/v1/workspaces/{workspace}/turns",
    summary: "Recorded turns, newest first",
    tag: "workspaces",
    success: WorkspaceLogRpc.successSchema,
    query: [{ name: "limit", description: "at most this many (default 100)" }]
  },
  { method: "get", path: "/v1/workspaces/{workspace}/diff", summary: "Changes not yet recorded", tag: "workspaces", success: WorkspaceDiffRpc.successSchema },
  { method: "get", path: "/v1/workspaces/{workspace}/turns/{turn}/diff", summary: "What one turn changed", tag: "workspaces", success: WorkspaceDiffRpc.successSchema },
  { method: "post", path: "/v1/workspaces/{workspace}/turns/{turn}/revert", summary: "Undo one turn", tag: "workspaces", success: WorkspaceRevertRpc.successSchema },
  { method: "get", path: "/v1/inbox", summary: "What waits for the human, oldest first", tag: "inbox", success: InboxListRpc.successSchema },
  {
    method: "post",
    path: "/v1/inbox/{id}/answer",
    summary: "Answer a question (the agent resumes with it) or stop a spent subtree",
    tag: "inbox",
    body: AnswerBody,
    success: InboxAnswerRpc.successSchema
  },
  { method: "get", path: "/v1/agents/{ref}/budget", summary: "The agent's subtree budget", tag: "agents", success: BudgetShowRpc.successSchema },
  {
    method: "post",
    path: "/v1/agents/{ref}/budget",
    summary: "Set (raise) the agent's subtree budget",
    tag: "agents",
    body: BudgetPatch,
    success: BudgetSetRpc.successSchema
  },
  { method: "get", path: "/v1/agents/{ref}/caps", summary: "The caps of the agent's tree (its root's)", tag: "agents", success: CapsShowRpc.successSchema },
  {
    method: "put",
    path: "/v1/agents/{ref}/caps",
    summary: "Set a root's tree caps (a raise starts queued spawns that fit; 0: no cap; null: the config's)",
    tag: "agents",
    body: CapsPatch,
    success: CapsSetRpc.successSchema
  },
  {
    method: "get",
    path: "/v1/events",
    summary: "Server-Sent Events of the event logs; id = cursor, Last-Event-ID resumes",
    tag: "events",
    sse: true,
    query: [
      { name: "agent", description: "one agent (id, name, or session id)" },
      { name: "tree", description: "an agent and its subtree" },
      { name: "from", description: "end: only what happens from now" },
      { name: "last_event_id", description: "same as the Last-Event-ID header" }
    ]
  }
]

const errorStatuses = { "400": "InvalidInput", "404": "NotFound", "500": "Internal", "503": "Unavailable" } as const

export const document = (): unknown => {
  const defs: Record<string, OpenApiJsonSchema.JsonSchema> = {}
  const schema = (s: Schema.Schema.Any) => OpenApiJsonSchema.makeWithDefs(s as Schema.Schema<unknown, unknown>, { defs, defsPath: "#/components/schemas/" })
  const errorSchema = schema(ErrorBody)
  const paths: Record<string, Record<string, unknown>> = {}
  for (const r of routes) {
    const pathParams = [...r.path.matchAll(/\{(\w+)\}/g)].map((m) => ({ name: m[1], in: "path", required: true, schema: { type: "string" } }))
    const query = (r.query ?? []).map((q) => ({ name: q.name, in: "query", required: false, description: q.description, schema: { type: "string" } }))
    const ok = r.sse
      ? { description: "text/event-stream", content: { "text/event-stream": { schema: { type: "string" } } } }
      : { description: "success", content: { "application/json": { schema: schema(r.success ?? Schema.Unknown) } } }
    const errors = Object.fromEntries(
      Object.entries(errorStatuses).map(([code, tag]) => [code, { description: tag, content: { "application/json": { schema: errorSchema } } }])
    )
    paths[r.path] = {
      ...paths[r.path],
      [r.method]: {
        tags: [r.tag],
        summary: r.summary,
        parameters: [...pathParams, ...query],
        ...(r.body === undefined ? {} : { requestBody: { required: true, content: { "application/json": { schema: schema(r.body) } } } }),
        responses: { [String(r.status ?? (r.method === "post" && r.path.endsWith("/messages") ? 202 : 200))]: ok, ...errors, "401": { description: "TCP without the bearer token" } }
      }
    }
  }
  return {
    openapi: "3.1.0",
    info: { title: "substrat daemon HTTP API", version },
    components: { schemas: defs, securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
    security: [{}, { bearer: [] }],
    paths
  }
}
