// The model forwarder's allowlist (src/provider/cli/ForwarderRoutes.ts) and the reservation
// estimate (src/domain/estimate.ts). A request target is allowed only when it is exactly one of
// the API's routes as sent; every other spelling — case, percent-escapes (`%2f`, `%2e`), dot
// segments, doubled or trailing slashes, `;`, backslashes, absolute form, other queries — is
// refused, whatever it might normalise to upstream. The Gemini API's routes name the model in the
// path: any plain model name is allowed there, and nothing that could reach another upstream path.
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { estimateOf, outputCapOf, StreamedOutput } from "../../src/domain/estimate.js"
import type { ModelApi } from "../../src/domain/requestUsage.js"
import { ResponseTap } from "../../src/domain/requestUsage.js"
import { costOf, maxCostOf, priceTable } from "../../src/domain/prices.js"
import { routeOf, routes } from "../../src/provider/cli/ForwarderRoutes.js"

const apis: ReadonlyArray<ModelApi> = ["anthropic", "openai", "gemini"]
const sampleModels = ["gemini-2.5-flash", "gemini-scripted", "m.1_x-Y"]
/** Every allowed (api, method, target) as sent (Gemini's with a few model names). */
const allowed = apis.flatMap((api) =>
  routes[api].flatMap((r) =>
    r.queries.flatMap((q) =>
      (r.path.includes("{model}") ? sampleModels.map((m) => r.path.replace("{model}", m)) : [r.path])
        .map((path) => ({ api, method: r.method, target: q === "" ? path : `${path}?${q}` }))
    )
  )
)
/** The Gemini API's allowlist, restated: POST, v1beta, one plain model name, one of three actions, its exact query. */
const geminiAllowed = (method: string, target: string): boolean => {
  const m = /^\/v1beta\/models\/([A-Za-z0-9][A-Za-z0-9._-]*):(streamGenerateContent\?alt=sse|generateContent|countTokens)$/.exec(target)
  return method === "POST" && m !== null && m[1]!.length <= 128
}
const isAllowed = (api: ModelApi, method: string, target: string) =>
  api === "gemini" ? geminiAllowed(method, target) : allowed.some((a) => a.api === api && a.method === method && a.target === target)

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
    expect(routeOf("openai", "POST", "/v1beta/models/gemini-2.5-flash:generateContent")._tag).toBe("refuse")
    expect(routeOf("gemini", "POST", "/v1/chat/completions")._tag).toBe("refuse")
  })

  it("Gemini: the model named by the path is one plain name; other paths, actions, queries and spellings are refused", () => {
    expect(routeOf("gemini", "POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse")).toEqual({
      _tag: "allow",
      kind: "model",
      path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
      model: "gemini-2.5-flash"
    })
    expect(routeOf("gemini", "POST", "/v1beta/models/gemini-2.5-pro:countTokens")).toMatchObject({ _tag: "allow", kind: "count", model: "gemini-2.5-pro" })
    const doors = [
      // Other endpoints and versions of the API.
      "/v1beta/models/gemini-2.5-flash:embedContent", "/v1beta/models/gemini-2.5-flash:batchEmbedContents", "/v1beta/models/gemini-2.5-flash:predict",
      "/v1beta/models", "/v1beta/models/gemini-2.5-flash", "/v1beta/files", "/upload/v1beta/files", "/v1beta/cachedContents", "/v1beta/tunedModels/t:generateContent",
      "/v1/models/gemini-2.5-flash:generateContent", "/v1alpha/models/gemini-2.5-flash:generateContent",
      // Queries: the stream without alt=sse, a key in the query, anything extra.
      "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=AIza",
      "/v1beta/models/gemini-2.5-flash:generateContent?key=AIza", "/v1beta/models/gemini-2.5-flash:generateContent?alt=sse",
      // A model name that tries to leave its segment or name another action.
      "/v1beta/models/../files:generateContent", "/v1beta/models/x/../../files:generateContent", "/v1beta/models/..:generateContent",
      "/v1beta/models/.:generateContent", "/v1beta/models/.hidden:generateContent", "/v1beta/models/:generateContent",
      "/v1beta/models/a/b:generateContent", "/v1beta/models/a:embedContent:generateContent", "/v1beta/models/a:generateContent/x",
      "/v1beta/models/%2e%2e%2ffiles:generateContent", "/v1beta/models/gemini%2F..%2Fcached:generateContent", "/v1beta/models/a%3AembedContent:generateContent",
      "/v1beta/models/a\\..\\files:generateContent", "/v1beta/models/a;b:generateContent", "/v1beta/models/a b:generateContent", "/v1beta/models/a\u0000:generateContent",
      `/v1beta/models/${"m".repeat(129)}:generateContent`, "/v1beta//models/a:generateContent", "/v1beta/models/a:generateContent#x",
      "//v1beta/models/a:generateContent", "http://evil/v1beta/models/a:generateContent"
    ]
    for (const d of doors) expect([d, routeOf("gemini", "POST", d)._tag]).toEqual([d, "refuse"])
    for (const m of ["GET", "PUT", "HEAD", "post"]) {
      expect(routeOf("gemini", m, "/v1beta/models/gemini-2.5-flash:generateContent")._tag).toBe("refuse")
    }
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
      fc.stringMatching(/^[a-zA-Z0-9%./;:?=&_\\-]{0,24}$/).map((m) => `/v1beta/models/${m}`),
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
    // Gemini: the model from the path; generationConfig's cap, times its candidates.
    const g = body({ contents: [{ role: "user", parts: [{ text: "hi" }] }], generationConfig: { maxOutputTokens: 2000, candidateCount: 2 } })
    expect(estimateOf(g, "gemini-2.5-flash")).toEqual({ model: "gemini-2.5-flash", input_tokens: g.length, output_tokens: 4000, choices: 2 })
    expect(estimateOf(body({ contents: [] }), "gemini-2.5-pro").output_tokens).toBe(outputCapOf("gemini-2.5-pro"))
  })

  it("Gemini usageMetadata: cached input apart, tool-use prompt as input, thoughts as output; the final chunk's figures", () => {
    const chunk = (o: unknown) => `data: ${JSON.stringify(o)}\r\n\r\n`
    const parts = (text: string) => [{ content: { role: "model", parts: [{ text }] }, index: 0 }]
    const stream = new ResponseTap("text/event-stream", "gemini-2.5-flash")
    stream.write(Buffer.from(chunk({ candidates: parts("Hel"), usageMetadata: { promptTokenCount: 5000 }, modelVersion: "gemini-2.5-flash-001" })))
    stream.write(Buffer.from(chunk({
      candidates: [{ ...parts("lo")[0], finishReason: "STOP" }],
      usageMetadata: { promptTokenCount: 5000, cachedContentTokenCount: 4000, toolUsePromptTokenCount: 30, candidatesTokenCount: 70, thoughtsTokenCount: 25 },
      modelVersion: "gemini-2.5-flash-001"
    })))
    expect(stream.charge(999)).toEqual({
      model: "gemini-2.5-flash-001",
      input_tokens: 1030,
      output_tokens: 95,
      cache_read_tokens: 4000,
      cache_write_tokens: 0,
      reported_cost_usd: null
    })
    // A stream cut before its finish: at least what it generated (a call's args count as JSON).
    const cut = new ResponseTap("text/event-stream", "gemini-2.5-flash")
    cut.write(Buffer.from(chunk({ candidates: [{ content: { parts: [{ functionCall: { name: "f", args: { k: "x".repeat(500) } } }] } }], usageMetadata: { promptTokenCount: 10 } })))
    expect(cut.charge(999)).toMatchObject({ model: "gemini-2.5-flash", input_tokens: 10, output_tokens: 508 })
    const json = new ResponseTap("application/json", "gemini-2.5-pro")
    json.write(Buffer.from(JSON.stringify({ candidates: parts("hi"), usageMetadata: { promptTokenCount: 12, candidatesTokenCount: 3 } })))
    expect(json.charge(999)).toMatchObject({ model: "gemini-2.5-pro", input_tokens: 12, output_tokens: 3, cache_read_tokens: 0 })
  })

  it("Gemini with candidateCount 2: usageMetadata covers both candidates; final only once each finished — a stream cut after the first is charged at least what both streamed", () => {
    const chunk = (o: unknown) => `data: ${JSON.stringify(o)}\r\n\r\n`
    const cand = (index: number, text: string, finishReason?: string) => ({ content: { role: "model", parts: [{ text }] }, ...(index === 0 ? {} : { index }), ...(finishReason === undefined ? {} : { finishReason }) })
    // The reservation asks for both candidates: the forwarder hands that count to the tap.
    const body = Buffer.from(JSON.stringify({ contents: [], generationConfig: { maxOutputTokens: 1000, candidateCount: 2 } }))
    expect(estimateOf(body, "gemini-2.5-flash")).toMatchObject({ output_tokens: 2000, choices: 2 })
    // Reserved at the list prices ($0.30 in, $2.50 out per million): Gemini has no cache-write
    // premium, so the input is not reserved at a dearer price.
    expect(maxCostOf(priceTable(), estimateOf(body, "gemini-2.5-flash"))).toBeCloseTo((body.length * 0.3 + 2000 * 2.5) / 1e6, 12)
    const early = { promptTokenCount: 100, candidatesTokenCount: 2 }
    const both = { promptTokenCount: 100, candidatesTokenCount: 700, thoughtsTokenCount: 10 }
    const first = "a".repeat(300)
    const second = "b".repeat(600)
    // Candidate 0 (its index left out) finishes in the second chunk, candidate 1 in the last.
    const events = [
      chunk({ candidates: [cand(0, "a"), cand(1, "b")], usageMetadata: early }),
      chunk({ candidates: [cand(0, first, "STOP")], usageMetadata: early }),
      chunk({ candidates: [cand(1, second)], usageMetadata: early }),
      chunk({ candidates: [cand(1, "", "STOP")], usageMetadata: both })
    ]
    // The whole stream: its last usageMetadata once, not per candidate, not summed over chunks.
    const whole = new ResponseTap("text/event-stream", "gemini-2.5-flash", 2)
    for (const e of events) whole.write(Buffer.from(e))
    const charged = whole.charge(999)
    expect(charged).toMatchObject({ input_tokens: 100, output_tokens: 710 })
    expect(costOf(priceTable(), charged!)).toBeCloseTo((100 * 0.3 + 710 * 2.5) / 1e6, 12)
    // Cut after candidate 0 finished, while candidate 1 still streams: not final — at least the
    // bytes both candidates streamed (1 + 1 + 300 + 600), not the early chunk's 2 tokens.
    const cut = new ResponseTap("text/event-stream", "gemini-2.5-flash", 2)
    for (const e of events.slice(0, 3)) cut.write(Buffer.from(e))
    expect(cut.charge(999)).toMatchObject({ input_tokens: 100, output_tokens: 902 })
    // A whole JSON body holds every candidate: its usage is final as it is.
    const json = new ResponseTap("application/json", "gemini-2.5-pro", 2)
    json.write(Buffer.from(JSON.stringify({ candidates: [cand(0, "x", "STOP"), cand(1, "y", "STOP")], usageMetadata: { promptTokenCount: 12, candidatesTokenCount: 40 } })))
    expect(json.charge(999)).toMatchObject({ input_tokens: 12, output_tokens: 40 })
  })

  it("an event-stream line over 32 MiB is not held: skipped to its end, its bytes charged as output, the next events read", () => {
    const line = `data: ${JSON.stringify({ type: "message_start", message: { model: "m", usage: { input_tokens: 10, output_tokens: 1 } }, pad: "x".repeat(33 * 1024 * 1024) })}`
    const tap = new ResponseTap("text/event-stream", null)
    const bytes = Buffer.from(`${line}\n\n`)
    for (let at = 0; at < bytes.length; at += 1024 * 1024) tap.write(bytes.subarray(at, at + 1024 * 1024))
    tap.write(Buffer.from(`data: ${JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "hi" } })}\n\n`))
    // The long line's usage is not read (it was not held); the charge is never below what it could carry.
    expect(tap.charge(999)).toMatchObject({ model: null, input_tokens: 999, output_tokens: line.length + 2 })
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
