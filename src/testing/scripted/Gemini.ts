// Gemini API codec for the scripted endpoint (what Gemini CLI speaks): `POST
// /v1beta/models/<model>:generateContent` answers one JSON response, `:streamGenerateContent?alt=sse`
// the same as SSE chunks (`data: {…}\r\n\r\n`, text split over several, each function call whole,
// `finishReason` and the full `usageMetadata` in the last), `:countTokens` a count. The model is in
// the path; a function call is a `functionCall` part, its result a `functionResponse` part.
import { chunks, roughTokens } from "./Anthropic.js"
import type { Reply, ScriptRequest } from "./Script.js"
import { contentText, isObj, type Json, type MessageReply, str } from "./Script.js"

/** `/v1beta/models/<model>:<action>` (any version prefix), or null. */
export const geminiTarget = (path: string): { readonly model: string; readonly action: string } | null => {
  const m = /\/models\/([^/:?]+):([A-Za-z]+)$/.exec(path.split("?")[0]!)
  return m === null ? null : { model: m[1]!, action: m[2]! }
}

const partText = (p: unknown): string => {
  if (!isObj(p)) return ""
  if (typeof p["text"] === "string") return p["text"]
  if (isObj(p["functionResponse"])) {
    const r = p["functionResponse"]["response"]
    return typeof r === "string" ? r : contentText(r) || JSON.stringify(r ?? "")
  }
  return ""
}

const partsText = (c: unknown): string =>
  isObj(c) && Array.isArray(c["parts"]) ? c["parts"].map(partText).filter((t) => t !== "").join("\n") : ""

export const readRequest = (body: unknown, raw: string, model: string): ScriptRequest => {
  const b = isObj(body) ? body : {}
  const contents = Array.isArray(b["contents"]) ? b["contents"].filter(isObj) : []
  // The latest user side: the trailing run of user contents (text, or function responses).
  const tail: Array<string> = []
  for (let i = contents.length - 1; i >= 0; i--) {
    const c = contents[i]!
    if (c["role"] === "user" || c["role"] === undefined) tail.unshift(partsText(c))
    else break
  }
  const tools = Array.isArray(b["tools"]) ? b["tools"].filter(isObj) : []
  const names = tools.flatMap((t) =>
    Array.isArray(t["functionDeclarations"]) ? t["functionDeclarations"].filter(isObj).map((d) => str(d["name"])) : []
  )
  return { api: "gemini", model, system: partsText(b["systemInstruction"]), lastUser: tail.join("\n"), toolNames: names, raw, body }
}

const statusName = (status: number): string =>
  status === 400 ? "INVALID_ARGUMENT"
  : status === 401 ? "UNAUTHENTICATED"
  : status === 403 ? "PERMISSION_DENIED"
  : status === 404 ? "NOT_FOUND"
  : status === 429 ? "RESOURCE_EXHAUSTED"
  : status === 503 ? "UNAVAILABLE"
  : "INTERNAL"

export const errorBody = (reply: Extract<Reply, { _tag: "Error" }>): Json => ({
  error: { code: reply.status, message: reply.message, status: reply.errorType ?? statusName(reply.status) }
})

const partsOf = (reply: MessageReply): Array<Json> =>
  reply.content.map((b) =>
    b.type === "text"
      ? { text: b.text }
      : b.type === "reasoning"
      ? { text: b.text, thought: true }
      : { functionCall: { ...(b.id === undefined ? {} : { id: b.id }), name: b.name, args: b.input ?? {} } }
  )

/** Gemini reports cached input inside promptTokenCount (cachedContentTokenCount is part of it). */
const usageOf = (reply: MessageReply, request: ScriptRequest, parts: ReadonlyArray<Json>): Json => {
  const cached = reply.usage?.cache_read_tokens ?? 0
  const prompt = (reply.usage?.input_tokens ?? roughTokens(request.raw)) + cached
  const out = reply.usage?.output_tokens ?? roughTokens(JSON.stringify(parts))
  return {
    promptTokenCount: prompt,
    candidatesTokenCount: out,
    totalTokenCount: prompt + out,
    ...(cached > 0 ? { cachedContentTokenCount: cached } : {})
  }
}

const responseId = () => `scripted-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`

export const responseJson = (reply: MessageReply, request: ScriptRequest): Json => {
  const parts = partsOf(reply)
  return {
    candidates: [{ content: { role: "model", parts }, finishReason: reply.stopReason ?? "STOP", index: 0 }],
    usageMetadata: usageOf(reply, request, parts),
    modelVersion: request.model,
    responseId: responseId()
  }
}

const frame = (o: Json): string => `data: ${JSON.stringify(o)}\r\n\r\n`

/** The SSE chunks of a streamed response: text pieces, each call whole, the finish and usage last. */
export const streamFrames = (reply: MessageReply, request: ScriptRequest): Array<string> => {
  const parts = partsOf(reply)
  const usage = usageOf(reply, request, parts)
  const id = responseId()
  const pieces: Array<Json> = parts.flatMap((p) =>
    typeof p["text"] === "string" ? chunks(p["text"]).map((text) => ({ ...p, text })) : [p]
  )
  if (pieces.length === 0) pieces.push({ text: "" })
  return pieces.map((p, i) => {
    const last = i === pieces.length - 1
    return frame({
      candidates: [{ content: { role: "model", parts: [p] }, ...(last ? { finishReason: reply.stopReason ?? "STOP" } : {}), index: 0 }],
      usageMetadata: last ? usage : { promptTokenCount: usage["promptTokenCount"], totalTokenCount: usage["promptTokenCount"] },
      modelVersion: request.model,
      responseId: id
    })
  })
}

/** A stream cut off mid-chunk (Reply.disconnect). */
export const partialFrame = "data: {\"candidates\": [{\"content\": {\"role\": \"model\", \"parts\": [{\"text\": \"par"

/** `:countTokens`. */
export const countTokens = (raw: string): Json => ({ totalTokens: roughTokens(raw) })
