// requires: bwrap
// The REAL Codex binary, offline, against the scripted Responses endpoint: an MCP tool round trip
// (namespaced function calls), `codex exec resume`, a failing turn, and inside bwrap with every
// namespace unshared — Codex cannot use a Unix socket, so llm-forward.mjs relays the sandbox's own
// loopback to the bound socket.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { codexArgs, codexEnv } from "../../src/provider/codex/Invocation.js"
import * as ExecJson from "../../src/provider/codex/ExecJson.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { tmpDir } from "../support/tmpDir.js"
import { bwrapArgs, codexVendorDir, echoMcp, forwarderScript, readJsonLines, repoRoot, run } from "./support.js"

const hostPath = `${Path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`
// A model name outside Codex's bundled catalog: Codex then declares MCP tools directly (a
// `namespace` tool) instead of deferring them behind `tool_search`, at the price of one non-fatal
// "Model metadata … not found" error item.
const model = "scripted-model"

const decode = (stdout: string): ReadonlyArray<ExecJson.ExecJsonLine> => {
  const lines = ExecJson.decodeAll(stdout)
  if (Either.isLeft(lines)) throw new Error(`exec --json did not decode: ${lines.left.message}\n${stdout}`)
  return lines.right
}

type Item = Record<string, unknown>
const inputOf = (r: ScriptedLlm.RecordedRequest): ReadonlyArray<Item> => (r.body as { input: ReadonlyArray<Item> }).input

const echoRoundTripScript = (extra: ReadonlyArray<ScriptedLlm.ScriptEntry> = []): ReadonlyArray<ScriptedLlm.ScriptEntry> => [
  { match: { lastUser: "ECHO: ping-42" }, reply: Reply.text("The tool said ping-42."), label: "after-tool" },
  {
    match: { lastUser: "Please call the echo tool", hasTool: "mcp__substrat__echo" },
    reply: Reply.toolCall("mcp__substrat__echo", { text: "ping-42" }, "Calling echo."),
    label: "call"
  },
  { match: { lastUser: "This is the second turn" }, reply: Reply.text("Second answer."), label: "resume" },
  ...extra
]

