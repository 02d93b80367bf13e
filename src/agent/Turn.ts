// One turn's data: its outcome, its span, what its provider output adds up to, and how a provider
// tool call's result and a failure are written into the log. Pure; TurnRunner runs the turn.
import type { Tracer } from "effect"
import { ProviderError } from "../domain/errors.js"
import { isJsonValue } from "../domain/events.js"
import type { TurnId } from "../domain/ids.js"
import { addUsage, type UsageTotals, zeroUsage } from "../domain/usage.js"
import type { ProviderOutput } from "../provider/Provider.js"

export interface TurnOutcome {
  readonly turn_id: TurnId
  readonly prompt: string
  /** The final text (or the concatenated chunks); "" when the turn failed. */
  readonly response: string
  readonly usage: UsageTotals
  /** Null when the turn completed. */
  readonly error: { readonly reason: string; readonly message: string } | null
  /** Set when the failed turn was parked (a budget on its path ran out): why. */
  readonly parked?: string
}

/** The turn's span: its parent (none: a root), links and attributes. */
export interface TurnSpan {
  readonly parent: Tracer.AnySpan | undefined
  readonly links: ReadonlyArray<Tracer.SpanLink>
  readonly attributes: Record<string, unknown>
}

/** What a turn's provider output adds up to so far (also when the turn fails half-way). */
export class Tally {
  chunks = ""
  final: string | null = null
  usage: UsageTotals = zeroUsage
  sawUsage = false
  /** `turn.start` is durable (with the delivery of the messages the prompt took). */
  startLogged = false

  add(out: ProviderOutput): void {
    if (out._tag === "TextChunk") this.chunks += out.text
    else if (out._tag === "Final") this.final = out.text
    else if (out._tag === "Usage") {
      this.sawUsage = true
      this.usage = addUsage(this.usage, out)
    }
  }

  get response(): string {
    return this.final ?? this.chunks
  }
}

/** A provider tool's result as logged: JSON, and at most this many characters of it. */
const PROVIDER_RESULT_MAX = 8192
export const loggable = (u: unknown): unknown => {
  const json = isJsonValue(u) ? u : String(u)
  const text = JSON.stringify(json)
  return text.length <= PROVIDER_RESULT_MAX ? json : { truncated: true, chars: text.length, preview: text.slice(0, PROVIDER_RESULT_MAX) }
}

/** A turn's failure as `provider.error` logs it. */
export const describeFailure = (e: unknown): { reason: string; message: string } =>
  e instanceof ProviderError
    ? { reason: e.reason, message: e.message }
    : typeof e === "object" && e !== null && "_tag" in e && "message" in e
    ? { reason: String(e._tag), message: String(e.message) }
    : { reason: "unknown", message: String(e) }
