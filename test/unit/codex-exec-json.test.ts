// codex exec --json decoding, fed with real captured output (test/fixtures/codex-exec-json/).
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as ExecJson from "../../src/provider/codex/ExecJson.js"

const dir = Path.join(import.meta.dirname, "../fixtures/codex-exec-json")
const load = (name: string): ReadonlyArray<ExecJson.ExecJsonLine> => {
  const decoded = ExecJson.decodeAll(Fs.readFileSync(Path.join(dir, name), "utf8"))
  if (Either.isLeft(decoded)) throw new Error(`${name}: ${decoded.left.message}`)
  return decoded.right
}

describe("codex exec --json", () => {
  it("decodes every captured fixture line; each run starts with thread.started and ends completed or failed", () => {
    const files = Fs.readdirSync(dir).filter((f) => f.endsWith(".jsonl"))
    expect(files.length).toBeGreaterThanOrEqual(7)
    for (const f of files) {
      const lines = load(f)
      expect(ExecJson.isThreadStarted(lines[0]!)).toBe(true)
      const last = lines[lines.length - 1]!
      expect(ExecJson.isTurnCompleted(last) || ExecJson.isTurnFailed(last)).toBe(true)
    }
  })

  it("MCP tool call and agent messages", () => {
    const lines = load("mcp-tool-call.jsonl")
    const items = ExecJson.completedItems(lines)
    const calls = items.filter(ExecJson.isMcpToolCall)
    expect(calls.map((c) => [c.server, c.tool, c.arguments, c.status, ExecJson.mcpResultText(c)])).toEqual([
      ["substrat", "echo", { text: "ping-42" }, "completed", "ECHO: ping-42"]
    ])
    expect(items.filter(ExecJson.isAgentMessage).map((m) => m.text)).toEqual(["Calling echo.", "The tool said ping-42. Done."])
    const started = lines.filter(ExecJson.isItemEvent).filter((e) => e.type === "item.started")
    expect(started.map((e) => e.item.type)).toEqual(["mcp_tool_call"])
    const done = lines.find(ExecJson.isTurnCompleted)!
    expect(done.usage.input_tokens).toBeGreaterThan(0)
    expect(done.usage.output_tokens).toBeGreaterThan(0)
  })

  it("resume keeps the thread id", () => {
    const first = load("mcp-tool-call.jsonl").find(ExecJson.isThreadStarted)!
    const resumed = load("resume.jsonl").find(ExecJson.isThreadStarted)!
    expect(resumed.thread_id).toBe(first.thread_id)
  })

  it("failed turns: error event then turn.failed with the message", () => {
    for (const [file, needle] of [["turn-failed-400.jsonl", "scripted invalid request"], ["turn-failed-529.jsonl", "529"]] as const) {
      const lines = load(file)
      const failed = lines.find(ExecJson.isTurnFailed)!
      expect(failed.error.message).toContain(needle)
      expect(lines.find(ExecJson.isStreamError)!.message).toBe(failed.error.message)
      expect(lines.some(ExecJson.isTurnCompleted)).toBe(false)
    }
  })

  it("command execution, reasoning and non-fatal error items", () => {
    const cmd = ExecJson.completedItems(load("command-execution.jsonl")).filter(ExecJson.isCommandExecution)
    expect(cmd.map((c) => [c.aggregated_output, c.exit_code, c.status])).toEqual([["hi-from-exec\n", 0, "completed"]])
    const items = ExecJson.completedItems(load("reasoning.jsonl"))
    expect(items.map((i) => i.type)).toEqual(["error", "reasoning", "agent_message"])
  })

  it("rejects malformed known lines and non-JSON, tolerates unknown types", () => {
    expect(Either.isLeft(ExecJson.decodeLine("{"))).toBe(true)
    expect(Either.isLeft(ExecJson.decodeLine(JSON.stringify({ type: "turn.completed" })))).toBe(true)
    expect(Either.isLeft(ExecJson.decodeLine(JSON.stringify({ type: "item.completed", item: { id: "x", type: "agent_message" } })))).toBe(true)
    const other = ExecJson.decodeLine(JSON.stringify({ type: "thread.goal_updated", goal: "x" }))
    expect(Either.isRight(other) && other.right.type).toBe("thread.goal_updated")
    const otherItem = ExecJson.decodeLine(JSON.stringify({ type: "item.completed", item: { id: "i", type: "collab_tool_call" } }))
    expect(Either.isRight(otherItem)).toBe(true)
  })
})
