// OpenAI codec for the scripted endpoint: the Responses API (what Codex speaks), JSON or SSE in
// the real event order, and the OpenAI error body (shared with Chat Completions, OpenAiChat.ts).
import { chunks, roughTokens } from "./Anthropic.js"
import type { Reply, ScriptRequest } from "./Script.js"
import { contentText, freshId, isObj, type Json, type MessageReply, str } from "./Script.js"

/**
 * Tools a Responses request declares, by the name a script uses. Codex groups each MCP server's
 * tools in a `{ type: "namespace", name: "mcp__<server>", tools: [...] }` tool; a script names
 * such a tool `mcp__<server>__<tool>` (as Claude Code does), and the function_call we emit
 * carries `namespace: "mcp__<server>"`, `name: "<tool>"` — the shape Codex requires. A freeform
 * tool (`{ type: "custom" }`, e.g. codex's apply_patch for catalog models) is called with a
 * `custom_tool_call` whose `input` is the script's input string.
 */
export const responsesTools = (body: unknown): Map<string, { readonly namespace?: string; readonly name: string; readonly custom?: boolean }> => {
  const out = new Map<string, { readonly namespace?: string; readonly name: string; readonly custom?: boolean }>()
  const tools = isObj(body) && Array.isArray(body["tools"]) ? body["tools"].filter(isObj) : []
  for (const t of tools) {
    const name = str(t["name"])
    if (t["type"] === "namespace" && Array.isArray(t["tools"])) {
      for (const inner of t["tools"].filter(isObj)) {
        const innerName = str(inner["name"])
        const qualified = innerName.startsWith(name) ? innerName : `${name}__${innerName}`
        out.set(qualified, { namespace: name, name: innerName })
      }
    } else if (name !== "") {
      out.set(name, t["type"] === "custom" ? { name, custom: true } : { name })
    }
  }
  return out
}

const inputItemText = (item: Json): string => {
  if (item["type"] === "function_call_output" || item["type"] === "custom_tool_call_output") {
    return contentText(item["output"])
  }
  return contentText(item["content"])
}

const isUserSide = (item: Json): boolean =>
  (item["type"] === "message" || item["type"] === undefined) && item["role"] === "user" ||
  item["type"] === "function_call_output" || item["type"] === "custom_tool_call_output"

export const readResponsesRequest = (body: unknown, raw: string): ScriptRequest => {
  const b = isObj(body) ? body : {}
  const input = typeof b["input"] === "string"
    ? [{ type: "message", role: "user", content: b["input"] }]
    : Array.isArray(b["input"]) ? b["input"].filter(isObj) : []
  const systemParts = [str(b["instructions"])]
  for (const item of input) {
    if (item["role"] === "system" || item["role"] === "developer") systemParts.push(inputItemText(item))
  }
  // The latest user side: the trailing run of user messages and tool outputs.
  const tail: Array<string> = []
  for (let i = input.length - 1; i >= 0; i--) {
    const item = input[i]!
    if (isUserSide(item)) tail.unshift(inputItemText(item))
    else if (item["role"] === "system" || item["role"] === "developer") continue
    else break
  }
  return {
    api: "openai-responses",
    model: str(b["model"]),
    system: systemParts.join("\n"),
    lastUser: tail.join("\n"),
    toolNames: [...responsesTools(body).keys()],
    raw,
    body
  }
}

const errorCodeFor = (status: number): string =>
  status === 400 ? "invalid_request_error"
  : status === 401 ? "invalid_api_key"
  : status === 404 ? "model_not_found"
  : status === 429 ? "rate_limit_exceeded"
  : "server_error"

export const openAiErrorBody = (reply: Extract<Reply, { _tag: "Error" }>): Json => ({
  error: {
    message: reply.message,
    type: reply.errorType ?? (reply.status >= 500 ? "server_error" : "invalid_request_error"),
    param: null,
    code: errorCodeFor(reply.status)
  }
})

const responseItems = (reply: MessageReply, request: ScriptRequest): Array<Json> => {
  const tools = responsesTools(request.body)
  const items: Array<Json> = []
  for (const b of reply.content) {
    if (b.type !== "reasoning") continue
    items.push({ id: freshId("rs_"), type: "reasoning", summary: [{ type: "summary_text", text: b.text }] })
  }
  const texts = reply.content.flatMap((b) => (b.type === "text" ? [b.text] : []))
  if (texts.length > 0) {
    items.push({
      id: freshId("msg_"),
      type: "message",
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: texts.join("\n\n"), annotations: [] }]
    })
  }
  for (const b of reply.content) {
    if (b.type !== "tool_use") continue
    const declared = tools.get(b.name)
    const callId = b.id ?? freshId("call_")
    if (declared?.custom === true) {
      const input = typeof b.input === "string" ? b.input : JSON.stringify(b.input ?? {})
      items.push({ id: freshId("ctc_"), type: "custom_tool_call", status: "completed", call_id: callId, name: declared.name, input })
      continue
    }
    items.push({
      id: freshId("fc_"),
      type: "function_call",
      status: "completed",
      arguments: JSON.stringify(b.input ?? {}),
      call_id: callId,
      name: declared?.name ?? b.name,
      ...(declared?.namespace === undefined ? {} : { namespace: declared.namespace })
    })
  }
  return items
}

