// requires: bwrap, git
// The REAL Gemini CLI (`@google/gemini-cli`, `gemini --acp`) as `acp:gemini` through the daemon and
// the CLI: its bwrap sandbox has the network off; its model traffic goes through the agent's
// metering forwarder to the daemon's Gemini forwarder (GEMINI_API_KEY added there as
// x-goog-api-key) and on to a scripted Gemini API endpoint (`acp.model`). Gemini CLI has a system
// prompt of its own: Substrat's instructions open the first prompt of its session, so the script
// tells agents apart by that first user content.
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { type Agent, cli, cliJson, startDaemon } from "../integration/daemon.support.js"
import { byAgent, geminiDoors, geminiEnvKeys, geminiHome, geminiSideDoors, KEY, MODEL, price, usage, withUsage } from "./acp-gemini.support.js"
import { agentEvents as events, daemonTestScope, dataNamed as of, withLlm } from "./support.js"

const { ds, homes } = daemonTestScope(geminiEnvKeys)

/** Agent `a`'s per-request usage events: one per answered request, each the scripted usage at the price. */
const expectPerRequestUsage = (home: string, a: { readonly name: string; readonly session_id: string }, answered: number) => {
  const perRequest = of(events(home, a.session_id), "usage").filter((u) => u["source"] === "request")
  expect(perRequest.length, a.name).toBe(answered)
  for (const u of perRequest) {
    expect(u).toMatchObject({ ...usage, cache_write_tokens: 0, model: MODEL })
    expect(u["cost_usd"]).toBeCloseTo(price, 12)
  }
}

/** Every file under the agent's HOME: none may hold the daemon's key. */
const expectNoKeyInHome = (home: string, sessionId: string) => {
  const agentHome = Path.join(home, "agents", sessionId, "home")
  const files = (Fs.readdirSync(agentHome, { recursive: true }) as Array<string>).filter((f) => Fs.statSync(Path.join(agentHome, f)).isFile())
  for (const f of files) expect(Fs.readFileSync(Path.join(agentHome, f), "utf8"), f).not.toContain(KEY)
}

describe("acp:gemini, the real Gemini CLI (daemon + CLI, bwrap, network off, scripted Gemini API)", () => {
  it("one turn: `send --wait` prints gemini's answer; its requests metered exactly at the price; the key never reaches the sandbox", () =>
    withLlm([], async (llm) => {
      const home = geminiHome(llm, homes)
      await Effect.runPromise(llm.replace([
        { match: { where: byAgent("AGENT=solo") }, reply: withUsage(Reply.text("Hello from Gemini CLI.")), label: "solo" }
      ]))
      ds.track(await startDaemon(home))
      const a = await cliJson<Agent>(home, ["agent", "create", "--provider", "acp:gemini", "--name", "solo", "--instructions", "AGENT=solo Be brief."])
      const sent = await cli(home, ["agent", "send", "--wait", "solo", "Say hello."])
      expect(sent.stderr).toBe("")
      expect(sent.stdout).toBe("Hello from Gemini CLI.\n")
      expect(sent.code).toBe(0)
      const reqs = await Effect.runPromise(llm.modelRequests)
      expect(reqs.map((r) => r.label ?? `unmatched: ${r.path} ${(r.lastUser ?? "").slice(0, 80)}`)).toEqual(["solo"])
      expect([reqs[0]!.kind, reqs[0]!.model, reqs[0]!.path, reqs[0]!.headers["x-goog-api-key"]]).toEqual([
        "gemini",
        MODEL,
        `/v1beta/models/${MODEL}:streamGenerateContent?alt=sse`,
        KEY
      ])
      // Substrat's MCP tools are declared to the model from the first request on.
      expect(JSON.stringify(reqs[0]!.body)).toContain("mcp_substrat_check_inbox")
      expect(reqs[0]!.lastUser).toContain("AGENT=solo Be brief.")
      expect(reqs[0]!.lastUser).toContain("Say hello.")
      expectPerRequestUsage(home, a, 1)
      // Reserved before it left, for the model its path named.
      expect(of(events(home, a.session_id), "usage.reserved").map((r) => r["model"])).toEqual([MODEL])
      expect(of(events(home, a.session_id), "turn.complete").map((t) => t["response"])).toEqual(["Hello from Gemini CLI."])
      expect(of(events(home, a.session_id), "provider.error")).toEqual([])
      expect(JSON.parse(Fs.readFileSync(Path.join(home, "agents", a.session_id, "home", ".gemini/settings.json"), "utf8"))).toMatchObject({
        security: { auth: { selectedType: "gemini-api-key" } },
        telemetry: { enabled: false },
        privacy: { usageStatisticsEnabled: false }
      })
      expectNoKeyInHome(home, a.session_id)
    }), 180_000)

  it("attacks from inside: gemini's own shell curls its forwarder socket — other endpoints, escaping model names, a `?key=`, oversized bodies — all refused, none reaches the upstream or is reserved", async () => {
    const r = await geminiSideDoors(homes, ds.track)
    expect([r.code, r.answer]).toEqual([0, "done\n"])
    // Only the agent's own two model requests reached the upstream.
    expect(r.reachedUpstream).toEqual([
      `POST /v1beta/models/${MODEL}:streamGenerateContent?alt=sse shell`,
      `POST /v1beta/models/${MODEL}:streamGenerateContent?alt=sse done`
    ])
    expect(r.codes).toEqual([...geminiDoors.map(() => "403"), "413", "413"])
    // Each door logged as sent; only the two model requests were reserved.
    expect(r.refused).toEqual(geminiDoors.map((d) => `POST ${d}`))
    expect(r.reserved).toBe(2)
    expect(r.keySeen).toBe(false)
  }, 180_000)
})
