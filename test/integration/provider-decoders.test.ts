// The CLI providers' pure parts on captured real output (test/fixtures/*): stream-json / exec --json
// → ProviderOutput, failure verdicts; binary discovery and the missing-binary check.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Exit } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { claudeDecoder } from "../../src/provider/claude/ClaudeProvider.js"
import { checkBinary, configuredBinaries, locate, resolveBinary } from "../../src/provider/cli/Binary.js"
import { load } from "../../src/config/Config.js"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import type { TurnPlan } from "../../src/provider/cli/CliProvider.js"
import { codexDecoder } from "../../src/provider/codex/CodexProvider.js"
import { cursorDecoder } from "../../src/provider/cursor/CursorProvider.js"
import type { ProviderOutput } from "../../src/provider/Provider.js"
import { repoRoot } from "../e2e/support.js"

const fixture = (dir: string, name: string) =>
  Fs.readFileSync(Path.join(repoRoot, "test/fixtures", dir, name), "utf8").split("\n").filter((l) => l.trim() !== "")

const feed = (d: TurnPlan["decoder"], lines: ReadonlyArray<string>, code = 0) => {
  const outs: Array<ProviderOutput> = lines.flatMap((l) => [...d.line(l)])
  return { outs, end: d.end({ code, signal: null }), resume: d.resumeId() }
}

describe("claude decoder", () => {
  it("MCP tool call: text, the reported call with its JSON result, usage with cost, final, session id", () => {
    const r = feed(claudeDecoder(), fixture("claude-stream-json", "mcp-tool-call.jsonl"))
    const call = r.outs.find((o) => o._tag === "ToolCall")
    expect(call).toMatchObject({ _tag: "ToolCall", tool: "echo", arguments: { text: "ping-42" }, result: "ECHO: ping-42", is_error: false })
    // An MCP tool is ours (the ToolHandler logs it): not marked as the provider's.
    expect(call).not.toHaveProperty("source")
    expect(Either.isRight(r.end)).toBe(true)
    const tail = Either.getOrThrow(r.end)
    expect(tail[0]).toMatchObject({ _tag: "Usage" })
    expect(tail[1]).toEqual({ _tag: "Final", text: "The tool said ping-42. Done." })
    expect(r.resume).toMatch(/^[0-9a-f-]{36}$/)
  })

  it("API error (529): the turn fails with the API's message; junk lines are skipped", () => {
    const r = feed(claudeDecoder(), ["not json", ...fixture("claude-stream-json", "api-error-529.jsonl")], 1)
    expect(Either.isLeft(r.end)).toBe(true)
    expect(Either.isLeft(r.end) ? r.end.left : "").toMatch(/529/)
  })

  it("no result line (killed mid-turn): a failure, and no resume id", () => {
    const lines = fixture("claude-stream-json", "mcp-tool-call.jsonl").filter((l) => !l.includes('"type":"result"'))
    const r = feed(claudeDecoder(), lines, 143)
    expect(Either.isLeft(r.end)).toBe(true)
    expect(r.resume).toBeNull()
  })
})

