// Agent nodes of the tree. The tree itself (pure) lives in src/agent/AgentTree.ts.
import { Schema } from "effect"
import { AgentId, SessionId, WorkspaceId } from "./ids.js"

export const AgentRole = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64))
export type AgentRole = typeof AgentRole.Type

/** `quarantined`: a crash loop stopped its turns until `agent resume` (docs/recovery.md). */
export const AgentState = Schema.Literal("idle", "busy", "waiting", "quarantined", "terminated")
export type AgentState = typeof AgentState.Type

/** What an agent name looks like (checked without a Schema where that is hot: recovery's plan). */
export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/

/** Agent names: what agents address each other by. Unique among siblings. */
export const AgentName = Schema.String.pipe(
  Schema.pattern(NAME_PATTERN, {
    message: () => "agent names are 1-64 characters of letters, digits, '_', '.', '-', starting with a letter or digit"
  })
)
export type AgentName = typeof AgentName.Type

/**
 * How an ACP agent's permission requests are answered (docs/providers.md "ACP agents"):
 * `auto` allows, `ask` asks the human in the inbox, `reject` refuses. On an agent: its own
 * policy (`agent create --approve`, inherited by its children); absent: the config's `acp.approve`.
 */
export const ApprovePolicy = Schema.Literal("auto", "ask", "reject")
export type ApprovePolicy = typeof ApprovePolicy.Type

export class AgentNode extends Schema.Class<AgentNode>("AgentNode")({
  id: AgentId,
  name: AgentName,
  session_id: SessionId,
  parent_id: Schema.NullOr(AgentId),
  instructions: Schema.String,
  role: AgentRole,
  provider: Schema.String,
  workspace_id: Schema.NullOr(WorkspaceId),
  state: AgentState,
  /** Its ACP permission policy; absent: the config's `acp.approve`. */
  approve: Schema.optional(ApprovePolicy)
}) {}
