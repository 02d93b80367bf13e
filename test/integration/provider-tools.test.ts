// requires: bwrap
// The providers' own tools through the real Orchestrator (real binaries, bwrap, network off,
// scripted model endpoint): claude's Write and codex's exec_command change the workspace; each
// call is logged once as a `tool_call.invoked`/`tool_call.result` pair marked `source: "provider"`,
// shows in the transcript (the daemon's TranscriptLines over the log) and in the live output
// `agent attach` prints (OutputBus `ToolCalled`). Substrat's own MCP tools stay logged once, by
// the ToolHandler, without the mark.
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { OutputBus } from "../../src/agent/OutputBus.js"
import { transcriptsFromLogs } from "../../src/daemon/TranscriptLines.js"
import type { AgentId } from "../../src/domain/ids.js"
import { defaultMcpServer } from "../../src/provider/cli/CliSettings.js"
import * as ModelForwarder from "../../src/provider/cli/ModelForwarder.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { dataOf, eventsOf, stackWith, testSettings } from "../e2e/providers.support.js"
import { repoRoot } from "../e2e/support.js"
import { tmpDir } from "../support/tmpDir.js"

const forwarders = (home: string, llm: ScriptedLlm.ScriptedLlmServer) =>
  Effect.all({
    anthropic: ModelForwarder.serve({ socketPath: Path.join(home, "llm", "a.sock"), api: "anthropic", upstream: llm.baseUrl, credential: null }),
    openai: ModelForwarder.serve({ socketPath: Path.join(home, "llm", "o.sock"), api: "openai", upstream: llm.baseUrl, credential: null })
  }).pipe(Effect.map((f) => ({ anthropic: f.anthropic.socketPath, openai: f.openai.socketPath })))

/** Run one turn of `agent` and collect what `agent attach` would have seen of it. */
const turnWithOutput = (agent: { readonly id: AgentId }, text: string) =>
  Effect.gen(function*() {
    const o = yield* Orchestrator
    const live = yield* Effect.flatMap(OutputBus, (b) => b.subscribe)
    yield* o.send({ agent: agent.id, text, sync: false })
    yield* o.awaitIdle
    const seen = yield* live.pipe(
      Stream.filter((x) => x.agent_id === agent.id),
      Stream.takeUntil((x) => x._tag === "TurnCompleted"),
      Stream.runCollect
    )
    return Chunk.toReadonlyArray(seen)
  })

