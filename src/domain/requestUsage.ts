// What one model request used, read from the response as it streams past the model forwarder
// (or the openai provider's own calls). Pure: no Effect, no I/O. Four wire formats:
//   Anthropic Messages   /v1/messages: `usage` in the JSON body, or `message_start.message.usage`
//                        + `message_delta.usage` (cumulative) in the event stream; input_tokens
//                        excludes cache reads/writes (cache_read_input_tokens, cache_creation_input_tokens)
//   OpenAI Chat          /v1/chat/completions: `usage.prompt_tokens` (includes
//                        prompt_tokens_details.cached_tokens), `completion_tokens`, OpenRouter's `cost`
//   OpenAI Responses     /v1/responses: `usage` of the body or of `response.completed`;
//                        input_tokens includes input_tokens_details.cached_tokens
//   Gemini               /v1beta/models/<model>:generateContent / :streamGenerateContent: `usageMetadata`
//                        of the body or of each chunk (cumulative: each replaces the last; final
//                        once every candidate asked for — `candidateCount` — has its `finishReason`);
//                        its counts cover all candidates; promptTokenCount includes
//                        cachedContentTokenCount, toolUsePromptTokenCount is input too,
//                        thoughtsTokenCount is output; the model is `modelVersion`
// Normalised: `input_tokens` is uncached input only; cache reads and writes are apart.
import { StringDecoder } from "node:string_decoder"
import { StreamedOutput, withFloor } from "./estimate.js"

export type ModelApi = "anthropic" | "openai" | "gemini"

export interface RequestUsage {
  readonly model: string | null
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cache_read_tokens: number
  readonly cache_write_tokens: number
  /** The cost the upstream reported itself (OpenRouter's `usage.cost`), else null: priced by the table. */
  readonly reported_cost_usd: number | null
}

type Json = Record<string, unknown>
const isObj = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const num = (u: unknown): number | undefined => (typeof u === "number" && Number.isFinite(u) && u >= 0 ? u : undefined)

/** Accumulates usage from the objects of one response (the JSON body, or each SSE `data:`). */
export class UsageAccumulator {
  private model: string | null = null
  private input: number | undefined
  private output: number | undefined
  private cacheRead: number | undefined
  private cacheWrite: number | undefined
  private cost: number | undefined
  private seen = false
  /** Gemini: the indexes of the candidates that finished. */
  private readonly finished = new Set<number>()
  /** The response's last usage was seen (the stream's end, or a whole JSON body). */
  complete = false

  /** `candidates`: how many responses the request asked for (Gemini's `candidateCount`). */
  constructor(model: string | null = null, private readonly candidates = 1) {
    this.model = model
  }

  private anthropic(u: Json): void {
    this.seen = true
    this.input = num(u["input_tokens"]) ?? this.input
    this.output = num(u["output_tokens"]) ?? this.output
    this.cacheRead = num(u["cache_read_input_tokens"]) ?? this.cacheRead
    this.cacheWrite = num(u["cache_creation_input_tokens"]) ?? this.cacheWrite
  }

  /** OpenAI: `total_in` includes `cached`. */
  private openai(totalIn: number | undefined, out: number | undefined, cached: number | undefined, cost: number | undefined): void {
    this.seen = true
    const c = cached ?? 0
    if (totalIn !== undefined) this.input = Math.max(0, totalIn - c)
    this.cacheRead = c
    this.output = out ?? this.output
    this.cost = cost ?? this.cost
  }

  /** Gemini's `usageMetadata`: cumulative, each chunk's replaces the last. */
  private gemini(u: Json): void {
    this.seen = true
    const cached = num(u["cachedContentTokenCount"]) ?? 0
    const prompt = num(u["promptTokenCount"])
    if (prompt !== undefined) this.input = Math.max(0, prompt + (num(u["toolUsePromptTokenCount"]) ?? 0) - cached)
    this.cacheRead = cached
    const out = num(u["candidatesTokenCount"])
    const thoughts = num(u["thoughtsTokenCount"])
    if (out !== undefined || thoughts !== undefined) this.output = (out ?? 0) + (thoughts ?? 0)
  }

  private usage(u: Json): void {
    if ("prompt_tokens" in u || "completion_tokens" in u) {
      const details = isObj(u["prompt_tokens_details"]) ? u["prompt_tokens_details"] : {}
      return this.openai(num(u["prompt_tokens"]), num(u["completion_tokens"]), num(details["cached_tokens"]), num(u["cost"]))
    }
    if (isObj(u["input_tokens_details"])) {
      return this.openai(num(u["input_tokens"]), num(u["output_tokens"]), num(u["input_tokens_details"]["cached_tokens"]), num(u["cost"]))
    }
    this.anthropic(u)
  }

  private noteModel(m: unknown): void {
    if (typeof m === "string" && m !== "") this.model = m
  }

