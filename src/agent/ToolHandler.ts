// ToolHandler: the tool catalog of seed 002 for one agent. Every tool returns at once with a
// JSON value; failures are JSON too: {"error": {"type", "message", ...}}. Arguments are decoded
// with Schemas (unknown keys rejected). Each call is logged as `tool_call.invoked` and
// `tool_call.result` in the calling agent's log.
import { Effect, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { type EventData, makeEvent } from "../domain/events.js"
import { type AgentId, MessageId } from "../domain/ids.js"
import { EventLog } from "../storage/EventLog.js"
import type { ToolInvoker, ToolResult } from "../provider/Provider.js"
import { inspectionOf } from "./Inspection.js"
import { Lifecycle } from "./Lifecycle.js"
import { OrchestratorState } from "./OrchestratorState.js"
import { senderName } from "./Prompt.js"
import { Router } from "./Router.js"

export const SendMessageArgs = Schema.Struct({
  recipient: Schema.String,
  text: Schema.String,
  sync: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  reply_to: Schema.optional(MessageId),
  timeout_seconds: Schema.optional(Schema.Number)
})
export const BroadcastArgs = Schema.Struct({ text: Schema.String })
export const CheckInboxArgs = Schema.Struct({})
export const SpawnAgentArgs = Schema.Struct({
  name: Schema.String,
  instructions: Schema.String,
  role: Schema.optionalWith(Schema.String.pipe(Schema.minLength(1)), { default: () => "worker" }),
  workspace_subdir: Schema.optional(Schema.NullOr(Schema.String)),
  provider: Schema.optional(Schema.NullOr(Schema.String))
})
export const InspectAgentArgs = Schema.Struct({ name: Schema.String })

/** The catalog, with a one-line description each (for MCP tool listings). */
export const toolCatalog = {
  send_message: {
    args: SendMessageArgs,
    description:
      "Send a message to your parent, a child or a sibling by name (or USER, for root agents). sync=true (default): the reply arrives as your next message; do not wait or poll. timeout_seconds=N (sync only): if no reply came within N seconds you get a notice instead and stop waiting (a late reply still arrives as a message). reply_to=<message id> answers a request."
  },
  broadcast: { args: BroadcastArgs, description: "Send a message to every sibling (your team). It waits in their inboxes." },
  check_inbox: { args: CheckInboxArgs, description: "Read (and clear) the notifications and broadcasts waiting for you." },
  spawn_agent: {
    args: SpawnAgentArgs,
    description: "Create a child agent. It starts when your turn ends; you can message it right away."
  },
  inspect_agent: {
    args: InspectAgentArgs,
    description: "See a parent's, child's or sibling's state, recent turns and messages."
  }
} as const
export type ToolName = keyof typeof toolCatalog

type Json = EventData<"tool_call.result">["result"]
/** Tool arguments/results are logged as plain JSON: round-trip through JSON (drops class prototypes, undefined). */
const asJson = (u: unknown): Json => JSON.parse(JSON.stringify(u ?? null)) as Json

class ToolFailure {
  constructor(readonly type: string, readonly message: string, readonly extra: Record<string, unknown> = {}) {}
}

const decode = <A, I>(schema: Schema.Schema<A, I>, tool: string, args: unknown) =>
  Schema.decodeUnknown(schema, { onExcessProperty: "error" })(args ?? {}).pipe(
    Effect.mapError((e) => new ToolFailure("invalid_arguments", `${tool}: ${e.message}`))
  )

export class ToolHandler extends Effect.Service<ToolHandler>()("substrat/ToolHandler", {
  effect: Effect.gen(function*() {
    const s = yield* OrchestratorState
    const router = yield* Router
    const lifecycle = yield* Lifecycle
    const log = yield* EventLog

    const run = (self: AgentId, tool: string, args: unknown): Effect.Effect<unknown, unknown> => {
      switch (tool) {
        case "send_message":
          return decode(SendMessageArgs, tool, args).pipe(
            Effect.flatMap((a) => router.sendFrom(self, a)),
            Effect.map((r) => ({ status: "sent", ...r }))
          )
        case "broadcast":
          return decode(BroadcastArgs, tool, args).pipe(
            Effect.flatMap((a) => router.broadcast(self, a.text)),
            Effect.map((r) => ({ status: "sent", ...r }))
          )
        case "check_inbox":
          return decode(CheckInboxArgs, tool, args).pipe(
            Effect.filterOrFail(
              () => args === null || args === undefined || typeof args !== "object" || Object.keys(args).length === 0,
              () => new ToolFailure("invalid_arguments", "check_inbox takes no arguments")
            ),
            Effect.flatMap(() => router.checkInbox(self)),
            Effect.map((msgs) => ({
              messages: msgs.map((m) => ({
                from: senderName(m),
                kind: m.kind,
                text: m.payload,
                message_id: m.id
              }))
            }))
          )
        case "spawn_agent":
          return decode(SpawnAgentArgs, tool, args).pipe(
            Effect.flatMap((a) => lifecycle.spawn(self, a)),
            Effect.map((n) => ({ status: "created", agent_id: n.id, name: n.name }))
          )
        case "inspect_agent":
          return decode(InspectAgentArgs, tool, args).pipe(
            Effect.flatMap((a) => {
              const r = s.tree.resolve(self, a.name)
              return r._tag === "Left" ? Effect.fail(r.left) : Effect.succeed(r.right)
            }),
            Effect.flatMap((n) => {
              const i = inspectionOf(s, n.id)
              return i
                ? Effect.succeed(i)
                : Effect.fail(new ToolFailure("not_found", `agent ${n.name} is gone`))
            })
          )
        default:
          return Effect.fail(
            new ToolFailure("unknown_tool", `unknown tool "${tool}"; tools: ${Object.keys(toolCatalog).join(", ")}`)
          )
      }
    }

    const toResult = (e: unknown): ToolResult => {
      if (e instanceof ToolFailure) return { is_error: true, result: { error: { type: e.type, message: e.message, ...e.extra } } }
      if (typeof e === "object" && e !== null && "_tag" in e) {
        const tag = String(e._tag)
        const message = "message" in e ? String(e.message) : tag
        if (tag === "RoutingError" && "reason" in e) {
          return { is_error: true, result: { error: { type: "routing_error", reason: e.reason, message } } }
        }
        if (tag === "InvalidInputError" && "field" in e) {
          const type = e.field === "name" && message.includes("taken") ? "name_taken" : "invalid_arguments"
          return { is_error: true, result: { error: { type, field: e.field, message } } }
        }
        if (tag === "NotFoundError") return { is_error: true, result: { error: { type: "not_found", message } } }
        return { is_error: true, result: { error: { type: "internal", message } } }
      }
      return { is_error: true, result: { error: { type: "internal", message: String(e) } } }
    }

    /** The tools as seen by one agent (its identity is fixed here, never taken from arguments). */
    const forAgent = (self: AgentId): ToolInvoker => ({
      invoke: (tool, args) =>
        Effect.gen(function*() {
          const call_id = randomUUID()
          const session = s.tree.get(self)?.session_id
          if (session) {
            yield* log.append(session, makeEvent("tool_call.invoked", { call_id, tool, arguments: asJson(args ?? {}) })).pipe(
              Effect.ignore
            )
          }
          const out: ToolResult = session
            ? yield* run(self, tool, args).pipe(
              Effect.map((result): ToolResult => ({ is_error: false, result })),
              Effect.catchAll((e) => Effect.succeed(toResult(e)))
            )
            : { is_error: true, result: { error: { type: "not_found", message: "this agent was terminated" } } }
          const after = s.tree.get(self)?.session_id
          if (after) {
            yield* log.append(after, makeEvent("tool_call.result", { call_id, tool, result: asJson(out.result), is_error: out.is_error }))
              .pipe(Effect.ignore)
          }
          return out
        }).pipe(Effect.withSpan("ToolHandler.invoke", { attributes: { tool } }))
    })

    return { forAgent } as const
  })
}) {}
