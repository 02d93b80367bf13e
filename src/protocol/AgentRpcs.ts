// The agent socket's protocol (ARCHITECTURE §6): exactly the tool methods, nothing else. Same
// framing as the admin socket (NDJSON JSON-RPC 2.0 through @effect/rpc). No method takes an
// agent id: the server is built for one agent and the socket *is* the caller's identity.
// Shared by the daemon side (AgentSocket.ts) and the MCP server (McpServer.ts); keep it free of
// daemon/orchestrator imports.
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import { Schema } from "effect"
import { JsonValue } from "../domain/events.js"
import { AskHumanArgs, BroadcastArgs, CheckInboxArgs, InspectAgentArgs, SendMessageArgs, SpawnAgentArgs } from "../domain/tools.js"

/** JSON-RPC `error.code` of a tool failure (the admin socket uses -32000…-32003). */
export const ToolErrorCode = -32010

/**
 * A tool call that failed inside the daemon: a routing error, a name taken, an agent gone, …
 * `error` is the whole JSON object the ToolHandler returned (`{type, message, ...details}`),
 * the same value in-process providers see; `type` and `message` are copied out of it.
 */
export class ToolError extends Schema.TaggedError<ToolError>()("ToolError", {
  code: Schema.optionalWith(Schema.Number, { default: () => ToolErrorCode }),
  type: Schema.String,
  message: Schema.String,
  error: JsonValue
}) {}

export class SendMessageRpc extends Rpc.make("send_message", { payload: SendMessageArgs, success: JsonValue, error: ToolError }) {}
export class BroadcastRpc extends Rpc.make("broadcast", { payload: BroadcastArgs, success: JsonValue, error: ToolError }) {}
export class CheckInboxRpc extends Rpc.make("check_inbox", { payload: CheckInboxArgs, success: JsonValue, error: ToolError }) {}
export class SpawnAgentRpc extends Rpc.make("spawn_agent", { payload: SpawnAgentArgs, success: JsonValue, error: ToolError }) {}
export class InspectAgentRpc extends Rpc.make("inspect_agent", { payload: InspectAgentArgs, success: JsonValue, error: ToolError }) {}

export class AskHumanRpc extends Rpc.make("ask_human", { payload: AskHumanArgs, success: JsonValue, error: ToolError }) {}

export class AgentRpcs extends RpcGroup.make(SendMessageRpc, BroadcastRpc, CheckInboxRpc, SpawnAgentRpc, InspectAgentRpc, AskHumanRpc) {}
