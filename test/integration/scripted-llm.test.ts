// The scripted LLM endpoint on its own: wire formats (SSE framing and event order), matching,
// recording, errors, TCP and Unix sockets. The real clients are exercised in test/e2e/.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"

interface Answer {
  readonly status: number
  readonly headers: Http.IncomingHttpHeaders
  readonly text: string
}

/** One HTTP request over TCP or a Unix socket; a dropped connection is a failure carrying what arrived. */
const request = (
  server: ScriptedLlm.ScriptedLlmServer,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {}
) =>
  Effect.async<Answer, { readonly _tag: "Dropped"; readonly partial: string }>((resume) => {
    const data = body === undefined ? undefined : JSON.stringify(body)
    const target = server.address._tag === "Unix"
      ? { socketPath: server.address.path }
      : { host: server.address.host, port: server.address.port }
    const req = Http.request({
      ...target,
      method,
      path,
      headers: { ...(data === undefined ? {} : { "content-type": "application/json" }), ...headers }
    }, (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (c: string) => (text += c))
      res.on("end", () => resume(Effect.succeed({ status: res.statusCode ?? 0, headers: res.headers, text })))
      res.on("error", () => resume(Effect.fail({ _tag: "Dropped", partial: text })))
      res.on("aborted", () => resume(Effect.fail({ _tag: "Dropped", partial: text })))
    })
    req.on("error", () => resume(Effect.fail({ _tag: "Dropped", partial: "" })))
    req.end(data)
  })

interface SseEvent {
  readonly event: string | undefined
  readonly data: string
}
const parseSse = (text: string): ReadonlyArray<SseEvent> => {
  expect(text.endsWith("\n\n")).toBe(true)
  return text.split("\n\n").filter((f) => f !== "").map((frame) => {
    const lines = frame.split("\n")
    const event = lines.find((l) => l.startsWith("event: "))?.slice(7)
    const data = lines.filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n")
    return { event, data }
  })
}
const jsonEvents = (text: string): ReadonlyArray<Record<string, unknown> & { type: string }> =>
  parseSse(text).map((e) => {
    const d = JSON.parse(e.data) as Record<string, unknown> & { type: string }
    expect(d.type).toBe(e.event) // the SSE event name always equals the payload type
    return d
  })

const anthropicBody = (user: unknown, extra: Record<string, unknown> = {}) => ({
  model: "claude-test",
  max_tokens: 100,
  stream: true,
  system: [{ type: "text", text: "You are agent alice." }],
  messages: [{ role: "user", content: user }],
  ...extra
})

const tcp = { listen: { port: 0 } } as const