describe("codex (real binary) offline", () => {
  it.scoped("MCP tool round trip over TCP (namespaced call), then exec resume carries the thread", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir("codex-e2e-")
      const home = Path.join(dir, "home")
      const work = Path.join(dir, "work")
      Fs.mkdirSync(Path.join(home, ".codex"), { recursive: true })
      Fs.mkdirSync(work)
      const echoLog = Path.join(dir, "echo.log")
      const llm = yield* ScriptedLlm.make({ listen: { port: 0 }, script: echoRoundTripScript() })
      const codex = Path.join(codexVendorDir(), "bin/codex")
      const env = codexEnv({ home, path: hostPath })
      const base = { baseUrl: `${llm.baseUrl}/v1`, model, mcpServers: { substrat: echoMcp(echoLog) } }

      const first = yield* run(codex, codexArgs({ ...base, prompt: "Please call the echo tool" }), { env, cwd: work })
      expect(first.code, first.stdout + first.stderr).toBe(0)
      const lines = decode(first.stdout)
      const threadId = lines.find(ExecJson.isThreadStarted)!.thread_id
      const items = ExecJson.completedItems(lines)
      const calls = items.filter(ExecJson.isMcpToolCall)
      expect(calls.map((c) => [c.server, c.tool, c.status, ExecJson.mcpResultText(c)])).toEqual([["substrat", "echo", "completed", "ECHO: ping-42"]])
      expect(items.filter(ExecJson.isAgentMessage).map((m) => m.text)).toEqual(["Calling echo.", "The tool said ping-42."])
      expect(lines.find(ExecJson.isTurnCompleted)!.usage.input_tokens).toBeGreaterThan(0)
      expect(readJsonLines(echoLog)).toEqual([{ tool: "echo", args: { text: "ping-42" } }])

      // What the model saw: the namespaced call went out and its output came back.
      const reqs = yield* llm.modelRequests
      expect(reqs.map((r) => r.label)).toEqual(["call", "after-tool"])
      const tools = (reqs[0]!.body as { tools: ReadonlyArray<Item> }).tools
      expect(tools.find((t) => t["type"] === "namespace" && t["name"] === "mcp__substrat")).toBeDefined()
      const input = inputOf(reqs[1]!)
      const call = input.find((i) => i["type"] === "function_call")!
      expect([call["namespace"], call["name"], JSON.parse(call["arguments"] as string)]).toEqual(["mcp__substrat", "echo", { text: "ping-42" }])
      const output = input.find((i) => i["type"] === "function_call_output")!
      expect(output["call_id"]).toBe(call["call_id"])
      expect(JSON.stringify(output["output"])).toContain("ECHO: ping-42")

      const second = yield* run(codex, codexArgs({ ...base, prompt: "This is the second turn", resume: threadId }), { env, cwd: work })
      expect(second.code).toBe(0)
      const resumed = decode(second.stdout)
      expect(resumed.find(ExecJson.isThreadStarted)!.thread_id).toBe(threadId)
      expect(ExecJson.completedItems(resumed).filter(ExecJson.isAgentMessage).map((m) => m.text)).toEqual(["Second answer."])
      const resumeReq = (yield* llm.modelRequests).at(-1)!
      expect(resumeReq.label).toBe("resume")
      const history = inputOf(resumeReq)
      expect(history.some((i) => i["type"] === "function_call" && i["namespace"] === "mcp__substrat")).toBe(true)
      expect(JSON.stringify(history)).toContain("The tool said ping-42.")
      expect(resumeReq.lastUser).toBe("This is the second turn")
    }))

  it.scoped("a failing model call is turn.failed with the message, exit 1, no retries", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir("codex-e2e-")
      Fs.mkdirSync(Path.join(dir, ".codex"))
      const llm = yield* ScriptedLlm.make({ listen: { port: 0 }, script: [{ reply: Reply.error(400, "scripted invalid request"), times: Infinity }] })
      const res = yield* run(
        Path.join(codexVendorDir(), "bin/codex"),
        codexArgs({ baseUrl: `${llm.baseUrl}/v1`, model, mcpServers: {}, prompt: "hello" }),
        { env: codexEnv({ home: dir, path: hostPath }), cwd: dir }
      )
      expect(res.code).toBe(1)
      const lines = decode(res.stdout)
      expect(lines.find(ExecJson.isTurnFailed)!.error.message).toContain("scripted invalid request")
      expect(lines.some(ExecJson.isTurnCompleted)).toBe(false)
      expect((yield* llm.modelRequests).length).toBe(1)
    }))

  it.scoped("an unreachable endpoint fails the turn at once; a slow MCP server is waited for", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir("codex-e2e-")
      Fs.mkdirSync(Path.join(dir, ".codex"))
      const codex = Path.join(codexVendorDir(), "bin/codex")
      const env = codexEnv({ home: dir, path: hostPath })
      // Nothing listens on a port we just closed.
      const closedPort = yield* Effect.scoped(
        ScriptedLlm.make({ listen: { port: 0 } }).pipe(Effect.map((l) => l.address._tag === "Tcp" ? l.address.port : 0))
      )
      const down = yield* run(codex, codexArgs({ baseUrl: `http://127.0.0.1:${closedPort}/v1`, model, mcpServers: {}, prompt: "hi" }), { env, cwd: dir })
      expect(down.code).toBe(1)
      expect(decode(down.stdout).find(ExecJson.isTurnFailed)!.error.message).toContain("Connection failed")

      // An MCP server that takes 2 s to start still has its tools in the first request.
      const llm = yield* ScriptedLlm.make({ listen: { port: 0 }, script: echoRoundTripScript() })
      const echoLog = Path.join(dir, "echo.log")
      const slow = echoMcp(echoLog)
      const res = yield* run(codex, codexArgs({
        baseUrl: `${llm.baseUrl}/v1`,
        model,
        prompt: "Please call the echo tool",
        mcpServers: { substrat: { ...slow, command: "sh", args: ["-c", `sleep 2; exec node ${slow.args.map((a) => `'${a}'`).join(" ")}`] } }
      }), { env, cwd: dir })
      expect(res.code, res.stdout + res.stderr).toBe(0)
      expect((yield* llm.modelRequests).map((r) => r.label)).toEqual(["call", "after-tool"])
      expect(readJsonLines(echoLog)).toEqual([{ tool: "echo", args: { text: "ping-42" } }])
    }))

  it.scoped("inside bwrap with no network: llm-forward to a bound Unix socket, MCP, exec_command, resume", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir("codex-bwrap-")
      const home = Path.join(dir, "home")
      const work = Path.join(dir, "work")
      Fs.mkdirSync(Path.join(home, ".codex"), { recursive: true })
      Fs.mkdirSync(work)
      const canary = yield* ScriptedLlm.make({ listen: { port: 0 }, fallback: Reply.text("should never be asked") })
      const canaryPort = canary.address._tag === "Tcp" ? canary.address.port : 0
      const socketPath = Path.join(dir, "llm.sock")
      const llm = yield* ScriptedLlm.make({
        listen: { socketPath },
        script: echoRoundTripScript([
          {
            match: { lastUser: "probe the network" },
            reply: Reply.message([{
              type: "tool_use",
              name: "exec_command",
              input: { cmd: `(echo > /dev/tcp/127.0.0.1/${canaryPort}) 2>/dev/null && echo NET-OPEN || echo NET-CLOSED` }
            }]),
            label: "probe"
          },
          { match: { lastUser: "NET-" }, reply: Reply.text("probed"), label: "after-probe" }
        ])
      })
      const sandboxed = (args: ReadonlyArray<string>) =>
        run("bwrap", bwrapArgs({
          home,
          workspace: work,
          roBinds: [
            [codexVendorDir(), "/opt/codex"],
            [forwarderScript, "/opt/substrat/llm-forward.mjs"],
            [socketPath, "/run/llm.sock"],
            [repoRoot, repoRoot]
          ],
          env: codexEnv({ home: "/home/agent", path: "/usr/bin:/bin" })
        }, ["node", "/opt/substrat/llm-forward.mjs", "--socket", "/run/llm.sock", "--", "/opt/codex/bin/codex", ...args]), {
          env: { PATH: hostPath },
          cwd: dir
        })
      const base = { baseUrl: "http://127.0.0.1:{port}/v1", model, mcpServers: { substrat: echoMcp("/home/agent/echo.log") } }

      const first = yield* sandboxed(codexArgs({ ...base, prompt: "Please call the echo tool" }))
      expect(first.code, first.stdout + first.stderr).toBe(0)
      const lines = decode(first.stdout)
      const threadId = lines.find(ExecJson.isThreadStarted)!.thread_id
      const calls = ExecJson.completedItems(lines).filter(ExecJson.isMcpToolCall)
      expect(calls.map((c) => ExecJson.mcpResultText(c))).toEqual(["ECHO: ping-42"])
      expect(readJsonLines(Path.join(home, "echo.log"))).toEqual([{ tool: "echo", args: { text: "ping-42" } }])

      const second = yield* sandboxed(codexArgs({ ...base, prompt: "probe the network", resume: threadId }))
      expect(second.code).toBe(0)
      const probe = decode(second.stdout)
      expect(probe.find(ExecJson.isThreadStarted)!.thread_id).toBe(threadId)
      const commands = ExecJson.completedItems(probe).filter(ExecJson.isCommandExecution)
      expect(commands.map((c) => [c.aggregated_output.trim(), c.exit_code])).toEqual([["NET-CLOSED", 0]])
      expect(yield* canary.requests).toEqual([])
      const reqs = yield* llm.modelRequests
      expect(reqs.map((r) => r.label)).toEqual(["call", "after-tool", "probe", "after-probe"])
      // The resumed request carries the first turn's namespaced MCP call.
      expect(inputOf(reqs[2]!).some((i) => i["type"] === "function_call" && i["namespace"] === "mcp__substrat")).toBe(true)
    }))
})
