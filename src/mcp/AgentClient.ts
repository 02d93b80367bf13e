// One tool call through an agent socket, as the MCP server (or any in-sandbox client) makes it:
// check the tool name, decode the arguments with the catalog's Schema (unknown keys rejected),
// connect, call, disconnect. Never fails: every outcome is a ToolResult, errors as
// `{"error": {"type", "message", ...}}` — the same JSON the ToolHandler gives in-process providers.
// A connection per call: tool calls are few, a Unix connect is cheap, and a daemon that went
// away (or came back) is seen at once instead of through a reconnect schedule.
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as RpcClient from "@effect/rpc/RpcClient"
import type { RpcClientError } from "@effect/rpc/RpcClientError"
import type * as RpcGroup from "@effect/rpc/RpcGroup"
import type * as RpcSerialization from "@effect/rpc/RpcSerialization"
import { Duration, Effect, Layer, ParseResult, Schema } from "effect"
import * as fs from "node:fs"
import { AgentRpcs, ToolError } from "../protocol/AgentRpcs.js"
import {
  AskHumanArgs,
  BroadcastArgs,
  CheckInboxArgs,
  InspectAgentArgs,
  isToolName,
  SendMessageArgs,
  SpawnAgentArgs,
  type ToolName,
  toolNames
} from "../domain/tools.js"

export type AgentRpcClient = RpcClient.RpcClient<RpcGroup.Rpcs<typeof AgentRpcs>, RpcClientError>

/** The outcome of one tool call (same shape as the provider port's ToolResult). */
export interface ToolOutcome {
  readonly is_error: boolean
  readonly result: unknown
}

const failure = (type: string, message: string, extra: Record<string, unknown> = {}): ToolOutcome => ({
  is_error: true,
  result: { error: { type, message, ...extra } }
})

type Call = (client: AgentRpcClient) => Effect.Effect<unknown, ToolError | RpcClientError>

const decodeArgs = <A, I>(schema: Schema.Schema<A, I>, args: unknown) =>
  Schema.decodeUnknown(schema, { errors: "all", onExcessProperty: "error" })(args ?? {})

/** Decode the arguments before anything touches the socket. */
const prepare = (tool: ToolName, args: unknown): Effect.Effect<Call, ParseResult.ParseError> => {
  switch (tool) {
    case "send_message":
      return Effect.map(decodeArgs(SendMessageArgs, args), (a): Call => (c) => c.send_message(a))
    case "broadcast":
      return Effect.map(decodeArgs(BroadcastArgs, args), (a): Call => (c) => c.broadcast(a))
    case "check_inbox":
      return Effect.map(decodeArgs(CheckInboxArgs, args), (a): Call => (c) => c.check_inbox(a))
    case "spawn_agent":
      return Effect.map(decodeArgs(SpawnAgentArgs, args), (a): Call => (c) => c.spawn_agent(a))
    case "inspect_agent":
      return Effect.map(decodeArgs(InspectAgentArgs, args), (a): Call => (c) => c.inspect_agent(a))
    case "ask_human":
      return Effect.map(decodeArgs(AskHumanArgs, args), (a): Call => (c) => c.ask_human(a))
  }
}

const codeIn = (u: unknown, depth = 0): string | undefined => {
  if (depth > 6 || typeof u !== "object" || u === null) return undefined
  if ("code" in u && typeof u.code === "string") return u.code
  return "cause" in u ? codeIn(u.cause, depth + 1) : undefined
}

const unreachable = (socket: string, why: string): ToolOutcome =>
  failure(
    "daemon_unavailable",
    `cannot reach the Substrat daemon through ${socket} (${why}); the tool was not run. ` +
      "The daemon may be stopped or restarting, or this agent was terminated."
  )

export interface CallOptions {
  /** The agent socket (inside a sandbox: where it is bound). */
  readonly socket: string
  /** Give up on a daemon that does not answer after this long (default 30 s). */
  readonly timeoutMs?: number | undefined
}

/** Call `tool` with raw (JSON) `args` through the agent socket. */
export const callTool = (
  options: CallOptions,
  tool: string,
  args: unknown
): Effect.Effect<ToolOutcome, never, RpcSerialization.RpcSerialization> => {
  const { socket } = options
  if (!isToolName(tool)) {
    return Effect.succeed(failure("unknown_tool", `unknown tool "${tool}"; tools: ${toolNames.join(", ")}`))
  }
  return prepare(tool, args).pipe(
    Effect.matchEffect({
      onFailure: (e) =>
        Effect.succeed(
          failure("invalid_arguments", `${tool}: ${ParseResult.TreeFormatter.formatErrorSync(e)}`)
        ),
      onSuccess: (call) =>
        !fs.existsSync(socket)
          ? Effect.succeed(unreachable(socket, "no such socket"))
          : Effect.scoped(Effect.flatMap(RpcClient.make(AgentRpcs), call)).pipe(
            Effect.provide(
              RpcClient.layerProtocolSocket().pipe(Layer.provide(NodeSocket.layerNet({ path: socket })))
            ),
            Effect.timeoutFail({
              duration: Duration.millis(options.timeoutMs ?? 30_000),
              onTimeout: () => "timeout" as const
            }),
            Effect.match({
              onSuccess: (result): ToolOutcome => ({ is_error: false, result }),
              onFailure: (e): ToolOutcome => {
                if (e === "timeout") {
                  return failure(
                    "daemon_unavailable",
                    `the Substrat daemon did not answer within ${options.timeoutMs ?? 30_000} ms (${socket}); the call may or may not have taken effect`
                  )
                }
                if (e instanceof ToolError) return { is_error: true, result: { error: e.error ?? { type: e.type, message: e.message } } }
                return unreachable(socket, codeIn(e.cause) ?? e.message)
              }
            })
          )
    })
  )
}
