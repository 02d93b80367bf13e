// requires: bwrap, git
// The REAL Qwen Code (`@qwen-code/qwen-code`, `qwen --acp`) as `acp:qwen` through the daemon and
// the CLI (acp.support.ts: bwrap, network off, the daemon's OpenAI forwarder to a scripted Chat
// Completions endpoint, the key only in the daemon).
import * as Fs from "node:fs"
import * as Path from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { type Agent, cli, cliJson, startDaemon } from "../integration/daemon.support.js"
import { type AcpAgent, acpEnvKeys, acpHome, expectForwarded, expectPerRequestUsage, firstPrompt, keyNotIn, offered, teamKilledWhileAsked, withUsage } from "./acp.support.js"
import { agentEvents as events, daemonTestScope, dataNamed as of, withLlm } from "./support.js"
import { FILE_BYTES } from "./team.support.js"

const scope = daemonTestScope(acpEnvKeys)

/**
 * Qwen Code names Substrat's tools `mcp__substrat__<tool>` and offers them as deferred ones (listed
 * by name in its start-up reminder, reached through its tool_search/tool_call): a session's first
 * request must already offer them, or the model's first call of one finds no such tool. Its own
 * write_file and read_file write and read; its question names the tool.
 */
const qwen: AcpAgent = {
  preset: "qwen",
  model: "qwen-scripted",
  tool: (t) => `mcp__substrat__${t}`,
  write: Reply.toolCall("write_file", { file_path: "/workspace/version.ts", content: FILE_BYTES }),
  read: Reply.toolCall("read_file", { file_path: "/workspace/version.ts" }),
  asks: "write_file: "
}

describe("acp:qwen, the real Qwen Code (daemon + CLI, bwrap, network off, scripted endpoint)", () => {
  it("one turn: `send --wait` prints qwen's answer; one request, metered exactly; the key never reaches the sandbox", () =>
    withLlm([], async (llm) => {
      const home = acpHome(scope.homes, qwen, llm)
      await Effect.runPromise(llm.replace([
        { match: { where: (r) => firstPrompt(r).includes("AGENT=solo") }, reply: withUsage(Reply.text("Hello from Qwen Code.")), label: "solo" }
      ]))
      scope.ds.track(await startDaemon(home))
      const a = await cliJson<Agent>(home, ["agent", "create", "--provider", "acp:qwen", "--name", "solo", "--instructions", "AGENT=solo Be brief."])
      const sent = await cli(home, ["agent", "send", "--wait", "solo", "Say hello."])
      expect(sent.stderr).toBe("")
      expect(sent.stdout).toBe("Hello from Qwen Code.\n")
      expect(sent.code).toBe(0)
      // Exactly the one request: qwen's background requests (memory extraction, next-prompt
      // suggestions) are off in the settings the preset writes to its HOME.
      const reqs = await Effect.runPromise(llm.modelRequests)
      expect(reqs.map((r) => r.label ?? `unmatched: ${(r.lastUser ?? "").slice(0, 80)}`)).toEqual(["solo"])
      expectForwarded(qwen, reqs)
      // Substrat's MCP tools are registered before the first prompt runs (the preset makes qwen's
      // MCP discovery blocking): offered to the model from its first request on.
      expect(offered(qwen, reqs[0]!)).toEqual(["mcp__substrat__send_message", "mcp__substrat__spawn_agent", "mcp__substrat__check_inbox"])
      // The instructions and the message open the first prompt.
      expect(reqs[0]!.lastUser).toContain("AGENT=solo Be brief.")
      expect(reqs[0]!.lastUser).toContain("Say hello.")
      expect(expectPerRequestUsage(home, qwen, a, reqs)).toBe(0)
      expect(of(events(home, a.session_id), "turn.complete").map((t) => t["response"])).toEqual(["Hello from Qwen Code."])
      expect(of(events(home, a.session_id), "provider.error")).toEqual([])
      // The agent's HOME has qwen's settings and its session; no key anywhere in it.
      keyNotIn(home, a)
      const agentHome = Path.join(home, "agents", a.session_id, "home")
      expect(JSON.parse(Fs.readFileSync(Path.join(agentHome, ".qwen/settings.json"), "utf8"))).toMatchObject({
        telemetry: { enabled: false },
        memory: { enableManagedAutoMemory: false },
        ui: { enableFollowupSuggestions: false }
      })
    }), 180_000)

  it("the team, killed -9 mid-turn: coder's write_file is asked in the inbox; the daemon dies while the question is open; after the restart the re-run turn asks the same item, its answer lets coder write once; reviewer reads it; `agent wait` prints lead's answer once; usage per request", () =>
    withLlm([], (llm) => teamKilledWhileAsked(qwen, scope, llm)), 420_000)
})
