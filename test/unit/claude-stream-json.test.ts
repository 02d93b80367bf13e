// Claude Code stream-json decoding, fed with real captured output (test/fixtures/claude-stream-json/).
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as StreamJson from "../../src/provider/claude/StreamJson.js"

const dir = Path.join(import.meta.dirname, "../fixtures/claude-stream-json")
const load = (name: string): ReadonlyArray<StreamJson.StreamJsonLine> => {
  const decoded = StreamJson.decodeAll(Fs.readFileSync(Path.join(dir, name), "utf8"))
  if (Either.isLeft(decoded)) throw new Error(`${name}: ${decoded.left.message}`)
  return decoded.right
}

describe("claude stream-json", () => {
  it("decodes every captured fixture line", () => {
    const files = Fs.readdirSync(dir).filter((f) => f.endsWith(".jsonl"))
    expect(files.length).toBeGreaterThanOrEqual(7)
    for (const f of files) {
      const lines = load(f)
      expect(lines.length).toBeGreaterThan(0)
      // Every run starts with system/init and ends with result, both carrying the same session id.
      const first = lines[0]!
      const last = lines[lines.length - 1]!
      expect(StreamJson.isInit(first)).toBe(true)
      expect(StreamJson.isResult(last)).toBe(true)
      if (StreamJson.isInit(first) && StreamJson.isResult(last)) expect(last.session_id).toBe(first.session_id)
    }
  })

  it("MCP tool call: tool_use with the mcp__ name, tool_result text, final result", () => {
    const lines = load("mcp-tool-call.jsonl")
    const init = lines.find(StreamJson.isInit)!
    expect(init.mcp_servers).toEqual([{ name: "substrat", status: "connected" }])
    const uses = lines.filter(StreamJson.isAssistant).flatMap(StreamJson.toolUses)
    expect(uses.map((u) => [u.name, u.input])).toEqual([["mcp__substrat__echo", { text: "ping-42" }]])
    const results = lines.filter(StreamJson.isUser).flatMap(StreamJson.toolResults)
    expect(results.map((r) => [r.tool_use_id, StreamJson.toolResultText(r)])).toEqual([[uses[0]!.id, "ECHO: ping-42"]])
    const texts = lines.filter(StreamJson.isAssistant).map(StreamJson.assistantText).filter((t) => t !== "")
    expect(texts).toEqual(["Calling echo.", "The tool said ping-42. Done."])
    const result = lines.find(StreamJson.isResult)!
    expect(result.is_error).toBe(false)
    expect(result.result).toBe("The tool said ping-42. Done.")
    expect(result.num_turns).toBeGreaterThanOrEqual(2)
    expect(result.total_cost_usd).toBeGreaterThan(0)
    expect(result.usage.input_tokens).toBeGreaterThan(0)
  })

  it("API errors: synthetic assistant line and is_error result with the status", () => {
    for (const [file, status] of [["api-error-400.jsonl", 400], ["api-error-529.jsonl", 529]] as const) {
      const lines = load(file)
      const assistant = lines.find(StreamJson.isAssistant)!
      expect(assistant.is_api_error_message).toBe(true)
      expect(assistant.api_error_status).toBe(status)
      expect(StreamJson.assistantText(assistant)).toContain(`API Error: ${status}`)
      const result = lines.find(StreamJson.isResult)!
      expect(result.is_error).toBe(true)
      expect(result.api_error_status).toBe(status)
      expect(result.terminal_reason).toBe("api_error")
    }
  })

  it("built-in tools and errors in tool results", () => {
    const lines = load("bash-tool.jsonl")
    const results = lines.filter(StreamJson.isUser).flatMap(StreamJson.toolResults)
    expect(results.map((r) => [StreamJson.toolResultText(r), r.is_error])).toEqual([
      ["<tool_use_error>Error: No such tool available: exec_command</tool_use_error>", true],
      ["hi-from-bash", false]
    ])
  })

  it("thinking blocks and system/thinking_tokens lines", () => {
    const lines = load("thinking.jsonl")
    expect(lines.some((l) => l.type === "system" && "subtype" in l && l.subtype === "thinking_tokens")).toBe(true)
    const blocks = lines.filter(StreamJson.isAssistant).flatMap((l) => l.message.content)
    expect(blocks.map((b) => b.type)).toEqual(["thinking", "text"])
  })

  it("resume keeps the session id", () => {
    const lines = load("resume.jsonl")
    const init = lines.find(StreamJson.isInit)!
    expect(lines.find(StreamJson.isResult)!.session_id).toBe(init.session_id)
  })

  it("rejects malformed known lines and non-JSON, tolerates unknown types", () => {
    expect(Either.isLeft(StreamJson.decodeLine("not json"))).toBe(true)
    expect(Either.isLeft(StreamJson.decodeLine(JSON.stringify({ type: "result", subtype: "success" })))).toBe(true)
    expect(Either.isLeft(StreamJson.decodeLine(JSON.stringify({ type: "assistant", message: {} })))).toBe(true)
    const other = StreamJson.decodeLine(JSON.stringify({ type: "stream_event", event: { type: "ping" } }))
    expect(Either.isRight(other) && other.right.type).toBe("stream_event")
  })
})
