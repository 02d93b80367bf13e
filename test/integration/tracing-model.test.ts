// Model requests as spans: a real daemon exporting to an OTLP/HTTP receiver in this process, a team
// of `openai` agents (bare Chat Completions, the tool loop in the daemon) against the scripted
// endpoint with exact usage per reply, and a price table, so every number is known:
//   boss: call 1 (spawn w, ask w) → call 2 ("Asked w.")   — its 1st turn
//   w:    call 1 ("42")                                    — its turn
//   boss: call 3 (woken by w's reply)                      — its 2nd turn
// Each call is a `model.request` span whose parent is the turn it ran in, with tokens (uncached
// in, out, cache read, cache write), cost, HTTP status, streamed, model, agent and provider. An
// agent past its token budget gets its next call refused: that span has an error status.
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { type Reply } from "../../src/testing/ScriptedLlm.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { type Agent, daemons, type Inspect, rpcClient, startDaemon, waitFor, waitQuiet } from "./daemon.support.js"
import { request, type Target } from "./http.support.js"
import { attr, exportedSoFar, type OtlpReceiver, type OtlpSpan, startReceiver } from "./otlp.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-otel-model-")
const home = join(dir, "home")
const unix: Target = { socketPath: join(home, "http.sock") }
let receiver: OtlpReceiver
const scope = Effect.runSync(Scope.make())
const ENV = ["SUBSTRAT_OTLP_ENDPOINT", "SUBSTRAT_OPENAI_BASE_URL", "SUBSTRAT_OPENAI_API_KEY", "SUBSTRAT_METER_PRICES"]

/** USD per million tokens: every cost below is exact arithmetic on these. */
const PRICE = { input: 1000, output: 2000, cache_read: 100, cache_write: 1250 }
const cost = (u: { input: number; output: number; cache_read: number }) =>
  (u.input * PRICE.input + u.output * PRICE.output + u.cache_read * PRICE.cache_read) / 1_000_000

const said = (text: string, usage: NonNullable<Extract<Reply, { _tag: "Message" }>["usage"]>): Reply => ({
  _tag: "Message",
  content: [{ type: "text", text }],
  usage
})

const script: ReadonlyArray<ScriptedLlm.ScriptEntry> = [
  { match: { system: "AGENT=boss", lastUser: "Reply from w" }, reply: said("w says 42.", { input_tokens: 200, output_tokens: 8, cache_read_tokens: 150 }), label: "boss-3" },
  {
    match: { system: "AGENT=boss", lastUser: "Start" },
    reply: {
      _tag: "Message",
      content: [
        { type: "tool_use", name: "spawn_agent", input: { name: "w", instructions: "AGENT=w You answer." } },
        { type: "tool_use", name: "send_message", input: { recipient: "w", text: "What is 6*7?", sync: true } }
      ],
      usage: { input_tokens: 100, output_tokens: 20, cache_read_tokens: 50 }
    },
    label: "boss-1"
  },
  { match: { system: "AGENT=boss" }, reply: said("Asked w.", { input_tokens: 110, output_tokens: 5 }), label: "boss-2" },
  { match: { system: "AGENT=w" }, reply: said("42", { input_tokens: 30, output_tokens: 2 }), label: "w-1" },
  {
    // Few uncached tokens, many cache reads: only counting the cache reads spends a 100-token budget.
    match: { system: "AGENT=cacher" },
    reply: { _tag: "Message", content: [{ type: "tool_use", name: "check_inbox", input: {} }], usage: { input_tokens: 10, output_tokens: 1, cache_read_tokens: 500 } },
    label: "cacher-1",
    times: 20
  },
  {
    match: { system: "AGENT=spender" },
    reply: { _tag: "Message", content: [{ type: "tool_use", name: "check_inbox", input: {} }], usage: { input_tokens: 500, output_tokens: 1 } },
    label: "spender-1"
  }
]

beforeAll(async () => {
  receiver = await startReceiver()
  const llm = await Effect.runPromise(Scope.extend(ScriptedLlm.make({ listen: { port: 0 }, script }), scope))
  // The daemon inherits the environment of `daemon start`.
  process.env["SUBSTRAT_OTLP_ENDPOINT"] = receiver.endpoint
  process.env["SUBSTRAT_OPENAI_BASE_URL"] = `${llm.baseUrl}/v1`
  process.env["SUBSTRAT_OPENAI_API_KEY"] = "sk-tracing-model-test"
  process.env["SUBSTRAT_METER_PRICES"] = JSON.stringify({ "e2e-model": PRICE })
  owned.track(await startDaemon(home))
  for (const k of ENV) delete process.env[k]
})

