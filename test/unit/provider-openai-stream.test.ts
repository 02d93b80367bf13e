// The openai provider's pure parts: the SSE accumulator (text deltas, tool call fragments, finish
// reason, usage, faults), settings from the environment, and the replay of an event log into
// the canonical conversation.
import { describe, expect, it } from "vitest"
import { Effect, Exit, Option, Redacted } from "effect"
import type { LogEntry } from "../../src/domain/events.js"
import { SessionId, TurnId } from "../../src/domain/ids.js"
import { ChatAccumulator, completeJson, isFault } from "../../src/provider/openai/ChatStream.js"
import { lostResult, renderTurns, replay } from "../../src/provider/openai/Conversation.js"
import * as FileSystem from "@effect/platform/FileSystem"
import { load } from "../../src/config/Config.js"
import { checkSettings, completionsUrl, fromConfig } from "../../src/provider/openai/Settings.js"

const feed = (lines: ReadonlyArray<string>) => {
  const acc = new ChatAccumulator()
  const deltas: Array<string> = []
  for (const l of lines) {
    const r = acc.line(l)
    if (isFault(r)) return { acc, deltas, fault: r }
    deltas.push(...r)
  }
  const end = acc.end()
  if (isFault(end)) return { acc, deltas, fault: end }
  deltas.push(...end)
  return { acc, deltas, fault: null }
}
const data = (o: unknown) => [`data: ${JSON.stringify(o)}`, ""]
const delta = (d: unknown, finish: string | null = null) => data({ choices: [{ index: 0, delta: d, finish_reason: finish }] })

describe("ChatAccumulator", () => {
  it("streams text deltas; assembles tool calls from fragments by index; usage; [DONE]", () => {
    const r = feed([
      ": OPENROUTER PROCESSING",
      "",
      ...delta({ role: "assistant", content: "" }),
      ...delta({ content: "Hel" }),
      "event: ignored",
      ...delta({ content: "lo" }),
      ...delta({ tool_calls: [{ index: 0, id: "call_a", type: "function", function: { name: "spawn_", arguments: "" } }] }),
      ...delta({ tool_calls: [{ index: 1, id: "call_b", type: "function", function: { name: "check_inbox", arguments: "{}" } }] }),
      ...delta({ tool_calls: [{ index: 0, function: { name: "agent", arguments: "{\"name\":" } }] }),
      ...delta({ tool_calls: [{ index: 0, function: { arguments: "\"w\"}" } }] }, "tool_calls"),
      ...data({ choices: [], usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15, cost: 0.0021 } }),
      "data: [DONE]",
      ""
    ])
    expect(r.fault).toBeNull()
    expect(r.deltas).toEqual(["Hel", "lo"])
    expect(r.acc.text).toBe("Hello")
    expect(r.acc.toolCalls).toEqual([
      { id: "call_a", name: "spawn_agent", arguments: "{\"name\":\"w\"}" },
      { id: "call_b", name: "check_inbox", arguments: "{}" }
    ])
    expect(r.acc.finishReason).toBe("tool_calls")
    expect(r.acc.usage).toEqual({ input_tokens: 12, output_tokens: 3, cost_usd: 0.0021 })
    expect(r.acc.done).toBe(true)
  })

  it("CRLF lines, multi-line data, a last event without its blank line", () => {
    const r = feed([
      "data: {\"choices\":[{\"index\":0,\r",
      "data: \"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\r",
      "\r",
      "data: [DONE]"
    ])
    expect(r.fault).toBeNull()
    expect(r.deltas).toEqual(["x"])
    expect(r.acc.finishReason).toBe("stop")
  })

  it("faults: not JSON, an in-stream error, cut short, a bad shape", () => {
    expect(feed(["data: {nope", ""]).fault).toMatchObject({ kind: "malformed" })
    expect(feed([...data({ error: { message: "rate limited", code: 429 } })]).fault).toEqual({
      kind: "api",
      message: "the endpoint reported an error mid-stream: rate limited (429)"
    })
    expect(feed([...delta({ content: "partial" })]).fault).toMatchObject({ kind: "truncated" })
    expect(feed([...data({ choices: "x" })]).fault).toMatchObject({ kind: "malformed" })
    // finish_reason without [DONE] is complete (some servers omit it)
    expect(feed([...delta({ content: "a" }, "stop")]).fault).toBeNull()
  })

  it("a non-streamed chat.completion body", () => {
    const acc = new ChatAccumulator()
    const r = completeJson(acc, JSON.stringify({
      choices: [{ index: 0, message: { role: "assistant", content: "hi", tool_calls: [{ id: "c1", type: "function", function: { name: "broadcast", arguments: "{\"text\":\"x\"}" } }] }, finish_reason: "tool_calls" }],
      usage: { prompt_tokens: 5, completion_tokens: 2 }
    }))
    expect(r).toEqual(["hi"])
    expect(acc.toolCalls).toEqual([{ id: "c1", name: "broadcast", arguments: "{\"text\":\"x\"}" }])
    expect(acc.usage).toEqual({ input_tokens: 5, output_tokens: 2, cost_usd: 0 })
    expect(isFault(completeJson(new ChatAccumulator(), "<html>"))).toBe(true)
  })
})

