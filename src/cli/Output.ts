// Human and JSON renderings of what the daemon returns.
import { Console, Effect } from "effect"
import type { AgentNode } from "../domain/agent.js"
import type { SessionInfo } from "../daemon/Rpcs.js"
import type { WorkspaceSpec } from "../domain/workspace.js"

export const printJson = (value: unknown): Effect.Effect<void> => Console.log(JSON.stringify(value, null, 2))

/** Left-aligned columns. */
export const table = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths: Array<number> = []
  for (const r of rows) r.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)))
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  ")).join("\n")
}

/** The agent forest, roots first, children indented with box-drawing branches. */
export const renderTree = (agents: ReadonlyArray<AgentNode>): string => {
  if (agents.length === 0) return "(no agents)"
  const ids = new Set(agents.map((a) => a.id))
  const children = new Map<string, Array<AgentNode>>()
  const roots: Array<AgentNode> = []
  for (const a of agents) {
    if (a.parent_id === null || !ids.has(a.parent_id)) roots.push(a)
    else children.set(a.parent_id, [...(children.get(a.parent_id) ?? []), a])
  }
  const lines: Array<ReadonlyArray<string>> = []
  const walk = (a: AgentNode, prefix: string, branch: string) => {
    lines.push([`${prefix}${branch}${a.name}`, a.state, a.provider, a.role, a.id])
    const kids = children.get(a.id) ?? []
    const nextPrefix = prefix + (branch === "" ? "" : branch === "└─ " ? "   " : "│  ")
    kids.forEach((k, i) => walk(k, nextPrefix, i === kids.length - 1 ? "└─ " : "├─ "))
  }
  for (const r of roots) walk(r, "", "")
  return table([["NAME", "STATE", "PROVIDER", "ROLE", "ID"], ...lines])
}

export const renderSessions = (sessions: ReadonlyArray<SessionInfo>): string =>
  sessions.length === 0
    ? "(no sessions)"
    : table([
      ["SESSION", "STATE", "AGENT", "PROVIDER", "CREATED"],
      ...sessions.map((s) => [s.id, s.state, s.agent_name ?? "-", s.provider_name, s.created_at])
    ])

export const renderWorkspaces = (ws: ReadonlyArray<WorkspaceSpec>): string =>
  ws.length === 0
    ? "(no workspaces)"
    : table([
      ["WORKSPACE", "NAME", "PARENT", "NETWORK", "LINKS", "ROOT"],
      ...ws.map((w) => [
        w.id,
        w.name ?? "-",
        w.parent_id ?? "-",
        w.network_access ? "yes" : "no",
        String(w.symlinks.length),
        w.root_path
      ])
    ])
