// `session/update` → ProviderOutput, per turn (a pure state machine over the notifications):
//   agent_message_chunk (text)          → TextChunk (the response is their concatenation)
//   tool_call / tool_call_update        → one ToolCall once the call is completed or failed, with
//                                         its input (rawInput) and result (rawOutput, else the text
//                                         of its content); Substrat's own tools (the `substrat` MCP
//                                         server) are logged by the ToolHandler already, the
//                                         agent's own are marked `source: "provider"`
//   a permission request's tool call    → its fields (rawInput, title, …) onto the call, as an
//                                         update without a status: Qwen Code announces a call with
//                                         an empty rawInput and sends the input only there
//   plan                                → a ToolCall `plan` (its entries, one line each)
//   thoughts, modes, commands, usage_update (context size, not billed tokens) → nothing
// Billed usage comes from the metering model forwarder (per request), not from ACP.
import type * as Acp from "@agentclientprotocol/sdk"
import type { ProviderOutput } from "../Provider.js"

interface Pending {
  title: string
  name: string | null
  kind: string | null
  rawInput: unknown
  rawOutput: unknown
  content: ReadonlyArray<Acp.ToolCallContent>
  done: boolean
}

/** Whether a tool call is one of Substrat's tools, served by our MCP server named `substrat`. */
export const isSubstratTool = (name: string | null, title: string): boolean =>
  /(^|[_\s(])substrat([_\s)]|$)/i.test(name ?? "") || /\bsubstrat\b/i.test(title) || (name ?? "").startsWith("mcp__substrat__")

/** Our tool's bare name (`mcp__substrat__send_message` → `send_message`). */
const bareName = (name: string | null, title: string): string => {
  const n = name ?? title
  const m = /^mcp__substrat__(.+)$/.exec(n) ?? /^(\w+) \(substrat MCP Server\)$/i.exec(n)
  return m === null ? n : m[1]!
}

const contentText = (content: ReadonlyArray<Acp.ToolCallContent>): string =>
  content
    .map((c) =>
      c.type === "content"
        ? c.content.type === "text" ? c.content.text : `[${c.content.type}]`
        : c.type === "diff"
        ? `diff ${c.path}`
        : `terminal ${c.terminalId}`
    )
    .join("\n")

const parsed = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const planText = (entries: ReadonlyArray<Acp.PlanEntry>): string =>
  entries.map((e) => `${e.status === "completed" ? "[x]" : e.status === "in_progress" ? "[~]" : "[ ]"} ${e.content}`).join("\n")

export interface UpdateDecoder {
  readonly update: (u: Acp.SessionUpdate) => ReadonlyArray<ProviderOutput>
  /** The tool call of a `session/request_permission`: what it says of the call, nothing emitted. */
  readonly asked: (t: Acp.ToolCallUpdate) => void
}

export const makeDecoder = (): UpdateDecoder => {
  const calls = new Map<string, Pending>()
  let plans = 0

  const finish = (id: string, p: Pending, failed: boolean): ProviderOutput => {
    p.done = true
    const ours = isSubstratTool(p.name, p.title)
    const result = p.rawOutput !== undefined && p.rawOutput !== null ? p.rawOutput : parsed(contentText(p.content))
    return {
      _tag: "ToolCall",
      call_id: id,
      tool: ours ? bareName(p.name, p.title) : p.name ?? p.title,
      arguments: p.rawInput ?? null,
      result,
      is_error: failed,
      ...(ours ? {} : { source: "provider" as const })
    }
  }

  /** What an update says of a call, onto the call (created when unknown). */
  const merge = (u: Acp.ToolCallUpdate): Pending => {
    let p = calls.get(u.toolCallId)
    if (p === undefined) {
      p = { title: u.title ?? u.toolCallId, name: u.name ?? null, kind: u.kind ?? null, rawInput: undefined, rawOutput: undefined, content: [], done: false }
      calls.set(u.toolCallId, p)
    }
    if (u.title !== undefined && u.title !== null) p.title = u.title
    if (u.name !== undefined && u.name !== null) p.name = u.name
    if (u.kind !== undefined && u.kind !== null) p.kind = u.kind
    if (u.rawInput !== undefined) p.rawInput = u.rawInput
    if (u.rawOutput !== undefined) p.rawOutput = u.rawOutput
    if (u.content !== undefined && u.content !== null) p.content = u.content
    return p
  }

  const update = (u: Acp.SessionUpdate): ReadonlyArray<ProviderOutput> => {
    switch (u.sessionUpdate) {
      case "agent_message_chunk":
        return u.content.type === "text" && u.content.text !== "" ? [{ _tag: "TextChunk", text: u.content.text }] : []
      case "tool_call": {
        const p: Pending = {
          title: u.title,
          name: u.name ?? null,
          kind: u.kind ?? null,
          rawInput: u.rawInput,
          rawOutput: u.rawOutput,
          content: u.content ?? [],
          done: false
        }
        calls.set(u.toolCallId, p)
        return u.status === "completed" || u.status === "failed" ? [finish(u.toolCallId, p, u.status === "failed")] : []
      }
      case "tool_call_update": {
        const p = merge(u)
        if (p.done) return []
        return u.status === "completed" || u.status === "failed" ? [finish(u.toolCallId, p, u.status === "failed")] : []
      }
      case "plan":
        plans += 1
        return [{
          _tag: "ToolCall",
          call_id: `plan-${plans}`,
          tool: "plan",
          arguments: { entries: u.entries.map((e) => ({ content: e.content, status: e.status, priority: e.priority })) },
          result: planText(u.entries),
          is_error: false,
          source: "provider"
        }]
      default:
        return []
    }
  }

  return {
    update,
    asked: (t) => {
      const p = merge(t)
      // The request's content is the question (a diff, a command), not the call's result.
      p.content = []
    }
  }
}
