// Tracing with a real CLI provider (claude, offline against the scripted model endpoint, in bwrap):
// the provider's own tool (Write) is a `tool_call` span marked source=provider below the turn, and
// substrat's tool called by claude over MCP — which reaches the daemon on the agent's socket, in
// another fiber — still hangs below the same turn (Tracing.asTurnOf / turnOf); and each model
// request claude sends through its own forwarder socket (`agents/<sid>/llm-anthropic.sock`, served
// because a ModelMeter is present) is a `model.request` span below that turn with the exact usage
// the scripted endpoint reported and the meter's cost. Spans are recorded in memory by a tracer
// around Effect's own.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Tracer } from "effect"
import type { Reply as ReplyT } from "../../src/testing/ScriptedLlm.js"
import * as Path from "node:path"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import type { RequestUsage } from "../../src/domain/requestUsage.js"
import { ModelMeter } from "../../src/provider/ModelMeter.js"
import * as ModelForwarder from "../../src/provider/cli/ModelForwarder.js"
import * as Tracing from "../../src/telemetry/Tracing.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { stackWith, testSettings } from "../e2e/providers.support.js"
import { tmpDir } from "../support/tmpDir.js"

const recording = (native: Tracer.Tracer, spans: Array<Tracer.Span>): Tracer.Tracer =>
  Tracer.make({
    span(name, parent, context, links, startTime, kind, options) {
      const s = native.span(name, parent, context, links, startTime, kind, options)
      spans.push(s)
      return s
    },
    context: native.context
  })

/** A reply with exact usage (claude's own requests without it would carry rough counts). */
const withUsage = (reply: ReplyT, input: number, output: number, cacheRead: number, cacheWrite: number): ReplyT =>
  reply._tag === "Message"
    ? { ...reply, usage: { input_tokens: input, output_tokens: output, cache_read_tokens: cacheRead, cache_write_tokens: cacheWrite } }
    : reply

describe("tracing a CLI provider's turn", () => {
  it.scoped("claude: the turn, its own Write (source=provider) and substrat's check_inbox over MCP are spans of one tree", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("trace-claude-")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { match: { system: "AGENT=coder" }, reply: withUsage(Reply.toolCall("Write", { file_path: "/workspace/a.txt", content: "a\n" }), 1001, 11, 0, 0), label: "write" },
          { match: { system: "AGENT=coder" }, reply: withUsage(Reply.toolCall("mcp__substrat__check_inbox", {}), 1002, 12, 500, 0), label: "inbox" },
          { match: { system: "AGENT=coder" }, reply: withUsage(Reply.text("done"), 1003, 13, 600, 70), label: "done" }
        ]
      })
      const anthropic = yield* ModelForwarder.serve({ socketPath: Path.join(home, "llm", "a.sock"), api: "anthropic", upstream: llm.baseUrl, credential: null })
      const openai = yield* ModelForwarder.serve({ socketPath: Path.join(home, "llm", "o.sock"), api: "openai", upstream: llm.baseUrl, credential: null })
      const spans: Array<Tracer.Span> = []
      // A meter that admits everything and prices a request at 1 µUSD per token it names.
      const metered: Array<RequestUsage> = []
      const meter = Layer.succeed(ModelMeter, {
        reserve: (session) => Effect.succeed({ id: String(metered.length), session, cost_usd: 0, tokens: 0 }),
        settle: (_hold, u) =>
          Effect.sync(() => {
            if (u === null) return 0
            metered.push(u)
            return (u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens) / 1e6
          }),
        refused: () => Effect.void
      })
      const native = yield* Effect.tracer
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const coder = yield* o.createRoot({ name: "coder", instructions: "AGENT=coder", provider: "claude" })
        yield* o.send({ agent: coder.id, text: "write a", sync: false })
        yield* o.awaitIdle
      }).pipe(
        Effect.provide(stackWith(home, testSettings({ anthropic: anthropic.socketPath, openai: openai.socketPath })).pipe(
          Layer.provideMerge(Layer.merge(Tracing.layerOn, meter))
        )),
        Effect.withTracer(recording(native, spans))
      )
      const ended = spans.filter((s) => s.status._tag === "Ended")
      const turns = ended.filter((s) => s.name === "turn")
      expect(turns.length).toBe(1)
      const turn = turns[0]!
      expect(turn.attributes.get("gen_ai.agent.name")).toBe("coder")
      expect(turn.attributes.get("gen_ai.provider.name")).toBe("claude")
      expect(turn.attributes.get("gen_ai.usage.output_tokens")).toEqual(expect.any(Number))
      const isBelow = (s: Tracer.Span, ancestor: Tracer.Span): boolean => {
        let p = Option.getOrUndefined(s.parent)
        while (p !== undefined) {
          if (p === ancestor) return true
          p = p._tag === "Span" ? Option.getOrUndefined(p.parent) : undefined
        }
        return false
      }
      const tools = ended.filter((s) => s.name === "tool_call")
      expect(tools.map((t) => [t.attributes.get("gen_ai.tool.name"), t.attributes.get("substrat.tool.source")])).toEqual([
        ["Write", "provider"],
        ["check_inbox", "substrat"]
      ])
      for (const t of tools) expect([t.attributes.get("gen_ai.tool.name"), isBelow(t, turn)]).toEqual([t.attributes.get("gen_ai.tool.name"), true])
      expect(tools.every((t) => t.traceId === turn.traceId)).toBe(true)

      // claude's model requests through its forwarder socket: spans directly below the turn.
      const requests = ended.filter((s) => s.name === "model.request" && s.attributes.get("gen_ai.usage.input_tokens") !== undefined)
      const usage = (s: Tracer.Span) => ({
        in: s.attributes.get("gen_ai.usage.input_tokens"),
        out: s.attributes.get("gen_ai.usage.output_tokens"),
        cacheRead: s.attributes.get("gen_ai.usage.cache_read.input_tokens"),
        cacheWrite: s.attributes.get("gen_ai.usage.cache_creation.input_tokens"),
        cost: s.attributes.get("substrat.cost_usd")
      })
      const ours = requests.map(usage).filter((u) => typeof u.in === "number" && u.in > 1000 && u.in < 1004)
      expect(ours).toEqual([
        { in: 1001, out: 11, cacheRead: 0, cacheWrite: 0, cost: 1012 / 1e6 },
        { in: 1002, out: 12, cacheRead: 500, cacheWrite: 0, cost: 1514 / 1e6 },
        { in: 1003, out: 13, cacheRead: 600, cacheWrite: 70, cost: 1686 / 1e6 }
      ])
      for (const r of requests.filter((x) => ours.some((u) => u.in === x.attributes.get("gen_ai.usage.input_tokens")))) {
        expect(Option.getOrUndefined(r.parent)).toBe(turn)
        expect(r.traceId).toBe(turn.traceId)
        expect(r.attributes.get("gen_ai.agent.name")).toBe("coder")
        expect(r.attributes.get("gen_ai.agent.id")).toBe(turn.attributes.get("gen_ai.agent.id"))
        expect(r.attributes.get("gen_ai.provider.name")).toBe("claude")
        expect(r.attributes.get("substrat.model.api")).toBe("anthropic")
        expect(r.attributes.get("http.response.status_code")).toBe(200)
        expect(r.attributes.get("substrat.model.streamed")).toBe(true)
        expect(r.status._tag === "Ended" && r.status.exit._tag).toBe("Success")
      }
      // Every metered request was traced.
      expect(ended.filter((s) => s.name === "model.request").length).toBe(metered.length)
    }), { timeout: 120_000 })
})
