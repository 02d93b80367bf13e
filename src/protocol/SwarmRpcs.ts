// The shapes of the swarm methods of the admin protocol (`swarm.*` in Rpcs.ts; docs/protocol.md,
// docs/swarm.md), shared by the daemon (src/daemon/handlers/Swarm.ts) and the CLI.
import { Schema } from "effect"
import { AgentId, SessionId, WorkspaceId } from "../domain/ids.js"
import { LineRange, NodeKind, SwarmLanguage } from "../swarm/SwarmNode.js"

export const SwarmNodeStatus = Schema.Literal("dormant", "idle", "busy", "waiting", "quarantined", "orphaned")

export const SwarmStatus = Schema.Struct({
  name: Schema.String,
  root: Schema.String,
  provider: Schema.String,
  languages: Schema.Array(SwarmLanguage),
  running: Schema.Boolean,
  watching: Schema.Boolean,
  started_at: Schema.String,
  /** The workspace on the code tree: the node agents work in it; its history records their turns. */
  workspace_id: Schema.NullOr(WorkspaceId),
  /** Live nodes (each has an agent). */
  nodes: Schema.Number,
  /** Of those, agents without a session yet. */
  dormant: Schema.Number,
  /** Agents whose code is gone (kept for history). */
  orphaned: Schema.Number
})
export type SwarmStatus = typeof SwarmStatus.Type

export const SwarmAgent = Schema.Struct({
  node_id: Schema.String,
  agent_id: AgentId,
  session_id: SessionId,
  name: Schema.String,
  kind: NodeKind,
  path: Schema.String,
  symbol: Schema.String,
  lines: Schema.NullOr(LineRange),
  parent: Schema.NullOr(Schema.String),
  status: SwarmNodeStatus
})
export type SwarmAgent = typeof SwarmAgent.Type

/** A node id (`src/a.ts#function:f`), its agent's id, or the name of exactly one node agent. */
export const NodeRef = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(4096))


/** A node's cron schedule (docs/swarm.md, "Schedules"). */
export const SwarmSchedule = Schema.Struct({
  node: Schema.String,
  cron: Schema.String,
  since: Schema.String,
  /** The last tick fired (or skipped while the swarm was stopped); null: none yet. */
  last: Schema.NullOr(Schema.String),
  /** The next tick. */
  next: Schema.String
})
export type SwarmSchedule = typeof SwarmSchedule.Type

/** A cron expression: 5 fields (min hour day month weekday), or 6 with seconds first. */
export const CronExpr = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256))

/** `swarm.log`: a node agent's turns and what each changed (docs/swarm.md, "swarm log"). */
export const SwarmLogTurn = Schema.Struct({
  turn_id: Schema.String,
  started: Schema.String,
  ended: Schema.NullOr(Schema.String),
  outcome: Schema.Literal("complete", "failed", "running"),
  /** The prompt for people: who said what (`USER: …`), without the daemon's message headers. */
  prompt: Schema.String,
  /** The prompt as the agent read it (headers and message ids). */
  raw_prompt: Schema.String,
  response: Schema.String,
  workspace_id: Schema.NullOr(Schema.String),
  commit: Schema.NullOr(Schema.String),
  changes: Schema.Array(Schema.Struct({ path: Schema.String, change: Schema.Literal("added", "modified", "deleted") }))
})
export const SwarmLogNode = Schema.Struct({
  node_id: Schema.String,
  agent_id: AgentId,
  name: Schema.String,
  status: SwarmNodeStatus,
  turns: Schema.Array(SwarmLogTurn)
})
export type SwarmLogNode = typeof SwarmLogNode.Type
