// The model forwarder's allowlist (src/provider/cli/ForwarderRoutes.ts) and the reservation
// estimate (src/domain/estimate.ts). A request target is allowed only when it is exactly one of
// the API's routes as sent; every other spelling — case, percent-escapes (`%2f`, `%2e`), dot
// segments, doubled or trailing slashes, `;`, backslashes, absolute form, other queries — is
// refused, whatever it might normalise to upstream.
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { estimateOf, outputCapOf, StreamedOutput } from "../../src/domain/estimate.js"
import type { ModelApi } from "../../src/domain/requestUsage.js"
import { ResponseTap } from "../../src/domain/requestUsage.js"
import { routeOf, routes } from "../../src/provider/cli/ForwarderRoutes.js"

const apis: ReadonlyArray<ModelApi> = ["anthropic", "openai"]
/** Every allowed (api, method, target) as sent. */
const allowed = apis.flatMap((api) =>
  routes[api].flatMap((r) => r.queries.map((q) => ({ api, method: r.method, target: q === "" ? r.path : `${r.path}?${q}` })))
)
const isAllowed = (api: ModelApi, method: string, target: string) =>
  allowed.some((a) => a.api === api && a.method === method && a.target === target)

/** Ways to spell an allowed target that some server might read as the same (or a sibling) endpoint. */
const respell = (target: string): fc.Arbitrary<string> => {
  const path = target.split("?")[0]!
  const i = fc.nat({ max: Math.max(0, path.length - 1) })
  const hex = (c: string) => `%${c.charCodeAt(0).toString(16).padStart(2, "0")}`
  return fc.oneof(
    fc.tuple(i, fc.boolean()).map(([k, up]) => {
      const c = path[k]!
      const swapped = up ? c.toUpperCase() : c.toLowerCase() === c ? c.toUpperCase() : c.toLowerCase()
      return path.slice(0, k) + swapped + path.slice(k + 1)
    }),
    i.map((k) => path.slice(0, k) + hex(path[k]!) + path.slice(k + 1)),
    fc.constantFrom(
      path.replace(/\//g, "%2f"),
      path.replace(/\//g, "%2F"),
      path.replace("/v1/", "/v1/%2e/"),
      path.replace("/v1/", "/v1/./"),
      path.replace("/v1/", "/x/../v1/"),
      path.replace("/v1/", "/v1//"),
      `/${path}`,
      `${path}/`,
      `${path};`,
      `${path};x=1`,
      path.replace(/\//g, "\\"),
      `http://localhost${path}`,
      `${path}#x`,
      `${path}?beta=true&x=1`,
      `${path}?x`,
      `${path}/batches`,
      `${path}%00`,
      `${path} `,
      path.replace("/v1/", "/V1/")
    ),
    fc.tuple(i, fc.constantFrom("/", "%2f", "%2e", ".", ";", "\\", "%", "//", "/..", "?")).map(([k, s]) => path.slice(0, k) + s + path.slice(k))
  )
}

describe("the model forwarder's allowlist", () => {
  it("allows exactly the routes of each API, as sent", () => {
    for (const a of allowed) expect(routeOf(a.api, a.method, a.target)._tag).toBe("allow")
    // The other API's routes, other methods, and the side doors found in the attack pass.
    const doors = ["/v1/messages/batches", "/v1/complete", "/v1/files", "/v1/models", "/v1/messages%2fbatches", "/V1/MESSAGES", "/v1/messages/", "/v1/messages?", "/api/hello"]
    for (const d of doors) {
      expect(routeOf("anthropic", "POST", d)._tag).toBe("refuse")
      expect(routeOf("anthropic", "GET", d)._tag).toBe("refuse")
    }
    expect(routeOf("anthropic", "POST", "/v1/responses")._tag).toBe("refuse")
    expect(routeOf("openai", "POST", "/v1/messages")._tag).toBe("refuse")
    expect(routeOf("anthropic", "GET", "/v1/messages")._tag).toBe("refuse")
    expect(routeOf("openai", "GET", "/v1/models")._tag).toBe("refuse")
    expect(routeOf("openai", "POST", "/v1/responses?beta=true")._tag).toBe("refuse")
    expect(routeOf("anthropic", undefined, undefined)._tag).toBe("refuse")
  })

  it("refuses every other spelling of an allowed target (fast-check)", () => {
    fc.assert(
      fc.property(fc.constantFrom(...allowed).chain((a) => respell(a.target).map((t) => ({ ...a, t }))), ({ api, method, t }) => {
        const v = routeOf(api, method, t)
        expect(v._tag === "allow").toBe(isAllowed(api, method, t))
      }),
      { numRuns: 3000 }
    )
  })

  it("allows nothing but the list, whatever the target (fast-check)", () => {
    const target = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.stringMatching(/^\/[a-zA-Z0-9%./;?=&_\\-]{0,40}$/),
      fc.constantFrom(...allowed.map((a) => a.target)).chain((t) => fc.string({ maxLength: 6 }).map((s) => t + s))
    )
    fc.assert(
      fc.property(fc.constantFrom(...apis), fc.constantFrom("GET", "POST", "HEAD", "PUT", "DELETE", "post"), target, (api, method, t) => {
        const v = routeOf(api, method, t)
        expect(v._tag === "allow").toBe(isAllowed(api, method, t))
      }),
      { numRuns: 5000 }
    )
  })
})

describe("a request's reservation estimate", () => {
  const body = (o: unknown) => Buffer.from(JSON.stringify(o))
  it("input: one token per byte of the body; output: the request's cap, never above the model's", () => {
    const b = body({ model: "claude-sonnet-4-5", max_tokens: 32000, messages: [{ role: "user", content: "hi" }] })
    expect(estimateOf(b)).toEqual({ model: "claude-sonnet-4-5", input_tokens: b.length, output_tokens: 32000 })
    expect(estimateOf(body({ model: "gpt-4o-mini", max_tokens: 10_000_000 })).output_tokens).toBe(outputCapOf("gpt-4o-mini"))
    // No cap given: the model's; Chat Completions' n choices each get one.
    expect(estimateOf(body({ model: "gpt-4.1" })).output_tokens).toBe(32_768)
    expect(estimateOf(body({ model: "gpt-4o", max_completion_tokens: 100, n: 3 })).output_tokens).toBe(300)
    expect(estimateOf(body({ model: "gpt-5", max_output_tokens: 500 })).output_tokens).toBe(500)
    expect(estimateOf(Buffer.from("not json")).output_tokens).toBe(outputCapOf(null))
  })

  it("a stream cut before its last usage is charged at least the bytes it generated", () => {
    const text = "x".repeat(5000)
    const frames = [
      `event: message_start\ndata: ${JSON.stringify({ type: "message_start", message: { model: "m", usage: { input_tokens: 10, output_tokens: 1 } } })}\n\n`,
      `event: content_block_delta\ndata: ${JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text } })}\n\n`
    ]
    const cut = new ResponseTap("text/event-stream", null)
    for (const f of frames) cut.write(Buffer.from(f))
    expect(cut.charge(999)).toMatchObject({ input_tokens: 10, output_tokens: 5000 })
    // With its final usage the upstream's own figure stands.
    const whole = new ResponseTap("text/event-stream", null)
    for (const f of frames) whole.write(Buffer.from(f))
    whole.write(Buffer.from(`data: ${JSON.stringify({ type: "message_delta", usage: { output_tokens: 1200 } })}\n\n`))
    expect(whole.charge(999)).toMatchObject({ input_tokens: 10, output_tokens: 1200 })
    const s = new StreamedOutput()
    s.note({ delta: { text: "é" } })
    expect(s.tokens).toBe(2)
  })
})
