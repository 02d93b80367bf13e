// `codex exec --json` JSONL events, as Schemas, and pure decoders.
// Shapes taken from real output of @openai/codex 0.169.0 (test/fixtures/codex-exec-json/), checked
// against codex-rs `exec_events.rs`. Only fields we use are declared; extra fields are ignored on
// decode. No mapping to provider events here: that belongs to the codex provider layer.
import { Either, ParseResult, Schema } from "effect"

// --- items -------------------------------------------------------------------------------------

/** The assistant's text. */
export const AgentMessage = Schema.Struct({ id: Schema.String, type: Schema.Literal("agent_message"), text: Schema.String })
/** A reasoning summary. */
export const Reasoning = Schema.Struct({ id: Schema.String, type: Schema.Literal("reasoning"), text: Schema.String })
/** A shell command Codex ran (its `exec_command` tool): `/bin/bash -lc '…'`. */
export const CommandExecution = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("command_execution"),
  command: Schema.String,
  aggregated_output: Schema.String,
  exit_code: Schema.optional(Schema.NullOr(Schema.Number)),
  /** in_progress | completed | failed | declined */
  status: Schema.String
})
export const McpContent = Schema.Union(
  Schema.Struct({ type: Schema.Literal("text"), text: Schema.String }),
  Schema.Struct({ type: Schema.String })
)
/** A call of an MCP tool: `server` is the `mcp_servers.<name>` key, `tool` the bare tool name. */
export const McpToolCall = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("mcp_tool_call"),
  server: Schema.String,
  tool: Schema.String,
  arguments: Schema.optional(Schema.Unknown),
  result: Schema.optional(Schema.NullOr(Schema.Struct({
    content: Schema.Array(McpContent),
    structured_content: Schema.optional(Schema.Unknown)
  }))),
  error: Schema.optional(Schema.NullOr(Schema.Struct({ message: Schema.String }))),
  /** in_progress | completed | failed */
  status: Schema.String
})
export const FileChange = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("file_change"),
  changes: Schema.Array(Schema.Struct({ path: Schema.String, kind: Schema.String })),
  status: Schema.String
})
export const WebSearch = Schema.Struct({ id: Schema.String, type: Schema.Literal("web_search"), query: Schema.optional(Schema.String) })
export const TodoList = Schema.Struct({
  id: Schema.String,
  type: Schema.Literal("todo_list"),
  items: Schema.Array(Schema.Struct({ text: Schema.String, completed: Schema.Boolean }))
})
/** A non-fatal error item, e.g. "Model metadata for `x` not found" (seen with every custom model name). */
export const ErrorItem = Schema.Struct({ id: Schema.String, type: Schema.Literal("error"), message: Schema.String })

const knownItemTypes: ReadonlyArray<string> = [
  "agent_message", "reasoning", "command_execution", "mcp_tool_call", "file_change", "web_search", "todo_list", "error"
]
export const OtherItem = Schema.Struct({
  id: Schema.String,
  type: Schema.String.pipe(Schema.filter((t) => !knownItemTypes.includes(t)))
})

export const ThreadItem = Schema.Union(
  AgentMessage, Reasoning, CommandExecution, McpToolCall, FileChange, WebSearch, TodoList, ErrorItem, OtherItem
)
export type ThreadItem = typeof ThreadItem.Type

// --- events ------------------------------------------------------------------------------------