describe("provider tools are visible (real binaries)", () => {
  it.scoped("claude's Write: the file is written, the call is logged once as the provider's, in the transcript and in attach", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-tools-claude-")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { match: { system: "AGENT=coder" }, reply: Reply.toolCall("Write", { file_path: "/workspace/hello.txt", content: "hello from coder\n" }), label: "write" },
          { match: { system: "AGENT=coder" }, reply: Reply.toolCall("mcp__substrat__check_inbox", {}), label: "inbox" },
          { match: { system: "AGENT=coder" }, reply: Reply.text("wrote hello.txt"), label: "done" }
        ]
      })
      const sockets = yield* forwarders(home, llm)
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const coder = yield* o.createRoot({ name: "coder", instructions: "AGENT=coder", provider: "claude" })
        const seen = yield* turnWithOutput(coder, "please write the greeting")
        const log = yield* eventsOf(coder.session_id)
        expect(dataOf(log, "provider.error")).toEqual([])
        expect((yield* llm.modelRequests).map((r) => r.label)).toEqual(["write", "inbox", "done"])
        expect(Fs.readFileSync(Path.join(home, "agents", coder.session_id, "workspace", "hello.txt"), "utf8")).toBe("hello from coder\n")

        // events.jsonl: Write once, marked; check_inbox once (the ToolHandler's), unmarked.
        const invoked = dataOf(log, "tool_call.invoked")
        const results = dataOf(log, "tool_call.result")
        expect(invoked.map((c) => [c.tool, c.source])).toEqual([["Write", "provider"], ["check_inbox", undefined]])
        expect(invoked[0]!.arguments).toEqual({ file_path: "/workspace/hello.txt", content: "hello from coder\n" })
        expect(results.map((r) => [r.tool, r.source, r.is_error])).toEqual([["Write", "provider", false], ["check_inbox", undefined, false]])
        expect(results[0]!.call_id).toBe(invoked[0]!.call_id)
        expect(String(results[0]!.result)).toContain("/workspace/hello.txt")

        // The transcript (the daemon derives it from the log with these lines).
        const transcript = transcriptsFromLogs([{ session: coder.session_id, entries: log }]).get(coder.session_id) ?? []
        const toolLines = transcript.filter((l) => l.includes("⚙"))
        expect(toolLines.length).toBe(2)
        expect(toolLines[0]).toMatch(/^\[\d\d:\d\d:\d\d\] coder ⚙ Write \{"file_path":"\/workspace\/hello\.txt","content":"hello from coder\\n"\}$/)
        expect(toolLines[1]).toMatch(/^\[\d\d:\d\d:\d\d\] coder ⚙ Write → .*\/workspace\/hello\.txt/)

        // What `agent attach` prints comes from these outputs.
        const calls = seen.flatMap((x) => (x._tag === "ToolCalled" ? [x.tool] : []))
        expect(calls).toEqual(["Write", "check_inbox"])
      }).pipe(Effect.provide(stackWith(home, testSettings(sockets))))
    }), { timeout: 120_000 })

  it.scoped("codex's exec_command: the command runs in the workspace, logged once as the provider's, in the transcript and in attach", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-tools-codex-")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { match: { system: "AGENT=cx", lastUser: "MADE-BY-CODEX" }, reply: Reply.text("made it"), label: "done" },
          {
            match: { system: "AGENT=cx" },
            reply: Reply.message([{ type: "tool_use", name: "exec_command", input: { cmd: "echo MADE-BY-CODEX > made.txt && cat made.txt" } }]),
            label: "exec"
          }
        ]
      })
      const sockets = yield* forwarders(home, llm)
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const cx = yield* o.createRoot({ name: "cx", instructions: "AGENT=cx", provider: "codex" })
        const seen = yield* turnWithOutput(cx, "make the file")
        const log = yield* eventsOf(cx.session_id)
        expect(dataOf(log, "provider.error")).toEqual([])
        expect((yield* llm.modelRequests).map((r) => r.label)).toEqual(["exec", "done"])
        expect(Fs.readFileSync(Path.join(home, "agents", cx.session_id, "workspace", "made.txt"), "utf8")).toBe("MADE-BY-CODEX\n")

        const invoked = dataOf(log, "tool_call.invoked")
        const results = dataOf(log, "tool_call.result")
        expect(invoked.map((c) => [c.tool, c.source])).toEqual([["exec_command", "provider"]])
        expect(JSON.stringify(invoked[0]!.arguments)).toContain("echo MADE-BY-CODEX > made.txt")
        expect(results.map((r) => [r.tool, r.source, r.is_error])).toEqual([["exec_command", "provider", false]])
        expect(results[0]!.result).toMatchObject({ exit_code: 0, output: expect.stringContaining("MADE-BY-CODEX") })

        const transcript = transcriptsFromLogs([{ session: cx.session_id, entries: log }]).get(cx.session_id) ?? []
        const toolLines = transcript.filter((l) => l.includes("⚙"))
        expect(toolLines.length).toBe(2)
        expect(toolLines[0]).toMatch(/ cx ⚙ exec_command .*echo MADE-BY-CODEX > made\.txt/)
        expect(toolLines[1]).toMatch(/ cx ⚙ exec_command → .*MADE-BY-CODEX/)

        expect(seen.flatMap((x) => (x._tag === "ToolCalled" ? [x.tool] : []))).toEqual(["exec_command"])
      }).pipe(Effect.provide(stackWith(home, testSettings(sockets))))
    }), { timeout: 120_000 })
})

