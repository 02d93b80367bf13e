// Settings of the `openai` provider (a bare OpenAI-compatible Chat Completions endpoint: OpenAI,
// OpenRouter, a local server). The daemon calls the endpoint itself (the model never runs in a
// sandbox), so the key stays in the daemon's memory as a Redacted and is sent only as the
// `Authorization: Bearer` header of model requests — never logged, never written to disk.
//
//   SUBSTRAT_OPENAI_BASE_URL      the API base, `/chat/completions` is appended (default
//                                 https://api.openai.com/v1; https://openrouter.ai/api/v1 when
//                                 only OPENROUTER_API_KEY is set)
//   SUBSTRAT_OPENAI_API_KEY       the key (else OPENAI_API_KEY, else OPENROUTER_API_KEY)
//   SUBSTRAT_OPENAI_MODEL         the model when the provider string has no variant (`openai`);
//                                 `openai:<model>` names it per agent
//   SUBSTRAT_OPENAI_MAX_STEPS     model calls per turn before the turn fails (default 25)
//   SUBSTRAT_OPENAI_TIMEOUT_MS    wait for the response headers, and at most this long between
//                                 two chunks of a streamed response (default 120000)
//   SUBSTRAT_OPENAI_MAX_RETRIES   retries of a request that failed before its body started with
//                                 a retryable error (connection refused/reset, 408, 409, 429, 5xx;
//                                 default 2, backoff from SUBSTRAT_OPENAI_RETRY_DELAY_MS = 500)
import { Context, Effect, Layer, Option, Redacted } from "effect"
import type { Settings } from "../../config/Config.js"
import { ProviderError } from "../../domain/errors.js"

export interface OpenAiSettingsShape {
  /** The API base URL, without a trailing `/chat/completions`. */
  readonly baseUrl: string
  /** True when the base URL was configured explicitly (a local server may need no key). */
  readonly baseUrlConfigured: boolean
  readonly apiKey: Option.Option<Redacted.Redacted<string>>
  /** The model for the provider string `openai` (no variant); null: a variant is required. */
  readonly defaultModel: string | null
  readonly maxSteps: number
  readonly timeoutMs: number
  readonly maxRetries: number
  readonly retryDelayMs: number
}

export class OpenAiSettings extends Context.Tag("substrat/provider/OpenAiSettings")<OpenAiSettings, OpenAiSettingsShape>() {
  static readonly layer = (settings: OpenAiSettingsShape): Layer.Layer<OpenAiSettings> => Layer.succeed(OpenAiSettings, settings)
}

export const defaultBaseUrl = "https://api.openai.com/v1"
export const openRouterBaseUrl = "https://openrouter.ai/api/v1"

/** Settings with the defaults, for tests and embedders: `defaults({ baseUrl, apiKey: … })`. */
export const defaults = (overrides: Partial<OpenAiSettingsShape> = {}): OpenAiSettingsShape => ({
  baseUrl: defaultBaseUrl,
  baseUrlConfigured: overrides.baseUrl !== undefined,
  apiKey: Option.none(),
  defaultModel: null,
  maxSteps: 25,
  timeoutMs: 120_000,
  maxRetries: 2,
  retryDelayMs: 500,
  ...overrides
})

/** The settings from the configuration (src/config/Config.ts; names in the header). */
export const fromConfig = (config: Settings): OpenAiSettingsShape => {
  const o = config.openai
  const ownKey = Option.orElse(o.apiKey, () => config.credentials.openaiApiKey)
  const routerKey = config.credentials.openrouterApiKey
  const base = Option.getOrUndefined(o.baseUrl)
  return {
    baseUrl: (base ?? (Option.isNone(ownKey) && Option.isSome(routerKey) ? openRouterBaseUrl : defaultBaseUrl)).replace(/\/+$/, ""),
    baseUrlConfigured: base !== undefined,
    apiKey: Option.orElse(ownKey, () => routerKey),
    defaultModel: Option.getOrNull(o.model),
    maxSteps: o.maxSteps,
    timeoutMs: o.timeoutMs,
    maxRetries: o.maxRetries,
    retryDelayMs: o.retryDelayMs
  }
}

/** The chat completions URL of these settings. */
export const completionsUrl = (s: OpenAiSettingsShape): string => `${s.baseUrl.replace(/\/+$/, "")}/chat/completions`

const notReady = (message: string) => new ProviderError({ provider: "openai", reason: "missing-binary", message })

/**
 * Readiness (the factory's `check`): an endpoint is configured — a key, or an explicit base URL
 * (a local server may need none). The reason is `missing-binary`, the port's "not installed"
 * reason, so `agent create` and `spawn_agent` refuse the provider up front like a missing CLI.
 */
export const checkSettings = (s: OpenAiSettingsShape): Effect.Effect<void, ProviderError> =>
  Effect.suspend(() => {
    try {
      const u = new URL(completionsUrl(s))
      if (u.protocol !== "http:" && u.protocol !== "https:") {
        return Effect.fail(notReady(`openai: SUBSTRAT_OPENAI_BASE_URL must be http(s), got ${u.protocol}`))
      }
    } catch {
      return Effect.fail(notReady(`openai: SUBSTRAT_OPENAI_BASE_URL is not a URL: ${s.baseUrl}`))
    }
    return Option.isNone(s.apiKey) && !s.baseUrlConfigured
      ? Effect.fail(notReady(
        "openai: no endpoint configured — set SUBSTRAT_OPENAI_API_KEY (or OPENAI_API_KEY / OPENROUTER_API_KEY) in the daemon's environment, or SUBSTRAT_OPENAI_BASE_URL for a server that needs no key"
      ))
      : Effect.void
  })

/** The model of a provider string's variant (`openai:<model>`), else the default; null: none. */
export const modelFor = (s: OpenAiSettingsShape, variant: string | null): string | null =>
  variant !== null && variant.trim() !== "" ? variant.trim() : s.defaultModel
