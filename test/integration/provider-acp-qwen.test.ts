// requires: bwrap
// The real Qwen Code (`@qwen-code/qwen-code`, `qwen --acp`) as `acp:qwen`, in the agent's bwrap
// sandbox with the network off, against the scripted OpenAI-compatible endpoint through a model
// forwarder: a text turn, then a turn that calls one of Substrat's tools over MCP.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Path from "node:path"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import * as ModelForwarder from "../../src/provider/cli/ModelForwarder.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { dataOf, eventsOf, stackWith, testSettings } from "../e2e/providers.support.js"
import { tmpDir } from "../support/tmpDir.js"

describe("acp:qwen (real Qwen Code, bwrap, network off, scripted endpoint)", () => {
  it.scoped("answers a turn, and calls a substrat tool through the MCP server of session/new", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("acp-qwen-")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { match: { lastUser: "first" }, reply: Reply.text("hello from qwen"), label: "t1" },
          { match: { lastUser: "second" }, reply: Reply.toolCall("mcp__substrat__check_inbox", {}), label: "t2-tool" },
          // The tool's result is the request's last message (qwen's background memory requests get the fallback).
          { match: { lastUser: "\"messages\"" }, reply: Reply.text("inbox checked"), label: "t2-end" }
        ],
        fallback: Reply.text("fallback")
      })
      const fwd = yield* ModelForwarder.serve({ socketPath: Path.join(home, "llm", "o.sock"), api: "openai", upstream: llm.baseUrl, credential: null })
      const settings = { ...testSettings({ anthropic: null, openai: fwd.socketPath }), acp: { approve: "auto" as const, model: "qwen-scripted" } }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const a = yield* o.createRoot({ name: "q", instructions: "AGENT=q", provider: "acp:qwen" })
        yield* o.send({ agent: a.id, text: "first", sync: false })
        yield* o.awaitIdle
        yield* o.send({ agent: a.id, text: "second", sync: false })
        yield* o.awaitIdle
        const log = yield* eventsOf(a.session_id)
        const reqs = yield* llm.modelRequests
        expect({ errors: dataOf(log, "provider.error"), labels: reqs.map((r) => `${r.kind}:${r.label ?? r.answeredBy}`) }).toEqual({ errors: [], labels: expect.anything() })
        expect(dataOf(log, "turn.complete").map((t) => t.response)).toEqual(["hello from qwen", "inbox checked"])
        expect(dataOf(log, "tool_call.invoked").map((c) => c.tool)).toContain("check_inbox")
        // Every model request went through the forwarder as Chat Completions with the configured model.
        expect(reqs.filter((r) => r.label !== undefined).map((r) => r.label)).toEqual(["t1", "t2-tool", "t2-end"])
        for (const r of reqs) expect([r.kind, r.model]).toEqual(["openai-chat", "qwen-scripted"])
      }).pipe(Effect.provide(stackWith(home, settings)))
    }), { timeout: 240_000 })
})