  /** One object of the response (a JSON body, or one event of a stream). */
  observe(o: unknown): void {
    if (!isObj(o)) return
    if (isObj(o["usageMetadata"])) {
      this.noteModel(o["modelVersion"])
      this.gemini(o["usageMetadata"])
      // A candidate's chunks may end before another's: the usage is final once each one finished
      // (a candidate's `index` is left out when it is 0).
      const candidates: ReadonlyArray<unknown> = Array.isArray(o["candidates"]) ? o["candidates"] : []
      for (const c of candidates) if (isObj(c) && typeof c["finishReason"] === "string") this.finished.add(num(c["index"]) ?? 0)
      if (this.finished.size >= this.candidates) this.complete = true
      return
    }
    const type = o["type"]
    if (type === "message_stop" || (type === "message_delta" && isObj(o["usage"]))) this.complete = true
    if (type === "message_start" && isObj(o["message"])) {
      this.noteModel(o["message"]["model"])
      if (isObj(o["message"]["usage"])) this.anthropic(o["message"]["usage"])
      return
    }
    if (typeof type === "string" && type.startsWith("response.") && isObj(o["response"])) {
      this.noteModel(o["response"]["model"])
      if (isObj(o["response"]["usage"])) {
        this.usage(o["response"]["usage"])
        if (type === "response.completed" || type === "response.incomplete" || type === "response.failed") this.complete = true
      }
      return
    }
    this.noteModel(o["model"])
    if (isObj(o["usage"])) {
      this.usage(o["usage"])
      // A Chat Completions stream's usage comes in its last chunk; an Anthropic body has it whole.
      if (type !== "message_delta") this.complete = true
    }
  }

  /** The object observed last was the whole response (a JSON body): its usage is final. */
  whole(): void {
    if (this.seen) this.complete = true
  }

  /** Null when the response carried no usage at all (an error, or a server that reports none). */
  result(): RequestUsage | null {
    if (!this.seen) return null
    return {
      model: this.model,
      input_tokens: this.input ?? 0,
      output_tokens: this.output ?? 0,
      cache_read_tokens: this.cacheRead ?? 0,
      cache_write_tokens: this.cacheWrite ?? 0,
      reported_cost_usd: this.cost ?? null
    }
  }
}

/** JSON bodies (and event-stream lines) larger than this are not buffered for metering. */
const MAX_JSON_BYTES = 32 * 1024 * 1024

/**
 * Reads usage from a response body fed chunk by chunk (already decompressed): an event stream
 * (`text/event-stream`: each `data:` line is one object) or one JSON body.
 */
export class ResponseTap {
  private readonly acc: UsageAccumulator
  private readonly decoder = new StringDecoder("utf8")
  private readonly sse: boolean
  private buffer = ""
  private overflow = false
  /** Inside an event-stream line too long to hold (skipped to its newline). */
  private skipping = false
  private readonly streamed = new StreamedOutput()

  /** `candidates`: how many responses the request asked for (Gemini's `candidateCount`). */
  constructor(contentType: string | undefined, requestModel: string | null, candidates = 1) {
    this.sse = (contentType ?? "").toLowerCase().includes("text/event-stream")
    this.acc = new UsageAccumulator(requestModel, candidates)
  }

  private line(l: string): void {
    if (!l.startsWith("data:")) return
    const data = l.slice(5).trim()
    if (data === "" || data === "[DONE]") return
    try {
      const o: unknown = JSON.parse(data)
      this.acc.observe(o)
      this.streamed.note(o)
    } catch {
      // not JSON: not ours to judge (the client sees the same bytes)
    }
  }

  write(chunk: Uint8Array): void {
    if (this.overflow) return
    const text = this.decoder.write(Buffer.from(chunk))
    if (this.sse) {
      // Lines are looked for in the new text only; a line longer than MAX_JSON_BYTES is not held:
      // it is skipped to its end and its bytes count as generated output.
      let start = 0
      let i: number
      while ((i = text.indexOf("\n", start)) >= 0) {
        if (this.skipping) {
          this.streamed.unread(i - start)
          this.skipping = false
        } else this.line((this.buffer + text.slice(start, i)).replace(/\r$/, ""))
        this.buffer = ""
        start = i + 1
      }
      if (this.skipping) this.streamed.unread(text.length - start)
      else {
        this.buffer += text.slice(start)
        if (this.buffer.length > MAX_JSON_BYTES) {
          this.streamed.unread(this.buffer.length)
          this.buffer = ""
          this.skipping = true
        }
      }
      return
    }
    this.buffer += text
    if (this.buffer.length > MAX_JSON_BYTES) {
      this.overflow = true
      this.buffer = ""
    }
  }

  end(): RequestUsage | null {
    this.buffer += this.decoder.end()
    if (this.sse) {
      for (const l of this.buffer.split("\n")) this.line(l.replace(/\r$/, ""))
    } else if (!this.overflow && this.buffer.trim() !== "") {
      try {
        this.acc.observe(JSON.parse(this.buffer))
        this.acc.whole()
      } catch {
        // not JSON
      }
    }
    this.buffer = ""
    return this.acc.result()
  }

  /**
   * What to charge when the response is over (ended, failed or abandoned), never less than the
   * upstream bills: its own usage when its last usage was seen; otherwise what was seen with the
   * output raised to what was streamed (`inputAtMost` standing in for input never reported).
   * Null: nothing was generated (no usage, nothing streamed).
   */
  charge(inputAtMost: number): RequestUsage | null {
    const u = this.end()
    if (this.acc.complete && u !== null) return u
    const streamed = this.streamed.tokens
    if (u === null && streamed === 0) return null
    const seen = u ?? { model: null, input_tokens: inputAtMost, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, reported_cost_usd: null }
    return withFloor(seen, streamed)
  }
}

/** The `model` field of a request body (JSON), else null. */
export const requestModel = (body: string): string | null => {
  try {
    const j: unknown = JSON.parse(body)
    return isObj(j) && typeof j["model"] === "string" ? j["model"] : null
  } catch {
    return null
  }
}