describe("the sandbox binds only what the MCP server needs from the install dir", () => {
  it.scoped("from claude's Bash: no .git, no test/, no README of the install dir; the MCP tools still work (bundle, and src + node_modules under tsx)", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-binds-")
      const probe = `echo PROBE; ls -a ${repoRoot} 2>&1; ls ${repoRoot}/.git ${repoRoot}/test ${repoRoot}/README.md 2>&1; echo END`
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { match: { system: "AGENT=peek", lastUser: "PROBE" }, reply: Reply.toolCall("mcp__substrat__check_inbox", {}), label: "inbox", times: 2 },
          { match: { system: "AGENT=peek", lastUser: "messages" }, reply: Reply.text("looked"), label: "done", times: 2 },
          { match: { system: "AGENT=peek" }, reply: Reply.toolCall("Bash", { command: probe, description: "probe" }), label: "bash", times: 2 }
        ]
      })
      const sockets = yield* forwarders(home, llm)
      const base = testSettings(sockets)
      const variants = [
        { name: "bundle", mcpServer: defaultMcpServer(repoRoot, "/usr/bin/node") },
        { name: "tsx", mcpServer: defaultMcpServer(repoRoot, "/usr/bin/node", { bundle: false }) }
      ]
      expect(variants[0]!.mcpServer.args[0]).toMatch(/dist\/mcp-server\.cjs$/)
      for (const v of variants) {
        yield* Effect.gen(function*() {
          const o = yield* Orchestrator
          const a = yield* o.createRoot({ name: "peek", instructions: "AGENT=peek", provider: "claude" })
          yield* o.send({ agent: a.id, text: "look around", sync: false })
          yield* o.awaitIdle
          const log = yield* eventsOf(a.session_id)
          expect({ variant: v.name, errors: dataOf(log, "provider.error") }).toEqual({ variant: v.name, errors: [] })
          const results = dataOf(log, "tool_call.result")
          expect(results.map((r) => r.tool)).toEqual(["Bash", "check_inbox"])
          // The substrat tool ran: the MCP server started from what was bound.
          expect(results[1]!.is_error).toBe(false)
          const out = String(results[0]!.result)
          expect(out).toContain("PROBE")
          expect(out).toMatch(new RegExp(`ls: cannot access '${repoRoot}/\\.git': No such file or directory`))
          expect(out).toMatch(new RegExp(`ls: cannot access '${repoRoot}/test': No such file or directory`))
          expect(out).toMatch(new RegExp(`ls: cannot access '${repoRoot}/README\\.md': No such file or directory`))
          const listing = out.slice(out.indexOf("PROBE") + 5, out.indexOf("ls: cannot access")).split(/\s+/).filter((x) => x !== "" && x !== "." && x !== "..")
          expect(listing.sort()).toEqual(v.name === "bundle" ? ["dist"] : ["node_modules", "package.json", "src", "tsconfig.json"])
        }).pipe(Effect.provide(stackWith(Path.join(home, v.name), { ...base, mcpServer: v.mcpServer })))
      }
    }), { timeout: 120_000 })
})

describe("codex with its default (catalog) model", () => {
  it.scoped("gpt-5.5 against a custom endpoint: MCP tools are declared directly (no tool_search) and a call works", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("prov-codex-default-")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { match: { system: "AGENT=cd", lastUser: "messages" }, reply: Reply.text("inbox checked"), label: "done" },
          { match: { system: "AGENT=cd", hasTool: "mcp__substrat__check_inbox" }, reply: Reply.toolCall("mcp__substrat__check_inbox", {}), label: "call" }
        ]
      })
      const sockets = yield* forwarders(home, llm)
      // No model configured: the provider's default (a model of Codex's bundled catalog).
      const settings = { ...testSettings(sockets), models: {} }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const cd = yield* o.createRoot({ name: "cd", instructions: "AGENT=cd", provider: "codex" })
        yield* o.send({ agent: cd.id, text: "check your inbox", sync: false })
        yield* o.awaitIdle
        const log = yield* eventsOf(cd.session_id)
        expect(dataOf(log, "provider.error")).toEqual([])
        expect(dataOf(log, "turn.complete").map((t) => t.response)).toEqual(["inbox checked"])
        expect(dataOf(log, "tool_call.result").map((r) => [r.tool, r.is_error])).toEqual([["check_inbox", false]])
        const reqs = yield* llm.modelRequests
        expect(reqs.map((r) => r.label)).toEqual(["call", "done"])
        expect(reqs[0]!.model).toBe("gpt-5.5")
        const tools = (reqs[0]!.body as { tools: ReadonlyArray<Record<string, unknown>> }).tools
        expect(tools.some((t) => t["type"] === "namespace" && t["name"] === "mcp__substrat")).toBe(true)
        expect(tools.some((t) => t["type"] === "tool_search")).toBe(false)
      }).pipe(Effect.provide(stackWith(home, settings)))
    }), { timeout: 120_000 })
})
