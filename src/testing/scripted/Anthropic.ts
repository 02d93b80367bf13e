// Anthropic Messages API codec for the scripted endpoint: read what a request says, write a
// reply as the real API does (JSON, or SSE events in the real order).
import type { Reply, ScriptRequest } from "./Script.js"
import { contentText, freshId, isObj, type Json } from "./Script.js"

/** `<system-reminder>` blocks Claude Code injects into user turns; not part of what was said. */
export const stripReminders = (s: string): string =>
  s.replace(/<system-reminder>[\s\S]*?<\/system-reminder>/g, "").trim()

const blockText = (b: unknown): string => {
  if (typeof b === "string") return b
  if (!isObj(b)) return ""
  if (b["type"] === "text" && typeof b["text"] === "string") return b["text"]
  if (b["type"] === "tool_result") return contentText(b["content"])
  return ""
}

const messageText = (content: unknown): string =>
  typeof content === "string" ? content : Array.isArray(content) ? content.map(blockText).join("\n") : ""

export const readRequest = (body: unknown, raw: string): ScriptRequest => {
  const b = isObj(body) ? body : {}
  const messages = Array.isArray(b["messages"]) ? b["messages"].filter(isObj) : []
  const systemParts = [messageText(b["system"])]
  for (const m of messages) if (m["role"] === "system") systemParts.push(messageText(m["content"]))
  const lastUserMsg = [...messages].reverse().find((m) => m["role"] === "user")
  const tools = Array.isArray(b["tools"]) ? b["tools"].filter(isObj) : []
  return {
    api: "anthropic",
    model: typeof b["model"] === "string" ? b["model"] : "",
    system: systemParts.join("\n"),
    lastUser: lastUserMsg === undefined ? "" : stripReminders(messageText(lastUserMsg["content"])),
    toolNames: tools.flatMap((t) => (typeof t["name"] === "string" ? [t["name"]] : [])),
    raw,
    body
  }
}

const errorTypeFor = (status: number): string =>
  status === 400 ? "invalid_request_error"
  : status === 401 ? "authentication_error"
  : status === 403 ? "permission_error"
  : status === 404 ? "not_found_error"
  : status === 413 ? "request_too_large"
  : status === 429 ? "rate_limit_error"
  : status === 529 ? "overloaded_error"
  : "api_error"

export const errorBody = (reply: Extract<Reply, { _tag: "Error" }>): Json => ({
  type: "error",
  error: { type: reply.errorType ?? errorTypeFor(reply.status), message: reply.message }
})

type Block =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "tool_use"; id: string; name: string; input: unknown }

const blocksOf = (reply: Extract<Reply, { _tag: "Message" }>): Array<Block> =>
  reply.content.map((b) =>
    b.type === "text"
      ? { type: "text", text: b.text }
      : b.type === "reasoning"
      ? { type: "thinking", thinking: b.text, signature: "scripted-signature" }
      : { type: "tool_use", id: b.id ?? freshId("toolu_"), name: b.name, input: b.input ?? {} }
  )

const stopReasonOf = (reply: Extract<Reply, { _tag: "Message" }>): string =>
  reply.stopReason ?? (reply.content.some((b) => b.type === "tool_use") ? "tool_use" : "end_turn")

/** Rough token count for usage numbers: a quarter of the characters. */
export const roughTokens = (s: string): number => Math.max(1, Math.ceil(s.length / 4))

export const messageJson = (reply: Extract<Reply, { _tag: "Message" }>, request: ScriptRequest): Json => {
  const content = blocksOf(reply)
  return {
    id: freshId("msg_"),
    type: "message",
    role: "assistant",
    model: request.model,
    content,
    stop_reason: stopReasonOf(reply),
    stop_sequence: null,
    usage: {
      input_tokens: reply.usage?.input_tokens ?? roughTokens(request.raw),
      cache_creation_input_tokens: reply.usage?.cache_write_tokens ?? 0,
      cache_read_input_tokens: reply.usage?.cache_read_tokens ?? 0,
      output_tokens: reply.usage?.output_tokens ?? roughTokens(JSON.stringify(content))
    }
  }
}

export const sse = (event: string, data: unknown): string => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

/** Split a string into a few pieces so clients see several deltas (and must concatenate). */
export const chunks = (s: string, n = 3): Array<string> => {
  if (s.length === 0) return [""]
  const size = Math.max(1, Math.ceil(s.length / n))
  const out: Array<string> = []
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size))
  return out
}

/** The SSE frames of a streamed message, in the order the real API sends them. */
export const streamFrames = (reply: Extract<Reply, { _tag: "Message" }>, request: ScriptRequest): Array<string> => {
  const full = messageJson(reply, request)
  const usage = full["usage"] as Json
  const frames: Array<string> = [
    sse("message_start", {
      type: "message_start",
      message: { ...full, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } }
    }),
    sse("ping", { type: "ping" })
  ]
  ;(full["content"] as Array<Block>).forEach((block, index) => {
    if (block.type === "text") {
      frames.push(sse("content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } }))
      for (const text of chunks(block.text)) {
        frames.push(sse("content_block_delta", { type: "content_block_delta", index, delta: { type: "text_delta", text } }))
      }
    } else if (block.type === "thinking") {
      frames.push(sse("content_block_start", { type: "content_block_start", index, content_block: { type: "thinking", thinking: "", signature: "" } }))
      for (const thinking of chunks(block.thinking)) {
        frames.push(sse("content_block_delta", { type: "content_block_delta", index, delta: { type: "thinking_delta", thinking } }))
      }
      frames.push(sse("content_block_delta", { type: "content_block_delta", index, delta: { type: "signature_delta", signature: block.signature } }))
    } else {
      frames.push(sse("content_block_start", {
        type: "content_block_start",
        index,
        content_block: { type: "tool_use", id: block.id, name: block.name, input: {} }
      }))
      frames.push(sse("content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: "" } }))
      for (const partial_json of chunks(JSON.stringify(block.input))) {
        frames.push(sse("content_block_delta", { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json } }))
      }
    }
    frames.push(sse("content_block_stop", { type: "content_block_stop", index }))
  })
  frames.push(sse("message_delta", {
    type: "message_delta",
    delta: { stop_reason: full["stop_reason"], stop_sequence: null },
    usage: { output_tokens: usage["output_tokens"] }
  }))
  frames.push(sse("message_stop", { type: "message_stop" }))
  return frames
}

/** `/v1/messages/count_tokens`. */
export const countTokens = (raw: string): Json => ({ input_tokens: roughTokens(raw) })
