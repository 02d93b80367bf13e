// The single-agent check of a real ACP agent (provider-acp-qwen.test.ts, provider-acp-opencode.test.ts):
// `acp:<preset>` through the Orchestrator, in the agent's bwrap sandbox with the network off,
// against the scripted OpenAI-compatible endpoint through a model forwarder: a text turn, then a
// turn that calls Substrat's check_inbox (`checkInbox`: the agent's name for it) through the MCP
// server of `session/new`. Every request is Chat Completions with `acp.model`.
import { Effect } from "effect"
import * as Path from "node:path"
import { expect } from "vitest"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import * as ModelForwarder from "../../src/provider/cli/ModelForwarder.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { dataOf, eventsOf, stackWith, testSettings } from "../e2e/providers.support.js"
import { tmpDir } from "../support/tmpDir.js"

/**
 * Create the root `name` on `provider`, send it "first" then "second" (each to idle, no wait):
 * its log after both turns.
 */
export const firstThenSecond = (name: string, provider: string) =>
  Effect.gen(function*() {
    const o = yield* Orchestrator
    const a = yield* o.createRoot({ name, instructions: `AGENT=${name}`, provider })
    yield* o.send({ agent: a.id, text: "first", sync: false })
    yield* o.awaitIdle
    yield* o.send({ agent: a.id, text: "second", sync: false })
    yield* o.awaitIdle
    return yield* eventsOf(a.session_id)
  })

export const twoTurnsWithATool = (preset: string, checkInbox: string) =>
  Effect.gen(function*() {
    const home = yield* tmpDir(`acp-${preset}-`)
    const model = `${preset}-scripted`
    const llm = yield* ScriptedLlm.make({
      listen: { port: 0 },
      script: [
        { match: { lastUser: "first" }, reply: Reply.text(`hello from ${preset}`), label: "t1" },
        { match: { lastUser: "second" }, reply: Reply.toolCall(checkInbox, {}), label: "t2-tool" },
        // The tool's result is the request's last message.
        { match: { lastUser: "\"messages\"" }, reply: Reply.text("inbox checked"), label: "t2-end" }
      ],
      // Anything else (a background request of the agent's own) is visible as unlabelled.
      fallback: Reply.text("fallback")
    })
    const fwd = yield* ModelForwarder.serve({ socketPath: Path.join(home, "llm", "o.sock"), api: "openai", upstream: llm.baseUrl, credential: null })
    const settings = { ...testSettings({ anthropic: null, openai: fwd.socketPath }), acp: { approve: "auto" as const, model } }
    yield* Effect.gen(function*() {
      const log = yield* firstThenSecond("a", `acp:${preset}`)
      const reqs = yield* llm.modelRequests
      expect({ errors: dataOf(log, "provider.error"), labels: reqs.map((r) => `${r.kind}:${r.label ?? r.answeredBy}`) }).toEqual({ errors: [], labels: expect.anything() })
      expect(dataOf(log, "turn.complete").map((t) => t.response)).toEqual([`hello from ${preset}`, "inbox checked"])
      expect(dataOf(log, "tool_call.invoked").map((c) => c.tool)).toContain("check_inbox")
      // The conversation's requests only, each through the forwarder as Chat Completions with the configured model.
      expect(reqs.map((r) => r.label)).toEqual(["t1", "t2-tool", "t2-end"])
      for (const r of reqs) expect([r.kind, r.model]).toEqual(["openai-chat", model])
    }).pipe(Effect.provide(stackWith(home, settings)))
  })