describe("ScriptedLlm — Anthropic Messages", () => {
  it.scoped("streams a text reply with the real event order and framing", () =>
    Effect.gen(function*() {
      const llm = yield* ScriptedLlm.make({ ...tcp, script: [{ reply: Reply.text("Hello there, world!") }] })
      const res = yield* request(llm, "POST", "/v1/messages?beta=true", anthropicBody("hi"))
      expect(res.status).toBe(200)
      expect(res.headers["content-type"]).toContain("text/event-stream")
      const events = jsonEvents(res.text)
      expect(events.map((e) => e.type)).toEqual([
        "message_start", "ping", "content_block_start",
        ...events.filter((e) => e.type === "content_block_delta").map(() => "content_block_delta"),
        "content_block_stop", "message_delta", "message_stop"
      ])
      expect(events.filter((e) => e.type === "content_block_delta").length).toBeGreaterThan(1)
      const text = events.flatMap((e) => e.type === "content_block_delta" ? [(e["delta"] as { text: string }).text] : []).join("")
      expect(text).toBe("Hello there, world!")
      const start = events[0]!["message"] as { role: string; content: Array<unknown>; model: string }
      expect([start.role, start.content, start.model]).toEqual(["assistant", [], "claude-test"])
      const delta = events.find((e) => e.type === "message_delta")!
      expect((delta["delta"] as { stop_reason: string }).stop_reason).toBe("end_turn")
      expect((delta["usage"] as { output_tokens: number }).output_tokens).toBeGreaterThan(0)
    }))

  it.scoped("streams text + tool_use: input_json_delta pieces concatenate to the input", () =>
    Effect.gen(function*() {
      const input = { recipient: "bob", text: "do the thing", sync: true }
      const llm = yield* ScriptedLlm.make({
        ...tcp,
        script: [{ reply: Reply.toolCall("mcp__substrat__send_message", input, "Sending.") }]
      })
      const events = jsonEvents((yield* request(llm, "POST", "/v1/messages", anthropicBody("go"))).text)
      const starts = events.filter((e) => e.type === "content_block_start")
      expect(starts.map((e) => [e["index"], (e["content_block"] as { type: string }).type])).toEqual([[0, "text"], [1, "tool_use"]])
      const block = starts[1]!["content_block"] as { id: string; name: string; input: unknown }
      expect(block.name).toBe("mcp__substrat__send_message")
      expect(block.id).toMatch(/^toolu_/)
      expect(block.input).toEqual({})
      const json = events
        .filter((e) => e.type === "content_block_delta" && e["index"] === 1)
        .map((e) => (e["delta"] as { type: string; partial_json: string }))
      expect(json.every((d) => d.type === "input_json_delta")).toBe(true)
      expect(JSON.parse(json.map((d) => d.partial_json).join(""))).toEqual(input)
      expect(events.filter((e) => e.type === "content_block_stop").map((e) => e["index"])).toEqual([0, 1])
      expect(((events.find((e) => e.type === "message_delta")!)["delta"] as { stop_reason: string }).stop_reason).toBe("tool_use")
    }))

  it.scoped("answers non-streaming requests with a whole message", () =>
    Effect.gen(function*() {
      const llm = yield* ScriptedLlm.make({
        ...tcp,
        script: [{ reply: Reply.message([{ type: "reasoning", text: "hmm" }, { type: "text", text: "ok" }, { type: "tool_use", name: "Bash", input: { command: "ls" }, id: "toolu_fixed" }]) }]
      })
      const res = yield* request(llm, "POST", "/v1/messages", anthropicBody("x", { stream: false }))
      expect(res.headers["content-type"]).toBe("application/json")
      const msg = JSON.parse(res.text) as { type: string; content: Array<Record<string, unknown>>; stop_reason: string; usage: { input_tokens: number } }
      expect(msg.type).toBe("message")
      expect(msg.content).toEqual([
        { type: "thinking", thinking: "hmm", signature: "scripted-signature" },
        { type: "text", text: "ok" },
        { type: "tool_use", id: "toolu_fixed", name: "Bash", input: { command: "ls" } }
      ])
      expect(msg.stop_reason).toBe("tool_use")
      expect(msg.usage.input_tokens).toBeGreaterThan(0)
    }))

  it.scoped("scripted errors: status and the API's error body", () =>
    Effect.gen(function*() {
      const llm = yield* ScriptedLlm.make({
        ...tcp,
        script: [{ reply: Reply.error(529, "Overloaded") }, { reply: Reply.error(400, "bad", "invalid_request_error") }]
      })
      const a = yield* request(llm, "POST", "/v1/messages", anthropicBody("x"))
      expect(a.status).toBe(529)
      expect(JSON.parse(a.text)).toEqual({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } })
      const b = yield* request(llm, "POST", "/v1/messages", anthropicBody("x"))
      expect([b.status, (JSON.parse(b.text) as { error: { type: string } }).error.type]).toEqual([400, "invalid_request_error"])
    }))

  it.scoped("a disconnect drops the stream mid-way", () =>
    Effect.gen(function*() {
      const llm = yield* ScriptedLlm.make({ ...tcp, script: [{ reply: Reply.disconnect() }] })
      const res = yield* Effect.either(request(llm, "POST", "/v1/messages", anthropicBody("x")))
      // Either the socket error surfaces, or the body ends without a complete message_stop.
      if (res._tag === "Right") expect(res.right.text).not.toContain("message_stop")
      else expect(res.left._tag).toBe("Dropped")
    }))

  it.scoped("HEAD / and GET / are answered; count_tokens too; unknown routes are 404", () =>
    Effect.gen(function*() {
      const llm = yield* ScriptedLlm.make({ ...tcp })
      expect((yield* request(llm, "HEAD", "/")).status).toBe(200)
      expect((yield* request(llm, "GET", "/")).status).toBe(200)
      const count = yield* request(llm, "POST", "/v1/messages/count_tokens?beta=true", anthropicBody("hello"))
      expect((JSON.parse(count.text) as { input_tokens: number }).input_tokens).toBeGreaterThan(0)
      expect((yield* request(llm, "POST", "/v1/nope", {})).status).toBe(404)
      const kinds = (yield* llm.requests).map((r) => r.kind)
      expect(kinds).toEqual(["probe", "probe", "count_tokens", "unknown"])
      expect(yield* llm.modelRequests).toEqual([])
    }))
})

