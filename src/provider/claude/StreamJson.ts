// Claude Code's `--output-format stream-json --verbose` lines, as Schemas, and pure decoders.
// Shapes taken from real output of @anthropic-ai/claude-code 2.1.330 (test/fixtures/claude-stream-json/).
// Only the fields we use are declared; everything else on a line is ignored on decode. No mapping to
// provider events here: that belongs to the claude provider layer.
import { Either, ParseResult, Schema } from "effect"

// --- content blocks ----------------------------------------------------------------------------

export const TextBlock = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })
export const ThinkingBlock = Schema.Struct({
  type: Schema.Literal("thinking"),
  thinking: Schema.String,
  signature: Schema.optional(Schema.String)
})
export const ToolUseBlock = Schema.Struct({
  type: Schema.Literal("tool_use"),
  id: Schema.String,
  /** `mcp__<server>__<tool>` for MCP tools, else a built-in (Bash, Read, …). */
  name: Schema.String,
  input: Schema.Unknown
})
/** What a tool returned: a string, or MCP-style content blocks (`[{ type: "text", text }]`). */
export const ToolResultContent = Schema.Union(
  Schema.String,
  Schema.Array(Schema.Union(TextBlock, Schema.Struct({ type: Schema.String })))
)
export const ToolResultBlock = Schema.Struct({
  type: Schema.Literal("tool_result"),
  tool_use_id: Schema.String,
  content: Schema.optional(ToolResultContent),
  is_error: Schema.optional(Schema.Boolean)
})

const knownBlockTypes: ReadonlyArray<string> = ["text", "thinking", "tool_use", "tool_result"]
/** Any other block (redacted_thinking, image, server tool blocks, …): kept by type only. */
export const OtherBlock = Schema.Struct({
  type: Schema.String.pipe(Schema.filter((t) => !knownBlockTypes.includes(t)))
})

export const ContentBlock = Schema.Union(TextBlock, ThinkingBlock, ToolUseBlock, ToolResultBlock, OtherBlock)
export type ContentBlock = typeof ContentBlock.Type

export const Usage = Schema.Struct({
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  cache_creation_input_tokens: Schema.optional(Schema.NullOr(Schema.Number)),
  cache_read_input_tokens: Schema.optional(Schema.NullOr(Schema.Number))
})
export type Usage = typeof Usage.Type

// --- lines -------------------------------------------------------------------------------------

/** First line of every run: the session id (the resume handle), tools, MCP server status. */
export const SystemInit = Schema.Struct({
  type: Schema.Literal("system"),
  subtype: Schema.Literal("init"),
  session_id: Schema.String,
  cwd: Schema.String,
  model: Schema.String,
  tools: Schema.Array(Schema.String),
  mcp_servers: Schema.Array(Schema.Struct({ name: Schema.String, status: Schema.String })),
  permissionMode: Schema.optional(Schema.String),
  claude_code_version: Schema.optional(Schema.String)
})
export type SystemInit = typeof SystemInit.Type

/** Other system lines (`thinking_tokens`, `compact_boundary`, hook and status notices, …). */
export const SystemOther = Schema.Struct({
  type: Schema.Literal("system"),
  subtype: Schema.String.pipe(Schema.filter((s) => s !== "init")),
  session_id: Schema.optional(Schema.String)
})
export type SystemOther = typeof SystemOther.Type

/**
 * One assistant content block per line (Claude Code splits a message into several lines sharing
 * `message.id`). A failed API call also arrives as an assistant line: a synthetic text block
 * "API Error: …" with `is_api_error_message: true` and `api_error_status`.
 */
export const Assistant = Schema.Struct({
  type: Schema.Literal("assistant"),
  session_id: Schema.String,
  parent_tool_use_id: Schema.NullOr(Schema.String),
  message: Schema.Struct({
    id: Schema.String,
    model: Schema.String,
    role: Schema.Literal("assistant"),
    content: Schema.Array(ContentBlock),
    stop_reason: Schema.optional(Schema.NullOr(Schema.String)),
    usage: Schema.optional(Usage)
  }),
  error: Schema.optional(Schema.String),
  is_api_error_message: Schema.optional(Schema.Boolean),
  api_error_status: Schema.optional(Schema.NullOr(Schema.Number))
})
export type Assistant = typeof Assistant.Type