describe("codex decoder", () => {
  it("MCP tool call and agent message; thread id is the resume id", () => {
    const r = feed(codexDecoder(), fixture("codex-exec-json", "mcp-tool-call.jsonl"))
    expect(r.outs.some((o) => o._tag === "ToolCall" && o.tool === "echo" && !o.is_error)).toBe(true)
    const tail = Either.getOrThrow(r.end)
    expect(tail.map((o) => o._tag)).toEqual(["Usage", "Final"])
    expect(r.resume).not.toBeNull()
  })

  it("command_execution is codex's own exec_command, marked as the provider's", () => {
    const r = feed(codexDecoder(), fixture("codex-exec-json", "command-execution.jsonl"))
    const calls = r.outs.filter((o) => o._tag === "ToolCall")
    expect(calls.length).toBeGreaterThan(0)
    expect(calls.every((c) => c._tag === "ToolCall" && c.tool === "exec_command" && c.source === "provider")).toBe(true)
  })

  it("usage across exec resume: turn.completed carries the thread's running totals; the turn's own tokens are the difference", () => {
    const lines = fixture("codex-exec-json", "resume.jsonl")
    const thread = "01a20071-ad29-76b0-b035-639429f8bf78"
    const usageOf = (d: TurnPlan["decoder"]) => Either.getOrThrow(feed(d, lines).end)[0]
    // The resumed thread had 20000 input / 100 output tokens after its previous turn.
    const resumed = codexDecoder({ resumeId: thread, tokenBase: { input_tokens: 20000, cached_input_tokens: 0, output_tokens: 100 } })
    expect(usageOf(resumed)).toEqual({ _tag: "Usage", input_tokens: 11529, output_tokens: 71, cost_usd: 0 })
    expect(resumed.tokenTotal?.()).toEqual({ input_tokens: 31529, cached_input_tokens: 0, output_tokens: 171 })
    // A new thread, another thread, or totals that went down (reset): the totals as reported.
    for (const base of [undefined, { resumeId: "another-thread", tokenBase: { input_tokens: 20000, cached_input_tokens: 0, output_tokens: 100 } },
      { resumeId: thread, tokenBase: { input_tokens: 40000, cached_input_tokens: 0, output_tokens: 100 } }]) {
      expect(usageOf(codexDecoder(base))).toEqual({ _tag: "Usage", input_tokens: 31529, output_tokens: 171, cost_usd: 0 })
    }
    // A failed turn does not move the base.
    expect(codexDecoder().tokenTotal?.()).toBeNull()
  })

  it("turn.failed is a failed turn", () => {
    const r = feed(codexDecoder(), fixture("codex-exec-json", "turn-failed-529.jsonl"), 1)
    expect(Either.isLeft(r.end) ? r.end.left : "").toMatch(/codex turn failed/)
  })
})

describe("cursor-agent decoder (documented format)", () => {
  const sid = "3f1c2e4a-0000-4000-8000-000000000001"
  const lines = [
    { type: "system", subtype: "init", apiKeySource: "env", cwd: "/workspace", session_id: sid, model: "x", permissionMode: "default" },
    { type: "user", message: { role: "user", content: [{ type: "text", text: "hi" }] }, session_id: sid },
    { type: "tool_call", subtype: "started", call_id: "c1", tool_call: { mcpToolCall: { args: { name: "substrat-check_inbox", toolName: "check_inbox", providerIdentifier: "substrat", args: {} } } }, session_id: sid },
    { type: "tool_call", subtype: "completed", call_id: "c1", tool_call: { mcpToolCall: { args: { toolName: "check_inbox", providerIdentifier: "substrat", args: {} }, result: { success: { content: [{ text: { text: "{\"messages\":[]}" } }], isError: false } } } }, session_id: sid },
    { type: "tool_call", subtype: "completed", call_id: "c2", tool_call: { shellToolCall: { args: { command: "ls" }, result: { rejected: { reason: "not allowed" } } } }, session_id: sid },
    { type: "assistant", message: { role: "assistant", content: [{ type: "text", text: "done" }] }, session_id: sid },
    { type: "result", subtype: "success", is_error: false, duration_ms: 5, duration_api_ms: 5, result: "done", session_id: sid }
  ].map((l) => JSON.stringify(l))

  it("MCP call, rejected shell call, text, result", () => {
    const r = feed(cursorDecoder(), lines)
    expect(r.outs).toEqual([
      { _tag: "ToolCall", call_id: "c1", tool: "check_inbox", arguments: {}, result: { messages: [] }, is_error: false },
      // cursor's own shell tool is marked as the provider's (the TurnScheduler logs it; check_inbox is ours).
      { _tag: "ToolCall", call_id: "c2", tool: "shell", arguments: { command: "ls" }, result: "not allowed", is_error: true, source: "provider" },
      { _tag: "TextChunk", text: "done" }
    ])
    expect(Either.getOrThrow(r.end)).toEqual([{ _tag: "Usage", input_tokens: 0, output_tokens: 0, cost_usd: 0 }, { _tag: "Final", text: "done" }])
    expect(r.resume).toBe(sid)
  })

  it("documented failure: non-zero exit and no result line", () => {
    const r = feed(cursorDecoder(), lines.slice(0, 2), 1)
    expect(Either.isLeft(r.end)).toBe(true)
    expect(r.resume).toBeNull()
  })
})

