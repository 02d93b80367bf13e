// requires: bwrap, git
// The REAL Qwen Code (`@qwen-code/qwen-code`, `qwen --acp`) as `acp:qwen` through the daemon and
// the CLI: each agent's qwen in its own bwrap sandbox (network off), its model traffic through the
// daemon's OpenAI forwarder to a scripted Chat Completions endpoint (`acp.model`), the key only in
// the daemon. Qwen Code has no system prompt for the client to set: Substrat's instructions open
// the first prompt of its session, so the script tells agents apart by that first message.
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import type * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { makeTmpDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, startDaemon } from "../integration/daemon.support.js"
import { agentEvents as events, daemonTestScope, dataNamed as of, withLlm } from "./support.js"

const envKeys = ["SUBSTRAT_OPENAI_UPSTREAM", "OPENAI_API_KEY", "SUBSTRAT_METER_PRICES"]
const { ds, homes } = daemonTestScope(envKeys)

const MODEL = "qwen-scripted"
/** Chat Completions usage: prompt_tokens include the cached ones. */
const usage = { input_tokens: 1000, output_tokens: 200, cache_read_tokens: 3000 }
/** $ per request: (1000×1 + 200×2 + 3000×0.5) / 1e6. */
const price = 2900 / 1e6

/** The text of a Chat Completions message's content. */
const textOf = (c: unknown): string =>
  typeof c === "string" ? c : Array.isArray(c) ? c.map((p) => (typeof p === "object" && p !== null && "text" in p ? String(p.text) : "")).join("") : ""

/**
 * The first prompt of the agent's session: the user message that carries Substrat's
 * instructions (qwen puts its own reminders before it). "" for a request without it.
 */
export const firstPrompt = (r: ScriptedLlm.ScriptRequest): string => {
  const b = r.body
  const msgs = typeof b === "object" && b !== null && "messages" in b && Array.isArray(b.messages) ? (b.messages as ReadonlyArray<unknown>) : []
  for (const m of msgs) {
    if (typeof m !== "object" || m === null || !("role" in m) || m.role !== "user") continue
    const t = textOf("content" in m ? m.content : "")
    if (t.includes("You are one agent in a team run by Substrat")) return t
  }
  return ""
}

/** A fresh home whose acp:qwen agents reach `llm` through the daemon's forwarder as MODEL, priced. */
const qwenHome = (llm: ScriptedLlm.ScriptedLlmServer, toml = ""): string => {
  const home = makeTmpDir("saq-") // short: agent socket paths must fit in sun_path
  homes.push(home)
  Fs.chmodSync(home, 0o755)
  Fs.writeFileSync(Path.join(home, "config.toml"), `[acp]\nmodel = "${MODEL}"\n${toml}`)
  process.env["SUBSTRAT_OPENAI_UPSTREAM"] = llm.baseUrl
  process.env["OPENAI_API_KEY"] = "sk-test-daemon-only"
  process.env["SUBSTRAT_METER_PRICES"] = JSON.stringify({ [MODEL]: { input: 1, output: 2, cache_read: 0.5, cache_write: 4 } })
  return home
}

const withUsage = (r: ScriptedLlm.Reply): ScriptedLlm.Reply => (r._tag === "Message" ? { ...r, usage } : r)

/** Agent `a`'s per-request usage events: one per answered request, each the scripted usage at the price. */
const expectPerRequestUsage = (home: string, a: Agent, answered: number) => {
  const perRequest = of(events(home, a.session_id), "usage").filter((u) => u["source"] === "request")
  expect(perRequest.length, a.name).toBe(answered)
  for (const u of perRequest) {
    expect(u).toMatchObject({ ...usage, model: MODEL })
    expect(u["cost_usd"]).toBeCloseTo(price, 12)
  }
}

describe("acp:qwen, the real Qwen Code (daemon + CLI, bwrap, network off, scripted endpoint)", () => {
  it("one turn: `send --wait` prints qwen's answer; one request, metered exactly; the key never reaches the sandbox", () =>
    withLlm([], async (llm) => {
      const home = qwenHome(llm)
      await Effect.runPromise(llm.replace([
        { match: { where: (r) => firstPrompt(r).includes("AGENT=solo") }, reply: withUsage(Reply.text("Hello from Qwen Code.")), label: "solo" }
      ]))
      ds.track(await startDaemon(home))
      const a = await cliJson<Agent>(home, ["agent", "create", "--provider", "acp:qwen", "--name", "solo", "--instructions", "AGENT=solo Be brief."])
      const sent = await cli(home, ["agent", "send", "--wait", "solo", "Say hello."])
      expect(sent.stderr).toBe("")
      expect(sent.stdout).toBe("Hello from Qwen Code.\n")
      expect(sent.code).toBe(0)
      // Exactly the one request: qwen's background requests (memory extraction, next-prompt
      // suggestions) are off in the settings the preset writes to its HOME.
      const reqs = await Effect.runPromise(llm.modelRequests)
      expect(reqs.map((r) => r.label ?? `unmatched: ${(r.lastUser ?? "").slice(0, 80)}`)).toEqual(["solo"])
      expect(reqs[0]!.kind).toBe("openai-chat")
      expect(reqs[0]!.model).toBe(MODEL)
      expect(reqs[0]!.headers["authorization"]).toBe("Bearer sk-test-daemon-only")
      // The instructions and the message open the first prompt.
      expect(reqs[0]!.lastUser).toContain("AGENT=solo Be brief.")
      expect(reqs[0]!.lastUser).toContain("Say hello.")
      expectPerRequestUsage(home, a, 1)
      expect(of(events(home, a.session_id), "turn.complete").map((t) => t["response"])).toEqual(["Hello from Qwen Code."])
      expect(of(events(home, a.session_id), "provider.error")).toEqual([])
      // The agent's HOME has qwen's settings and its session; no key anywhere in it.
      const agentHome = Path.join(home, "agents", a.session_id, "home")
      const files = (Fs.readdirSync(agentHome, { recursive: true }) as Array<string>).filter((f) => Fs.statSync(Path.join(agentHome, f)).isFile())
      expect(JSON.parse(Fs.readFileSync(Path.join(agentHome, ".qwen/settings.json"), "utf8"))).toMatchObject({
        telemetry: { enabled: false },
        memory: { enableManagedAutoMemory: false },
        ui: { enableFollowupSuggestions: false }
      })
      for (const f of files) expect(Fs.readFileSync(Path.join(agentHome, f), "utf8"), f).not.toContain("sk-test-daemon-only")
    }), 180_000)
})
