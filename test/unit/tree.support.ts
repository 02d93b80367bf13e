// Helpers to build trees in unit tests.
import { Either } from "effect"
import { AgentTree } from "../../src/agent/AgentTree.js"
import { AgentNode } from "../../src/domain/agent.js"
import { type AgentId, newAgentId, newSessionId } from "../../src/domain/ids.js"

export const node = (name: string, parent: AgentId | null = null) =>
  new AgentNode({
    id: newAgentId(),
    name,
    session_id: newSessionId(),
    parent_id: parent,
    instructions: "",
    role: "worker",
    provider: "scripted",
    workspace_id: null,
    state: "idle"
  })

export const build = (spec: ReadonlyArray<readonly [string, string | null]>) => {
  let t = AgentTree.empty
  const ids = new Map<string, AgentId>()
  for (const [name, parent] of spec) {
    const n = node(name.split("/").pop()!, parent === null ? null : ids.get(parent)!)
    t = Either.getOrThrow(t.add(n))
    ids.set(name, n.id)
  }
  return { t, id: (k: string) => ids.get(k)! }
}

