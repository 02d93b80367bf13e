// Metering and budgets with the REAL Claude Code binary, sandboxed (bwrap, network off), through
// the daemon and CLI: every model request goes through the agent's own forwarder socket to the
// scripted Anthropic endpoint, which reports a known usage (streamed — Claude Code streams).
//   - a claude root spawns a claude child: each agent's `usage` events (source "request") match
//     the requests the endpoint got from it, one for one; inspect's own and subtree totals are exact;
//   - a USD budget smaller than the work: the forwarder refuses the request past it (the endpoint
//     never sees it), the turn ends, the inbox shows the breach.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { type Agent, cli, cliJson, rpcOnce, startDaemon, waitFor, waitQuiet } from "../integration/daemon.support.js"
import { agentEvents, claudeMeteredHome, claudeMeterEnvKeys, daemonTestScope, dataNamed, withLlm } from "./support.js"

const requestUsage = (home: string, sid: string) =>
  dataNamed(agentEvents(home, sid), "usage").filter((u) => u["source"] === "request")

const { ds, homes } = daemonTestScope(claudeMeterEnvKeys)
const setup = (llm: ScriptedLlm.ScriptedLlmServer) => claudeMeteredHome(llm, homes, "smc-")

const usage = { input_tokens: 1000, output_tokens: 200, cache_read_tokens: 3000, cache_write_tokens: 500 }
/** $ per request: (1000×1 + 200×2 + 3000×0.5 + 500×4) / 1e6. */
const price = 4900 / 1e6
const known = (r: ScriptedLlm.Reply): ScriptedLlm.Reply => (r._tag === "Message" ? { ...r, usage } : r)
const entry = (system: string, reply: ScriptedLlm.Reply, label: string, lastUser?: string): ScriptedLlm.ScriptEntry => ({
  match: lastUser === undefined ? { system } : { system, lastUser },
  reply: known(reply),
  label
})
const { Reply } = ScriptedLlm

describe("metering and budgets with the real claude binary", () => {
  it("per-request usage events match the endpoint's requests; own and subtree totals are exact", () =>
    withLlm([
      entry("AGENT=boss", Reply.toolCall("mcp__substrat__spawn_agent", { name: "w1", instructions: "AGENT=w1" }), "spawn"),
      entry("AGENT=boss", Reply.toolCall("mcp__substrat__send_message", { recipient: "w1", text: "Say hi.", sync: true }), "ask"),
      entry("AGENT=boss", Reply.text("Asked."), "boss-1"),
      entry("AGENT=boss", Reply.text("All done."), "boss-2"),
      entry("AGENT=w1", Reply.text("hi"), "w1")
    ], async (llm) => {
      const home = setup(llm)
      ds.track(await startDaemon(home))
      const boss = await cliJson<Agent>(home, ["agent", "create", "--provider", "claude", "--name", "boss", "--instructions", "AGENT=boss You lead."])
      expect((await cli(home, ["agent", "send", "boss", "Start."])).code).toBe(0)
      // w1's reply wakes the boss for a second turn.
      await Effect.runPromise(llm.awaitRequests(5, (r) => r.label !== undefined))
      const agents = await waitQuiet(home)
      const w1 = agents.find((a) => a.name === "w1")!
      const reqs = await Effect.runPromise(llm.modelRequests)
      expect(reqs.map((r) => r.label)).toEqual(["spawn", "ask", "boss-1", "w1", "boss-2"])
      const fromBoss = reqs.filter((r) => (r.system ?? "").includes("AGENT=boss")).length
      const fromW1 = reqs.filter((r) => (r.system ?? "").includes("AGENT=w1")).length
      const bossUsage = requestUsage(home, boss.session_id)
      const w1Usage = requestUsage(home, w1.session_id)
      expect([bossUsage.length, w1Usage.length]).toEqual([fromBoss, fromW1])
      for (const u of [...bossUsage, ...w1Usage]) {
        expect(u).toMatchObject({ input_tokens: 1000, output_tokens: 200, cache_read_tokens: 3000, cache_write_tokens: 500, model: "claude-test-1" })
        expect(u["cost_usd"]).toBeCloseTo(price, 12)
        expect(typeof u["turn_id"]).toBe("string")
      }
      const cost = (n: number) => n * price
      const i = await cliJson<{ usage: { own: Record<string, number>; subtree: Record<string, number> } }>(home, ["agent", "inspect", "boss"])
      expect(i.usage.own).toMatchObject({ input_tokens: 1000 * fromBoss, output_tokens: 200 * fromBoss, cache_read_tokens: 3000 * fromBoss, cache_write_tokens: 500 * fromBoss })
      expect(i.usage.subtree).toMatchObject({
        input_tokens: 1000 * (fromBoss + fromW1),
        output_tokens: 200 * (fromBoss + fromW1),
        cache_read_tokens: 3000 * (fromBoss + fromW1),
        cache_write_tokens: 500 * (fromBoss + fromW1)
      })
      expect(i.usage.own["cost_usd"]).toBeCloseTo(cost(fromBoss), 9)
      expect(i.usage.subtree["cost_usd"]).toBeCloseTo(cost(fromBoss + fromW1), 9)
    }), 240_000)

  it("a USD budget stops a claude agent: the request past it never reaches the endpoint, the inbox shows the breach", () =>
    withLlm([
      entry("AGENT=solo", Reply.toolCall("mcp__substrat__check_inbox", {}), "r1"),
      entry("AGENT=solo", Reply.toolCall("mcp__substrat__check_inbox", {}), "r2"),
      entry("AGENT=solo", Reply.toolCall("mcp__substrat__check_inbox", {}), "r3"),
      entry("AGENT=solo", Reply.toolCall("mcp__substrat__check_inbox", {}), "r4"),
      entry("AGENT=solo", Reply.text("finished"), "r5")
    ], async (llm) => {
      const home = setup(llm)
      ds.track(await startDaemon(home))
      // Room for 2.5 requests.
      const solo = await cliJson<Agent>(home, [
        "agent", "create", "--provider", "claude", "--name", "solo", "--instructions", "AGENT=solo Work.", "--budget-usd", String(price * 2.5)
      ])
      expect((await cli(home, ["agent", "send", "solo", "Go.", "--notify"])).code).toBe(0)
      const item = await waitFor("the breach", async () =>
        (await rpcOnce<{ items: ReadonlyArray<{ id: string; kind: string; text: string }> }>(home, "inbox.list")).items.find((x) => x.kind === "budget"), 120_000)
      expect(item.text).toContain("USD budget spent")
      await waitQuiet(home, ["solo"])
      const reqs = await Effect.runPromise(llm.modelRequests)
      // Three requests fit (the third crosses the limit); the fourth was refused at the forwarder.
      expect(reqs.map((r) => r.label)).toEqual(["r1", "r2", "r3"])
      expect(requestUsage(home, solo.session_id)).toHaveLength(3)
      const shown = await cliJson<{ exhausted: string | null; used: { cost_usd: number } }>(home, ["budget", "show", "solo"])
      expect(shown.exhausted).toContain("USD budget spent")
      expect(shown.used.cost_usd).toBeCloseTo(price * 3, 9)
    }), 240_000)
})
