// requires: bwrap
// Claude Code through the real Orchestrator (real binary, bwrap, scripted Anthropic endpoint):
// the per-turn cost across --resume, an eviction and a restart without suspending (kill -9).
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { Recovery } from "../../src/recovery/Recovery.js"
import * as ModelForwarder from "../../src/provider/cli/ModelForwarder.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { dataOf, eventsOf, stackWith, testSettings } from "../e2e/providers.support.js"
import { tmpDir } from "../support/tmpDir.js"

/** Every scripted model request reports the same usage, so Claude prices each one the same. */
const priced = (reply: ScriptedLlm.Reply): ScriptedLlm.Reply =>
  reply._tag === "Message" ? { ...reply, usage: { input_tokens: 1000, output_tokens: 100 } } : reply

describe("claude provider: cost", () => {
  it.scoped("each turn's usage is its own cost, not Claude's running total across --resume (eviction, kill -9 restart)", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-cost-")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { match: { system: "AGENT=acct", lastUser: "turn one" }, reply: priced(Reply.text("one done")), label: "t1" },
          // Turn two makes two model requests (a Bash call, then the answer): twice the cost.
          { match: { system: "AGENT=acct", lastUser: "turn two" }, reply: priced(Reply.toolCall("Bash", { command: "echo hi", description: "hi" })), label: "t2a" },
          { match: { system: "AGENT=acct", lastUser: "hi" }, reply: priced(Reply.text("two done")), label: "t2b" },
          { match: { system: "AGENT=acct", lastUser: "turn three" }, reply: priced(Reply.text("three done")), label: "t3" },
          { match: { system: "AGENT=other" }, reply: priced(Reply.text("other done")), label: "other" }
        ]
      })
      const fwd = yield* ModelForwarder.serve({ socketPath: Path.join(home, "llm", "a.sock"), api: "anthropic", upstream: llm.baseUrl, credential: null })
      const settings = testSettings({ anthropic: fwd.socketPath, openai: null })
      // One slot: running `other` evicts `acct` (its blob goes to session.json) after turn one.
      const acct = yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const a = yield* o.createRoot({ name: "acct", instructions: "AGENT=acct", provider: "claude" })
        const b = yield* o.createRoot({ name: "other", instructions: "AGENT=other", provider: "claude" })
        for (const [agent, text] of [[a, "turn one"], [b, "go"], [a, "turn two"]] as const) {
          yield* o.send({ agent: agent.id, text, sync: false })
          yield* o.awaitIdle
        }
        return a
      }).pipe(Effect.provide(stackWith(home, settings, 1)))
      // The stack closed without suspending (as after a kill -9): session.json still holds the
      // eviction's blob from before turn two; a new orchestrator over the same home runs turn three.
      const log = yield* Effect.gen(function*() {
        expect((yield* Effect.flatMap(Recovery, (r) => r.run({ resume: false }))).agents).toBe(2)
        const o = yield* Orchestrator
        yield* o.send({ agent: acct.id, text: "turn three", sync: false })
        yield* o.awaitIdle
        return yield* eventsOf(acct.session_id)
      }).pipe(Effect.provide(Recovery.Default.pipe(Layer.provideMerge(stackWith(home, settings, 1)))))

      expect(dataOf(log, "provider.error")).toEqual([])
      expect(dataOf(log, "turn.complete").map((t) => t.response)).toEqual(["one done", "two done", "three done"])
      expect(dataOf(log, "suspend.result").length).toBeGreaterThanOrEqual(1)
      expect((yield* llm.modelRequests).map((r) => r.label)).toEqual(["t1", "other", "t2a", "t2b", "t3"])
      // One request costs c (turn one is a fresh session: its running total is its own cost).
      // Claude's running totals are c, 3c, 4c; each turn's own cost is c, 2c, c.
      const costs = dataOf(log, "usage").map((u) => u.cost_usd)
      expect(costs.length).toBe(3)
      const c = costs[0]!
      expect(c).toBeGreaterThan(0)
      expect(costs[1]).toBeCloseTo(2 * c, 9)
      expect(costs[2]).toBeCloseTo(c, 9)
      // The sum is Claude's final running total (kept with the resume id in cli-resume.json).
      const resume = JSON.parse(Fs.readFileSync(Path.join(home, "agents", acct.session_id, "cli-resume.json"), "utf8")) as { cost_total: number }
      expect(resume.cost_total).toBeCloseTo(4 * c, 9)
      expect(costs.reduce((x, y) => x + y, 0)).toBeCloseTo(resume.cost_total, 9)
      expect(dataOf(log, "usage").map((u) => [u.input_tokens, u.output_tokens])).toEqual([[1000, 100], [2000, 200], [1000, 100]])
    }), { timeout: 180_000 })
})
