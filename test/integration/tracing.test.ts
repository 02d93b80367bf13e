// OpenTelemetry: a real daemon with SUBSTRAT_OTLP_ENDPOINT pointing at an OTLP/HTTP receiver in
// this process (it decodes the JSON exports). A scripted team — lead spawns kid and asks it a
// question (sync), kid answers, the answer wakes lead again — must come out as ONE trace:
//   user.agent.send → message(USER→lead) → turn(lead) → tool_call(send_message) → message(lead→kid)
//   → turn(kid) → message(kid→lead, response) → turn(lead, 2nd)
// with agent, provider, tokens and cost on the turns; and the dashboard's reads export nothing.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cli, daemons, startDaemon, waitFor, waitQuiet } from "./daemon.support.js"
import { request, type Target } from "./http.support.js"
import { attr, exportedSoFar, type OtlpReceiver, type OtlpSpan, startReceiver } from "./otlp.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const owned = daemons()
const dir = makeTmpDir("substrat-otel-")
const home = join(dir, "home")
const unix: Target = { socketPath: join(home, "http.sock") }
let receiver: OtlpReceiver
let spans: Array<OtlpSpan> = []
let services: Array<string> = []

const book = {
  lead: {
    steps: [
      {
        tools: [
          { tool: "spawn_agent", args: { name: "kid", instructions: "You answer.", role: "worker" } },
          { tool: "send_message", args: { recipient: "kid", text: "What is six times seven?", sync: true } }
        ],
        text: "Asked kid.",
        usage: { input_tokens: 100, output_tokens: 20, cost_usd: 0.5 }
      },
      { text: "kid says 42.", usage: { input_tokens: 40, output_tokens: 4, cost_usd: 0.125 } }
    ],
    after: "silent"
  },
  kid: { steps: [{ text: "42", usage: { input_tokens: 7, output_tokens: 3, cost_usd: 0.25 } }], after: "silent" }
}

beforeAll(async () => {
  receiver = await startReceiver()
  spans = receiver.spans
  services = receiver.services
  fs.mkdirSync(join(home, "scripts"), { recursive: true })
  fs.writeFileSync(join(home, "scripts", "team.json"), JSON.stringify(book))
  // The daemon inherits the environment of `daemon start`.
  process.env["SUBSTRAT_OTLP_ENDPOINT"] = receiver.endpoint
  owned.track(await startDaemon(home))
  delete process.env["SUBSTRAT_OTLP_ENDPOINT"]
})

afterAll(async () => {
  await owned.killAll()
  await receiver.close()
  removeDir(dir)
})

