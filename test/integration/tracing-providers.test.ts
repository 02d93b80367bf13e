// Tracing with a real CLI provider (claude, offline against the scripted model endpoint, in bwrap):
// the provider's own tool (Write) is a `tool_call` span marked source=provider below the turn, and
// substrat's tool called by claude over MCP — which reaches the daemon on the agent's socket, in
// another fiber — still hangs below the same turn (Tracing.asTurnOf / turnOf). Spans are recorded
// in memory by a tracer around Effect's own.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Tracer } from "effect"
import * as Path from "node:path"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import * as ModelForwarder from "../../src/provider/cli/ModelForwarder.js"
import * as Tracing from "../../src/telemetry/Tracing.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { stackWith, testSettings } from "../e2e/providers.support.js"
import { tmpDir } from "../support/tmp.js"

const recording = (native: Tracer.Tracer, spans: Array<Tracer.Span>): Tracer.Tracer =>
  Tracer.make({
    span(name, parent, context, links, startTime, kind, options) {
      const s = native.span(name, parent, context, links, startTime, kind, options)
      spans.push(s)
      return s
    },
    context: native.context
  })

describe("tracing a CLI provider's turn", () => {
  it.scoped("claude: the turn, its own Write (source=provider) and substrat's check_inbox over MCP are spans of one tree", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("trace-claude-")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { match: { system: "AGENT=coder" }, reply: Reply.toolCall("Write", { file_path: "/workspace/a.txt", content: "a\n" }), label: "write" },
          { match: { system: "AGENT=coder" }, reply: Reply.toolCall("mcp__substrat__check_inbox", {}), label: "inbox" },
          { match: { system: "AGENT=coder" }, reply: Reply.text("done"), label: "done" }
        ]
      })
      const anthropic = yield* ModelForwarder.serve({ socketPath: Path.join(home, "llm", "a.sock"), upstream: llm.baseUrl, credential: null })
      const openai = yield* ModelForwarder.serve({ socketPath: Path.join(home, "llm", "o.sock"), upstream: llm.baseUrl, credential: null })
      const spans: Array<Tracer.Span> = []
      const native = yield* Effect.tracer
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const coder = yield* o.createRoot({ name: "coder", instructions: "AGENT=coder", provider: "claude" })
        yield* o.send({ agent: coder.id, text: "write a", sync: false })
        yield* o.awaitIdle
      }).pipe(
        Effect.provide(stackWith(home, testSettings({ anthropic: anthropic.socketPath, openai: openai.socketPath })).pipe(
          Layer.provideMerge(Tracing.layerOn)
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
    }), { timeout: 120_000 })
})
