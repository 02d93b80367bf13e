// requires: bwrap, git
// The REAL ACP adapters of Claude Code and Codex (`@agentclientprotocol/claude-agent-acp` as
// `acp:claude`, `@agentclientprotocol/codex-acp` as `acp:codex`), each running the CLI the claude /
// codex provider runs, through the daemon and the CLI (acp.support.ts: bwrap, network off, the
// daemon's Anthropic / OpenAI forwarder to the scripted Messages / Responses endpoint, the key only
// in the daemon): the team scenario, and the team with the daemon killed -9 mid-turn. Both adapters
// make requests of their own (a session title per new session; claude's one-token request on a
// resumed session): answered under their labels, metered against the agent too.
// Not in `npm test` (about a minute): `npm run test:acp-adapters`, or this file with
// SUBSTRAT_TEST_ACP_ADAPTERS=1 (vitest.config.ts `profiles`, docs/testing.md "Test profiles").
import { describe, it } from "vitest"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { type AcpAgent, acpEnvKeys, acpTeam, teamKilledWhileAsked } from "./acp.support.js"
import { daemonTestScope, withLlm } from "./support.js"
import { FILE_BYTES } from "./team.support.js"

const scope = daemonTestScope(acpEnvKeys)

/**
 * Claude Code's own Write and Read. Claude Code asks before a write (its default permission mode)
 * and before an MCP call (Substrat's own are allowed unasked: claude-agent-acp names them in
 * `_meta.claudeCode.toolName`).
 */
const claude: AcpAgent = {
  preset: "claude",
  api: "anthropic",
  model: "claude-scripted",
  tool: (t) => `mcp__substrat__${t}`,
  write: Reply.toolCall("Write", { file_path: "/workspace/version.ts", content: FILE_BYTES }),
  read: Reply.toolCall("Read", { file_path: "/workspace/version.ts" }),
  asks: "Write version.ts",
  // Its session title; on a resumed session, Claude Code's one-token "Hi" (max_tokens 1).
  background: [
    { label: "title", match: { system: "naming a coding session" }, perAgent: true },
    { label: "resume-ping", match: { where: (r) => r.lastUser === "Hi" && r.system.includes("You are Claude Code") } }
  ],
  calls: { coder: ["Write"], reviewer: ["Read"] }
}

/** Codex's own apply_patch (a freeform tool of its default model) and its shell. The preset runs it with approvals off: it asks nothing. */
const PATCH = "*** Begin Patch\n*** Add File: version.ts\n+export const version = \"1.2.3\"\n*** End Patch\n"
const codex: AcpAgent = {
  preset: "codex",
  api: "openai-responses",
  model: "gpt-5.5",
  tool: (t) => `mcp__substrat__${t}`,
  write: Reply.message([{ type: "tool_use", name: "apply_patch", input: PATCH }]),
  read: Reply.message([{ type: "tool_use", name: "exec_command", input: { cmd: "cat /workspace/version.ts" } }]),
  asks: "",
  // Its session title, after a new session's first turn (on a model of its own choosing).
  background: [{ label: "title", match: { lastUser: "very short title for a conversation" }, perAgent: true }],
  calls: { coder: ["Editing files"], reviewer: ["exec_command"] }
}

describe("acp:claude and acp:codex, the real adapters (daemon + CLI, bwrap, network off, scripted endpoint)", () => {
  it("acp:claude, the team: lead spawns coder and reviewer, coder writes with Claude Code's Write (asked, allowed by policy), reviewer reads it with Read, `send --wait` prints lead's answer; every request metered", () =>
    withLlm([], (llm) => acpTeam(claude, scope, llm, { coderPermissions: ["allow_once (policy auto)"], killed: false })), 420_000)

  it("acp:claude, the team killed -9 mid-turn: coder's Write is asked in the inbox; the daemon dies while the question is open; after the restart the re-run turn asks the same item, its answer lets coder write once; `agent wait` prints lead's answer once; usage per request", () =>
    withLlm([], (llm) => teamKilledWhileAsked(claude, scope, llm)), 420_000)

  it("acp:codex, the team: lead spawns coder and reviewer, coder writes with codex's apply_patch, reviewer reads it with its shell, `send --wait` prints lead's answer; every request metered", () =>
    withLlm([], (llm) => acpTeam(codex, scope, llm, { coderPermissions: [], killed: false })), 420_000)

  it("acp:codex, the team killed -9 while the reviewer's request is held: `agent wait` prints lead's answer after a restart; the reviewer ran again, nothing lost or answered twice; usage per request", () =>
    withLlm([], (llm) => acpTeam(codex, scope, llm, { coderPermissions: [], killed: true })), 420_000)
})
