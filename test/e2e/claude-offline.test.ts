// requires: bwrap
// The REAL Claude Code binary, offline, against the scripted Anthropic endpoint: an MCP tool round
// trip, --resume carrying the conversation, a failing API call, and all of it again inside bwrap
// with every namespace unshared (no network) and the model reached through a bound Unix socket.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { claudeArgs, claudeEnv } from "../../src/provider/claude/Invocation.js"
import * as StreamJson from "../../src/provider/claude/StreamJson.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { tmpDir } from "../support/tmpDir.js"
import { bwrapArgs, claudeBin, echoMcp, readJsonLines, repoRoot, run } from "./support.js"

const hostPath = `${Path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`

const decode = (stdout: string): ReadonlyArray<StreamJson.StreamJsonLine> => {
  const lines = StreamJson.decodeAll(stdout)
  if (Either.isLeft(lines)) throw new Error(`stream-json did not decode: ${lines.left.message}\n${stdout}`)
  return lines.right
}

type Msg = { readonly role: string; readonly content: unknown }
const messagesOf = (r: ScriptedLlm.RecordedRequest): ReadonlyArray<Msg> => (r.body as { messages: ReadonlyArray<Msg> }).messages
const blocks = (m: Msg): ReadonlyArray<Record<string, unknown>> =>
  typeof m.content === "string" ? [{ type: "text", text: m.content }] : (m.content as ReadonlyArray<Record<string, unknown>>)
const toolNames = (r: ScriptedLlm.RecordedRequest): ReadonlyArray<string> =>
  ((r.body as { tools?: ReadonlyArray<{ name: string }> }).tools ?? []).map((t) => t.name)