afterAll(async () => {
  await owned.killAll()
  await receiver.close()
  await Effect.runPromise(Scope.close(scope, Exit.void))
  removeDir(dir)
})

describe("model requests as spans (OTLP)", () => {
  it("each model call of a team is a model.request span below the turn it ran in, with exact tokens and cost; a refused call is an error", async () => {
    const spans = receiver.spans
    expect((await request(unix, "POST", "/v1/agents", { name: "boss", provider: "openai:e2e-model", instructions: "AGENT=boss You lead." })).status).toBe(201)
    expect((await request(unix, "POST", "/v1/agents/boss/messages", { text: "Start the work.", wait: false })).status).toBeLessThan(300)
    const created = await request(unix, "POST", "/v1/agents", {
      name: "spender",
      provider: "openai:e2e-model",
      instructions: "AGENT=spender You spend.",
      budget: { tokens: 100 }
    })
    expect(created.status).toBe(201)
    expect((await request(unix, "POST", "/v1/agents/spender/messages", { text: "Spend.", wait: false })).status).toBeLessThan(300)
    // The refused call parks spender's turn (docs/budgets.md): it stays queued until a raise.
    await waitQuiet(home, ["spender"])
    const spenderLog = fs.readFileSync(join(home, "agents", (JSON.parse(created.body) as { session_id: string }).session_id, "events.jsonl"), "utf8")
    expect(spenderLog.split("\n").filter((l) => l !== "" && (JSON.parse(l) as { event: string }).event === "budget.breached").length).toBe(1)
    const rpc = await rpcClient(join(home, "daemon.sock"))
    try {
      const spender = (await rpc.call<{ agents: ReadonlyArray<Agent> }>("agent.list")).agents.find((a) => a.name === "spender")!
      expect((await rpc.call<Inspect>("agent.inspect", { agent: spender.id })).queued_turns).toBe(1)
    } finally {
      rpc.close()
    }

    const byName = (name: string) => spans.filter((s) => s.name === name)
    await waitFor("6 model requests exported", () => (byName("model.request").length >= 6 ? true : undefined), 30_000)
    // Everything ended so far has arrived before counting.
    await exportedSoFar(receiver, unix)

    const requests = byName("model.request")
    expect(requests.length).toBe(6)
    const turns = byName("turn")
    const turnById = new Map(turns.map((t) => [t.spanId, t]))
    const turnOf = (s: OtlpSpan) => (s.parentSpanId === undefined ? undefined : turnById.get(s.parentSpanId))
    // Every model request's parent is a turn of its own agent, in the same trace.
    for (const r of requests) {
      const t = turnOf(r)
      expect([r.spanId, t?.name, t?.traceId]).toEqual([r.spanId, "turn", r.traceId])
      expect(attr(r, "gen_ai.agent.name")).toBe(attr(t!, "gen_ai.agent.name"))
      expect(attr(r, "gen_ai.agent.id")).toBe(attr(t!, "gen_ai.agent.id"))
      expect(attr(r, "gen_ai.provider.name")).toBe("openai")
      expect(attr(r, "gen_ai.request.model")).toBe("e2e-model")
    }

    const ok = requests.filter((r) => attr(r, "error") === undefined)
    expect(ok.length).toBe(5)
    const call = (input: number) => {
      const m = ok.filter((r) => attr(r, "gen_ai.usage.input_tokens") === input)
      expect([input, m.length]).toEqual([input, 1])
      return m[0]!
    }
    const expectUsage = (r: OtlpSpan, u: { input: number; output: number; cache_read: number }) => {
      expect({
        in: attr(r, "gen_ai.usage.input_tokens"),
        out: attr(r, "gen_ai.usage.output_tokens"),
        cacheRead: attr(r, "gen_ai.usage.cache_read.input_tokens"),
        cacheWrite: attr(r, "gen_ai.usage.cache_creation.input_tokens"),
        status: attr(r, "http.response.status_code"),
        streamed: attr(r, "substrat.model.streamed"),
        model: attr(r, "gen_ai.response.model")
      }).toEqual({ in: u.input, out: u.output, cacheRead: u.cache_read, cacheWrite: 0, status: 200, streamed: true, model: "e2e-model" })
      expect(attr(r, "substrat.cost_usd")).toBeCloseTo(cost(u), 12)
      expect(r.status?.code ?? 0).not.toBe(2)
    }
    const boss1 = call(100)
    const boss2 = call(110)
    const w1 = call(30)
    const boss3 = call(200)
    expectUsage(boss1, { input: 100, output: 20, cache_read: 50 })
    expectUsage(boss2, { input: 110, output: 5, cache_read: 0 })
    expectUsage(w1, { input: 30, output: 2, cache_read: 0 })
    expectUsage(boss3, { input: 200, output: 8, cache_read: 150 })

    // Calls 1 and 2 of boss ran in its first turn; w's in w's turn; call 3 in boss's second turn.
    expect(turnOf(boss1)).toBe(turnOf(boss2))
    expect(attr(turnOf(boss1)!, "gen_ai.agent.name")).toBe("boss")
    expect(attr(turnOf(w1)!, "gen_ai.agent.name")).toBe("w")
    expect(attr(turnOf(boss3)!, "gen_ai.agent.name")).toBe("boss")
    expect(turnOf(boss3)).not.toBe(turnOf(boss1))
    // One trace for the user's request: the kid's and the reply's turns too.
    const root = byName("user.agent.send").filter((s) => attr(s, "gen_ai.agent.name") === "boss")
    expect(root.length).toBe(1)
    expect([boss1, boss2, w1, boss3].map((r) => r.traceId)).toEqual(Array(4).fill(root[0]!.traceId))
    // The turn's tokens are the sum of its requests'.
    expect(attr(turnOf(boss1)!, "gen_ai.usage.input_tokens")).toBe(100 + 110 + 50)

    // spender: the first call spent its 100-token budget; the second is refused, an error span.
    const refused = requests.filter((r) => attr(r, "error") === true)
    expect(refused.length).toBe(1)
    expect(attr(refused[0]!, "gen_ai.agent.name")).toBe("spender")
    expect(attr(refused[0]!, "error.type")).toBe("substrat_budget")
    expect(attr(refused[0]!, "substrat.model.refused")).toBe(true)
    expect(refused[0]!.status?.code).toBe(2)
    expect(refused[0]!.status?.message).toContain("budget")
    expect(attr(turnOf(refused[0]!)!, "gen_ai.agent.name")).toBe("spender")
    const spent = requests.filter((r) => attr(r, "gen_ai.agent.name") === "spender" && r !== refused[0])
    expect(spent.map((r) => attr(r, "gen_ai.usage.input_tokens"))).toEqual([500])
  }, 120_000)

  it("cache reads count against a token budget: 11 uncached tokens and 500 cache reads spend 100 tokens", async () => {
    const created = await request(unix, "POST", "/v1/agents", {
      name: "cacher",
      provider: "openai:e2e-model",
      instructions: "AGENT=cacher You read the cache.",
      budget: { tokens: 100 }
    })
    expect(created.status).toBe(201)
    const session = (JSON.parse(created.body) as { session_id: string }).session_id
    expect((await request(unix, "POST", "/v1/agents/cacher/messages", { text: "Read.", wait: false })).status).toBeLessThan(300)
    const log = () =>
      fs.readFileSync(join(home, "agents", session, "events.jsonl"), "utf8").split("\n").filter((l) => l !== "")
        .map((l) => JSON.parse(l) as { event: string; data: Record<string, unknown> })
    // The breach is logged when the refused request is refused; then the turn ends (or parks).
    await waitFor("cacher's budget breached", () => (log().some((e) => e.event === "budget.breached") ? true : undefined))
    await waitFor("cacher's turn over", async () => {
      const r = await request(unix, "GET", "/v1/agents/cacher")
      return (JSON.parse(r.body) as { state: string }).state === "busy" ? undefined : true
    })
    // The first request (511 tokens, cache included) was the only one let through: the second
    // was refused before it left. Counting cache reads as 0, ten 11-token requests would pass.
    const used = log().filter((e) => e.event === "usage" && e.data["source"] === "request")
    expect(used.map((e) => [e.data["input_tokens"], e.data["cache_read_tokens"]])).toEqual([[10, 500]])
    const breached = log().filter((e) => e.event === "budget.breached")
    expect(breached.map((e) => e.data["reason"])).toEqual(["token budget spent (511 of 100 tokens, cache included)"])
  }, 120_000)
})
