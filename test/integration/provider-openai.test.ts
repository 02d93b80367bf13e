// The `openai` provider (bare Chat Completions model, tool loop in the daemon) through the real
// Orchestrator on the file EventLog/SessionStore, against the scripted endpoint
// (src/testing/ScriptedLlm.ts, streaming /chat/completions). No network beyond loopback.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Option, Stream } from "effect"
import * as Net from "node:net"
import * as Orchestration from "../../src/agent/Orchestrator.js"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { Recovery } from "../../src/recovery/Recovery.js"
import type { AgentId } from "../../src/domain/ids.js"
import { Durable } from "../../src/storage/Durable.js"
import { toolNames } from "../../src/domain/tools.js"
import * as OpenAi from "../../src/provider/openai/OpenAiProvider.js"
import { defaults, type OpenAiSettingsShape } from "../../src/provider/openai/Settings.js"
import { makeRegistry, ProviderRegistry } from "../../src/provider/ProviderRegistry.js"
import { scriptedFactory } from "../../src/provider/scripted/ScriptedProvider.js"
import { MultiplexerConfig } from "../../src/session/Multiplexer.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { tmpDir } from "../support/tmpDir.js"
import { dataOf, eventsOf } from "./orchestration.support.js"
import { storageOver } from "./recovery.support.js"

type Msg = { readonly role: string; readonly content?: unknown; readonly tool_calls?: ReadonlyArray<{ id: string; function: { name: string; arguments: string } }>; readonly tool_call_id?: string }
const messagesOf = (r: ScriptedLlm.RecordedRequest): ReadonlyArray<Msg> => (r.body as { messages: ReadonlyArray<Msg> }).messages
const roles = (r: ScriptedLlm.RecordedRequest) => messagesOf(r).map((m) => m.role)
const bodyOf = (r: ScriptedLlm.RecordedRequest) => r.body as Record<string, unknown>

const settingsFor = (baseUrl: string, extra: Partial<OpenAiSettingsShape> = {}): OpenAiSettingsShape =>
  defaults({ baseUrl, maxRetries: 0, retryDelayMs: 1, timeoutMs: 10_000, ...extra })

/** Orchestrator + Recovery over the file layers of `home`; the registry: scripted + openai. */
const life = (home: string, settings: OpenAiSettingsShape) => {
  const storage = storageOver(home, Durable.layer)
  const registry = Layer.effect(ProviderRegistry, Effect.map(OpenAi.factoryWith(settings), (f) => makeRegistry([scriptedFactory(), f])))
  return Recovery.Default.pipe(
    Layer.provideMerge(Orchestration.layer),
    Layer.provideMerge(Layer.mergeAll(registry, MultiplexerConfig.layer(4))),
    Layer.provideMerge(storage)
  )
}

const turn = (agent: AgentId, text: string) =>
  Effect.flatMap(Orchestrator, (o) => o.runTurn(agent, text)).pipe(Effect.map(Option.getOrThrow))

const freePort = Effect.async<number>((resume) => {
  const s = Net.createServer()
  s.listen(0, "127.0.0.1", () => {
    const port = (s.address() as Net.AddressInfo).port
    s.close(() => resume(Effect.succeed(port)))
  })
})

