// The most a model request can cost, read from its body before it is relayed (docs/budgets.md,
// "Reservations"). Pure. Input: one token per byte of the body (a byte-level tokenizer never
// makes more tokens than bytes of text; images and framing make fewer), at most a context window
// of INPUT_CEILING. Output: the request's own cap — Anthropic `max_tokens`, Chat Completions
// `max_completion_tokens` / `max_tokens` (times `n` choices), Responses `max_output_tokens`,
// Gemini `generationConfig.maxOutputTokens` (times `candidateCount`; its model is in the path) —
// never above the model's output cap (the upstream refuses more), which is also used when the
// request gives none.
import type { RequestUsage } from "./requestUsage.js"

export interface RequestEstimate {
  readonly model: string | null
  /** Input tokens at most (uncached and cache writes alike: the dearer price applies). */
  readonly input_tokens: number
  /** Output tokens at most. */
  readonly output_tokens: number
  /** Responses generated at once (Chat Completions `n`, Gemini `candidateCount`) when more than one. */
  readonly choices?: number
}

/** No model takes a larger context than this (tokens). */
export const INPUT_CEILING = 2_000_000
/** The output cap of a model not in `outputCaps`. */
export const DEFAULT_OUTPUT_CAP = 128_000

/** Output caps by longest model-name prefix (rounded up: a stale entry must not under-reserve). */
export const outputCaps: Readonly<Record<string, number>> = {
  "claude": 128_000,
  "gpt-5": 128_000,
  "gpt-4.1": 32_768,
  "gpt-4o": 16_384,
  "o3": 100_000,
  "o4": 100_000
}

export const outputCapOf = (model: string | null): number => {
  if (model === null) return DEFAULT_OUTPUT_CAP
  const name = model.includes("/") ? model.slice(model.lastIndexOf("/") + 1) : model
  let best: string | null = null
  for (const k of Object.keys(outputCaps)) if (name.startsWith(k) && (best === null || k.length > best.length)) best = k
  return best === null ? DEFAULT_OUTPUT_CAP : outputCaps[best] ?? DEFAULT_OUTPUT_CAP
}

const count = (u: unknown): number | undefined => (typeof u === "number" && Number.isFinite(u) && u > 0 ? Math.ceil(u) : undefined)

/** The estimate of one request body (JSON; a body that is not JSON gets the defaults); `pathModel`: the model named by the path (Gemini). */
export const estimateOf = (body: Uint8Array, pathModel?: string): RequestEstimate => {
  let j: Record<string, unknown> = {}
  try {
    const parsed: unknown = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8"))
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) j = parsed as Record<string, unknown>
  } catch {
    // not JSON: the upstream will refuse it; the defaults hold it meanwhile
  }
  const model = pathModel ?? (typeof j["model"] === "string" ? j["model"] : null)
  const cap = outputCapOf(model)
  const g: Record<string, unknown> = typeof j["generationConfig"] === "object" && j["generationConfig"] !== null ? j["generationConfig"] as Record<string, unknown> : {}
  const asked = [j["max_tokens"], j["max_completion_tokens"], j["max_output_tokens"], g["maxOutputTokens"]].map(count).filter((n) => n !== undefined)
  const each = Math.min(cap, asked.length === 0 ? cap : Math.max(...asked))
  const choices = Math.min(128, Math.max(count(j["n"]) ?? 1, count(g["candidateCount"]) ?? 1))
  return { model, input_tokens: Math.min(INPUT_CEILING, body.byteLength), output_tokens: each * choices, ...(choices > 1 ? { choices } : {}) }
}

/**
 * Output tokens at least as many as a stream carried, for a response that ended before its final
 * usage: one token per byte of generated text seen (`text`, `partial_json`, `thinking`, string
 * `delta`, `content`, `arguments`, `refusal`, reasoning; Gemini's function-call `args` as JSON)
 * — a token is never shorter than a byte.
 */
export class StreamedOutput {
  private bytes = 0
  note(o: unknown): void {
    if (typeof o !== "object" || o === null) return
    if (Array.isArray(o)) {
      for (const x of o) this.note(x)
      return
    }
    for (const [k, v] of Object.entries(o)) {
      if (typeof v === "string") {
        if (generated.has(k)) this.bytes += Buffer.byteLength(v, "utf8")
      } else if (k === "args" && typeof v === "object" && v !== null) {
        this.bytes += Buffer.byteLength(JSON.stringify(v), "utf8")
      } else this.note(v)
    }
  }
  /** Bytes of a line too long to read: counted as generated (never less than it could carry). */
  unread(bytes: number): void {
    this.bytes += bytes
  }
  get tokens(): number {
    return this.bytes
  }
}
const generated = new Set(["text", "partial_json", "thinking", "delta", "content", "arguments", "refusal", "reasoning", "reasoning_content"])

/** A usage no lower than what was streamed: output raised to the streamed floor. */
export const withFloor = (u: RequestUsage, streamed: number): RequestUsage =>
  u.output_tokens >= streamed ? u : { ...u, output_tokens: streamed }