/** Tool results going back to the model (and, with `--input-format stream-json`, echoed prompts). */
export const User = Schema.Struct({
  type: Schema.Literal("user"),
  session_id: Schema.String,
  parent_tool_use_id: Schema.NullOr(Schema.String),
  message: Schema.Struct({
    role: Schema.Literal("user"),
    content: Schema.Union(Schema.String, Schema.Array(ContentBlock))
  })
})
export type User = typeof User.Type

/**
 * Last line of a run. `is_error` is the verdict: an API failure ends with `subtype: "success"`
 * and `is_error: true` (seen with 400 and 529); other subtypes are `error_max_turns`,
 * `error_during_execution`. `session_id` is the same as in `system/init` (also after `--resume`).
 */
export const Result = Schema.Struct({
  type: Schema.Literal("result"),
  subtype: Schema.String,
  is_error: Schema.Boolean,
  session_id: Schema.String,
  result: Schema.optional(Schema.String),
  num_turns: Schema.Number,
  duration_ms: Schema.Number,
  duration_api_ms: Schema.optional(Schema.Number),
  total_cost_usd: Schema.Number,
  usage: Usage,
  stop_reason: Schema.optional(Schema.NullOr(Schema.String)),
  terminal_reason: Schema.optional(Schema.String),
  api_error_status: Schema.optional(Schema.NullOr(Schema.Number))
})
export type Result = typeof Result.Type

const knownTypes: ReadonlyArray<string> = ["system", "assistant", "user", "result"]
/** Lines of other types (`stream_event` with --include-partial-messages, rate-limit notices, …). */
export const Other = Schema.Struct({
  type: Schema.String.pipe(Schema.filter((t) => !knownTypes.includes(t)))
})
export type Other = typeof Other.Type

export const StreamJsonLine = Schema.Union(SystemInit, SystemOther, Assistant, User, Result, Other)
export type StreamJsonLine = typeof StreamJsonLine.Type

// --- decoding ----------------------------------------------------------------------------------

const decodeJsonLine = Schema.decodeUnknownEither(Schema.parseJson(StreamJsonLine))

/** Decode one stdout line. A line that is not JSON, or a known type with a wrong shape, is a ParseError. */
export const decodeLine = (line: string): Either.Either<StreamJsonLine, ParseResult.ParseError> => decodeJsonLine(line)

/** Decode a whole captured output (blank lines skipped); the first bad line fails it. */
export const decodeAll = (text: string): Either.Either<ReadonlyArray<StreamJsonLine>, ParseResult.ParseError> =>
  Either.all(text.split("\n").filter((l) => l.trim() !== "").map(decodeLine))

// --- small pure views --------------------------------------------------------------------------

export const isInit: (l: StreamJsonLine) => l is SystemInit = Schema.is(SystemInit)
export const isResult: (l: StreamJsonLine) => l is Result = Schema.is(Result)
export const isAssistant: (l: StreamJsonLine) => l is Assistant = Schema.is(Assistant)
export const isUser: (l: StreamJsonLine) => l is User = Schema.is(User)

const isText = Schema.is(TextBlock)
const isToolUse = Schema.is(ToolUseBlock)
const isToolResult = Schema.is(ToolResultBlock)

/** The text blocks of an assistant line, joined. */
export const assistantText = (l: Assistant): string =>
  l.message.content.filter(isText).map((b) => b.text).join("")

export const toolUses = (l: Assistant): ReadonlyArray<typeof ToolUseBlock.Type> => l.message.content.filter(isToolUse)

export const toolResults = (l: User): ReadonlyArray<typeof ToolResultBlock.Type> =>
  typeof l.message.content === "string" ? [] : l.message.content.filter(isToolResult)

/** A tool result's content as plain text. */
export const toolResultText = (b: typeof ToolResultBlock.Type): string =>
  b.content === undefined
    ? ""
    : typeof b.content === "string"
    ? b.content
    : b.content.filter(isText).map((c) => c.text).join("\n")
