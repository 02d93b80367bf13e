// Metering at the model forwarder: a forwarder relays to the scripted Anthropic / OpenAI endpoint
// (over its Unix socket, as the per-agent forwarders relay to the daemon's), reads the usage of
// every model response — streamed (SSE) and plain JSON, Anthropic Messages, Chat Completions and
// Responses — and refuses the next request once `admit` says so, without reaching the upstream.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Http from "node:http"
import * as Path from "node:path"
import type { RequestUsage } from "../../src/meter/RequestUsage.js"
import { costOf, priceTable } from "../../src/meter/Prices.js"
import * as ModelForwarder from "../../src/provider/cli/ModelForwarder.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { makeTmpDir } from "../support/tmp.js"

const usage = { input_tokens: 120, output_tokens: 34, cache_read_tokens: 1000, cache_write_tokens: 50 }
const reply: ScriptedLlm.Reply = { _tag: "Message", content: [{ type: "text", text: "hello there, metered" }], usage }

const post = (socketPath: string, path: string, body: unknown) =>
  Effect.async<{ readonly status: number; readonly body: string }>((resume) => {
    const req = Http.request({ socketPath, path, method: "POST", headers: { "content-type": "application/json" } }, (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (c: string) => (text += c))
      res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, body: text })))
    })
    req.on("error", (e) => resume(Effect.die(e)))
    req.end(JSON.stringify(body))
  })

const setup = (refuseAfter: number) =>
  Effect.gen(function*() {
    const dir = makeTmpDir("mf-")
    const llm = yield* ScriptedLlm.make({ listen: { socketPath: Path.join(dir, "up.sock") }, fallback: reply })
    const recorded: Array<RequestUsage> = []
    const socketPath = Path.join(dir, "agent-llm.sock")
    yield* ModelForwarder.serve({
      socketPath,
      upstream: "http://localhost",
      upstreamSocket: Path.join(dir, "up.sock"),
      credential: null,
      meter: {
        admit: Effect.sync(() => (recorded.length >= refuseAfter ? "this agent's USD budget spent" : null)),
        record: (u) => Effect.sync(() => {
          recorded.push(u)
          return 0
        })
      }
    })
    return { llm, recorded, socketPath }
  })

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

describe("metering at the model forwarder", () => {
  it.scoped("reads exact usage from every format, streamed and not", () =>
    Effect.gen(function*() {
      const { recorded, socketPath } = yield* setup(Infinity)
      const cases = [
        ["/v1/messages", anthropic(false), "claude-sonnet-4-5"],
        ["/v1/messages", anthropic(true), "claude-sonnet-4-5"],
        ["/v1/chat/completions", chat(false), "gpt-4o-mini"],
        ["/v1/chat/completions", chat(true), "gpt-4o-mini"],
        ["/v1/responses", responses(false), "gpt-5"],
        ["/v1/responses", responses(true), "gpt-5"]
      ] as const
      for (const [path, body] of cases) {
        const r = yield* post(socketPath, path, body)
        expect([path, body.stream, r.status]).toEqual([path, body.stream, 200])
      }
      // Records land when each response has ended; the next request waits for them.
      yield* post(socketPath, "/v1/messages/count_tokens", anthropic(false))
      expect(recorded.length).toBe(cases.length)
      recorded.forEach((u, i) => {
        const [, , model] = cases[i]!
        const anth = i < 2
        expect(u).toEqual({
          model,
          input_tokens: 120,
          output_tokens: 34,
          cache_read_tokens: 1000,
          // The OpenAI formats have no cache writes.
          cache_write_tokens: anth ? 50 : 0,
          reported_cost_usd: null
        })
      })
      // claude-sonnet-4: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million.
      expect(costOf(priceTable(), recorded[0]!)).toBeCloseTo((120 * 3 + 34 * 15 + 1000 * 0.3 + 50 * 3.75) / 1e6, 12)
    }))

  it.scoped("a refused request gets a clear 400 and never reaches the upstream", () =>
    Effect.gen(function*() {
      const { llm, recorded, socketPath } = yield* setup(1)
      const ok = yield* post(socketPath, "/v1/messages", anthropic(true))
      expect(ok.status).toBe(200)
      const refused = yield* post(socketPath, "/v1/messages", anthropic(false))
      expect(refused.status).toBe(400)
      expect(JSON.parse(refused.body)).toMatchObject({ error: { message: "substrat: this agent's USD budget spent" } })
      expect((yield* llm.modelRequests).length).toBe(1)
      expect(recorded.length).toBe(1)
    }))
})
