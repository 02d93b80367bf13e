// Metering at the model forwarder: a forwarder relays to the scripted Anthropic / OpenAI endpoint
// (over its Unix socket, as the per-agent forwarders relay to the daemon's), reads the usage of
// every model response — streamed (SSE) and plain JSON, Anthropic Messages, Chat Completions,
// Responses and the Gemini API — and refuses the next request once `admit` says so, without reaching the upstream.
// Each model request's span (`meter.span`, recorded here) gets its status, streamed, usage and
// cost, and ends once; a refusal or an upstream error status ends it as a failure.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schedule } from "effect"
import * as Http from "node:http"
import * as Path from "node:path"
import type { RequestUsage } from "../../src/domain/requestUsage.js"
import { costOf, priceTable } from "../../src/domain/prices.js"
import { BudgetExceeded } from "../../src/domain/errors.js"
import type { SessionId } from "../../src/domain/ids.js"
import * as ModelForwarder from "../../src/provider/cli/ModelForwarder.js"
import type { Hold } from "../../src/provider/ModelMeter.js"
import type { ModelRequestSpan } from "../../src/telemetry/Tracing.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { makeTmpDir } from "../support/tmp.js"
import { post } from "../support/unixPost.js"

const usage = { input_tokens: 120, output_tokens: 34, cache_read_tokens: 1000, cache_write_tokens: 50 }
const reply: ScriptedLlm.Reply = { _tag: "Message", content: [{ type: "text", text: "hello there, metered" }], usage }

/** A model request's span as the forwarder drove it: its attributes, and how it ended (undefined: open). */
interface SpanRecord {
  readonly attributes: Record<string, string | number | boolean>
  ends: Array<{ readonly type: string; readonly message: string } | null>
}

const exceeded = new BudgetExceeded({
  agent_id: "a",
  owner_id: "a",
  owner_name: "solo",
  limit: "usd",
  reason: "USD budget spent",
  message: "this agent's USD budget spent"
})

const setup = (refuseAfter: number, answer: ScriptedLlm.Reply = reply) =>
  Effect.gen(function*() {
    const dir = makeTmpDir("mf-")
    const llm = yield* ScriptedLlm.make({ listen: { socketPath: Path.join(dir, "up.sock") }, fallback: answer })
    const recorded: Array<RequestUsage> = []
    const holds: Array<Hold> = []
    const spans: Array<SpanRecord> = []
    const span = Effect.sync((): ModelRequestSpan => {
      const rec: SpanRecord = { attributes: {}, ends: [] }
      spans.push(rec)
      return {
        annotate: (a) => void Object.assign(rec.attributes, a),
        end: (failure) => Effect.sync(() => void rec.ends.push(failure ?? null))
      }
    })
    const meter: ModelForwarder.ForwarderMeter = {
      reserve: () =>
        Effect.suspend(() => {
          if (holds.length >= refuseAfter) return Effect.fail(exceeded)
          const h = { id: `h${holds.length}`, session: "s" as SessionId, cost_usd: 0, tokens: 0 }
          holds.push(h)
          return Effect.succeed(h)
        }),
      settle: (_h, u) =>
        Effect.sync(() => {
          if (u === null) return 0
          recorded.push(u)
          return recorded.length / 1000
        }),
      span
    }
    const forwarder = (api: "anthropic" | "openai" | "gemini") =>
      ModelForwarder.serve({
        socketPath: Path.join(dir, `agent-${api}.sock`),
        upstream: "http://localhost",
        upstreamSocket: Path.join(dir, "up.sock"),
        credential: null,
        api,
        meter
      })
    const socketPath = (yield* forwarder("anthropic")).socketPath
    const openaiSocket = (yield* forwarder("openai")).socketPath
    const geminiSocket = (yield* forwarder("gemini")).socketPath
    return { llm, recorded, socketPath, openaiSocket, geminiSocket, spans }
  })

/** Wait until every span has ended (a span ends after its response reached the client). */
const allEnded = (spans: ReadonlyArray<SpanRecord>, n: number) =>
  Effect.suspend(() => spans.length === n && spans.every((s) => s.ends.length > 0) ? Effect.void : Effect.fail("open")).pipe(
    Effect.retry(Schedule.spaced("10 millis").pipe(Schedule.upTo("10 seconds"))),
    Effect.orDie
  )

