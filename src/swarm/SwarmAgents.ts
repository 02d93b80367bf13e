// Node agents (pure): what agent a code-tree node gets — its ids (derived from the swarm name,
// the node id and the node's generation, so nothing per dormant agent has to be stored), its
// name (the seed's `func_format_date`, made a valid agent name unique among its siblings), its
// instructions (the code it owns, and that it may edit only that code) — and the texts of the
// swarm's triggers. See docs/swarm.md.
import { createHash } from "node:crypto"
import { AgentNode, NAME_PATTERN } from "../domain/agent.js"
import { AgentId, SessionId, type WorkspaceId } from "../domain/ids.js"
import type { SwarmNode, SwarmNodeId } from "./SwarmNode.js"

/** A UUID-shaped id (version nibble 8) from a sha256 of `parts`: stable across restarts. */
export const derivedUuid = (...parts: ReadonlyArray<string>): string => {
  const h = createHash("sha256").update(parts.join("\0")).digest("hex")
  const variant = (8 | (parseInt(h[16]!, 16) & 3)).toString(16)
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`
}

export const agentIdOf = (swarm: string, node: SwarmNodeId, generation: number): AgentId =>
  AgentId.make(derivedUuid("agent", swarm, node, String(generation)))
export const sessionIdOf = (swarm: string, node: SwarmNodeId, generation: number): SessionId =>
  SessionId.make(derivedUuid("session", swarm, node, String(generation)))

const short = (id: string, n: number) => createHash("sha256").update(id).digest("hex").slice(0, n)

/** A valid agent name (NAME_PATTERN, ≤ 64 characters) from a display name; long ones keep a hash of the node id. */
export const validName = (display: string, nodeId: string): string => {
  let s = display.replace(/[^A-Za-z0-9_.-]+/g, "_").replace(/^[^A-Za-z0-9]+/, "")
  if (s === "") s = "node"
  if (s.length > 64) s = `${s.slice(0, 55)}_${short(nodeId, 8)}`
  return s
}

/** `name` made unique against `taken` (a sibling has it): a hash of the node id is appended. */
export const uniqueName = (name: string, nodeId: string, taken: (n: string) => boolean): string => {
  if (!taken(name)) return name
  for (let len = 6; len <= 16; len += 2) {
    const tail = `_${short(nodeId, len)}`
    const candidate = `${name.slice(0, 64 - tail.length)}${tail}`
    if (!taken(candidate)) return candidate
  }
  return `${name.slice(0, 47)}_${short(`${nodeId}\0${name}`, 16)}`
}

/** A swarm name from a directory name (a valid root agent name). */
export const swarmNameOf = (dirName: string): string => {
  const n = validName(dirName, dirName)
  return NAME_PATTERN.test(n) ? n : "swarm"
}

const what = (n: SwarmNode): string =>
  n.kind === "dir"
    ? n.path === "." ? "the root directory of the code tree" : `the directory ${n.path}`
    : n.kind === "file"
    ? `the file ${n.path}`
    : `the ${n.kind} ${n.name} in ${n.path}`

const linesOf = (n: SwarmNode): string => n.lines === null ? "" : ` (lines ${n.lines.start}-${n.lines.end})`

/** The rules every node agent shares (one string in memory, joined to each agent's own line). */
export const SWARM_RULES = `
You are one agent of a swarm: every directory, file, class, function and method of this code base has its own agent, organised as the code is (a file's agent is the parent of its classes' and functions' agents).
Rules:
- The code tree is your working directory (/workspace in your sandbox; node paths are relative to it). Your turns' changes are recorded in its history under your name.
- You may edit only the code you own (the span named above, without the spans of your children, which their own agents own). Anything else you want changed, ask its owner.
- Messages go one hop: to your parent ("parent"), your children and your siblings by name, or "broadcast:children" / "broadcast:siblings"; "find:<symbol>" reaches the agent of that class/function/method anywhere in the tree, hop by hop.
- You are woken when your code changes, when a message or the user reaches you, or on a schedule. Do what is asked, reply briefly, and stop.`

/** What an agent of `node` is told (its own line, then the shared rules). */
export const instructionsOf = (node: SwarmNode): string =>
  `You own ${what(node)}${linesOf(node)}; node id ${node.id}.` + SWARM_RULES

export interface NodeAgentArgs {
  readonly swarm: string
  /** `agentIdOf(swarm, node.id, generation)`, passed in so the caller's copy of the id is the record's. */
  readonly id: AgentId
  readonly node: SwarmNode
  readonly generation: number
  readonly name: string
  readonly parent: AgentId | null
  readonly provider: string
  readonly workspace: WorkspaceId | null
}

/** One role string per kind (shared by every agent of that kind). */
const roles: Readonly<Record<SwarmNode["kind"], string>> = {
  dir: "swarm-dir",
  file: "swarm-file",
  class: "swarm-class",
  function: "swarm-function",
  method: "swarm-method"
}

/**
 * A dormant node agent's record. Its instructions are the shared rules only: its own line
 * (`instructionsOf`) is derived from its node when it materializes (Tree.describeDormant), so
 * 100,000 dormant agents do not each hold a string of their own.
 */
export const nodeAgent = (a: NodeAgentArgs): AgentNode =>
  new AgentNode({
    id: a.id,
    name: a.name,
    session_id: sessionIdOf(a.swarm, a.node.id, a.generation),
    parent_id: a.parent,
    instructions: SWARM_RULES,
    role: roles[a.node.kind],
    provider: a.provider,
    workspace_id: a.workspace,
    state: "idle"
  }, { disableValidation: true })

/** The notice a node agent gets when its code changed (a save, or found at start-up). */
export const changedText = (before: SwarmNode, after: SwarmNode, atStart: boolean): string =>
  `${atStart ? "While the swarm was stopped, your" : "Your"} code changed: ${what(after)}, now${linesOf(after)}` +
  (before.lines !== null && after.lines !== null && (before.lines.start !== after.lines.start || before.lines.end !== after.lines.end)
    ? ` (was lines ${before.lines.start}-${before.lines.end})`
    : "") +
  `. Read it, and act if something you own needs it.`

/** The notice of a user's `swarm trigger`. */
export const triggeredText = (node: SwarmNode, why: string): string =>
  `You were triggered (${why}). You own ${what(node)}${linesOf(node)}. Check your code and do what it needs.`
