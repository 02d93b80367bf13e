// requires: bwrap
// The real Gemini CLI (`@google/gemini-cli`, `gemini --acp`) as `acp:gemini`, in the agent's bwrap
// sandbox with the network off, against the scripted Gemini API endpoint through two model
// forwarders (the agent's metering one in front of a keyed one, as in the daemon): a text turn,
// then a turn that calls Substrat's check_inbox over MCP. Every request is streamGenerateContent
// for the configured model, carries the key only past the keyed forwarder, and is metered with
// exactly the usage its response reported.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Path from "node:path"
import type { RequestEstimate } from "../../src/domain/estimate.js"
import type { RequestUsage } from "../../src/domain/requestUsage.js"
import * as ModelForwarder from "../../src/provider/cli/ModelForwarder.js"
import { ModelMeter } from "../../src/provider/ModelMeter.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { dataOf, stackWith, testSettings } from "../e2e/providers.support.js"
import { tmpDir } from "../support/tmpDir.js"
import { firstThenSecond } from "./acp-real.support.js"

const MODEL = "gemini-scripted"
const KEY = "gk-daemon-only"
/** Gemini reports promptTokenCount 4000 (cache reads included) and candidatesTokenCount 200. */
const usage = { input_tokens: 1000, output_tokens: 200, cache_read_tokens: 3000 }
const withUsage = (r: ScriptedLlm.Reply): ScriptedLlm.Reply => (r._tag === "Message" ? { ...r, usage } : r)

describe("acp:gemini (real Gemini CLI, bwrap, network off, scripted Gemini API)", () => {
  it.scoped("answers a turn, and calls a substrat tool through the MCP server of session/new; every request metered exactly", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("acp-gemini-")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { match: { lastUser: "first" }, reply: withUsage(Reply.text("hello from gemini")), label: "t1" },
          { match: { lastUser: "second" }, reply: withUsage(Reply.toolCall("mcp_substrat_check_inbox", {})), label: "t2-tool" },
          { match: { lastUser: "\"messages\"" }, reply: withUsage(Reply.text("inbox checked")), label: "t2-end" }
        ]
      })
      // The daemon's forwarder (holds the key), and the agent's own in front of it (metered).
      const keyed = yield* ModelForwarder.serve({
        socketPath: Path.join(home, "llm", "g.sock"),
        api: "gemini",
        upstream: llm.baseUrl,
        credential: { header: "x-goog-api-key", value: KEY }
      })
      const reserved: Array<RequestEstimate> = []
      const metered: Array<RequestUsage> = []
      const meter = Layer.succeed(ModelMeter, {
        reserve: (session, estimate) =>
          Effect.sync(() => {
            reserved.push(estimate)
            return { id: String(reserved.length), session, cost_usd: 0, tokens: 0 }
          }),
        settle: (_hold, u) => Effect.sync(() => (u === null ? 0 : (metered.push(u), 0))),
        refused: () => Effect.void
      })
      const settings = {
        ...testSettings({ anthropic: null, openai: null }),
        geminiSocket: keyed.socketPath,
        acp: { approve: "auto" as const, model: MODEL }
      }
      yield* Effect.gen(function*() {
        const log = yield* firstThenSecond("gem", "acp:gemini")
        const reqs = yield* llm.modelRequests
        expect({ errors: dataOf(log, "provider.error"), labels: reqs.map((r) => r.label ?? r.answeredBy) }).toEqual({
          errors: [],
          labels: ["t1", "t2-tool", "t2-end"]
        })
        expect(dataOf(log, "turn.complete").map((t) => t.response)).toEqual(["hello from gemini", "inbox checked"])
        expect(dataOf(log, "tool_call.invoked").map((c) => c.tool)).toContain("check_inbox")
        // Streamed Gemini API requests for the configured model, the daemon's key added past the sandbox.
        for (const r of reqs) {
          expect([r.kind, r.model, r.path, r.headers["x-goog-api-key"]]).toEqual([
            "gemini",
            MODEL,
            `/v1beta/models/${MODEL}:streamGenerateContent?alt=sse`,
            KEY
          ])
        }
        // Each request reserved for its model (named by the path) and settled with the usage it reported.
        expect(reserved.map((e) => e.model)).toEqual(reqs.map(() => MODEL))
        expect(metered).toEqual(reqs.map(() => ({
          model: MODEL,
          input_tokens: 1000,
          output_tokens: 200,
          cache_read_tokens: 3000,
          cache_write_tokens: 0,
          reported_cost_usd: null
        })))
      }).pipe(Effect.provide(stackWith(home, settings).pipe(Layer.provideMerge(meter))))
    }), { timeout: 240_000 })
})
