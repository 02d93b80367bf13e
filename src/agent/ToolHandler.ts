// ToolHandler: the tool catalog of seed 002 for one agent. Every tool returns at once with a
// JSON value; failures are JSON too: {"error": {"type", "message", ...}}. Arguments are decoded
// with the catalog's Schemas (src/domain/tools.ts; unknown keys rejected). Each call is logged as
// `tool_call.invoked` and `tool_call.result` in the calling agent's log. Each tool keeps its
// typed error union; `toResult` maps the tags to the JSON error types in one place.
import { Data, Effect, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import type { EventLogError, InvalidInputError, NotFoundError, RoutingError, SessionStoreError } from "../domain/errors.js"
import { type EventData, makeEvent } from "../domain/events.js"
import type { AgentId } from "../domain/ids.js"
import {
  AskHumanArgs,
  BroadcastArgs,
  CheckInboxArgs,
  InspectAgentArgs,
  isToolName,
  SendMessageArgs,
  SpawnAgentArgs,
  toolArgs,
  toolDescriptions,
  type ToolName,
  toolNames
} from "../domain/tools.js"
import type { ToolInvoker, ToolResult } from "../provider/Provider.js"
import { EventLog } from "../storage/EventLog.js"
import { Tracing } from "../telemetry/Tracing.js"
import { Delivery } from "./Delivery.js"
import { Inspection } from "./Inspection.js"
import { senderName } from "./Prompt.js"
import { Router } from "./Router.js"
import { Quotas } from "./Quotas.js"
import { type CapError, SpawnQueue } from "./SpawnQueue.js"
import { Tree } from "./Tree.js"
import { HumanDesk, TurnGate } from "./TurnGate.js"

export { AskHumanArgs, BroadcastArgs, CheckInboxArgs, InspectAgentArgs, SendMessageArgs, SpawnAgentArgs, type ToolName }

/** The catalog, with a one-line description each (for MCP tool listings): the domain's, per tool. */
export const toolCatalog: { readonly [K in ToolName]: { readonly args: (typeof toolArgs)[K]; readonly description: string } } = {
  send_message: { args: toolArgs.send_message, description: toolDescriptions.send_message },
  broadcast: { args: toolArgs.broadcast, description: toolDescriptions.broadcast },
  check_inbox: { args: toolArgs.check_inbox, description: toolDescriptions.check_inbox },
  spawn_agent: { args: toolArgs.spawn_agent, description: toolDescriptions.spawn_agent },
  inspect_agent: { args: toolArgs.inspect_agent, description: toolDescriptions.inspect_agent },
  ask_human: { args: toolArgs.ask_human, description: toolDescriptions.ask_human }
}

type Json = EventData<"tool_call.result">["result"]
/** Tool arguments/results are logged as plain JSON: round-trip through JSON (drops class prototypes, undefined). */
const asJson = (u: unknown): Json => JSON.parse(JSON.stringify(u ?? null)) as Json

/** A tool failure that is not one of the domain errors (bad arguments, unknown tool, agent gone). */
class ToolFailure extends Data.TaggedError("ToolFailure")<{ readonly type: string; readonly message: string }> {}

const decode = <A, I>(schema: Schema.Schema<A, I>, tool: string, args: unknown) =>
  Schema.decodeUnknown(schema, { onExcessProperty: "error" })(args ?? {}).pipe(
    Effect.mapError((e) => new ToolFailure({ type: "invalid_arguments", message: `${tool}: ${e.message}` }))
  )

const failed = (error: Record<string, unknown>): ToolResult => ({ is_error: true, result: { error } })

/** Every way a tool can fail: the operations' typed errors, and ToolFailure. */
type ToolError = ToolFailure | CapError | RoutingError | InvalidInputError | NotFoundError | EventLogError | SessionStoreError

/** The JSON error of a failed tool, by tag (anything not the caller's doing is `internal`). */
const toResult = (eff: Effect.Effect<unknown, ToolError>): Effect.Effect<ToolResult> =>
  eff.pipe(
    Effect.map((result): ToolResult => ({ is_error: false, result })),
    Effect.catchTags({
      ToolFailure: (e) => Effect.succeed(failed({ type: e.type, message: e.message })),
      CapError: (e) => Effect.succeed(failed({ type: "cap_reached", cap: e.cap, message: e.message })),
      RoutingError: (e) => Effect.succeed(failed({ type: "routing_error", reason: e.reason, message: e.message })),
      InvalidInputError: (e) =>
        Effect.succeed(failed({
          type: e.code ?? "invalid_arguments",
          field: e.field,
          message: e.message
        })),
      NotFoundError: (e) => Effect.succeed(failed({ type: "not_found", message: e.message })),
      EventLogError: (e) => Effect.succeed(failed({ type: "internal", message: e.message })),
      SessionStoreError: (e) => Effect.succeed(failed({ type: "internal", message: e.message }))
    })
  )

export class ToolHandler extends Effect.Service<ToolHandler>()("substrat/ToolHandler", {
  effect: Effect.gen(function*() {
    const tree = yield* Tree
    const tracing = yield* Tracing
    const router = yield* Router
    const delivery = yield* Delivery
    const spawns = yield* SpawnQueue
    const inspection = yield* Inspection
    const log = yield* EventLog
    const quotas = yield* Quotas
    const gate = Option.getOrNull(yield* Effect.serviceOption(TurnGate))
    const desk = Option.getOrNull(yield* Effect.serviceOption(HumanDesk))
    const nodeOf = (self: AgentId) =>
      Effect.suspend(() => {
        const n = tree.get(self)
        return n ? Effect.succeed(n) : Effect.fail(new ToolFailure({ type: "not_found", message: "this agent was terminated" }))
      })
    /** A spawn is refused while a budget on the spawner's path is spent. */
    const spawnAllowed = (self: AgentId) =>
      gate === null ? Effect.void : nodeOf(self).pipe(
        Effect.flatMap(gate.maySpawn),
        Effect.flatMap((why) => why === null ? Effect.void : Effect.fail(new ToolFailure({ type: "budget_exhausted", message: `spawn refused: ${why}` })))
      )

    const run = (self: AgentId, tool: ToolName, args: unknown): Effect.Effect<ToolResult> => {
      switch (tool) {
        case "send_message":
          return toResult(decode(SendMessageArgs, tool, args).pipe(
            Effect.flatMap((a) => router.sendFrom(self, a)),
            Effect.map((r) => ({ status: "sent", ...r }))
          ))
        case "broadcast":
          return toResult(decode(BroadcastArgs, tool, args).pipe(
            Effect.flatMap((a) => router.broadcast(self, a.text)),
            Effect.map((r) => ({ status: "sent", ...r }))
          ))
        case "check_inbox":
          return toResult(decode(CheckInboxArgs, tool, args).pipe(
            Effect.flatMap(() => delivery.checkInbox(self)),
            Effect.map((msgs) => ({
              messages: msgs.map((m) => ({ from: senderName(m), kind: m.kind, text: m.payload, message_id: m.id }))
            }))
          ))
        case "spawn_agent":
          return toResult(decode(SpawnAgentArgs, tool, args).pipe(
            Effect.tap(() => spawnAllowed(self)),
            Effect.flatMap(({ budget_tokens, budget_turns, budget_usd, ...a }) => {
              const budget = {
                ...(budget_usd === undefined ? {} : { usd: budget_usd }),
                ...(budget_tokens === undefined ? {} : { tokens: budget_tokens }),
                ...(budget_turns === undefined ? {} : { turns: budget_turns })
              }
              return spawns.spawn(self, Object.keys(budget).length === 0 ? a : { ...a, budget })
            })
          ))
        case "inspect_agent":
          return toResult(decode(InspectAgentArgs, tool, args).pipe(
            Effect.flatMap((a) => tree.current().resolve(self, a.name)),
            Effect.flatMap((n) => {
              const i = inspection.inspect(n.id)
              return i ? Effect.succeed(i) : new ToolFailure({ type: "not_found", message: `agent ${n.name} is gone` })
            })
          ))
        case "ask_human":
          return toResult(decode(AskHumanArgs, tool, args).pipe(
            Effect.flatMap((a) =>
              desk === null
                ? Effect.fail(new ToolFailure({ type: "unavailable", message: "ask_human: this daemon has no human inbox" }))
                : Effect.flatMap(nodeOf(self), (n) =>
                  desk.ask(n, a.question).pipe(Effect.mapError((e) => new ToolFailure({ type: "internal", message: e.message }))))
            ),
            Effect.map((r) => ({
              status: "asked",
              item_id: r.item_id,
              note: "End your turn now. You are paused until the human answers; the answer arrives as your next message."
            }))
          ))
      }
    }

    /** The tools as seen by one agent (its identity is fixed here, never taken from arguments). */
    const forAgent = (self: AgentId): ToolInvoker => ({
      invoke: (tool, args) =>
        Effect.gen(function*() {
          const call_id = randomUUID()
          const session = tree.get(self)?.session_id
          if (session) {
            yield* log.append(session, makeEvent("tool_call.invoked", { call_id, tool, arguments: asJson(args ?? {}) })).pipe(
              Effect.ignore
            )
          }
          const out: ToolResult = !session
            ? failed({ type: "not_found", message: "this agent was terminated" })
            : isToolName(tool)
            ? yield* run(self, tool, args)
            : failed({ type: "unknown_tool", message: `unknown tool "${tool}"; tools: ${toolNames.join(", ")}` })
          const after = tree.get(self)?.session_id
          if (after) {
            yield* log.append(after, makeEvent("tool_call.result", { call_id, tool, result: asJson(out.result), is_error: out.is_error }))
              .pipe(Effect.ignore)
          }
          return out
        }).pipe((call) => (isToolName(tool) ? quotas.guard(self, tool, args, call) : call), (call) => {
          if (!tracing.enabled) return Effect.withSpan(call, "ToolHandler.invoke", { attributes: { tool } })
          // Below the agent's running turn, also when the call came over its socket (another fiber).
          const session = tree.get(self)?.session_id
          const turn = session === undefined ? undefined : tracing.turnOf(session)
          return Effect.withSpan(Effect.tap(call, (out) => Effect.annotateCurrentSpan("error", out.is_error)), "tool_call", {
            ...(turn === undefined ? {} : { parent: turn }),
            attributes: { "gen_ai.tool.name": tool, "substrat.tool.source": "substrat", "gen_ai.agent.id": self }
          })
        })
    })

    return { forAgent } as const
  })
}) {}
