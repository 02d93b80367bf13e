// The model forwarder's allowlist (docs/sandbox.md, "The model forwarder"): the only requests a
// sandbox may send through its forwarder socket, per API — exactly these methods, paths and
// query strings, matched on the request target as sent. A target with an ambiguous spelling
// (percent-escapes, `;`, backslashes, empty, `.` or `..` segments, anything but printable ASCII)
// is refused before any matching, so no upstream can read it as something else. The Gemini API
// names the model in the path (`/v1beta/models/{model}:streamGenerateContent`): `{model}` matches
// one plain name only — a letter or digit, then letters, digits, `.`, `_`, `-` (at most 128) —,
// never a `/`, `:` or escape that could reach another upstream path. Pure.
import type { ModelApi } from "../../domain/requestUsage.js"

/** What an allowed request is: a model generation (reserved and metered), a token count (budget-checked), a probe (answered here). */
export type RouteKind = "model" | "count" | "probe"

interface Route {
  readonly method: string
  /** The path as sent; `{model}` stands for one model name (MODEL_NAME). */
  readonly path: string
  readonly kind: RouteKind
  /** Query strings allowed as sent ("" = none). */
  readonly queries: ReadonlyArray<string>
}

/**
 * Per API, what its clients need: Claude Code sends Messages (`?beta=true`), sometimes
 * count_tokens, and a `HEAD /api/hello` connectivity probe; Codex sends Responses; Chat
 * Completions is the OpenAI-compatible generation endpoint; Gemini CLI sends streamGenerateContent
 * (`?alt=sse`), sometimes generateContent and countTokens, with its key in `x-goog-api-key`.
 */
export const routes: { readonly [A in ModelApi]: ReadonlyArray<Route> } = {
  anthropic: [
    { method: "POST", path: "/v1/messages", kind: "model", queries: ["", "beta=true"] },
    { method: "POST", path: "/v1/messages/count_tokens", kind: "count", queries: ["", "beta=true"] },
    { method: "HEAD", path: "/api/hello", kind: "probe", queries: [""] }
  ],
  openai: [
    { method: "POST", path: "/v1/responses", kind: "model", queries: [""] },
    { method: "POST", path: "/v1/chat/completions", kind: "model", queries: [""] }
  ],
  gemini: [
    { method: "POST", path: "/v1beta/models/{model}:streamGenerateContent", kind: "model", queries: ["alt=sse"] },
    { method: "POST", path: "/v1beta/models/{model}:generateContent", kind: "model", queries: [""] },
    { method: "POST", path: "/v1beta/models/{model}:countTokens", kind: "count", queries: [""] }
  ]
}

/** A model name in a path: nothing an upstream could read as more than one segment or another action. */
export const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/

/** `path` against a route's path: the model it names (`{model}`), "" without one, null: no match. */
const matchPath = (route: string, path: string): string | null => {
  const at = route.indexOf("{model}")
  if (at < 0) return route === path ? "" : null
  const head = route.slice(0, at)
  const tail = route.slice(at + "{model}".length)
  if (!path.startsWith(head) || !path.endsWith(tail) || path.length <= head.length + tail.length) return null
  const model = path.slice(head.length, path.length - tail.length)
  return MODEL_NAME.test(model) ? model : null
}

export type Verdict =
  | {
    readonly _tag: "allow"
    readonly kind: RouteKind
    readonly path: string
    /** The model named by the path (Gemini), else undefined: the body names it. */
    readonly model?: string
  }
  | { readonly _tag: "refuse"; readonly reason: string }

const printable = /^[\x21-\x7e]*$/

/** Why `target` is spelled ambiguously, or null. */
export const ambiguity = (target: string): string | null => {
  if (!target.startsWith("/")) return "the target is not an origin-form path"
  if (!printable.test(target)) return "the target has characters outside printable ASCII"
  if (target.includes("%")) return "percent-escapes are not accepted"
  if (target.includes(";")) return "';' is not accepted"
  if (target.includes("\\")) return "backslashes are not accepted"
  if (target.includes("#")) return "fragments are not accepted"
  if (target.endsWith("?")) return "an empty query ('?' with nothing after it) is not accepted"
  const path = target.split("?", 1)[0]!
  const segments = path.split("/").slice(1)
  if (segments.some((s) => s === "" || s === "." || s === "..")) return "empty, '.' and '..' path segments are not accepted"
  return null
}

/** The verdict on one request (method and target exactly as received). */
export const routeOf = (api: ModelApi, method: string | undefined, target: string | undefined): Verdict => {
  const m = method ?? ""
  const t = target ?? ""
  const why = ambiguity(t)
  if (why !== null) return { _tag: "refuse", reason: why }
  const q = t.indexOf("?")
  const path = q < 0 ? t : t.slice(0, q)
  const query = q < 0 ? "" : t.slice(q + 1)
  for (const r of routes[api]) {
    if (r.method !== m || !r.queries.includes(query)) continue
    const model = matchPath(r.path, path)
    if (model === null) continue
    return model === "" ? { _tag: "allow", kind: r.kind, path } : { _tag: "allow", kind: r.kind, path, model }
  }
  return { _tag: "refuse", reason: `${m} ${path} is not a model endpoint this forwarder relays` }
}

/** The allowlist in words, for refusal messages. */
export const allowedText = (api: ModelApi): string =>
  routes[api].filter((r) => r.kind !== "probe").map((r) => `${r.method} ${r.path}`).join(", ")
