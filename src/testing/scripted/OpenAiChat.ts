// OpenAI Chat Completions codec for the scripted endpoint (what the bare-LLM `openai` provider
// speaks): JSON or SSE chunks in the real order, usage last when `stream_options.include_usage`.
import { chunks, roughTokens } from "./Anthropic.js"
import type { ScriptRequest } from "./Script.js"
import { contentText, freshId, isObj, type Json, type MessageReply, str } from "./Script.js"

export const readChatRequest = (body: unknown, raw: string): ScriptRequest => {
  const b = isObj(body) ? body : {}
  const messages = Array.isArray(b["messages"]) ? b["messages"].filter(isObj) : []
  const system = messages.filter((m) => m["role"] === "system" || m["role"] === "developer").map((m) => contentText(m["content"]))
  const tail: Array<string> = []
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!
    if (m["role"] === "user" || m["role"] === "tool") tail.unshift(contentText(m["content"]))
    else break
  }
  const tools = Array.isArray(b["tools"]) ? b["tools"].filter(isObj) : []
  return {
    api: "openai-chat",
    model: str(b["model"]),
    system: system.join("\n"),
    lastUser: tail.join("\n"),
    toolNames: tools.flatMap((t) => (isObj(t["function"]) ? [str(t["function"]["name"])] : [])),
    raw,
    body
  }
}

const chatParts = (reply: MessageReply) => {
  const text = reply.content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("\n\n")
  const calls = reply.content.flatMap((b) =>
    b.type === "tool_use"
      ? [{ id: b.id ?? freshId("call_"), type: "function", function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } }]
      : []
  )
  const finish = reply.stopReason ?? (calls.length > 0 ? "tool_calls" : "stop")
  return { text, calls, finish }
}

const chatUsage = (reply: MessageReply, request: ScriptRequest, out: string): Json => {
  const cached_tokens = reply.usage?.cache_read_tokens ?? 0
  const prompt_tokens = (reply.usage?.input_tokens ?? roughTokens(request.raw)) + cached_tokens
  const completion_tokens = reply.usage?.output_tokens ?? roughTokens(out)
  return {
    prompt_tokens,
    completion_tokens,
    total_tokens: prompt_tokens + completion_tokens,
    ...(cached_tokens > 0 ? { prompt_tokens_details: { cached_tokens } } : {})
  }
}

export const chatJson = (reply: MessageReply, request: ScriptRequest): Json => {
  const { calls, finish, text } = chatParts(reply)
  return {
    id: freshId("chatcmpl-"),
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: request.model,
    choices: [{
      index: 0,
      message: { role: "assistant", content: text === "" ? null : text, ...(calls.length > 0 ? { tool_calls: calls } : {}) },
      finish_reason: finish
    }],
    usage: chatUsage(reply, request, text + JSON.stringify(calls))
  }
}

export const chatFrames = (reply: MessageReply, request: ScriptRequest): Array<string> => {
  const { calls, finish, text } = chatParts(reply)
  const id = freshId("chatcmpl-")
  const created = Math.floor(Date.now() / 1000)
  const chunk = (delta: Json, finish_reason: string | null, extra: Json = {}) =>
    `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: request.model, choices: [{ index: 0, delta, finish_reason }], ...extra })}\n\n`
  const frames = [chunk({ role: "assistant", content: "" }, null)]
  if (text !== "") for (const content of chunks(text)) frames.push(chunk({ content }, null))
  calls.forEach((call, index) => {
    frames.push(chunk({ tool_calls: [{ index, id: call.id, type: "function", function: { name: call.function.name, arguments: "" } }] }, null))
    for (const args of chunks(call.function.arguments)) {
      frames.push(chunk({ tool_calls: [{ index, function: { arguments: args } }] }, null))
    }
  })
  frames.push(chunk({}, finish))
  const b = request.body
  if (isObj(b) && isObj(b["stream_options"]) && b["stream_options"]["include_usage"] === true) {
    frames.push(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: request.model, choices: [], usage: chatUsage(reply, request, text + JSON.stringify(calls)) })}\n\n`)
  }
  frames.push("data: [DONE]\n\n")
  return frames
}