/** The openai provider's settings from an environment, through the configuration module (no config.toml). */
const settingsFromEnv = (env: Readonly<Record<string, string>>) =>
  fromConfig(Effect.runSync(Effect.map(load({ env }), (l) => l.settings).pipe(Effect.provide(FileSystem.layerNoop({ exists: () => Effect.succeed(false) })))))

describe("openai settings", () => {
  it("from the environment: explicit base URL and key; OpenRouter when only its key is set; the key stays redacted", () => {
    const s = settingsFromEnv({ SUBSTRAT_OPENAI_BASE_URL: "http://127.0.0.1:9/v1/", SUBSTRAT_OPENAI_API_KEY: "sk-secret-1", SUBSTRAT_OPENAI_MODEL: "m1", SUBSTRAT_OPENAI_MAX_STEPS: "7" })
    expect(completionsUrl(s)).toBe("http://127.0.0.1:9/v1/chat/completions")
    expect(s.defaultModel).toBe("m1")
    expect(s.maxSteps).toBe(7)
    expect(Option.map(s.apiKey, Redacted.value)).toEqual(Option.some("sk-secret-1"))
    expect(JSON.stringify(s)).not.toContain("sk-secret-1")
    expect(String(Option.getOrThrow(s.apiKey))).not.toContain("sk-secret-1")

    const r = settingsFromEnv({ OPENROUTER_API_KEY: "sk-or-1" })
    expect(r.baseUrl).toBe("https://openrouter.ai/api/v1")
    const o = settingsFromEnv({ OPENAI_API_KEY: "sk-oa", OPENROUTER_API_KEY: "sk-or-1" })
    expect(o.baseUrl).toBe("https://api.openai.com/v1")
    expect(Option.map(o.apiKey, Redacted.value)).toEqual(Option.some("sk-oa"))
  })

  it("check: a key, or an explicit base URL (a keyless local server); else refused", () => {
    const ok = (env: Readonly<Record<string, string>>) => Exit.isSuccess(Effect.runSyncExit(checkSettings(settingsFromEnv(env))))
    expect(ok({})).toBe(false)
    expect(ok({ OPENAI_API_KEY: "k" })).toBe(true)
    expect(ok({ SUBSTRAT_OPENAI_BASE_URL: "http://127.0.0.1:8080/v1" })).toBe(true)
    expect(ok({ SUBSTRAT_OPENAI_BASE_URL: "ftp://x", OPENAI_API_KEY: "k" })).toBe(false)
  })
})

describe("replay of the event log", () => {
  const sid = SessionId.make("00000000-0000-4000-8000-000000000001")
  const t1 = TurnId.make("00000000-0000-4000-8000-0000000000a1")
  const t2 = TurnId.make("00000000-0000-4000-8000-0000000000a2")
  const t3 = TurnId.make("00000000-0000-4000-8000-0000000000a3")
  const e = (event: LogEntry["event"], d: unknown): LogEntry => ({ ts: "2025-01-01T00:00:00.000Z", session_id: sid, event, data: d }) as LogEntry

  it("turns with tool calls, a failed turn, a turn cut short by a crash (a call without a result)", () => {
    const r = replay([
      e("session.created", { provider: "openai:m", model: null, system_prompt: "be brief" }),
      e("turn.start", { turn_id: t1, prompt: "p1" }),
      e("tool_call.invoked", { call_id: "x1", tool: "spawn_agent", arguments: { name: "w", instructions: "i" } }),
      e("tool_call.result", { call_id: "x1", tool: "spawn_agent", result: { status: "created" }, is_error: false }),
      e("usage", { turn_id: t1, input_tokens: 1, output_tokens: 1, cost_usd: 0 }),
      e("turn.complete", { turn_id: t1, response: "done" }),
      e("turn.start", { turn_id: t2, prompt: "p2" }),
      e("provider.error", { turn_id: t2, reason: "turn", message: "HTTP 500" }),
      e("suspend.result", { state_size: 10 }),
      e("provider.error", { turn_id: null, reason: "suspend", message: "x" }),
      e("turn.start", { turn_id: t3, prompt: "p3" }),
      e("tool_call.invoked", { call_id: "x2", tool: "check_inbox", arguments: {} })
    ])
    expect(r.instructions).toBe("be brief")
    expect(r.turns).toEqual([
      { prompt: "p1", tools: [{ tool: "spawn_agent", arguments: { name: "w", instructions: "i" }, result: { status: "created" }, is_error: false }], response: "done" },
      { prompt: "p2", tools: [], response: null },
      { prompt: "p3", tools: [{ tool: "check_inbox", arguments: {}, result: lostResult, is_error: true }], response: null }
    ])
    expect(renderTurns(r.turns).map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant", "user", "user", "assistant", "tool"])
  })
})
