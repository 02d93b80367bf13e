// The price table: USD per million tokens per model, by longest matching prefix of the model
// name (a vendor prefix such as `anthropic/` — OpenRouter's — is ignored). Defaults for known
// models; `meter.prices` in the configuration (JSON) overrides or adds entries. A model not in
// the table costs 0 (its tokens still count); `substrat inspect` shows the model names seen.
import { Either, ParseResult, Schema } from "effect"
import type { RequestEstimate } from "./estimate.js"
import type { RequestUsage } from "./requestUsage.js"

export const Price = Schema.Struct({
  input: Schema.Number.pipe(Schema.nonNegative()),
  output: Schema.Number.pipe(Schema.nonNegative()),
  cache_read: Schema.optional(Schema.Number.pipe(Schema.nonNegative())),
  cache_write: Schema.optional(Schema.Number.pipe(Schema.nonNegative()))
})
export type Price = typeof Price.Type

export const PriceTable = Schema.Record({ key: Schema.String, value: Price })
export type PriceTable = typeof PriceTable.Type

/** USD per million tokens (list prices; cache_read/cache_write default to input × 0.1 / × 1.25). */
export const defaultPrices: PriceTable = {
  "claude-opus-4-5": { input: 5, output: 25, cache_read: 0.5, cache_write: 6.25 },
  "claude-opus-4": { input: 15, output: 75, cache_read: 1.5, cache_write: 18.75 },
  "claude-sonnet-4": { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 },
  "claude-3-7-sonnet": { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 },
  "claude-3-5-sonnet": { input: 3, output: 15, cache_read: 0.3, cache_write: 3.75 },
  "claude-haiku-4-5": { input: 1, output: 5, cache_read: 0.1, cache_write: 1.25 },
  "claude-3-5-haiku": { input: 0.8, output: 4, cache_read: 0.08, cache_write: 1 },
  "gpt-5-nano": { input: 0.05, output: 0.4, cache_read: 0.005 },
  "gpt-5-mini": { input: 0.25, output: 2, cache_read: 0.025 },
  "gpt-5": { input: 1.25, output: 10, cache_read: 0.125 },
  "gpt-4.1-nano": { input: 0.1, output: 0.4, cache_read: 0.025 },
  "gpt-4.1-mini": { input: 0.4, output: 1.6, cache_read: 0.1 },
  "gpt-4.1": { input: 2, output: 8, cache_read: 0.5 },
  "gpt-4o-mini": { input: 0.15, output: 0.6, cache_read: 0.075 },
  "gpt-4o": { input: 2.5, output: 10, cache_read: 1.25 },
  "o4-mini": { input: 1.1, output: 4.4, cache_read: 0.275 },
  "o3": { input: 2, output: 8, cache_read: 0.5 },
  // Gemini (Developer API, standard tier; docs/budgets.md says what each figure was checked
  // against): prompts up to 200k tokens (2.5 Pro's longer ones cost more: set `meter.prices`);
  // text input (2.5 Flash's audio input costs more). Gemini reports no cache writes (implicit
  // caching has no write charge; explicit caches, `cachedContents`, are off the forwarder's
  // allowlist): cache_write at the input price keeps a reservation's input at the input price.
  "gemini-2.5-pro": { input: 1.25, output: 10, cache_read: 0.125, cache_write: 1.25 },
  "gemini-2.5-flash-lite": { input: 0.1, output: 0.4, cache_read: 0.01, cache_write: 0.1 },
  "gemini-2.5-flash": { input: 0.3, output: 2.5, cache_read: 0.03, cache_write: 0.3 }
}

const decodeTable = Schema.decodeUnknownEither(Schema.parseJson(PriceTable))

/** Parse the `meter.prices` setting (JSON); Left: why not, in words. */
export const parsePrices = (json: string): Either.Either<PriceTable, string> =>
  Either.mapLeft(decodeTable(json), (e) => ParseResult.TreeFormatter.formatErrorSync(e))

/** The defaults with `overrides` on top. */
export const priceTable = (overrides: PriceTable = {}): PriceTable => ({ ...defaultPrices, ...overrides })

/** The entry for `model` (longest matching prefix), or null. */
export const priceOf = (table: PriceTable, model: string | null): Price | null => {
  if (model === null) return null
  const name = model.includes("/") ? model.slice(model.lastIndexOf("/") + 1) : model
  let best: string | null = null
  for (const k of Object.keys(table)) {
    if ((name === k || name.startsWith(k)) && (best === null || k.length > best.length)) best = k
  }
  return best === null ? null : table[best] ?? null
}

/** What one request cost: the upstream's own figure when it gave one, else the table's. */
export const costOf = (table: PriceTable, u: RequestUsage): number => {
  if (u.reported_cost_usd !== null) return u.reported_cost_usd
  const p = priceOf(table, u.model)
  if (p === null) return 0
  const perToken = (n: number, usdPerMillion: number) => (n * usdPerMillion) / 1_000_000
  return perToken(u.input_tokens, p.input) +
    perToken(u.output_tokens, p.output) +
    perToken(u.cache_read_tokens, p.cache_read ?? p.input * 0.1) +
    perToken(u.cache_write_tokens, p.cache_write ?? p.input * 1.25)
}

/**
 * The most a request of `estimate` can cost by the table: its input at the dearer of the input
 * and cache-write prices, its output at the output price (0 for a model not in the table).
 */
export const maxCostOf = (table: PriceTable, estimate: RequestEstimate): number => {
  const p = priceOf(table, estimate.model)
  if (p === null) return 0
  return (estimate.input_tokens * Math.max(p.input, p.cache_write ?? p.input * 1.25) + estimate.output_tokens * p.output) / 1_000_000
}