describe("OpenTelemetry traces (OTLP/HTTP JSON)", () => {
  it("a user's request to a team is one trace: request → message → turn → tool call → message → child's turn → reply → turn", async () => {
    expect((await request(unix, "POST", "/v1/agents", { name: "lead", provider: "scripted:team" })).status).toBe(201)
    const sent = await request(unix, "POST", "/v1/agents/lead/messages", { text: "Ask kid.", wait: true })
    expect(sent.status).toBe(200)
    await waitQuiet(home)
    // Reads that must not be exported (no user request behind them).
    await request(unix, "GET", "/v1/agents?all=1")
    await request(unix, "GET", "/v1/daemon")
    expect((await cli(home, ["agent", "list"])).code).toBe(0)

    const byName = (name: string) => spans.filter((s) => s.name === name)
    const turnOf = (agent: string) => byName("turn").filter((t) => attr(t, "gen_ai.agent.name") === agent)
    await waitFor("the lead's second turn exported", () => (turnOf("lead").length >= 2 && turnOf("kid").length >= 1 ? true : undefined), 30_000)
    // Everything ended so far (the reads above included) has arrived before counting.
    const marker = await exportedSoFar(receiver, unix)
    expect(new Set(services)).toEqual(new Set(["substrat"]))

    const root = byName("user.agent.send")
    expect(root.length).toBe(1)
    const trace = root[0]!.traceId
    expect(root[0]!.parentSpanId).toBeUndefined()
    expect(attr(root[0]!, "gen_ai.agent.name")).toBe("lead")
    const inTrace = spans.filter((s) => s.traceId === trace)
    const byId = new Map(inTrace.map((s) => [s.spanId, s]))
    const parentOf = (s: OtlpSpan) => (s.parentSpanId === undefined ? undefined : byId.get(s.parentSpanId))
    /** The nearest ancestor of one of our span kinds (Effect.fn spans of the services lie in between). */
    const ours = new Set(["user.agent.send", "message", "turn", "tool_call"])
    const up = (s: OtlpSpan) => {
      let p = parentOf(s)
      while (p !== undefined && !ours.has(p.name)) p = parentOf(p)
      return p
    }
    // Every span of the trace hangs below the root: no orphan, no second root.
    for (const s of inTrace) {
      if (s === root[0]) continue
      let p = parentOf(s)
      let hops = 0
      while (p !== undefined && p !== root[0] && hops++ < 100) p = parentOf(p)
      expect([s.name, p?.name]).toEqual([s.name, "user.agent.send"])
    }

    const messages = inTrace.filter((s) => s.name === "message")
    const msg = (from: string, to: string) => {
      const m = messages.filter((x) => attr(x, "substrat.message.from") === from && attr(x, "substrat.message.to") === to)
      expect([from, to, m.length]).toEqual([from, to, 1])
      return m[0]!
    }
    const toLead = msg("USER", "lead")
    expect(up(toLead)).toBe(root[0])

    const [lead1, lead2] = turnOf("lead").filter((t) => t.traceId === trace)
    expect(lead1 && lead2).toBeTruthy()
    const first = parentOf(lead1!) === toLead ? lead1! : lead2!
    const second = first === lead1 ? lead2! : lead1!
    expect(parentOf(first)).toBe(toLead)
    expect(attr(first, "gen_ai.provider.name")).toBe("scripted:team")
    expect(attr(first, "gen_ai.usage.input_tokens")).toBe(100)
    expect(attr(first, "gen_ai.usage.output_tokens")).toBe(20)
    expect(attr(first, "substrat.cost_usd")).toBe(0.5)
    expect(attr(first, "gen_ai.agent.id")).toMatch(/^[0-9a-f-]{36}$/)

    const tools = inTrace.filter((s) => s.name === "tool_call" && up(s) === first)
    expect(tools.map((t) => attr(t, "gen_ai.tool.name")).sort()).toEqual(["send_message", "spawn_agent"])
    const ask = msg("lead", "kid")
    expect(attr(ask, "substrat.message.kind")).toBe("request")
    expect(attr(up(ask)!, "gen_ai.tool.name")).toBe("send_message")

    const kid = turnOf("kid").filter((t) => t.traceId === trace)
    expect(kid.length).toBe(1)
    expect(parentOf(kid[0]!)).toBe(ask)
    expect(attr(kid[0]!, "gen_ai.usage.input_tokens")).toBe(7)
    expect(attr(kid[0]!, "substrat.cost_usd")).toBe(0.25)
    expect(attr(kid[0]!, "substrat.agent.parent_id")).toBe(attr(first, "gen_ai.agent.id"))

    const reply = msg("kid", "lead")
    expect(attr(reply, "substrat.message.kind")).toBe("response")
    expect(up(reply)).toBe(kid[0])
    expect(parentOf(second)).toBe(reply)
    expect(attr(second, "substrat.cost_usd")).toBe(0.125)

    // Nothing else was exported but the agent's creation (its own request) and the marker's: no
    // background or read traces.
    const traces = new Set(spans.map((s) => s.traceId))
    const others = spans.filter((s) => s.traceId !== trace && s.traceId !== marker)
    expect(traces.size).toBe(3)
    expect(others.filter((s) => s.parentSpanId === undefined).map((s) => s.name)).toEqual(["user.agent.create"])
  }, 120_000)
})