describe("ScriptedLlm — script matching and recording", () => {
  it.scoped("first matching entry wins; tool results, system prompt and queue order", () =>
    Effect.gen(function*() {
      const llm = yield* ScriptedLlm.make({
        ...tcp,
        script: [
          { match: { lastUser: "ECHO: 42" }, reply: Reply.text("saw the tool result"), label: "after-tool" },
          { match: { system: "agent bob" }, reply: Reply.text("bob speaking"), times: Infinity, label: "bob" },
          { reply: Reply.text("first in queue"), label: "q1" },
          { reply: Reply.text("second in queue"), label: "q2" }
        ],
        fallback: Reply.text("fallback")
      })
      const say = (body: unknown) =>
        request(llm, "POST", "/v1/messages", body).pipe(
          Effect.map((r) => jsonEvents(r.text).flatMap((e) => e.type === "content_block_delta" ? [(e["delta"] as { text: string }).text] : []).join(""))
        )
      expect(yield* say(anthropicBody("hello"))).toBe("first in queue")
      // Claude Code's shapes: <system-reminder> blocks in the user turn, a system-role message, extra params.
      const toolTurn = anthropicBody([{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "ECHO: 42" }] }], {
        thinking: { type: "adaptive" },
        context_management: { edits: [] },
        metadata: { user_id: "u" }
      })
      const withReminder = {
        ...toolTurn,
        messages: [
          { role: "user", content: [{ type: "text", text: "<system-reminder>\nignore ECHO: 42 here\n</system-reminder>\n" }, { type: "text", text: "hi" }] },
          { role: "system", content: "# Environment" },
          ...toolTurn.messages
        ]
      }
      expect(yield* say(withReminder)).toBe("saw the tool result")
      expect(yield* say({ ...anthropicBody("again"), system: "You are agent bob." })).toBe("bob speaking")
      expect(yield* say({ ...anthropicBody("again"), system: "You are agent bob." })).toBe("bob speaking")
      expect(yield* say(anthropicBody("hello"))).toBe("second in queue")
      expect(yield* say(anthropicBody("hello"))).toBe("fallback")
      // A user turn whose only mention of the needle is inside a system-reminder does not match it.
      yield* llm.push({ match: { lastUser: "needle" }, reply: Reply.text("matched needle") })
      expect(yield* say(anthropicBody([{ type: "text", text: "<system-reminder>needle</system-reminder>" }, { type: "text", text: "plain" }]))).toBe("fallback")
      expect(yield* say(anthropicBody("a needle"))).toBe("matched needle")

      const recorded = yield* llm.modelRequests
      expect(recorded.map((r) => r.answeredBy)).toEqual([2, 0, 1, 1, 3, "fallback", "fallback", 4])
      expect(recorded.map((r) => r.label ?? null)).toEqual(["q1", "after-tool", "bob", "bob", "q2", null, null, null])
      expect(recorded[1]!.lastUser).toBe("ECHO: 42")
      expect(recorded[1]!.system).toContain("# Environment")
      expect((recorded[1]!.body as { thinking: unknown }).thinking).toEqual({ type: "adaptive" })
      expect(recorded[1]!.headers["content-type"]).toBe("application/json")
      const remaining = yield* llm.remaining
      expect(remaining.map((e) => e.label)).toEqual(["bob"])
    }))

  it.scoped("without a fallback an unmatched request gets a 400 naming it; replace swaps the script", () =>
    Effect.gen(function*() {
      const llm = yield* ScriptedLlm.make({ ...tcp, script: [{ match: { lastUser: "zzz" }, reply: Reply.text("z") }] })
      const res = yield* request(llm, "POST", "/v1/messages", anthropicBody("hello there"))
      expect(res.status).toBe(400)
      expect(res.text).toContain("no script entry matches request #0")
      expect(res.text).toContain("hello there")
      yield* llm.replace([{ match: { model: "claude-test", api: "anthropic" }, reply: Reply.text("replaced") }])
      const ok = yield* request(llm, "POST", "/v1/messages", anthropicBody("hello", { stream: false }))
      expect((JSON.parse(ok.text) as { content: Array<{ text: string }> }).content[0]!.text).toBe("replaced")
      expect((yield* llm.modelRequests).map((r) => [r.answeredBy, r.status])).toEqual([["none", 400], [0, 200]])
    }))

  it.scoped("delayed replies still answer, and awaitRequests waits for arrivals", () =>
    Effect.gen(function*() {
      const llm = yield* ScriptedLlm.make({ ...tcp, script: [{ reply: Reply.text("late"), delayMs: 50 }] })
      const fiber = yield* Effect.fork(request(llm, "POST", "/v1/messages", anthropicBody("x", { stream: false })))
      const seen = yield* llm.awaitRequests(1)
      expect(seen[0]!.lastUser).toBe("x")
      const res = yield* fiber.await.pipe(Effect.flatten)
      expect((JSON.parse(res.text) as { content: Array<{ text: string }> }).content[0]!.text).toBe("late")
    }))
})