describe("binary discovery", () => {
  it.effect("configured path (from the loaded settings), PATH; a missing binary is a missing-binary ProviderError", () =>
    Effect.gen(function*() {
      // SUBSTRAT_CLAUDE_BIN is a setting: it reaches the lookup through the loaded configuration.
      const loaded = yield* load({ env: { SUBSTRAT_HOME: Path.join(repoRoot, "no-such-home"), SUBSTRAT_CLAUDE_BIN: Path.join(repoRoot, "node_modules/.bin/claude") } })
        .pipe(Effect.provide(NodeFileSystem.layer))
      const configured = configuredBinaries(loaded)
      expect(configured).toEqual({ claude: { path: Path.join(repoRoot, "node_modules/.bin/claude"), from: "SUBSTRAT_CLAUDE_BIN" } })
      const claude = yield* resolveBinary("claude", configured.claude, { PATH: "" })
      expect(claude.from).toBe("SUBSTRAT_CLAUDE_BIN")
      expect(claude.hostPath.endsWith("bin/claude.exe")).toBe(true)
      expect(claude.sandboxPath.startsWith("/opt/substrat/claude/")).toBe(true)
      // npm's node launcher for codex resolves to the native binary of the platform package.
      const codex = yield* resolveBinary("codex", undefined, { PATH: Path.join(repoRoot, "node_modules/.bin") })
      expect(codex.hostPath).toMatch(/codex-linux-[^/]+\/vendor\/[^/]+\/bin\/codex$/)
      expect(codex.sandboxPath).toBe("/opt/substrat/codex/bin/codex")
      // The parent environment's variable alone is not configuration: only PATH is read from it.
      const unloaded = locate("claude", undefined, { SUBSTRAT_CLAUDE_BIN: "/nonexistent/claude", PATH: "" }, repoRoot)
      expect(unloaded?.from).toBe("package")
      const missing = yield* Effect.exit(checkBinary("cursor-agent", undefined, { PATH: "/nonexistent" }))
      expect(Exit.isFailure(missing)).toBe(true)
      if (Exit.isFailure(missing)) {
        expect(JSON.stringify(missing.cause)).toContain("missing-binary")
        expect(JSON.stringify(missing.cause)).toContain("SUBSTRAT_CURSOR_BIN")
      }
      const bad = yield* Effect.exit(checkBinary("claude", "/nonexistent/claude", {}))
      expect(Exit.isFailure(bad)).toBe(true)
    }))

  it.effect("the CLIs installed with substrat are found by default (nothing configured, nothing on PATH); the configured path overrides; PATH comes after the package", () =>
    Effect.gen(function*() {
      // A PATH holding other `claude`/`codex` executables: the package's own copies win over them.
      const other = Fs.mkdtempSync(Path.join(Fs.realpathSync("/tmp"), "bin-order-"))
      for (const n of ["claude", "codex"]) Fs.writeFileSync(Path.join(other, n), "#!/bin/sh\necho other\n", { mode: 0o755 })
      try {
        for (const PATH of ["", other]) {
          const claude = yield* resolveBinary("claude", undefined, { PATH }, repoRoot)
          expect(claude.from).toBe("package")
          expect(claude.hostPath).toMatch(/@anthropic-ai\/claude-code[^/]*\/(bin\/claude\.exe|claude)$/)
          expect(Fs.statSync(claude.hostPath).size).toBeGreaterThan(1024 * 1024)
          const codex = yield* resolveBinary("codex", undefined, { PATH }, repoRoot)
          expect(codex.from).toBe("package")
          expect(codex.hostPath).toMatch(/codex-linux-[^/]+\/vendor\/[^/]+\/bin\/codex$/)
        }
        // The configured path still overrides the package…
        const forced = yield* resolveBinary("claude", { path: Path.join(other, "claude"), from: "SUBSTRAT_CLAUDE_BIN" }, { PATH: "" }, repoRoot)
        expect([forced.hostPath, forced.from]).toEqual([Path.join(other, "claude"), "SUBSTRAT_CLAUDE_BIN"])
        // …and an install without the packages falls back to PATH.
        const bare = Fs.mkdtempSync(Path.join(Fs.realpathSync("/tmp"), "bare-install-"))
        Fs.writeFileSync(Path.join(bare, "package.json"), "{}")
        const fromPath = yield* resolveBinary("claude", undefined, { PATH: other }, bare)
        expect([fromPath.hostPath, fromPath.from]).toEqual([Path.join(other, "claude"), "PATH"])
        const none = yield* Effect.exit(checkBinary("codex", undefined, { PATH: "" }, bare))
        expect(Exit.isFailure(none)).toBe(true)
        Fs.rmSync(bare, { recursive: true, force: true })
      } finally {
        Fs.rmSync(other, { recursive: true, force: true })
      }
    }))
})
