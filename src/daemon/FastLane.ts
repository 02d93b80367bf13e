// The frame guard's fast lane: read-only admin methods whose answer is a pure function of the
// orchestrator's in-memory state, answered synchronously from the socket's data callback —
// without @effect/rpc's per-request fiber, context merge and Schema encode (docs/protocol.md,
// "Speed"). Only `agent.list` qualifies today: `agent.inspect`, `session.list` and
// `daemon.status` read session records / event logs from disk and stay on @effect/rpc.
//
// No cache: each request reads the live state (the tree and the per-agent state, exactly what
// `Orchestrator.list` reads) and serialises it, so a reply can never be staler than the @effect/rpc
// path's. The bytes are the @effect/rpc path's bytes: objects are built in the Schema's field
// order with the Schema's (identity) encoding; test/integration/rpc-fast-lane.test.ts compares
// both paths byte for byte.
import { stateOf } from "../agent/Inspection.js"
import type { OrchestratorStateService } from "../agent/OrchestratorState.js"
import { AgentNode } from "../domain/agent.js"

/** `result` JSON of a fast-lane method, or undefined: let @effect/rpc answer. */
export type FastLane = (method: string, params: unknown) => string | undefined

const agentFields = Object.keys(AgentNode.fields) as ReadonlyArray<keyof AgentNode>

/** One agent as the AgentNode Schema encodes it (field order of the Schema; `state` live). */
const encodeNode = (s: OrchestratorStateService, n: AgentNode): Record<string, unknown> => {
  const o: Record<string, unknown> = {}
  for (const k of agentFields) o[k] = k === "state" ? stateOf(s, n.id) : n[k]
  return o
}

export const make = (s: OrchestratorStateService): FastLane => (method) => {
  if (method !== "agent.list") return undefined
  const agents: Array<Record<string, unknown>> = []
  for (const n of s.tree.nodes.values()) agents.push(encodeNode(s, n))
  return JSON.stringify({ agents })
}
