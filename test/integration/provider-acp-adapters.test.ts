// requires: bwrap
// The real ACP adapters of Claude Code and Codex (`@agentclientprotocol/claude-agent-acp`,
// `@agentclientprotocol/codex-acp`) as `acp:claude` / `acp:codex`, in the agent's bwrap sandbox
// with the network off: each runs the CLI the claude / codex provider runs (the copy in
// node_modules), against the scripted Anthropic / OpenAI Responses endpoint through a model
// forwarder metered per request. A text turn, then a turn that calls Substrat's `check_inbox`
// over the MCP server of `session/new`; every model request is metered with its exact usage.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schedule } from "effect"
import * as Path from "node:path"
import type { RequestUsage } from "../../src/domain/requestUsage.js"
import * as ModelForwarder from "../../src/provider/cli/ModelForwarder.js"
import { ModelMeter } from "../../src/provider/ModelMeter.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { dataOf, stackWith, testSettings } from "../e2e/providers.support.js"
import { tmpDir } from "../support/tmpDir.js"
import { firstThenSecond } from "./acp-real.support.js"

/** Each scripted reply's own usage, so every metered request can be told apart. */
const usageOf = (n: number) => ({ input_tokens: 1000 + n, output_tokens: 10 + n, cache_read_tokens: 100 * n, cache_write_tokens: 7 * n })
const withUsage = (reply: ScriptedLlm.Reply, n: number): ScriptedLlm.Reply => reply._tag === "Message" ? { ...reply, usage: usageOf(n) } : reply

/** The scripted usage of each labelled reply (`title`: the adapter's session title, once per session). */
const usageNumber: Record<string, number> = { t1: 1, "t2-tool": 2, "t2-end": 3, title: 4 }

const adapters = [
  // Each adapter asks the model for a session title (JSON) once, in a request of its own that
  // carries the first prompt too: claude-agent-acp on the first prompt (matched on the system
  // prompt), codex-acp after the first turn (on a model of its own choosing, matched on its text).
  { preset: "claude", api: "anthropic" as const, kind: "anthropic", tool: "mcp__substrat__check_inbox", model: "claude-scripted", title: { system: "naming a coding session" } },
  // codex-acp's codex runs the codex provider's default model (its catalog entry without tool_search).
  { preset: "codex", api: "openai" as const, kind: "openai-responses", tool: "mcp__substrat__check_inbox", model: "gpt-5.5", title: { lastUser: "very short title for a conversation" } }
]

describe("acp adapters (real claude-agent-acp / codex-acp, bwrap, network off, scripted endpoint)", () => {
  for (const ad of adapters) {
    it.scoped(`acp:${ad.preset}: a text turn and a check_inbox call over MCP, each request metered exactly`, () =>
      Effect.gen(function*() {
        const home = yield* tmpDir(`acp-${ad.preset}-`)
        const llm = yield* ScriptedLlm.make({
          listen: { port: 0 },
          script: [
            { match: ad.title, reply: withUsage(Reply.text(JSON.stringify({ title: "Substrat inbox" })), 4), label: "title", times: Infinity },
            { match: { lastUser: "first" }, reply: withUsage(Reply.text(`hello from ${ad.preset}`), 1), label: "t1" },
            { match: { lastUser: "second" }, reply: withUsage(Reply.toolCall(ad.tool, {}), 2), label: "t2-tool" },
            // The tool's result (its text names the inbox's messages) is the request's last user turn.
            { match: { lastUser: "\"messages\"" }, reply: withUsage(Reply.text("inbox checked"), 3), label: "t2-end" }
          ],
          fallback: withUsage(Reply.text("fallback"), 9)
        })
        const fwd = yield* ModelForwarder.serve({ socketPath: Path.join(home, "llm", `${ad.api}.sock`), api: ad.api, upstream: llm.baseUrl, credential: null })
        const metered: Array<RequestUsage> = []
        const meter = Layer.succeed(ModelMeter, {
          reserve: (session) => Effect.succeed({ id: String(metered.length), session, cost_usd: 0, tokens: 0 }),
          settle: (_hold, u) => Effect.sync(() => (u === null ? 0 : (metered.push(u), 0))),
          refused: () => Effect.void
        })
        const sockets = ad.api === "anthropic" ? { anthropic: fwd.socketPath, openai: null } : { anthropic: null, openai: fwd.socketPath }
        const settings = { ...testSettings(sockets), models: {}, acp: { approve: "auto" as const, ...(ad.preset === "claude" ? { model: ad.model } : {}) } }
        yield* Effect.gen(function*() {
          const log = yield* firstThenSecond(ad.preset, `acp:${ad.preset}`)
          const early = yield* llm.modelRequests
          expect({ errors: dataOf(log, "provider.error"), labels: early.map((r) => `${r.kind}:${r.label ?? r.answeredBy}`) }).toEqual({ errors: [], labels: expect.anything() })
          expect(dataOf(log, "turn.complete").map((t) => t.response)).toEqual([`hello from ${ad.preset}`, "inbox checked"])
          expect(dataOf(log, "tool_call.invoked").map((c) => c.tool)).toContain("check_inbox")
          // The title request runs beside the turns (codex-acp's after the first turn ends): wait
          // for it, and for every request's usage to be settled.
          yield* llm.awaitRequests(1, (r) => r.label === "title")
          const reqs = yield* llm.modelRequests
          yield* Effect.sync(() => metered.length).pipe(Effect.repeat({ until: (n) => n >= reqs.length, schedule: Schedule.spaced("50 millis") }))
          expect(reqs.map((r) => r.label ?? r.answeredBy).filter((l) => l !== "title")).toEqual(["t1", "t2-tool", "t2-end"])
          expect(reqs.filter((r) => r.label === "title").length).toBe(1)
          for (const r of reqs) expect([r.kind, r.label === "title" || r.model === ad.model]).toEqual([ad.kind, true])
          // One metered usage per model request, each exactly the scripted one of its reply.
          const byInput = (a: { readonly input_tokens: number }, b: { readonly input_tokens: number }) => a.input_tokens - b.input_tokens
          // (The Responses API has no cache writes: what it reports of the scripted usage is 0.)
          const expected = reqs.map((r) => {
            const u = usageOf(usageNumber[r.label ?? ""] ?? 9)
            return { ...u, cache_write_tokens: ad.api === "openai" ? 0 : u.cache_write_tokens, model: r.model ?? null, reported_cost_usd: null }
          })
          expect([...metered].sort(byInput)).toEqual(expected.sort(byInput))
        }).pipe(Effect.provide(stackWith(home, settings).pipe(Layer.provideMerge(meter))))
      }), { timeout: 240_000 })
  }
})
