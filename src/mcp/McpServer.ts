// The per-agent MCP server (`substrat mcp-server --socket <agent.sock>`, ARCHITECTURE §6):
// MCP over stdio to the provider CLI (Claude Code, Codex, cursor-agent), every tool call
// forwarded to the agent socket and answered at once.
//
// Built on the SDK's low-level `Server` with `tools/list` and `tools/call` handlers rather than
// `McpServer.registerTool`: in SDK 1.x `registerTool` takes only zod schemas (it validates
// with zod and converts zod to JSON Schema for listings), while our argument Schemas are
// effect Schemas. The low-level Server (which McpServer wraps) lets the listing carry the JSON
// Schemas derived from our Schemas (`JSONSchema.make`) and the call decode with the very same
// Schemas — one definition, no zod copy, no second validator.
//
// Effects run at this edge through one ManagedRuntime (stderr logging: stdout is the protocol).
// Keep the import graph small — this process is spawned for every provider turn: no daemon,
// no orchestrator, no @effect/cli.
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { CallToolRequestSchema, type CallToolResult, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { type Effect, Layer, Logger, ManagedRuntime } from "effect"
import type { Readable, Writable } from "node:stream"
import { callTool, type CallOptions, type ToolOutcome } from "./AgentClient.js"
import { toolGuidance } from "../domain/guidance.js"
import { inputJsonSchema, toolDescriptions, toolNames } from "../domain/tools.js"

export const serverName = "substrat"
export const serverVersion = "0.1.0"

export type McpServerOptions = CallOptions

/** What the `tools/list` answer carries. */
export const toolListing = () =>
  toolNames.map((name) => ({ name, description: toolDescriptions[name], inputSchema: inputJsonSchema(name) }))

/** A ToolOutcome as an MCP tool result: the JSON value as text; errors flagged `isError`. */
export const toCallToolResult = (o: ToolOutcome): CallToolResult => ({
  content: [{ type: "text", text: JSON.stringify(o.result) }],
  ...(o.is_error ? { isError: true } : {})
})

type Run = <A>(effect: Effect.Effect<A, never, RpcSerialization.RpcSerialization>) => Promise<A>

/** An MCP Server (not yet connected) forwarding every tool call through `run`. */
export const makeServer = (options: McpServerOptions, run: Run): Server => {
  const server = new Server(
    { name: serverName, version: serverVersion },
    { capabilities: { tools: {} }, instructions: toolGuidance }
  )
  const tools = toolListing()
  server.setRequestHandler(ListToolsRequestSchema, () => Promise.resolve({ tools }))
  server.setRequestHandler(CallToolRequestSchema, (request) =>
    run(callTool(options, request.params.name, request.params.arguments ?? {})).then(toCallToolResult))
  return server
}

/** The runtime of the edge: NDJSON JSON-RPC serialization for the socket, logs on stderr. */
export const EdgeLive = Layer.mergeAll(
  RpcSerialization.layerNdJsonRpc(),
  Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))
)

export interface Stdio {
  readonly stdin: Readable
  readonly stdout: Writable
}

/** Serve MCP on stdio until the client goes away (stdin ends or the transport closes). */
export const serveStdio = async (
  options: McpServerOptions,
  io: Stdio = { stdin: process.stdin, stdout: process.stdout }
): Promise<void> => {
  const runtime = ManagedRuntime.make(EdgeLive)
  const server = makeServer(options, (effect) => runtime.runPromise(effect))
  const closed = new Promise<void>((resolve) => {
    server.onclose = resolve
  })
  io.stdin.once("end", () => void server.close())
  await server.connect(new StdioServerTransport(io.stdin, io.stdout))
  await closed
  await runtime.dispose()
}