describe("ScriptedLlm — OpenAI", () => {
  const responsesBody = (extra: Record<string, unknown> = {}) => ({
    model: "gpt-test",
    stream: true,
    instructions: "",
    input: [
      { type: "message", role: "developer", content: [{ type: "input_text", text: "You are agent carol." }] },
      { type: "message", role: "user", content: [{ type: "input_text", text: "please echo" }] }
    ],
    tools: [
      { type: "function", name: "exec_command", parameters: {} },
      { type: "namespace", name: "mcp__substrat", description: "", tools: [{ type: "function", name: "echo", parameters: {} }] }
    ],
    ...extra
  })

  it.scoped("Responses: a freeform (custom) tool is called with a custom_tool_call carrying the input text", () =>
    Effect.gen(function*() {
      const patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"
      const llm = yield* ScriptedLlm.make({ ...tcp, script: [{ reply: Reply.message([{ type: "tool_use", name: "apply_patch", input: patch }]) }] })
      const body = responsesBody()
      const res = yield* request(llm, "POST", "/v1/responses", { ...body, tools: [...body.tools, { type: "custom", name: "apply_patch", format: { type: "grammar" } }] })
      const events = jsonEvents(res.text)
      const done = events.filter((e) => e.type === "response.output_item.done").map((e) => e["item"] as Record<string, unknown>)
      expect(done.map((i) => [i["type"], i["name"], i["input"]])).toEqual([["custom_tool_call", "apply_patch", patch]])
      const deltas = events.filter((e) => e.type === "response.custom_tool_call_input.delta").map((e) => e["delta"] as string).join("")
      expect(deltas).toBe(patch)
      expect(events.some((e) => e.type === "response.function_call_arguments.delta")).toBe(false)
    }))

  it.scoped("Responses: streamed text and a namespaced MCP function call, in the real event order", () =>
    Effect.gen(function*() {
      const llm = yield* ScriptedLlm.make({
        ...tcp,
        script: [{
          match: { system: "agent carol", hasTool: "mcp__substrat__echo" },
          reply: Reply.message([{ type: "reasoning", text: "thinking" }, { type: "text", text: "Calling." }, { type: "tool_use", name: "mcp__substrat__echo", input: { text: "hi" } }])
        }]
      })
      const res = yield* request(llm, "POST", "/v1/responses", responsesBody())
      const events = jsonEvents(res.text)
      const types = events.map((e) => e.type)
      expect(types[0]).toBe("response.created")
      expect(types[1]).toBe("response.in_progress")
      expect(types[types.length - 1]).toBe("response.completed")
      expect(events.map((e) => e["sequence_number"])).toEqual(events.map((_, i) => i))
      const added = events.filter((e) => e.type === "response.output_item.added").map((e) => (e["item"] as { type: string }).type)
      expect(added).toEqual(["reasoning", "message", "function_call"])
      const text = events.filter((e) => e.type === "response.output_text.delta").map((e) => e["delta"] as string).join("")
      expect(text).toBe("Calling.")
      const done = events.filter((e) => e.type === "response.output_item.done").map((e) => e["item"] as Record<string, unknown>)
      const call = done.find((i) => i["type"] === "function_call")!
      expect([call["namespace"], call["name"], JSON.parse(call["arguments"] as string)]).toEqual(["mcp__substrat", "echo", { text: "hi" }])
      expect(call["call_id"]).toMatch(/^call_/)
      const args = events.filter((e) => e.type === "response.function_call_arguments.delta").map((e) => e["delta"] as string).join("")
      expect(args).toBe(call["arguments"])
      const completed = events[events.length - 1]!["response"] as { status: string; output: Array<unknown>; usage: { input_tokens: number; output_tokens: number; total_tokens: number } }
      expect(completed.status).toBe("completed")
      expect(completed.output).toHaveLength(3)
      expect(completed.usage.total_tokens).toBe(completed.usage.input_tokens + completed.usage.output_tokens)
      const rec = (yield* llm.modelRequests)[0]!
      expect([rec.kind, rec.lastUser, (rec.system ?? "").includes("agent carol")]).toEqual(["openai-responses", "please echo", true])
    }))

  it.scoped("Responses: the latest user side is the trailing tool outputs; errors use OpenAI's body", () =>
    Effect.gen(function*() {
      const llm = yield* ScriptedLlm.make({
        ...tcp,
        script: [
          { match: { lastUser: "ECHO: hi" }, reply: Reply.text("done") },
          { reply: Reply.error(429, "slow down") }
        ]
      })
      const body = responsesBody({
        stream: false,
        input: [
          ...responsesBody().input,
          { type: "function_call", name: "echo", namespace: "mcp__substrat", arguments: "{}", call_id: "c1" },
          { type: "function_call_output", call_id: "c1", output: [{ type: "input_text", text: "ECHO: hi" }] }
        ]
      })
      const ok = JSON.parse((yield* request(llm, "POST", "/v1/responses", body)).text) as { output: Array<{ content: Array<{ text: string }> }> }
      expect(ok.output[0]!.content[0]!.text).toBe("done")
      const err = yield* request(llm, "POST", "/v1/responses", responsesBody())
      expect(err.status).toBe(429)
      expect((JSON.parse(err.text) as { error: { message: string; code: string } }).error).toMatchObject({ message: "slow down", code: "rate_limit_exceeded" })
    }))

  it.scoped("Chat Completions: streamed chunks with tool_calls, usage and [DONE]", () =>
    Effect.gen(function*() {
      const llm = yield* ScriptedLlm.make({ ...tcp, script: [{ reply: Reply.toolCall("send_message", { to: "x" }, "ok") }] })
      const res = yield* request(llm, "POST", "/v1/chat/completions", {
        model: "m",
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: "system", content: "sys" }, { role: "user", content: "hey" }],
        tools: [{ type: "function", function: { name: "send_message", parameters: {} } }]
      })
      const frames = parseSse(res.text)
      expect(frames[frames.length - 1]!.data).toBe("[DONE]")
      const chunks = frames.slice(0, -1).map((f) => JSON.parse(f.data) as { choices: Array<{ delta: Record<string, unknown>; finish_reason: string | null }>; usage?: { total_tokens: number } })
      const deltas = chunks.flatMap((c) => c.choices.map((ch) => ch.delta))
      expect(deltas.map((d) => d["content"] ?? "").join("")).toBe("ok")
      const args = deltas.flatMap((d) => (d["tool_calls"] as Array<{ function: { arguments?: string } }> | undefined) ?? []).map((t) => t.function.arguments ?? "").join("")
      expect(JSON.parse(args)).toEqual({ to: "x" })
      expect(chunks.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter((f) => f !== null)).toEqual(["tool_calls"])
      expect(chunks[chunks.length - 1]!.usage!.total_tokens).toBeGreaterThan(0)
      expect((yield* llm.modelRequests)[0]!.system).toBe("sys")
    }))
})

