// Decoding a streamed Chat Completions response (Server-Sent Events), pure: one `ChatAccumulator`
// per model call is fed the response's lines and returns the text deltas to stream out, while it
// assembles the tool calls (`delta.tool_calls[]` by `index`: the first fragment carries `id` and
// `function.name`, later ones append to `function.arguments`), the `finish_reason` and the final
// `usage` chunk (`stream_options.include_usage`). `data: [DONE]` ends the stream.
//
// Tolerated: comment lines (`: keep-alive`, OpenRouter's `: OPENROUTER PROCESSING`), `event:` /
// `id:` / `retry:` fields, multi-line `data:`, CRLF. A non-streamed JSON body (a server that
// ignores `stream: true`) is decoded by `completeJson`. Faults are values (`StreamFault`).

type Json = Record<string, unknown>
const isObj = (u: unknown): u is Json => u !== null && typeof u === "object" && !Array.isArray(u)

export interface AssembledCall {
  readonly id: string
  readonly name: string
  /** The raw JSON text of the arguments, as the model streamed it. */
  readonly arguments: string
}

export interface ChatUsage {
  readonly input_tokens: number
  readonly output_tokens: number
  /** OpenRouter reports `usage.cost` (USD); others do not: 0. */
  readonly cost_usd: number
}

/** What went wrong with a response body: malformed (bad JSON/shape), an in-stream error, cut short. */
export interface StreamFault {
  readonly kind: "malformed" | "api" | "truncated"
  readonly message: string
}

/** A feed result is a fault (else: the text deltas). */
export const isFault = (r: ReadonlyArray<string> | StreamFault): r is StreamFault => !Array.isArray(r)

const num = (u: unknown): number => (typeof u === "number" && Number.isFinite(u) ? u : 0)

const usageOf = (u: unknown): ChatUsage | null =>
  isObj(u)
    ? { input_tokens: num(u["prompt_tokens"]), output_tokens: num(u["completion_tokens"]), cost_usd: num(u["cost"]) }
    : null

const apiErrorText = (e: unknown): string => {
  if (isObj(e)) {
    const m = typeof e["message"] === "string" ? e["message"] : JSON.stringify(e)
    const code = e["code"] ?? e["type"]
    return code === undefined || code === null ? m : `${m} (${String(code)})`
  }
  return String(e)
}

const clip = (s: string, n = 200) => (s.length > n ? `${s.slice(0, n)}…` : s)

export class ChatAccumulator {
  text = ""
  finishReason: string | null = null
  usage: ChatUsage | null = null
  /** The HTTP status of the response, once it arrived (ChatClient.streamCompletion). */
  status: number | null = null
  /** Whether the response was an event stream (else one JSON body). */
  streamed = false
  /** The chunk that carried `usage`, as sent (the Meter reads cache tokens and the model from it). */
  rawUsage: unknown = null
  done = false
  private readonly calls: Array<{ id: string; name: string; arguments: string }> = []
  private data: Array<string> = []

  /** The tool calls so far, in index order (gaps dropped). */
  get toolCalls(): ReadonlyArray<AssembledCall> {
    return this.calls.filter((c) => c !== undefined).map((c, i) => ({ ...c, id: c.id === "" ? `call_${i}` : c.id }))
  }

  /** One line of the SSE body (without its newline). Returns the text deltas, or a fault. */
  line(raw: string): ReadonlyArray<string> | StreamFault {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw
    if (line === "") return this.dispatch()
    if (line.startsWith(":")) return []
    const colon = line.indexOf(":")
    const field = colon < 0 ? line : line.slice(0, colon)
    if (field !== "data") return []
    let value = colon < 0 ? "" : line.slice(colon + 1)
    if (value.startsWith(" ")) value = value.slice(1)
    this.data.push(value)
    return []
  }

  /** The body ended: flush a last event without its blank line, then check it was complete. */
  end(): ReadonlyArray<string> | StreamFault {
    const last = this.dispatch()
    if (isFault(last)) return last
    if (!this.done && this.finishReason === null) {
      return { kind: "truncated", message: "the response stream ended before the model finished (no finish_reason, no [DONE])" }
    }
    return last
  }

  private dispatch(): ReadonlyArray<string> | StreamFault {
    if (this.data.length === 0) return []
    const payload = this.data.join("\n")
    this.data = []
    if (payload.trim() === "[DONE]") {
      this.done = true
      return []
    }
    let chunk: unknown
    try {
      chunk = JSON.parse(payload)
    } catch {
      return { kind: "malformed", message: `a stream event is not JSON: ${clip(JSON.stringify(payload))}` }
    }
    return this.chunk(chunk)
  }

  /** One decoded `chat.completion.chunk`. */
  chunk(chunk: unknown): ReadonlyArray<string> | StreamFault {
    if (!isObj(chunk)) return { kind: "malformed", message: `a stream event is not an object: ${clip(JSON.stringify(chunk))}` }
    if (chunk["error"] !== undefined && chunk["error"] !== null) {
      return { kind: "api", message: `the endpoint reported an error mid-stream: ${apiErrorText(chunk["error"])}` }
    }
    const usage = usageOf(chunk["usage"])
    if (usage !== null) {
      this.usage = usage
      this.rawUsage = chunk
    }
    const choices = chunk["choices"]
    if (choices === undefined || choices === null) return []
    if (!Array.isArray(choices)) return { kind: "malformed", message: "`choices` is not an array" }
    const out: Array<string> = []
    for (const c of choices) {
      if (!isObj(c)) return { kind: "malformed", message: "a choice is not an object" }
      if (c["index"] !== undefined && c["index"] !== 0) continue
      if (typeof c["finish_reason"] === "string") this.finishReason = c["finish_reason"]
      const delta = c["delta"] ?? c["message"]
      if (delta === undefined || delta === null) continue
      if (!isObj(delta)) return { kind: "malformed", message: "`delta` is not an object" }
      const content = delta["content"]
      if (typeof content === "string" && content !== "") {
        this.text += content
        out.push(content)
      }
      const calls = delta["tool_calls"]
      if (calls !== undefined && calls !== null) {
        if (!Array.isArray(calls)) return { kind: "malformed", message: "`tool_calls` is not an array" }
        for (const [pos, tc] of calls.entries()) {
          if (!isObj(tc)) return { kind: "malformed", message: "a tool call delta is not an object" }
          const index = typeof tc["index"] === "number" ? tc["index"] : pos
          if (!Number.isInteger(index) || index < 0 || index > 1024) {
            return { kind: "malformed", message: `bad tool call index ${String(tc["index"])}` }
          }
          const slot = this.calls[index] ?? (this.calls[index] = { id: "", name: "", arguments: "" })
          if (typeof tc["id"] === "string" && tc["id"] !== "") slot.id = tc["id"]
          const fn = tc["function"]
          if (isObj(fn)) {
            if (typeof fn["name"] === "string") slot.name += fn["name"]
            if (typeof fn["arguments"] === "string") slot.arguments += fn["arguments"]
          }
        }
      }
    }
    return out
  }
}

/** A whole (non-streamed) `chat.completion` body, fed to `acc`: its text, or a fault. */
export const completeJson = (acc: ChatAccumulator, text: string): ReadonlyArray<string> | StreamFault => {
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    return { kind: "malformed", message: `the response body is not JSON: ${clip(JSON.stringify(text))}` }
  }
  const r = acc.chunk(body)
  if (!isFault(r)) acc.done = true
  return r
}