describe("openai provider (Chat Completions, tool loop in the daemon)", () => {
  it.scopedLive("a root spawns a child through a streamed tool call and asks it (sync); results are fed back; the reply wakes the root with its history", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-openai-")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { match: { system: "AGENT=boss", lastUser: "Reply from w" }, reply: Reply.text("w says 42. Done."), label: "boss-3" },
          {
            match: { system: "AGENT=boss", lastUser: "Start" },
            reply: {
              _tag: "Message",
              content: [
                { type: "text", text: "Spawning w and asking it." },
                { type: "tool_use", id: "call_spawn", name: "spawn_agent", input: { name: "w", instructions: "AGENT=w You answer sums." } },
                { type: "tool_use", id: "call_ask", name: "send_message", input: { recipient: "w", text: "What is 6*7?" } }
              ],
              usage: { input_tokens: 100, output_tokens: 20 }
            },
            label: "boss-1"
          },
          { match: { system: "AGENT=boss" }, reply: { ...Reply.text("Asked w."), usage: { input_tokens: 130, output_tokens: 5 } } as ScriptedLlm.Reply, label: "boss-2" },
          { match: { system: "AGENT=w" }, reply: Reply.text("42"), label: "w-1" }
        ]
      })
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const boss = yield* o.createRoot({ name: "boss", instructions: "AGENT=boss You lead.", provider: "openai:test-model" })
        yield* o.send({ agent: boss.id, text: "Start the work." })
        yield* o.awaitIdle

        const agents = yield* o.list
        const w = agents.find((a) => a.name === "w")!
        expect(w.parent_id).toBe(boss.id)
        expect(w.provider).toBe("openai:test-model")

        const reqs = yield* llm.modelRequests
        expect(reqs.map((r) => r.label)).toEqual(["boss-1", "boss-2", "w-1", "boss-3"])
        expect(reqs.every((r) => r.kind === "openai-chat" && r.stream && r.model === "test-model")).toBe(true)
        const first = bodyOf(reqs[0]!)
        expect(first["stream_options"]).toEqual({ include_usage: true })
        expect((first["tools"] as ReadonlyArray<{ function: { name: string } }>).map((t) => t.function.name)).toEqual([...toolNames])
        expect(String(messagesOf(reqs[0]!)[0]!.content)).toContain("AGENT=boss You lead.")

        // The second call of the same turn carries the model's calls and their results.
        const second = messagesOf(reqs[1]!)
        expect(second.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "tool"])
        expect(second[2]!.content).toBe("Spawning w and asking it.")
        expect(second[2]!.tool_calls!.map((c) => [c.id, c.function.name])).toEqual([["call_spawn", "spawn_agent"], ["call_ask", "send_message"]])
        expect(second[3]!.tool_call_id).toBe("call_spawn")
        expect(JSON.parse(String(second[3]!.content))).toMatchObject({ status: "created", name: "w" })
        expect(second[4]!.tool_call_id).toBe("call_ask")
        expect(JSON.parse(String(second[4]!.content))).toMatchObject({ status: "sent" })

        // The child got the question; its final text went back as the reply.
        expect(reqs[2]!.lastUser).toMatch(/^Message from boss \(message [0-9a-f-]{36}, reply expected\):\nWhat is 6\*7\?$/)

        // The root's next turn: its whole first turn (canonical form), then the reply.
        const third = messagesOf(reqs[3]!)
        expect(third.map((m) => m.role)).toEqual(["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "user"])
        expect(third[1]!.content).toMatch(/Start the work\.$/)
        expect(third[2]!.tool_calls!.map((c) => [c.id, c.function.name])).toEqual([["call_0_0", "spawn_agent"]])
        expect(third[4]!.tool_calls!.map((c) => [c.id, c.function.name])).toEqual([["call_0_1", "send_message"]])
        expect(third[6]!.content).toBe("Asked w.")
        expect(third[7]!.content).toMatch(/^Reply from w \(to message [0-9a-f-]{36}\): 42$/)

        const bossLog = yield* eventsOf(boss.session_id)
        expect(dataOf(bossLog, "tool_call.invoked").map((t) => t.tool)).toEqual(["spawn_agent", "send_message"])
        expect(dataOf(bossLog, "tool_call.result").map((t) => t.is_error)).toEqual([false, false])
        expect(dataOf(bossLog, "turn.complete").map((t) => t.response)).toEqual(["Asked w.", "w says 42. Done."])
        expect(dataOf(bossLog, "provider.error")).toEqual([])
        const usage = dataOf(bossLog, "usage")
        expect(usage.length).toBe(2)
        // Both model calls of the first turn, summed.
        expect(usage[0]).toMatchObject({ input_tokens: 230, output_tokens: 25, cost_usd: 0 })
        expect(usage[1]!.input_tokens).toBeGreaterThan(0)
      }).pipe(Effect.provide(life(home, settingsFor(llm.baseUrl))))
    }), 30_000)

  it.scopedLive("text streams out as chunks while the turn runs", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-openai-")
      const llm = yield* ScriptedLlm.make({ listen: { port: 0 }, script: [{ reply: Reply.text("one two three four five") }] })
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const a = yield* o.createRoot({ name: "a", instructions: "", provider: "openai:m" })
        const out = yield* o.subscribe(a.id)
        const collected = yield* out.pipe(
          Stream.takeUntil((x) => x._tag === "TurnCompleted"),
          Stream.runCollect,
          Effect.fork
        )
        yield* turn(a.id, "hi")
        const outputs = [...yield* Fiber.join(collected)]
        const texts = outputs.flatMap((x) => (x._tag === "Text" ? [x.text] : []))
        expect(texts.length).toBeGreaterThan(1)
        expect(texts.join("")).toBe("one two three four five")
      }).pipe(Effect.provide(life(home, settingsFor(llm.baseUrl))))
    }), 30_000)

  it.scopedLive("multi-turn history; suspend → resume replays the log; a restart (blob, and kill-style without one) continues the conversation", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-openai-")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { match: { system: "AGENT=boss", lastUser: "one" }, reply: Reply.text("r1"), label: "1" },
          { match: { system: "AGENT=boss", lastUser: "two" }, reply: Reply.text("r2"), label: "2" },
          { match: { system: "AGENT=boss", lastUser: "three" }, reply: Reply.text("r3"), label: "3" },
          { match: { system: "AGENT=boss", lastUser: "four" }, reply: Reply.text("r4"), label: "4" },
          { match: { system: "AGENT=solo", lastUser: "alpha" }, reply: Reply.text("ra"), label: "a" },
          { match: { system: "AGENT=solo", lastUser: "beta" }, reply: Reply.text("rb"), label: "b" }
        ]
      })
      const settings = settingsFor(llm.baseUrl)
      const ids = yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const boss = yield* o.createRoot({ name: "boss", instructions: "AGENT=boss", provider: "openai:m" })
        const solo = yield* o.createRoot({ name: "solo", instructions: "AGENT=solo", provider: "openai:m" })
        expect((yield* turn(boss.id, "one")).response).toBe("r1")
        expect((yield* turn(boss.id, "two")).response).toBe("r2")
        expect(yield* o.suspend(boss.session_id)).toBe(true)
        expect((yield* turn(boss.id, "three")).response).toBe("r3")
        expect((yield* turn(solo.id, "alpha")).response).toBe("ra")
        const log = yield* eventsOf(boss.session_id)
        expect(log.map((e) => e.event)).toContain("session.restored")
        expect(dataOf(log, "suspend.result")[0]!.state_size).toBeLessThan(200)
        return { boss, solo }
      }).pipe(Effect.provide(life(home, settings)))

      let reqs = yield* llm.modelRequests
      const r2 = reqs.find((r) => r.label === "2")!
      const r3 = reqs.find((r) => r.label === "3")!
      // After the resume, the request is the live conversation so far + r2 + the new prompt.
      expect(JSON.stringify(messagesOf(r3))).toBe(
        JSON.stringify([...messagesOf(r2), { role: "assistant", content: "r2" }, { role: "user", content: "three" }])
      )
      expect(roles(r3)).toEqual(["system", "user", "assistant", "user", "assistant", "user"])

      // A new daemon over the same home: recovery, then the next turns.
      yield* Effect.gen(function*() {
        const report = yield* Effect.flatMap(Recovery, (r) => r.run({ resume: false }))
        expect(report.agents).toBe(2)
        expect((yield* turn(ids.boss.id, "four")).response).toBe("r4")
        expect((yield* turn(ids.solo.id, "beta")).response).toBe("rb")
      }).pipe(Effect.provide(life(home, settings)))

      reqs = yield* llm.modelRequests
      const r4 = reqs.find((r) => r.label === "4")!
      expect(JSON.stringify(messagesOf(r4))).toBe(
        JSON.stringify([...messagesOf(r3), { role: "assistant", content: "r3" }, { role: "user", content: "four" }])
      )
      // solo was never suspended (no blob): `start` replayed its log.
      const rb = reqs.find((r) => r.label === "b")!
      expect(messagesOf(rb).slice(1)).toEqual([
        { role: "user", content: "alpha" },
        { role: "assistant", content: "ra" },
        { role: "user", content: "beta" }
      ])
    }), 30_000)

  it.scopedLive("HTTP 500, malformed SSE, a dropped stream, connection refused: a typed turn error and provider.error; the agent stays usable", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-openai-")
      const port = yield* freePort
      const settings = settingsFor(`http://127.0.0.1:${port}/v1`)
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const a = yield* o.createRoot({ name: "a", instructions: "AGENT=a", provider: "openai:m" })
        const refused = yield* turn(a.id, "nobody there")
        expect(refused.error?.reason).toBe("turn")
        expect(refused.error?.message).toMatch(/^openai: connection refused at http:\/\/127\.0\.0\.1:\d+\/v1\/chat\/completions/)

        const llm = yield* ScriptedLlm.make({
          listen: { port },
          script: [
            { reply: Reply.error(500, "upstream exploded"), label: "500" },
            { reply: Reply.text("back"), label: "ok-1" },
            { reply: Reply.raw("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"par\"}}]}\n\ndata: {not json\n\n"), label: "malformed" },
            { reply: Reply.disconnect(), label: "drop" },
            { reply: Reply.text("still here"), label: "ok-2" }
          ]
        })
        const e500 = yield* turn(a.id, "first")
        expect(e500.error?.message).toMatch(/^openai: HTTP 500 from .*: upstream exploded/)
        expect((yield* turn(a.id, "second")).response).toBe("back")
        const bad = yield* turn(a.id, "third")
        expect(bad.error?.message).toMatch(/a stream event is not JSON/)
        const drop = yield* turn(a.id, "fourth")
        expect(drop.error?.reason).toBe("turn")
        expect((yield* turn(a.id, "fifth")).response).toBe("still here")

        const log = yield* eventsOf(a.session_id)
        expect(dataOf(log, "provider.error").map((e) => e.reason)).toEqual(["turn", "turn", "turn", "turn"])
        expect(dataOf(log, "turn.complete").map((t) => t.response)).toEqual(["back", "still here"])
        // Failed turns stay in the conversation as prompts without an answer (as the log replays them).
        const last = (yield* llm.modelRequests).at(-1)!
        expect(messagesOf(last).slice(1).map((m) => [m.role, m.content])).toEqual([
          ["user", "nobody there"],
          ["user", "first"],
          ["user", "second"],
          ["assistant", "back"],
          ["user", "third"],
          ["user", "fourth"],
          ["user", "fifth"]
        ])
      }).pipe(Effect.provide(life(home, settings)))
    }), 30_000)

  it.scopedLive("retryable failures are retried before any output; the tool loop is bounded by maxSteps", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-openai-")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { match: { system: "AGENT=r" }, reply: Reply.error(503, "busy"), label: "503" },
          { match: { system: "AGENT=r" }, reply: Reply.text("after retry"), label: "ok" },
          { match: { system: "AGENT=loop" }, reply: Reply.toolCall("check_inbox", {}), times: Infinity, label: "loop" }
        ]
      })
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const r = yield* o.createRoot({ name: "r", instructions: "AGENT=r", provider: "openai:m" })
        expect((yield* turn(r.id, "go")).response).toBe("after retry")
        const loop = yield* o.createRoot({ name: "loop", instructions: "AGENT=loop", provider: "openai:m" })
        const out = yield* turn(loop.id, "go")
        expect(out.error?.message).toMatch(/still calling tools after 3 model calls/)
        const reqs = yield* llm.modelRequests
        expect(reqs.map((x) => x.label)).toEqual(["503", "ok", "loop", "loop", "loop"])
        const log = yield* eventsOf(loop.session_id)
        expect(dataOf(log, "tool_call.invoked").map((t) => t.tool)).toEqual(["check_inbox", "check_inbox", "check_inbox"])
      }).pipe(Effect.provide(life(home, settingsFor(llm.baseUrl, { maxRetries: 2, maxSteps: 3 }))))
    }), 30_000)

  it.scopedLive("tool arguments that are not JSON: the error goes back to the model, the tools never see the call", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-openai-")
      const frame = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`
      const bad = frame({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: "c_bad", type: "function", function: { name: "broadcast", arguments: "{bad" } }] }, finish_reason: null }] }) +
        frame({ choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] }) + "data: [DONE]\n\n"
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [{ reply: Reply.raw(bad), label: "bad" }, { reply: Reply.text("sorry"), label: "ok" }, { reply: Reply.text("next"), label: "next" }]
      })
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const a = yield* o.createRoot({ name: "a", instructions: "", provider: "openai:m" })
        expect((yield* turn(a.id, "go")).response).toBe("sorry")
        expect((yield* turn(a.id, "again")).response).toBe("next")
        const [, second, third] = yield* llm.modelRequests
        const fed = messagesOf(second!).at(-1)!
        expect(fed.role).toBe("tool")
        expect(fed.tool_call_id).toBe("c_bad")
        expect(String(fed.content)).toMatch(/invalid_arguments.*not JSON/)
        expect(dataOf(yield* eventsOf(a.session_id), "tool_call.invoked")).toEqual([])
        // Not in the log, so not in the kept conversation either.
        expect(messagesOf(third!).slice(1).map((m) => m.role)).toEqual(["user", "assistant", "user"])
      }).pipe(Effect.provide(life(home, settingsFor(llm.baseUrl))))
    }), 30_000)

  it.scopedLive("not configured: check and checkVariant refuse up front; agent creation through spawn_agent is refused", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-openai-")
      yield* Effect.gen(function*() {
        const registry = yield* ProviderRegistry
        const f = yield* registry.get("openai:m")
        const err = yield* Effect.flip(f.check ?? Effect.void)
        expect(err.reason).toBe("missing-binary")
        expect(err.message).toMatch(/SUBSTRAT_OPENAI_API_KEY/)
        const noModel = yield* Effect.flip(registry.get("openai"))
        expect(noModel.reason).toBe("unknown-provider")
        expect(noModel.message).toMatch(/openai:<model>/)

        const o = yield* Orchestrator
        const boss = yield* o.createRoot({ name: "boss", instructions: "", provider: "scripted" })
        const refused = yield* Effect.flip(o.spawn(boss.id, { name: "c", instructions: "", role: "worker", provider: "openai:m" }))
        expect(refused.message).toMatch(/no endpoint configured/)
      }).pipe(Effect.provide(life(home, defaults())))
    }), 30_000)
})
