// Permissions.ts: the acp.approve policy. A request for one of Substrat's own tools (named by the
// agent's `_meta.toolName`, as Qwen Code sends it, or `_meta.claudeCode.toolName`, as
// claude-agent-acp does, or by Gemini CLI's MCP title) is allowed under every policy without asking;
// a title that merely mentions substrat is asked like any other.
import type * as Acp from "@agentclientprotocol/sdk"
import { describe, expect, it } from "vitest"
import { SessionId } from "../../src/domain/ids.js"
import type { ProviderOutput } from "../../src/provider/Provider.js"
import * as Permissions from "../../src/provider/acp/Permissions.js"

const options: Array<Acp.PermissionOption> = [
  { optionId: "always", name: "Always", kind: "allow_always" },
  { optionId: "once", name: "Allow", kind: "allow_once" },
  { optionId: "no", name: "Reject", kind: "reject_once" }
]
const request = (title: string, toolName?: string, kind?: Acp.ToolKind): Acp.RequestPermissionRequest => ({
  sessionId: "s",
  options,
  toolCall: { toolCallId: "c1", title, ...(kind === undefined ? {} : { kind }), ...(toolName === undefined ? {} : { _meta: { toolName } }) }
})

const policy = (approve: Permissions.Approve) => {
  const asked: Array<string> = []
  const out: Array<ProviderOutput> = []
  const p = Permissions.make({
    approve,
    emit: (o) => out.push(o),
    asker: { session_id: SessionId.make("00000000-0000-4000-8000-000000000000"), agent_id: "a", agent_name: "lead", timeoutSeconds: 0, ask: (q) => (asked.push(q.text), Promise.resolve({ choice: "reject", earlier: false })) }
  })
  return { asked, out, decide: (r: Acp.RequestPermissionRequest) => p.decide(r, new AbortController().signal) }
}

describe("acp permissions", () => {
  it("Substrat's own tools are allowed under ask and reject, unasked and unlogged", async () => {
    for (const approve of ["ask", "reject", "auto"] as const) {
      const p = policy(approve)
      expect(await p.decide(request("{}", "mcp__substrat__send_message"))).toEqual({ outcome: { outcome: "selected", optionId: "once" } })
      expect([p.asked, p.out]).toEqual([[], []])
    }
  })

  it("claude-agent-acp names an MCP tool in `_meta.claudeCode.toolName`: Substrat's own are allowed unasked, another MCP tool is asked", async () => {
    const claude = (toolName: string, server: string): Acp.RequestPermissionRequest => ({
      sessionId: "s",
      options,
      toolCall: { toolCallId: "c1", title: toolName, _meta: { claudeCode: { toolName, mcpServer: { name: server, source: "sdk" } } } }
    })
    const p = policy("ask")
    expect(await p.decide(claude("mcp__substrat__spawn_agent", "substrat"))).toEqual({ outcome: { outcome: "selected", optionId: "once" } })
    expect([p.asked, p.out]).toEqual([[], []])
    expect(await p.decide(claude("mcp__other__x", "other"))).toEqual({ outcome: { outcome: "selected", optionId: "no" } })
    expect(p.asked.map((t) => t.split(". Its options")[0])).toEqual(["lead asks permission: mcp__other__x"])
  })

  it("an MCP server the agent added itself cannot pass for Substrat's by its name: asked under ask", async () => {
    const spoofs = ["mcp__my_substrat__rm", "mcp__anyserver__substrat_exec", "mcp__substrat__evil__send_message", "mcp__substrat__rm", "substrat", "mcp__substrat__"]
    for (const name of spoofs) {
      const p = policy("ask")
      expect(await p.decide(request(name, name)), name).toEqual({ outcome: { outcome: "selected", optionId: "no" } })
      expect(p.asked, name).toHaveLength(1)
      const c = policy("ask")
      expect(await c.decide({ sessionId: "s", options, toolCall: { toolCallId: "c1", title: name, _meta: { claudeCode: { toolName: name } } } }), name)
        .toEqual({ outcome: { outcome: "selected", optionId: "no" } })
      expect(c.asked, name).toHaveLength(1)
    }
  })

  it("Gemini CLI's requests for Substrat's tools (no _meta: its MCP title, kind other) are allowed unasked; look-alikes of another kind or server are asked", async () => {
    for (const approve of ["ask", "reject", "auto"] as const) {
      const p = policy(approve)
      expect(await p.decide(request("check_inbox (substrat MCP Server)", undefined, "other"))).toEqual({ outcome: { outcome: "selected", optionId: "once" } })
      expect([p.asked, p.out]).toEqual([[], []])
    }
    const p = policy("ask")
    // A shell command whose text mimics the title (kind execute), another server, a title with more after it, no kind.
    for (const [title, kind] of [
      ["check_inbox (substrat MCP Server)", "execute"],
      ["check_inbox (other MCP Server)", "other"],
      ["check_inbox (substrat MCP Server) && rm -rf /workspace", "other"],
      ["check_inbox (substrat MCP Server)", undefined]
    ] as const) {
      expect(await p.decide(request(title, undefined, kind)), `${title} ${kind}`).toEqual({ outcome: { outcome: "selected", optionId: "no" } })
    }
    expect(p.asked.length).toBe(4)
  })

  it("another tool is asked, named by its tool name when the title says nothing; a title mentioning substrat is asked too", async () => {
    const p = policy("ask")
    expect(await p.decide(request("{}", "mcp__other__x"))).toEqual({ outcome: { outcome: "selected", optionId: "no" } })
    expect(await p.decide(request("Writing to version.ts", "write_file"))).toEqual({ outcome: { outcome: "selected", optionId: "no" } })
    expect(await p.decide(request("rm -rf /workspace/substrat"))).toEqual({ outcome: { outcome: "selected", optionId: "no" } })
    // No tool name (opencode): the call's kind follows the title; "other" says nothing.
    expect(await p.decide(request("/workspace/version.ts", undefined, "edit"))).toEqual({ outcome: { outcome: "selected", optionId: "no" } })
    expect(await p.decide(request("ls", undefined, "other"))).toEqual({ outcome: { outcome: "selected", optionId: "no" } })
    expect(p.asked.map((t) => t.split(". Its options")[0])).toEqual([
      "lead asks permission: mcp__other__x",
      "lead asks permission: write_file: Writing to version.ts",
      "lead asks permission: rm -rf /workspace/substrat",
      "lead asks permission: /workspace/version.ts (edit)",
      "lead asks permission: ls"
    ])
    expect(p.out.map((o) => (o._tag === "ToolCall" ? o.result : null))).toEqual(Array(5).fill("reject_once (the human)"))
  })
})