describe("ScriptedLlm — Gemini API", () => {
  const geminiBody = (contents: ReadonlyArray<unknown>) => ({
    systemInstruction: { parts: [{ text: "You are agent gem." }] },
    contents,
    tools: [{ functionDeclarations: [{ name: "mcp_substrat_check_inbox", parameters: { type: "object" } }] }]
  })
  type Chunk = {
    candidates: Array<{ content: { role: string; parts: Array<Record<string, unknown>> }; finishReason?: string }>
    usageMetadata: Record<string, number>
    modelVersion: string
  }

  it.scoped("streamGenerateContent?alt=sse: text pieces, the call whole, finishReason and usage in the last chunk", () =>
    Effect.gen(function*() {
      const reply: ScriptedLlm.Reply = {
        _tag: "Message",
        content: [{ type: "text", text: "checking" }, { type: "tool_use", name: "mcp_substrat_check_inbox", input: { all: true } }],
        usage: { input_tokens: 40, output_tokens: 9, cache_read_tokens: 60 }
      }
      const llm = yield* ScriptedLlm.make({ ...tcp, script: [{ match: { api: "gemini", hasTool: "mcp_substrat_check_inbox", system: "agent gem" }, reply }] })
      const res = yield* request(llm, "POST", "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", geminiBody([{ role: "user", parts: [{ text: "go" }] }]))
      expect([res.status, res.headers["content-type"]]).toEqual([200, "text/event-stream; charset=utf-8"])
      // Google's framing: each chunk one `data:` line ended by a blank line, CRLF.
      const frames = res.text.split("\r\n\r\n")
      expect(frames.pop()).toBe("")
      const chunks = frames.map((f) => {
        expect(f.startsWith("data: ")).toBe(true)
        return JSON.parse(f.slice(6)) as Chunk
      })
      const parts = chunks.flatMap((c) => c.candidates[0]!.content.parts)
      expect(parts.filter((p) => typeof p["text"] === "string").map((p) => p["text"]).join("")).toBe("checking")
      expect(parts.filter((p) => "functionCall" in p)).toEqual([{ functionCall: { name: "mcp_substrat_check_inbox", args: { all: true } } }])
      expect(chunks.map((c) => c.candidates[0]!.finishReason ?? null).filter((f) => f !== null)).toEqual(["STOP"])
      expect(chunks[chunks.length - 1]!.usageMetadata).toEqual({ promptTokenCount: 100, candidatesTokenCount: 9, totalTokenCount: 109, cachedContentTokenCount: 60 })
      expect(chunks.every((c) => c.modelVersion === "gemini-x")).toBe(true)
      const [seen] = yield* llm.modelRequests
      expect([seen!.kind, seen!.model, seen!.stream, seen!.system, seen!.lastUser]).toEqual(["gemini", "gemini-x", true, "You are agent gem.", "go"])
    }))

  it.scoped("generateContent: one JSON response; a function response is the latest user side; errors, countTokens, disconnect", () =>
    Effect.gen(function*() {
      const llm = yield* ScriptedLlm.make({
        ...tcp,
        script: [
          { match: { lastUser: "\"messages\": []" }, reply: Reply.text("inbox empty") },
          { match: { lastUser: "fail" }, reply: Reply.error(429, "slow down") },
          { match: { lastUser: "cut" }, reply: Reply.disconnect() }
        ]
      })
      const res = yield* request(llm, "POST", "/v1beta/models/gemini-x:generateContent", geminiBody([
        { role: "user", parts: [{ text: "check" }] },
        { role: "model", parts: [{ functionCall: { name: "mcp_substrat_check_inbox", args: {} } }] },
        { role: "user", parts: [{ functionResponse: { name: "mcp_substrat_check_inbox", response: { output: "{\"messages\": []}" } } }] }
      ]))
      const body = JSON.parse(res.text) as Chunk
      expect([res.status, body.candidates[0]!.content, body.candidates[0]!.finishReason]).toEqual([200, { role: "model", parts: [{ text: "inbox empty" }] }, "STOP"])
      expect(body.usageMetadata["promptTokenCount"]).toBeGreaterThan(0)
      const err = yield* request(llm, "POST", "/v1beta/models/gemini-x:generateContent", geminiBody([{ role: "user", parts: [{ text: "fail" }] }]))
      expect([err.status, JSON.parse(err.text)]).toEqual([429, { error: { code: 429, message: "slow down", status: "RESOURCE_EXHAUSTED" } }])
      const count = yield* request(llm, "POST", "/v1beta/models/gemini-x:countTokens", geminiBody([{ role: "user", parts: [{ text: "n" }] }]))
      expect(JSON.parse(count.text)).toEqual({ totalTokens: expect.any(Number) })
      const cut = yield* Effect.either(request(llm, "POST", "/v1beta/models/gemini-x:streamGenerateContent?alt=sse", geminiBody([{ role: "user", parts: [{ text: "cut" }] }])))
      expect(cut._tag).toBe("Left")
      const other = yield* request(llm, "POST", "/v1beta/models/gemini-x:embedContent", {})
      expect(other.status).toBe(404)
      expect((yield* llm.requests).map((r) => r.kind)).toEqual(["gemini", "gemini", "count_tokens", "gemini", "unknown"])
    }))
})