const responseUsage = (reply: MessageReply, request: ScriptRequest, items: Array<Json>): Json => {
  const cached_tokens = reply.usage?.cache_read_tokens ?? 0
  const input_tokens = (reply.usage?.input_tokens ?? roughTokens(request.raw)) + cached_tokens
  const output_tokens = reply.usage?.output_tokens ?? roughTokens(JSON.stringify(items))
  return {
    input_tokens,
    input_tokens_details: { cached_tokens },
    output_tokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input_tokens + output_tokens
  }
}

const responseShell = (id: string, request: ScriptRequest, status: string, output: Array<Json>, usage: Json | null): Json => ({
  id,
  object: "response",
  created_at: Math.floor(Date.now() / 1000),
  status,
  error: null,
  incomplete_details: null,
  model: request.model,
  output,
  parallel_tool_calls: true,
  tool_choice: "auto",
  tools: [],
  usage
})

export const responsesJson = (reply: MessageReply, request: ScriptRequest): Json => {
  const items = responseItems(reply, request)
  return responseShell(freshId("resp_"), request, "completed", items, responseUsage(reply, request, items))
}

/** The SSE frames of a streamed response, in the order the real API sends them. */
export const responsesFrames = (reply: MessageReply, request: ScriptRequest): Array<string> => {
  const id = freshId("resp_")
  const items = responseItems(reply, request)
  let seq = 0
  const frames: Array<string> = []
  const emit = (type: string, data: Json) => {
    frames.push(`event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq++, ...data })}\n\n`)
  }
  emit("response.created", { response: responseShell(id, request, "in_progress", [], null) })
  emit("response.in_progress", { response: responseShell(id, request, "in_progress", [], null) })
  items.forEach((item, output_index) => {
    const item_id = item["id"]
    if (item["type"] === "message") {
      emit("response.output_item.added", { output_index, item: { ...item, status: "in_progress", content: [] } })
      const text = ((item["content"] as Array<Json>)[0]!)["text"] as string
      const part = { type: "output_text", text: "", annotations: [] }
      emit("response.content_part.added", { item_id, output_index, content_index: 0, part })
      for (const delta of chunks(text)) {
        emit("response.output_text.delta", { item_id, output_index, content_index: 0, delta, logprobs: [] })
      }
      emit("response.output_text.done", { item_id, output_index, content_index: 0, text, logprobs: [] })
      emit("response.content_part.done", { item_id, output_index, content_index: 0, part: { ...part, text } })
    } else if (item["type"] === "reasoning") {
      const text = ((item["summary"] as Array<Json>)[0]!)["text"] as string
      emit("response.output_item.added", { output_index, item: { ...item, summary: [] } })
      const part = { type: "summary_text", text: "" }
      emit("response.reasoning_summary_part.added", { item_id, output_index, summary_index: 0, part })
      for (const delta of chunks(text)) emit("response.reasoning_summary_text.delta", { item_id, output_index, summary_index: 0, delta })
      emit("response.reasoning_summary_text.done", { item_id, output_index, summary_index: 0, text })
      emit("response.reasoning_summary_part.done", { item_id, output_index, summary_index: 0, part: { ...part, text } })
    } else if (item["type"] === "custom_tool_call") {
      const input = item["input"] as string
      emit("response.output_item.added", { output_index, item: { ...item, status: "in_progress", input: "" } })
      for (const delta of chunks(input)) emit("response.custom_tool_call_input.delta", { item_id, output_index, delta })
      emit("response.custom_tool_call_input.done", { item_id, output_index, input })
    } else {
      const args = item["arguments"] as string
      emit("response.output_item.added", { output_index, item: { ...item, status: "in_progress", arguments: "" } })
      for (const delta of chunks(args)) emit("response.function_call_arguments.delta", { item_id, output_index, delta })
      emit("response.function_call_arguments.done", { item_id, output_index, arguments: args })
    }
    emit("response.output_item.done", { output_index, item })
  })
  emit("response.completed", { response: responseShell(id, request, "completed", items, responseUsage(reply, request, items)) })
  return frames
}
