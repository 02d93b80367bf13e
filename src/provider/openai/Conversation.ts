// The conversation of an `openai` agent, in the one form both the live provider and a replay of
// the event log produce (pure). ARCHITECTURE §9: for a bare model the event log *is* the
// conversation. A turn is what the log records of it:
//   turn.start{prompt}                    → the user message
//   tool_call.invoked / tool_call.result  → each tool call of the turn and its JSON result
//   turn.complete{response}               → the final assistant text
//   provider.error / nothing (a crash)    → the turn has no response
// Rendered for Chat Completions as: user(prompt); per tool call, in order, an assistant message
// carrying that one call and the tool message with its result; assistant(response). Tool call ids
// are derived from the turn's and the call's position (`call_<turn>_<n>`), so a conversation
// rendered from memory and the same conversation replayed from the log are byte-identical.
// Within a running turn the model sees its calls exactly as it made them (real ids, parallel
// calls grouped, interim text); what is kept afterwards is this canonical form — the interim text
// of a step that called tools is not in the log, so it is not kept.
import type { LogEntry } from "../../domain/events.js"
import { withToolGuidance } from "../../domain/guidance.js"
import { inputJsonSchema, toolDescriptions, toolNames } from "../../domain/tools.js"

export interface ToolExchange {
  readonly tool: string
  readonly arguments: unknown
  readonly result: unknown
  readonly is_error: boolean
}

export interface TurnRecord {
  readonly prompt: string
  readonly tools: ReadonlyArray<ToolExchange>
  /** The final assistant text; null when the turn failed or was cut short. */
  readonly response: string | null
}

export interface ChatToolCall {
  readonly id: string
  readonly type: "function"
  readonly function: { readonly name: string; readonly arguments: string }
}

export type ChatMessage =
  | { readonly role: "system"; readonly content: string }
  | { readonly role: "user"; readonly content: string }
  | { readonly role: "assistant"; readonly content: string | null; readonly tool_calls?: ReadonlyArray<ChatToolCall> }
  | { readonly role: "tool"; readonly tool_call_id: string; readonly content: string }

/** A JSON value as message text (strings stay as they are). */
export const asText = (u: unknown): string => (typeof u === "string" ? u : JSON.stringify(u ?? null))

export const toolCallOf = (id: string, tool: string, args: string): ChatToolCall => ({
  id,
  type: "function",
  function: { name: tool, arguments: args }
})

/** One tool call and its result as the two messages Chat Completions wants. */
export const exchangeMessages = (
  id: string,
  tool: string,
  args: string,
  result: unknown
): readonly [ChatMessage, ChatMessage] => [
  { role: "assistant", content: null, tool_calls: [toolCallOf(id, tool, args)] },
  { role: "tool", tool_call_id: id, content: asText(result) }
]

/** The canonical messages of the turns, after the system message. */
export const renderTurns = (turns: ReadonlyArray<TurnRecord>): Array<ChatMessage> => {
  const out: Array<ChatMessage> = []
  turns.forEach((t, i) => {
    out.push({ role: "user", content: t.prompt })
    t.tools.forEach((x, n) => out.push(...exchangeMessages(`call_${i}_${n}`, x.tool, JSON.stringify(x.arguments ?? {}), x.result)))
    if (t.response !== null) out.push({ role: "assistant", content: t.response })
  })
  return out
}

/** The system message: the seed-002 tool guidance, then the agent's instructions. */
export const systemMessage = (instructions: string): ChatMessage => ({ role: "system", content: withToolGuidance(instructions) })

/** Our tool catalog as Chat Completions `tools` (the MCP catalog's descriptions and JSON Schemas). */
export const chatTools = (): ReadonlyArray<unknown> =>
  toolNames.map((name) => ({
    type: "function",
    function: { name, description: toolDescriptions[name], parameters: inputJsonSchema(name) }
  }))

/** What a replay of the log finds: the instructions (from `session.created`) and the turns. */
export interface Replayed {
  readonly instructions: string | null
  readonly turns: ReadonlyArray<TurnRecord>
}

/** Result of a call the log has no `tool_call.result` for (the daemon stopped mid-call). */
export const lostResult = { error: { type: "interrupted", message: "no result was recorded (the daemon stopped during the call)" } }

/** Rebuild the conversation from a session's log entries (in order). */
export const replay = (entries: Iterable<LogEntry>): Replayed => {
  let instructions: string | null = null
  const turns: Array<TurnRecord> = []
  let current: { prompt: string; tools: Array<{ call_id: string; x: ToolExchange | null; tool: string; arguments: unknown }> } | null = null
  const close = (response: string | null) => {
    if (current === null) return
    turns.push({
      prompt: current.prompt,
      tools: current.tools.map((c) => c.x ?? { tool: c.tool, arguments: c.arguments, result: lostResult, is_error: true }),
      response
    })
    current = null
  }
  for (const e of entries) {
    switch (e.event) {
      case "session.created":
        if (instructions === null) instructions = e.data.system_prompt
        break
      case "turn.start":
        close(null)
        current = { prompt: e.data.prompt, tools: [] }
        break
      case "tool_call.invoked":
        current?.tools.push({ call_id: e.data.call_id, x: null, tool: e.data.tool, arguments: e.data.arguments })
        break
      case "tool_call.result": {
        const c = current?.tools.find((t) => t.call_id === e.data.call_id && t.x === null)
        if (c !== undefined) c.x = { tool: c.tool, arguments: c.arguments, result: e.data.result, is_error: e.data.is_error }
        break
      }
      case "turn.complete":
        close(e.data.response)
        break
      case "provider.error":
        if (e.data.turn_id !== null) close(null)
        break
      default:
        break
    }
  }
  close(null)
  return { instructions, turns }
}