describe("claude (real binary) offline", () => {
  it.scoped("MCP tool round trip over TCP, then --resume carries the conversation", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir("claude-e2e-")
      const home = Path.join(dir, "home")
      const work = Path.join(dir, "work")
      Fs.mkdirSync(home)
      Fs.mkdirSync(work)
      const echoLog = Path.join(dir, "echo.log")
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { match: { lastUser: "ECHO: ping-42" }, reply: Reply.text("The tool said ping-42."), label: "after-tool" },
          {
            match: { lastUser: "Please call the echo tool", hasTool: "mcp__substrat__echo" },
            reply: Reply.toolCall("mcp__substrat__echo", { text: "ping-42" }, "Calling echo."),
            label: "call"
          },
          { match: { lastUser: "This is the second turn" }, reply: Reply.text("Second answer."), label: "resume" }
        ]
      })
      const env = claudeEnv({ home, endpoint: { _tag: "Url", baseUrl: llm.baseUrl }, path: hostPath })
      const mcpServers = { substrat: echoMcp(echoLog) }

      const first = yield* run(claudeBin, claudeArgs({ prompt: "Please call the echo tool", mcpServers }), { env, cwd: work })
      expect(first.stderr).toBe("")
      expect(first.code).toBe(0)
      const lines = decode(first.stdout)
      const init = lines.find(StreamJson.isInit)!
      expect(init.mcp_servers).toEqual([{ name: "substrat", status: "connected" }])
      const uses = lines.filter(StreamJson.isAssistant).flatMap(StreamJson.toolUses)
      expect(uses.map((u) => u.name)).toEqual(["mcp__substrat__echo"])
      const results = lines.filter(StreamJson.isUser).flatMap(StreamJson.toolResults)
      expect(results.map(StreamJson.toolResultText)).toEqual(["ECHO: ping-42"])
      const result = lines.find(StreamJson.isResult)!
      expect([result.is_error, result.result, result.session_id]).toEqual([false, "The tool said ping-42.", init.session_id])
      expect(readJsonLines(echoLog)).toEqual([{ tool: "echo", args: { text: "ping-42" } }])

      // What the model saw: the MCP tool declared directly, then the tool result in the next request.
      const reqs = yield* llm.modelRequests
      expect(reqs.map((r) => r.label)).toEqual(["call", "after-tool"])
      expect(toolNames(reqs[0]!)).toContain("mcp__substrat__echo")
      const lastUser = messagesOf(reqs[1]!).at(-1)!
      expect(lastUser.role).toBe("user")
      const toolResult = blocks(lastUser).find((b) => b["type"] === "tool_result")!
      expect(toolResult["tool_use_id"]).toBe(uses[0]!.id)
      expect(JSON.stringify(toolResult["content"])).toContain("ECHO: ping-42")

      // Resume: same session id, and the request carries the whole earlier conversation.
      const second = yield* run(
        claudeBin,
        claudeArgs({ prompt: "This is the second turn", resume: init.session_id, mcpServers }),
        { env, cwd: work }
      )
      expect(second.code).toBe(0)
      const resumed = decode(second.stdout)
      const result2 = resumed.find(StreamJson.isResult)!
      expect([result2.is_error, result2.result, result2.session_id]).toEqual([false, "Second answer.", init.session_id])
      const resumeReq = (yield* llm.modelRequests).at(-1)!
      expect(resumeReq.label).toBe("resume")
      const history = messagesOf(resumeReq).flatMap(blocks)
      expect(history.some((b) => b["type"] === "tool_use" && b["name"] === "mcp__substrat__echo")).toBe(true)
      expect(history.some((b) => b["type"] === "text" && b["text"] === "The tool said ping-42.")).toBe(true)
      expect(resumeReq.lastUser).toBe("This is the second turn")
    }))

  it.scoped("a failing API call ends the turn at once: is_error result, exit 1, no retries", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir("claude-e2e-")
      const llm = yield* ScriptedLlm.make({ listen: { port: 0 }, script: [{ reply: Reply.error(529, "Overloaded (scripted)"), times: Infinity }] })
      const env = claudeEnv({ home: dir, endpoint: { _tag: "Url", baseUrl: llm.baseUrl }, path: hostPath })
      const res = yield* run(claudeBin, claudeArgs({ prompt: "hello", mcpServers: {} }), { env, cwd: dir })
      expect(res.code).toBe(1)
      const result = decode(res.stdout).find(StreamJson.isResult)!
      expect([result.is_error, result.api_error_status]).toEqual([true, 529])
      expect(result.result).toContain("Overloaded (scripted)")
      expect((yield* llm.modelRequests).length).toBe(1)
    }))

  it.scoped("inside bwrap with no network: model via a bound Unix socket, MCP, Bash, --resume", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir("claude-bwrap-")
      const home = Path.join(dir, "home")
      const work = Path.join(dir, "work")
      Fs.mkdirSync(home)
      Fs.mkdirSync(work)
      // A TCP listener on the host the sandbox must NOT be able to reach.
      const canary = yield* ScriptedLlm.make({ listen: { port: 0 }, fallback: Reply.text("should never be asked") })
      const canaryPort = canary.address._tag === "Tcp" ? canary.address.port : 0
      const socketPath = Path.join(dir, "llm.sock")
      const llm = yield* ScriptedLlm.make({
        listen: { socketPath },
        script: [
          { match: { lastUser: "ECHO: from-sandbox" }, reply: Reply.text("done in sandbox"), label: "after-tools" },
          {
            match: { lastUser: "sandboxed hello" },
            reply: Reply.message([
              { type: "text", text: "Probing." },
              {
                type: "tool_use",
                name: "Bash",
                input: { command: `(echo > /dev/tcp/127.0.0.1/${canaryPort}) 2>/dev/null && echo NET-OPEN || echo NET-CLOSED`, description: "probe" }
              },
              { type: "tool_use", name: "mcp__substrat__echo", input: { text: "from-sandbox" } }
            ]),
            label: "probe"
          },
          { match: { lastUser: "This is the second turn" }, reply: Reply.text("resumed in sandbox"), label: "resume" }
        ]
      })
      const env = claudeEnv({ home: "/home/agent", endpoint: { _tag: "UnixSocket", path: "/run/llm.sock" }, path: "/usr/bin:/bin" })
      const mcpServers = { substrat: echoMcp("/home/agent/echo.log") }
      const sandboxed = (args: ReadonlyArray<string>) =>
        run("bwrap", bwrapArgs({
          home,
          workspace: work,
          roBinds: [[claudeBin, "/opt/claude/claude"], [socketPath, "/run/llm.sock"], [repoRoot, repoRoot]],
          env
        }, ["/opt/claude/claude", ...args]), { env: { PATH: hostPath }, cwd: dir })

      const first = yield* sandboxed(claudeArgs({
        prompt: "sandboxed hello",
        mcpServers,
        allowedTools: ["mcp__substrat__*", "Bash"]
      }))
      expect(first.stderr).toBe("")
      expect(first.code).toBe(0)
      const lines = decode(first.stdout)
      const init = lines.find(StreamJson.isInit)!
      expect(init.cwd).toBe("/workspace")
      expect(init.mcp_servers).toEqual([{ name: "substrat", status: "connected" }])
      const results = lines.filter(StreamJson.isUser).flatMap(StreamJson.toolResults).map(StreamJson.toolResultText)
      expect([...results].sort()).toEqual(["ECHO: from-sandbox", "NET-CLOSED"])
      expect(lines.find(StreamJson.isResult)!.result).toBe("done in sandbox")
      expect(readJsonLines(Path.join(home, "echo.log"))).toEqual([{ tool: "echo", args: { text: "from-sandbox" } }])
      expect(yield* canary.requests).toEqual([])
      expect((yield* llm.modelRequests).map((r) => r.label)).toEqual(["probe", "after-tools"])
      // The session lives in the private HOME, keyed by the sandbox cwd.
      expect(Fs.existsSync(Path.join(home, ".claude/projects/-workspace", `${init.session_id}.jsonl`))).toBe(true)

      const second = yield* sandboxed(claudeArgs({ prompt: "This is the second turn", resume: init.session_id, mcpServers }))
      expect(second.code).toBe(0)
      const result2 = decode(second.stdout).find(StreamJson.isResult)!
      expect([result2.result, result2.session_id]).toEqual(["resumed in sandbox", init.session_id])
      const history = messagesOf((yield* llm.modelRequests).at(-1)!).flatMap(blocks)
      expect(history.some((b) => b["type"] === "tool_use" && b["name"] === "Bash")).toBe(true)
      expect(history.some((b) => b["type"] === "text" && b["text"] === "done in sandbox")).toBe(true)
    }))
})