describe("ScriptedLlm — Unix socket", () => {
  it.effect("serves over a Unix socket and removes it when the scope closes", () =>
    Effect.gen(function*() {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "scripted-llm-"))
      const socketPath = Path.join(dir, "llm.sock")
      try {
        yield* Effect.scoped(Effect.gen(function*() {
          const llm = yield* ScriptedLlm.make({ listen: { socketPath }, script: [{ reply: Reply.text("via socket") }] })
          expect(llm.baseUrl).toBe("http://localhost")
          expect(Fs.statSync(socketPath).isSocket()).toBe(true)
          const res = yield* request(llm, "POST", "/v1/messages", anthropicBody("x", { stream: false }))
          expect((JSON.parse(res.text) as { content: Array<{ text: string }> }).content[0]!.text).toBe("via socket")
        }))
        expect(Fs.existsSync(socketPath)).toBe(false)
      } finally {
        Fs.rmSync(dir, { recursive: true, force: true })
      }
    }))

  it.effect("fails to start on a path that cannot be listened on", () =>
    Effect.gen(function*() {
      const res = yield* Effect.either(Effect.scoped(ScriptedLlm.make({ listen: { socketPath: "/nonexistent-dir/x.sock" } })))
      expect(res._tag).toBe("Left")
      if (res._tag === "Left") expect(res.left.reason).toBe("listen")
    }))
})