const anthropic = (stream: boolean) => ({
  model: "claude-sonnet-4-5",
  max_tokens: 100,
  stream,
  messages: [{ role: "user", content: "hi" }]
})
const chat = (stream: boolean) => ({
  model: "gpt-4o-mini",
  stream,
  ...(stream ? { stream_options: { include_usage: true } } : {}),
  messages: [{ role: "user", content: "hi" }]
})
const responses = (stream: boolean) => ({ model: "gpt-5", stream, input: "hi" })
const gemini = { contents: [{ role: "user", parts: [{ text: "hi" }] }], generationConfig: { maxOutputTokens: 100 } }

describe("metering at the model forwarder", () => {
  it.scoped("reads exact usage from every format, streamed and not", () =>
    Effect.gen(function*() {
      const { recorded, socketPath, openaiSocket, geminiSocket, spans } = yield* setup(Infinity)
      const cases = [
        ["/v1/messages", anthropic(false), "claude-sonnet-4-5"],
        ["/v1/messages", anthropic(true), "claude-sonnet-4-5"],
        ["/v1/chat/completions", chat(false), "gpt-4o-mini"],
        ["/v1/chat/completions", chat(true), "gpt-4o-mini"],
        ["/v1/responses", responses(false), "gpt-5"],
        ["/v1/responses", responses(true), "gpt-5"],
        ["/v1beta/models/gemini-2.5-flash:generateContent", { ...gemini, stream: false }, "gemini-2.5-flash"],
        ["/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", { ...gemini, stream: true }, "gemini-2.5-flash"]
      ] as const
      for (const [path, body] of cases) {
        const socket = path === "/v1/messages" ? socketPath : path.startsWith("/v1beta/") ? geminiSocket : openaiSocket
        const r = yield* post(socket, path, body)
        expect([path, body.stream, r.status]).toEqual([path, body.stream, 200])
      }
      // Records land when each response has ended (its span ends after that); count_tokens records none.
      yield* post(socketPath, "/v1/messages/count_tokens", anthropic(false))
      yield* allEnded(spans, cases.length)
      expect(recorded.length).toBe(cases.length)
      recorded.forEach((u, i) => {
        const [, , model] = cases[i]!
        const anth = i < 2
        expect(u).toEqual({
          model,
          input_tokens: 120,
          output_tokens: 34,
          cache_read_tokens: 1000,
          // The OpenAI and Gemini formats have no cache writes.
          cache_write_tokens: anth ? 50 : 0,
          reported_cost_usd: null
        })
      })
      // One span per model request (count_tokens is none), ended once, with the usage and the meter's cost.
      yield* allEnded(spans, cases.length)
      spans.forEach((sp, i) => {
        const [path, body, model] = cases[i]!
        expect(sp.ends).toEqual([null])
        expect(sp.attributes).toEqual({
          "http.request.method": "POST",
          "url.path": path.split("?")[0],
          "http.response.status_code": 200,
          "substrat.model.streamed": body.stream,
          "gen_ai.response.model": model,
          "gen_ai.usage.input_tokens": 120,
          "gen_ai.usage.output_tokens": 34,
          "gen_ai.usage.cache_read.input_tokens": 1000,
          "gen_ai.usage.cache_creation.input_tokens": i < 2 ? 50 : 0,
          "substrat.cost_usd": (i + 1) / 1000
        })
      })
      // claude-sonnet-4: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million.
      expect(costOf(priceTable(), recorded[0]!)).toBeCloseTo((120 * 3 + 34 * 15 + 1000 * 0.3 + 50 * 3.75) / 1e6, 12)
      // gemini-2.5-flash: $0.30 in, $2.50 out, $0.03 cache read per million.
      expect(costOf(priceTable(), recorded[7]!)).toBeCloseTo((120 * 0.3 + 34 * 2.5 + 1000 * 0.03) / 1e6, 12)
    }))

  it.scoped("a refused request gets a clear 400 and never reaches the upstream", () =>
    Effect.gen(function*() {
      const { llm, recorded, socketPath, spans } = yield* setup(1)
      const ok = yield* post(socketPath, "/v1/messages", anthropic(true))
      expect(ok.status).toBe(200)
      const refused = yield* post(socketPath, "/v1/messages", anthropic(false))
      expect(refused.status).toBe(400)
      expect(JSON.parse(refused.body)).toMatchObject({ error: { message: "substrat: this agent's USD budget spent" } })
      expect((yield* llm.modelRequests).length).toBe(1)
      expect(recorded.length).toBe(1)
      // The refused request is a span too: status 400, ended as a failure naming the budget.
      yield* allEnded(spans, 2)
      expect(spans[0]!.ends).toEqual([null])
      expect(spans[1]!.attributes).toEqual({ "http.request.method": "POST", "url.path": "/v1/messages", "http.response.status_code": 400, "substrat.model.refused": true })
      expect(spans[1]!.ends).toEqual([{ type: "substrat_budget", message: "this agent's USD budget spent" }])
    }))

  it.scoped("an upstream error status ends the request's span as a failure with that status", () =>
    Effect.gen(function*() {
      const { spans, socketPath } = yield* setup(Infinity, ScriptedLlm.Reply.error(429, "slow down"))
      const r = yield* post(socketPath, "/v1/messages", anthropic(false))
      expect(r.status).toBe(429)
      yield* allEnded(spans, 1)
      expect(spans[0]!.attributes["http.response.status_code"]).toBe(429)
      expect(spans[0]!.ends).toEqual([{ type: "429", message: "HTTP 429 from the model API" }])
    }))
  it.scoped("side doors get a 403 at both forwarders: the upstream never sees one, nor the key outside a model request", () =>
    Effect.gen(function*() {
      const dir = makeTmpDir("mfk-")
      const llm = yield* ScriptedLlm.make({ listen: { socketPath: Path.join(dir, "up.sock") }, fallback: reply })
      const keyed = yield* ModelForwarder.serve({
        socketPath: Path.join(dir, "keyed.sock"),
        api: "anthropic",
        upstream: "http://localhost",
        upstreamSocket: Path.join(dir, "up.sock"),
        credential: { header: "x-api-key", value: "sk-real-key" }
      })
      const refused: Array<string> = []
      const agent = yield* ModelForwarder.serve({
        socketPath: Path.join(dir, "agent.sock"),
        api: "anthropic",
        upstream: "http://localhost",
        upstreamSocket: keyed.socketPath,
        credential: null,
        meter: {
          reserve: () => Effect.succeed({ id: "h", session: "s" as SessionId, cost_usd: 0, tokens: 0 }),
          settle: () => Effect.succeed(0),
          refused: (r) => Effect.sync(() => void refused.push(`${r.method} ${r.path}`))
        }
      })
      const doors = [
        "/v1/messages/batches", "/v1/complete", "/v1/files", "/v1/models", "/V1/MESSAGES", "/v1/messages%2fbatches",
        "/v1%2fmessages", "/v1/./messages", "/v1/x/../messages", "/v1/messages;", "/v1//messages", "/v1/messages/", "/v1/messages?x=1"
      ]
      for (const socket of [agent.socketPath, keyed.socketPath]) {
        for (const d of doors) {
          const r = yield* post(socket, d, anthropic(false))
          expect([d, r.status]).toEqual([d, 403])
          expect(r.body).not.toContain("sk-real-key")
        }
      }
      expect(refused).toEqual(doors.map((d) => `POST ${d}`))
      expect(yield* llm.requests).toEqual([])
      // The model endpoint itself goes through, with the daemon's key (the client's is dropped).
      expect((yield* post(agent.socketPath, "/v1/messages?beta=true", anthropic(false))).status).toBe(200)
      const seen = yield* llm.requests
      expect(seen.map((r) => [r.method, r.path, r.headers["x-api-key"]])).toEqual([["POST", "/v1/messages?beta=true", "sk-real-key"]])
    }))

  it.scoped("Gemini: side doors, model names that leave the path and oversized bodies never reach the upstream; the key is the daemon's", () =>
    Effect.gen(function*() {
      const dir = makeTmpDir("mfg-")
      const llm = yield* ScriptedLlm.make({ listen: { socketPath: Path.join(dir, "up.sock") }, fallback: reply })
      const keyed = yield* ModelForwarder.serve({
        socketPath: Path.join(dir, "keyed.sock"),
        api: "gemini",
        upstream: "http://localhost",
        upstreamSocket: Path.join(dir, "up.sock"),
        credential: { header: "x-goog-api-key", value: "AIza-daemon-only" },
        maxBodyBytes: 64 * 1024
      })
      const refused: Array<string> = []
      const reserved: Array<string | null> = []
      const agent = yield* ModelForwarder.serve({
        socketPath: Path.join(dir, "agent.sock"),
        api: "gemini",
        upstream: "http://localhost",
        upstreamSocket: keyed.socketPath,
        credential: null,
        maxBodyBytes: 64 * 1024,
        meter: {
          reserve: (e) => Effect.sync(() => (reserved.push(e.model), { id: "h", session: "s" as SessionId, cost_usd: 0, tokens: 0 })),
          settle: () => Effect.succeed(0),
          refused: (r) => Effect.sync(() => void refused.push(`${r.method} ${r.path}`))
        }
      })
      const doors = [
        "/v1beta/models/gemini-2.5-flash:embedContent", "/v1beta/models", "/v1beta/files", "/upload/v1beta/files", "/v1beta/cachedContents",
        "/v1/models/gemini-2.5-flash:generateContent", "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        "/v1beta/models/gemini-2.5-flash:generateContent?key=AIza-sandbox", "/v1beta/models/../files:generateContent",
        "/v1beta/models/x/../../files:generateContent", "/v1beta/models/%2e%2e%2Ffiles:generateContent", "/v1beta/models/a%2Fb:generateContent",
        "/v1beta/models/a/b:generateContent", "/v1beta/models/a:embedContent:generateContent", "/v1beta/models/..:generateContent",
        "/v1beta//models/a:generateContent", "/v1beta/models/a;x:generateContent"
      ]
      for (const socket of [agent.socketPath, keyed.socketPath]) {
        for (const d of doors) {
          const r = yield* send(socket, d, JSON.stringify(gemini))
          expect([d, r.status]).toEqual([d, 403])
          // Google's error shape, naming what is relayed; never the key.
          expect(JSON.parse(r.body)).toMatchObject({ error: { code: 403, status: "PERMISSION_DENIED" } })
          expect(r.body).not.toContain("AIza-daemon-only")
        }
        // A body over the limit: 413, declared or streamed.
        const big = JSON.stringify({ contents: [{ role: "user", parts: [{ text: "x".repeat(100 * 1024) }] }] })
        expect((yield* send(socket, "/v1beta/models/gemini-2.5-flash:generateContent", big)).status).toBe(413)
        expect((yield* send(socket, "/v1beta/models/gemini-2.5-flash:generateContent", big, { chunked: true })).status).toBe(413)
      }
      expect(refused).toEqual(doors.map((d) => `POST ${d}`))
      expect(reserved).toEqual([])
      expect(yield* llm.requests).toEqual([])
      // The model endpoint goes through with the daemon's key in place of the sandbox's.
      const ok = yield* send(agent.socketPath, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", JSON.stringify(gemini), {
        headers: { "x-goog-api-key": "AIza-sandbox" }
      })
      expect(ok.status).toBe(200)
      expect(reserved).toEqual(["gemini-2.5-flash"])
      const seen = yield* llm.requests
      expect(seen.map((r) => [r.method, r.path, r.headers["x-goog-api-key"]])).toEqual([
        ["POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "AIza-daemon-only"]
      ])
    }))
})

/** A POST over a Unix socket with extra headers, or a chunked body (no content-length). */
const send = (socketPath: string, path: string, body: string, o: { readonly headers?: Record<string, string>; readonly chunked?: boolean } = {}) =>
  Effect.async<{ readonly status: number; readonly body: string }>((resume) => {
    const req = Http.request(
      { socketPath, path, method: "POST", agent: false, headers: { "content-type": "application/json", ...o.headers } },
      (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (c: string) => (text += c))
        res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, body: text })))
      }
    )
    // A body the forwarder stops reading: its answer may come before the upload ends.
    req.on("error", () => undefined)
    if (o.chunked === true) {
      req.write(body.slice(0, 1000))
      req.end(body.slice(1000))
    } else {
      req.setHeader("content-length", Buffer.byteLength(body))
      req.end(body)
    }
  })
