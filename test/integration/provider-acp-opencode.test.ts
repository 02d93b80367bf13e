// requires: bwrap
// The real opencode (`opencode-ai`, `opencode acp`, a native binary) as `acp:opencode`, in the
// agent's bwrap sandbox with the network off, against the scripted OpenAI-compatible endpoint
// through a model forwarder (the preset's inline configuration names one OpenAI-compatible
// provider at the forwarded base URL): a text turn, then a turn that calls one of Substrat's tools
// over MCP.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Path from "node:path"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import * as ModelForwarder from "../../src/provider/cli/ModelForwarder.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { dataOf, eventsOf, stackWith, testSettings } from "../e2e/providers.support.js"
import { tmpDir } from "../support/tmpDir.js"

describe("acp:opencode (real opencode, bwrap, network off, scripted endpoint)", () => {
  it.scoped("answers a turn, and calls a substrat tool through the MCP server of session/new", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("acp-opencode-")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          // opencode's title request (its small_model) carries the first prompt too: tell it apart by its system prompt.
          { match: { system: "title generator" }, reply: Reply.text("a title"), label: "title", times: Infinity },
          { match: { lastUser: "first" }, reply: Reply.text("hello from opencode"), label: "t1" },
          { match: { lastUser: "second" }, reply: Reply.toolCall("substrat_check_inbox", {}), label: "t2-tool" },
          { match: { lastUser: "\"messages\"" }, reply: Reply.text("inbox checked"), label: "t2-end" }
        ],
        fallback: Reply.text("fallback")
      })
      const fwd = yield* ModelForwarder.serve({ socketPath: Path.join(home, "llm", "o.sock"), api: "openai", upstream: llm.baseUrl, credential: null })
      const settings = { ...testSettings({ anthropic: null, openai: fwd.socketPath }), acp: { approve: "auto" as const, model: "opencode-scripted" } }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const a = yield* o.createRoot({ name: "oc", instructions: "AGENT=oc", provider: "acp:opencode" })
        yield* o.send({ agent: a.id, text: "first", sync: false })
        yield* o.awaitIdle
        yield* o.send({ agent: a.id, text: "second", sync: false })
        yield* o.awaitIdle
        const log = yield* eventsOf(a.session_id)
        const reqs = yield* llm.modelRequests
        expect({ errors: dataOf(log, "provider.error"), labels: reqs.map((r) => `${r.kind}:${r.label ?? r.answeredBy}`) }).toEqual({ errors: [], labels: expect.anything() })
        expect(dataOf(log, "turn.complete").map((t) => t.response)).toEqual(["hello from opencode", "inbox checked"])
        expect(dataOf(log, "tool_call.invoked").map((c) => c.tool)).toContain("check_inbox")
        expect(reqs.filter((r) => r.label !== undefined && r.label !== "title").map((r) => r.label)).toEqual(["t1", "t2-tool", "t2-end"])
        // Every model request went through the forwarder as Chat Completions with the configured model.
        for (const r of reqs) expect([r.kind, r.model]).toEqual(["openai-chat", "opencode-scripted"])
      }).pipe(Effect.provide(stackWith(home, settings)))
    }), { timeout: 240_000 })
})