/** First line: the thread id is the resume handle (`codex exec resume <thread_id>`); same id after resume. */
export const ThreadStarted = Schema.Struct({ type: Schema.Literal("thread.started"), thread_id: Schema.String })
export const TurnStarted = Schema.Struct({ type: Schema.Literal("turn.started") })
export const Usage = Schema.Struct({
  input_tokens: Schema.Number,
  cached_input_tokens: Schema.optional(Schema.Number),
  output_tokens: Schema.Number,
  reasoning_output_tokens: Schema.optional(Schema.Number),
  cache_write_input_tokens: Schema.optional(Schema.Number)
})
export type Usage = typeof Usage.Type
export const TurnCompleted = Schema.Struct({ type: Schema.Literal("turn.completed"), usage: Usage })
/** The turn failed (exit code 1 follows). An `error` event with the same message comes just before. */
export const TurnFailed = Schema.Struct({
  type: Schema.Literal("turn.failed"),
  error: Schema.Struct({ message: Schema.String })
})
export const ItemEvent = Schema.Struct({
  type: Schema.Literal("item.started", "item.updated", "item.completed"),
  item: ThreadItem
})
export const StreamError = Schema.Struct({ type: Schema.Literal("error"), message: Schema.String })

const knownEventTypes: ReadonlyArray<string> = [
  "thread.started", "turn.started", "turn.completed", "turn.failed", "item.started", "item.updated", "item.completed", "error"
]
export const OtherEvent = Schema.Struct({
  type: Schema.String.pipe(Schema.filter((t) => !knownEventTypes.includes(t)))
})

export const ExecJsonLine = Schema.Union(
  ThreadStarted, TurnStarted, TurnCompleted, TurnFailed, ItemEvent, StreamError, OtherEvent
)
export type ExecJsonLine = typeof ExecJsonLine.Type
export type ThreadStarted = typeof ThreadStarted.Type
export type TurnCompleted = typeof TurnCompleted.Type
export type TurnFailed = typeof TurnFailed.Type
export type ItemEvent = typeof ItemEvent.Type
export type StreamError = typeof StreamError.Type

// --- decoding ----------------------------------------------------------------------------------

const decodeJsonLine = Schema.decodeUnknownEither(Schema.parseJson(ExecJsonLine))

/** Decode one stdout line. A line that is not JSON, or a known type with a wrong shape, is a ParseError. */
export const decodeLine = (line: string): Either.Either<ExecJsonLine, ParseResult.ParseError> => decodeJsonLine(line)

/** Decode a whole captured output (blank lines skipped); the first bad line fails it. */
export const decodeAll = (text: string): Either.Either<ReadonlyArray<ExecJsonLine>, ParseResult.ParseError> =>
  Either.all(text.split("\n").filter((l) => l.trim() !== "").map(decodeLine))

export const isThreadStarted: (l: ExecJsonLine) => l is ThreadStarted = Schema.is(ThreadStarted)
export const isTurnCompleted: (l: ExecJsonLine) => l is TurnCompleted = Schema.is(TurnCompleted)
export const isTurnFailed: (l: ExecJsonLine) => l is TurnFailed = Schema.is(TurnFailed)
export const isItemEvent: (l: ExecJsonLine) => l is ItemEvent = Schema.is(ItemEvent)
export const isStreamError: (l: ExecJsonLine) => l is StreamError = Schema.is(StreamError)

export const isAgentMessage: (i: ThreadItem) => i is typeof AgentMessage.Type = Schema.is(AgentMessage)
export const isMcpToolCall: (i: ThreadItem) => i is typeof McpToolCall.Type = Schema.is(McpToolCall)
export const isCommandExecution: (i: ThreadItem) => i is typeof CommandExecution.Type = Schema.is(CommandExecution)
export const isFileChange: (i: ThreadItem) => i is typeof FileChange.Type = Schema.is(FileChange)

/** The text of an MCP tool call's result content. */
export const mcpResultText = (item: typeof McpToolCall.Type): string =>
  (item.result?.content ?? []).flatMap((c) => ("text" in c && typeof c.text === "string" ? [c.text] : [])).join("\n")

/** Items completed in a run, in order. */
export const completedItems = (lines: ReadonlyArray<ExecJsonLine>): ReadonlyArray<ThreadItem> =>
  lines.filter(isItemEvent).filter((e) => e.type === "item.completed").map((e) => e.item)
