// cursor-agent's `--print --output-format stream-json` lines, as Schemas (lenient: unknown fields
// ignored, unknown line types kept by type). NOT verified against the real binary (it cannot be
// installed here). Sources, read 2026: Cursor's reference page
// https://cursor.com/docs/cli/reference/output-format (system/init, user, assistant, tool_call
// started/completed with a `<kind>ToolCall` key holding `args` and, when completed, `result`,
// terminal `result`); the MCP call's inner shape (`mcpToolCall.args.{name, toolName,
// providerIdentifier, args}`, `result.success.content[].text.text`, `isError`) follows
// third-party parsers of Cursor's agent protocol and is the least certain part — the decoder
// therefore also accepts plain strings / `{type:"text",text}` blocks.
import { Either, ParseResult, Schema } from "effect"

export const SystemInit = Schema.Struct({
  type: Schema.Literal("system"),
  subtype: Schema.Literal("init"),
  session_id: Schema.String,
  cwd: Schema.optional(Schema.String),
  model: Schema.optional(Schema.String),
  apiKeySource: Schema.optional(Schema.String),
  permissionMode: Schema.optional(Schema.String)
})
export type SystemInit = typeof SystemInit.Type

const TextPart = Schema.Struct({ type: Schema.String, text: Schema.optional(Schema.String) })

export const Message = Schema.Struct({
  role: Schema.String,
  content: Schema.Union(Schema.String, Schema.Array(TextPart))
})

export const User = Schema.Struct({ type: Schema.Literal("user"), message: Message, session_id: Schema.optional(Schema.String) })
export const Assistant = Schema.Struct({
  type: Schema.Literal("assistant"),
  message: Message,
  session_id: Schema.optional(Schema.String)
})
export type Assistant = typeof Assistant.Type

/** `tool_call: { "<kind>ToolCall": { args, result? } }` — kind e.g. read, write, shell, mcp. */
export const ToolCallLine = Schema.Struct({
  type: Schema.Literal("tool_call"),
  subtype: Schema.Literal("started", "completed"),
  call_id: Schema.String,
  tool_call: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  session_id: Schema.optional(Schema.String)
})
export type ToolCallLine = typeof ToolCallLine.Type

export const Result = Schema.Struct({
  type: Schema.Literal("result"),
  subtype: Schema.String,
  is_error: Schema.Boolean,
  result: Schema.optional(Schema.String),
  session_id: Schema.String,
  duration_ms: Schema.optional(Schema.Number),
  duration_api_ms: Schema.optional(Schema.Number),
  request_id: Schema.optional(Schema.String),
  /** Not in Cursor's docs (it reports no usage); accepted if a version sends it. */
  usage: Schema.optional(Schema.Struct({
    inputTokens: Schema.optional(Schema.Number),
    outputTokens: Schema.optional(Schema.Number),
    input_tokens: Schema.optional(Schema.Number),
    output_tokens: Schema.optional(Schema.Number)
  }))
})
export type Result = typeof Result.Type

const known: ReadonlyArray<string> = ["system", "user", "assistant", "tool_call", "result"]
export const SystemOther = Schema.Struct({
  type: Schema.Literal("system"),
  subtype: Schema.String.pipe(Schema.filter((s) => s !== "init"))
})
export const Other = Schema.Struct({ type: Schema.String.pipe(Schema.filter((t) => !known.includes(t))) })

export const StreamJsonLine = Schema.Union(SystemInit, SystemOther, User, Assistant, ToolCallLine, Result, Other)
export type StreamJsonLine = typeof StreamJsonLine.Type

const decodeJson = Schema.decodeUnknownEither(Schema.parseJson(StreamJsonLine))
export const decodeLine = (line: string): Either.Either<StreamJsonLine, ParseResult.ParseError> => decodeJson(line)

export const isInit: (l: StreamJsonLine) => l is SystemInit = Schema.is(SystemInit)
export const isAssistant: (l: StreamJsonLine) => l is Assistant = Schema.is(Assistant)
export const isToolCall: (l: StreamJsonLine) => l is ToolCallLine = Schema.is(ToolCallLine)
export const isResult: (l: StreamJsonLine) => l is Result = Schema.is(Result)

export const messageText = (m: typeof Message.Type): string =>
  typeof m.content === "string" ? m.content : m.content.map((p) => (p.type === "text" ? p.text ?? "" : "")).join("")

const rec = (u: unknown): Record<string, unknown> | null =>
  typeof u === "object" && u !== null && !Array.isArray(u) ? (u as Record<string, unknown>) : null

/** The text of MCP-ish content: a string, `[{text:{text}}]`, or `[{type:"text",text}]`. */
const contentText = (content: unknown): string => {
  if (typeof content === "string") return content
  if (!Array.isArray(content)) return ""
  return content.map((c) => {
    const r = rec(c)
    if (r === null) return ""
    if (typeof r["text"] === "string") return r["text"]
    const inner = rec(r["text"])
    return inner !== null && typeof inner["text"] === "string" ? inner["text"] : ""
  }).join("\n")
}

export interface ToolCallView {
  /** `mcp` for MCP tools, else the built-in kind (`shell`, `read`, `edit`, …). */
  readonly kind: string
  /** MCP: the tool's own name (`send_message`); built-ins: the kind. */
  readonly tool: string
  /** MCP: the server (`providerIdentifier`), else null. */
  readonly server: string | null
  readonly args: unknown
  /** Completed calls only. */
  readonly result?: { readonly text: string | null; readonly value: unknown; readonly isError: boolean }
}

/** Interpret a `tool_call` line's payload (the `<kind>ToolCall` key). */
export const viewToolCall = (l: ToolCallLine): ToolCallView | null => {
  const entry = Object.entries(l.tool_call).find(([k]) => k.endsWith("ToolCall"))
  if (entry === undefined) return null
  const kind = entry[0].slice(0, -"ToolCall".length)
  const body = rec(entry[1]) ?? {}
  const args = body["args"]
  let tool = kind
  let server: string | null = null
  let callArgs: unknown = args ?? {}
  if (kind === "mcp") {
    const a = rec(args) ?? {}
    server = typeof a["providerIdentifier"] === "string" ? a["providerIdentifier"] : null
    tool = typeof a["toolName"] === "string" ? a["toolName"] : typeof a["name"] === "string" ? a["name"] : "unknown"
    callArgs = a["args"] ?? {}
  }
  if (l.subtype !== "completed" || body["result"] === undefined) return { kind, tool, server, args: callArgs }
  const result = rec(body["result"]) ?? {}
  const success = rec(result["success"])
  if (success !== null) {
    const text = success["content"] !== undefined ? contentText(success["content"]) : null
    return { kind, tool, server, args: callArgs, result: { text, value: success, isError: success["isError"] === true } }
  }
  const failure = rec(result["error"]) ?? rec(result["rejected"]) ?? result
  const message = typeof failure["message"] === "string" ? failure["message"] : typeof failure["reason"] === "string" ? failure["reason"] : null
  return { kind, tool, server, args: callArgs, result: { text: message, value: failure, isError: true } }
}
