// The admin protocol (ARCHITECTURE §6): every method of `daemon.sock`, its payload, success and
// error Schemas. Shared by the daemon (RpcServer handlers) and the CLI (RpcClient); docs/protocol.md
// shows each one on the wire. Kept free of daemon imports so the CLI bundle stays small.
// Over 300 lines because it is the one `RpcGroup` of the admin socket: each method is a few lines
// of declaration, and splitting the group would only scatter the protocol's one definition.
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import { Schema } from "effect"
import { AgentNode } from "../domain/agent.js"
import { LogEntry } from "../domain/events.js"
import { AgentId, MessageId, SessionId, TurnId, WorkspaceId } from "../domain/ids.js"
import { RecentMessage, RecentTurn } from "../domain/inspection.js"
import { SessionState } from "../domain/session.js"
import { UsageWithTurns } from "../domain/usage.js"
import { BindMode, WorkspaceSpec } from "../domain/workspace.js"
import { SwarmLanguage } from "../swarm/SwarmNode.js"
import { CronExpr, NodeRef, SwarmAgent, SwarmLogNode, SwarmNodeStatus, SwarmSchedule, SwarmStatus } from "./SwarmRpcs.js"
import { Budget, InboxItem, Remaining } from "../domain/budget.js"
import { TreeCaps } from "../domain/caps.js"

// ---------------------------------------------------------------------------------------------
// Wire errors. `code` is what a JSON-RPC client sees as `error.code` (@effect/rpc copies a
// failure's `code` field there); the CLI maps `_tag` to its exit codes (docs/cli.md).

export const ErrorCode = {
  internal: -32000,
  notFound: -32001,
  invalidInput: -32002,
  unavailable: -32003
} as const

export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {
  code: Schema.optionalWith(Schema.Number, { default: () => ErrorCode.notFound }),
  kind: Schema.Literal("agent", "session", "workspace", "message", "provider", "turn"),
  id: Schema.String,
  message: Schema.String
}) {}

export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  code: Schema.optionalWith(Schema.Number, { default: () => ErrorCode.invalidInput }),
  field: Schema.String,
  message: Schema.String
}) {}

/** The daemon cannot do this now (feature not available yet, shutting down, …). */
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", {
  code: Schema.optionalWith(Schema.Number, { default: () => ErrorCode.unavailable }),
  message: Schema.String
}) {}

/** Anything else that went wrong inside the daemon; the daemon keeps running. */
export class Internal extends Schema.TaggedError<Internal>()("Internal", {
  code: Schema.optionalWith(Schema.Number, { default: () => ErrorCode.internal }),
  message: Schema.String
}) {}

export const RpcError = Schema.Union(NotFound, InvalidInput, Unavailable, Internal)
export type RpcError = typeof RpcError.Type

// ---------------------------------------------------------------------------------------------
// Shapes

/** What a person types for a thing: its id, its name or a unique id prefix (src/daemon/Refs.ts). */
const ref = (what: string) =>
  Schema.String.pipe(Schema.filter((s) => s.trim().length >= 1 && s.length <= 256, {
    message: () => `expected ${what}: a name, an id or a unique id prefix (1-256 characters)`
  }))

/** An agent: id, name, unique id prefix, or its session's id. */
export const AgentRef = ref("an agent")
/** A workspace: id, name or unique id prefix. */
export const WorkspaceRef = ref("a workspace")
/** A session: id or unique id prefix, or an agent reference (that agent's session). */
export const SessionRef = ref("a session")
/** A recorded turn of a workspace: id or unique id prefix (`substrat workspace log`). */
export const TurnRef = ref("a turn")

/** The text of one message from USER. */
export const MessageText = Schema.String.pipe(Schema.maxLength(512 * 1024))

/** The daemon's storage health (daemon/Storage.ts). */
export const StorageStatus = Schema.Struct({
  mode: Schema.Literal("ok", "read-only"),
  /** Why read-only (null when ok). */
  reason: Schema.NullOr(Schema.String),
  /** Free bytes under the home at the last probe (null: unknown). */
  free_bytes: Schema.NullOr(Schema.Number),
  /** Read-only since start-up: only a restart leaves it (recovery's writes must run first). */
  restart_needed: Schema.Boolean
})
export type StorageStatus = typeof StorageStatus.Type

export const DaemonStatus = Schema.Struct({
  pid: Schema.Number,
  version: Schema.String,
  home: Schema.String,
  socket: Schema.String,
  started_at: Schema.String,
  uptime_ms: Schema.Number,
  slots: Schema.Number,
  grace_ms: Schema.Number,
  agents: Schema.Number,
  sessions: Schema.Number,
  connections: Schema.Number,
  /** Read-only when the home's disk is full or failing (docs/reliability.md). */
  storage: Schema.optional(StorageStatus)
})
export type DaemonStatus = typeof DaemonStatus.Type

export const SessionInfo = Schema.Struct({
  id: SessionId,
  state: SessionState,
  provider_name: Schema.String,
  model: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  suspended_at: Schema.NullOr(Schema.String),
  agent_id: Schema.NullOr(AgentId),
  agent_name: Schema.NullOr(Schema.String)
})
export type SessionInfo = typeof SessionInfo.Type

export const Usage = UsageWithTurns
export type Usage = typeof Usage.Type

/** A busy agent's running turn: since when, and its current step (src/daemon/Progress.ts). */
export const AgentActivity = Schema.Struct({
  agent_id: AgentId,
  turn_id: Schema.String,
  since: Schema.String,
  /** e.g. `waiting for the model`, `model streaming`, `tool send_message → bob (request)`. */
  step: Schema.String,
  step_since: Schema.String
})
export type AgentActivity = typeof AgentActivity.Type

export const InspectResult = Schema.Struct({
  agent: AgentNode,
  session: Schema.NullOr(SessionInfo),
  parent: Schema.NullOr(Schema.String),
  children: Schema.Array(AgentNode),
  /** Messages waiting in the agent's inbox. */
  inbox: Schema.Number,
  queued_turns: Schema.Number,
  waiting_for_replies: Schema.Number,
  usage: Schema.Struct({ own: Usage, subtree: Usage }),
  recent_turns: Schema.Array(RecentTurn),
  recent_messages: Schema.Array(RecentMessage),
  /** Its running turn, when it has one. */
  activity: Schema.optional(Schema.NullOr(AgentActivity))
})
export type InspectResult = typeof InspectResult.Type

/** One item of `agent.attach`: what the agent says and hears, live. */
export const OutputEvent = Schema.Struct({
  ts: Schema.String,
  agent_id: AgentId,
  kind: Schema.Literal("text", "message", "turn.start", "turn.complete", "tool", "error", "state"),
  /** For `message`: the sender's and recipient's names. */
  from: Schema.optional(Schema.String),
  to: Schema.optional(Schema.String),
  text: Schema.String
})
export type OutputEvent = typeof OutputEvent.Type

// ---------------------------------------------------------------------------------------------
// Methods

export class DaemonStatusRpc extends Rpc.make("daemon.status", { success: DaemonStatus, error: RpcError }) {}
export class DaemonStopRpc extends Rpc.make("daemon.stop", {
  success: Schema.Struct({ pid: Schema.Number, stopping: Schema.Boolean })
}) {}

// Budgets and the human inbox (docs/budgets.md)

const Limit = Schema.NullOr(Schema.Number.pipe(Schema.nonNegative()))

/** Limits to set: absent keeps a limit, null removes it. */
export const BudgetPatch = Schema.Struct({
  usd: Schema.optional(Limit),
  tokens: Schema.optional(Limit),
  turns: Schema.optional(Limit),
  time_s: Schema.optional(Limit)
})
export type BudgetPatch = typeof BudgetPatch.Type

export const BudgetView = Schema.Struct({
  agent_id: AgentId,
  agent_name: Schema.String,
  /** The agent's own subtree budget (null: none; it shares its ancestors'). */
  budget: Schema.NullOr(Budget),
  /** What the subtree used (cache tokens included). */
  used: UsageWithTurns,
  remaining: Schema.NullOr(Remaining),
  /** Why the agent cannot work now (its own or an ancestor's budget spent), else null. */
  exhausted: Schema.NullOr(Schema.String),
  /** The inbox item of its spent budget, while the human has not raised it. */
  breach: Schema.NullOr(Schema.Struct({ item_id: Schema.String, reason: Schema.String }))
})
export type BudgetView = typeof BudgetView.Type

export class BudgetSetRpc extends Rpc.make("budget.set", {
  payload: { agent: AgentRef, ...BudgetPatch.fields },
  success: BudgetView,
  error: RpcError
}) {}

export class BudgetShowRpc extends Rpc.make("budget.show", {
  payload: { agent: AgentRef },
  success: BudgetView,
  error: RpcError
}) {}

/** A tree's caps (docs/budgets.md, "Caps"): the root's own, those in force (0: none), the policy. */
export const CapsView = Schema.Struct({
  root_id: AgentId,
  root_name: Schema.String,
  /** The root's own caps (`agent create --max-*`, `caps set`); null: the config's. */
  own: TreeCaps,
  /** What holds now: the root's own over the config's `caps.*` (0: no cap). */
  in_force: Schema.Struct({ max_depth: Schema.Number, max_children: Schema.Number, max_live: Schema.Number }),
  policy: Schema.Literal("queue", "refuse"),
  /** Spawns of this tree waiting for room. */
  queued: Schema.Number
})
export type CapsView = typeof CapsView.Type

/** Caps to change: an absent key keeps its value, null returns it to the config's, 0 is no cap. */
export const CapsPatch = Schema.Struct({
  max_depth: Schema.optional(TreeCaps.fields.max_depth),
  max_children: Schema.optional(TreeCaps.fields.max_children),
  max_live: Schema.optional(TreeCaps.fields.max_live)
})
export type CapsPatch = typeof CapsPatch.Type

export class CapsSetRpc extends Rpc.make("caps.set", {
  payload: { agent: AgentRef, ...CapsPatch.fields },
  success: CapsView,
  error: RpcError
}) {}

export class CapsShowRpc extends Rpc.make("caps.show", {
  payload: { agent: AgentRef },
  success: CapsView,
  error: RpcError
}) {}

export class InboxListRpc extends Rpc.make("inbox.list", {
  success: Schema.Struct({ items: Schema.Array(InboxItem) }),
  error: RpcError
}) {}

export class InboxAnswerRpc extends Rpc.make("inbox.answer", {
  payload: { id: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(128)), text: MessageText },
  success: Schema.Struct({
    id: Schema.String,
    kind: Schema.Literal("question", "stop", "cancel", "read"),
    agent_id: AgentId,
    agent_name: Schema.String
  }),
  error: RpcError
}) {}

export class AgentCreateRpc extends Rpc.make("agent.create", {
  payload: {
    name: Schema.optional(Schema.String),
    instructions: Schema.optional(Schema.String),
    provider: Schema.optional(Schema.String),
    role: Schema.optional(Schema.String),
    /** A workspace reference (id, name or unique id prefix). */
    workspace_id: Schema.optional(WorkspaceRef),
    /** The new root's subtree budget (docs/budgets.md). */
    budget: Schema.optional(BudgetPatch),
    /** The new tree's own caps (docs/budgets.md, "Caps"); absent/null fields: the config's. */
    caps: Schema.optional(Schema.partial(TreeCaps))
  },
  success: AgentNode,
  error: RpcError
}) {}

const AgentListParams = Schema.Struct({ all: Schema.optional(Schema.Boolean) })

export class AgentListRpc extends Rpc.make("agent.list", {
  /** `all`: terminated agents too (state `terminated`), after the live tree. No params: live only. */
  payload: Schema.UndefinedOr(AgentListParams),
  /** `activity`: the running turn of each busy agent. */
  success: Schema.Struct({ agents: Schema.Array(AgentNode), activity: Schema.optional(Schema.Array(AgentActivity)) }),
  error: RpcError
}) {}

/** The answer to USER's request (docs/messaging.md, "When a user's request is answered"). */
export const UserAnswer = Schema.Struct({
  message_id: MessageId,
  text: Schema.String,
  timestamp: Schema.String,
  /** The agent failed to answer (its turn failed, it was terminated, …): `text` says why. */
  error: Schema.Boolean
})
export type UserAnswer = typeof UserAnswer.Type

export class AgentSendRpc extends Rpc.make("agent.send", {
  payload: {
    agent: AgentRef,
    text: MessageText,
    sync: Schema.optional(Schema.Boolean),
    /** Wait for the answer (sync only) and return it; `Unavailable` when `timeout_s` passes first. */
    wait: Schema.optional(Schema.Boolean),
    timeout_s: Schema.optional(Schema.Number.pipe(Schema.positive(), Schema.finite()))
  },
  success: Schema.Struct({ message_id: MessageId, agent_id: AgentId, answer: Schema.optional(UserAnswer) }),
  error: RpcError
}) {}

/**
 * Wait (again) for the answer to USER's request to an agent — e.g. after the daemon went away
 * during `agent send --wait`. `message_id`: the request (full id or unique prefix); absent: the
 * agent's latest open request from USER, else the one answered last. At once when it was already
 * answered; `Unavailable` when `timeout_s` passes first.
 */
export class AgentWaitRpc extends Rpc.make("agent.wait", {
  payload: {
    agent: AgentRef,
    message_id: Schema.optional(Schema.String),
    timeout_s: Schema.optional(Schema.Number.pipe(Schema.positive(), Schema.finite()))
  },
  success: Schema.Struct({ message_id: MessageId, agent_id: AgentId, answer: UserAnswer }),
  error: RpcError
}) {}

export class AgentAttachRpc extends Rpc.make("agent.attach", {
  payload: { agent: AgentRef },
  success: OutputEvent,
  error: RpcError,
  stream: true
}) {}

export class AgentInspectRpc extends Rpc.make("agent.inspect", {
  payload: { agent: AgentRef },
  success: InspectResult,
  error: RpcError
}) {}

export class AgentTerminateRpc extends Rpc.make("agent.terminate", {
  payload: { agent: AgentRef },
  /** The agent first, then its subtree. */
  success: Schema.Struct({ agent_id: AgentId, terminated: Schema.Array(AgentId) }),
  error: RpcError
}) {}

/** Lift a crash-loop quarantine: the agent's held turns run again. */
export class AgentResumeRpc extends Rpc.make("agent.resume", {
  payload: { agent: AgentRef },
  /** `turns`: the held turns released. */
  success: Schema.Struct({ agent_id: AgentId, turns: Schema.Number }),
  error: RpcError
}) {}

/** The transcript (seed 000 §9), line by line; with `follow`, keeps streaming new lines. */
export class AgentLogsRpc extends Rpc.make("agent.logs", {
  payload: { agent: AgentRef, follow: Schema.optional(Schema.Boolean) },
  success: Schema.String,
  error: RpcError,
  stream: true
}) {}

/** One item of `events.follow`: an entry of an agent's event log, or the end of the backlog. */
export const FeedItem = Schema.Union(
  Schema.Struct({
    kind: Schema.Literal("event"),
    /** The stream's position after this item: pass it as `from` to resume right after it. */
    cursor: Schema.String,
    session_id: SessionId,
    /** Line of the entry in that session's events.jsonl. */
    line: Schema.Number,
    ts: Schema.String,
    event: Schema.String,
    /** Who it is about: for a message its sender (USER, SYSTEM or an agent's name), else the log's agent. */
    agent: Schema.String,
    /** One line for people (no time, no name); null for bookkeeping entries (usage, deliveries, …). */
    text: Schema.NullOr(Schema.String),
    entry: LogEntry
  }),
  Schema.Struct({ kind: Schema.Literal("live"), cursor: Schema.String })
)
export type FeedItem = typeof FeedItem.Type

/**
 * The daemon's event stream (src/feed/EventFeed.ts): every agent, one agent (`agent`) or an
 * agent's subtree (`tree`), terminated agents included; from the start, from a cursor (`from`:
 * an item's `cursor`, so nothing is missed or repeated across a reconnect or a daemon restart),
 * or from now (`from: "end"`); `after` (ISO time) skips older backlog entries. After the backlog
 * comes one `live` item; with `follow` the stream then goes on with new entries, else it ends.
 */
export class EventsFollowRpc extends Rpc.make("events.follow", {
  payload: {
    agent: Schema.optional(AgentRef),
    tree: Schema.optional(AgentRef),
    from: Schema.optional(Schema.String),
    after: Schema.optional(Schema.String),
    follow: Schema.optional(Schema.Boolean)
  },
  success: FeedItem,
  error: RpcError,
  stream: true
}) {}

export class SessionListRpc extends Rpc.make("session.list", {
  success: Schema.Struct({ sessions: Schema.Array(SessionInfo) }),
  error: RpcError
}) {}
export class SessionSuspendRpc extends Rpc.make("session.suspend", {
  payload: { session: SessionRef },
  success: SessionInfo,
  error: RpcError
}) {}
export class SessionResumeRpc extends Rpc.make("session.resume", {
  payload: { session: SessionRef },
  success: SessionInfo,
  error: RpcError
}) {}
export class SessionDeleteRpc extends Rpc.make("session.delete", {
  payload: { session: SessionRef },
  success: Schema.Struct({ session: SessionId, deleted: Schema.Boolean }),
  error: RpcError
}) {}

export class WorkspaceCreateRpc extends Rpc.make("workspace.create", {
  payload: {
    name: Schema.optional(Schema.String),
    parent: Schema.optional(WorkspaceRef),
    network: Schema.optional(Schema.Boolean)
  },
  success: WorkspaceSpec,
  error: RpcError
}) {}
export class WorkspaceListRpc extends Rpc.make("workspace.list", {
  success: Schema.Struct({ workspaces: Schema.Array(WorkspaceSpec) }),
  error: RpcError
}) {}
export class WorkspaceLinkRpc extends Rpc.make("workspace.link", {
  payload: {
    workspace: WorkspaceRef,
    host_path: Schema.String,
    mount_path: Schema.String,
    mode: Schema.optional(BindMode)
  },
  success: WorkspaceSpec,
  error: RpcError
}) {}
export class WorkspaceDeleteRpc extends Rpc.make("workspace.delete", {
  /** `force`: delete even while an agent uses it (or a descendant), and with child workspaces. */
  payload: { workspace: WorkspaceRef, force: Schema.optional(Schema.Boolean) },
  /** `removed`: every workspace deleted (children first, then this one). */
  success: Schema.Struct({
    workspace: WorkspaceId,
    deleted: Schema.Boolean,
    removed: Schema.optional(Schema.Array(WorkspaceId))
  }),
  error: RpcError
}) {}

/** One changed path of a turn (relative to the workspace's own root). */
export const ChangedPath = Schema.Struct({
  path: Schema.String,
  change: Schema.Literal("added", "modified", "deleted")
})

/** What one turn changed (with `turn`), or what changed since the last recorded turn (without). */
export class WorkspaceDiffRpc extends Rpc.make("workspace.diff", {
  payload: { workspace: WorkspaceRef, turn: Schema.optional(TurnRef) },
  success: Schema.Struct({
    workspace: WorkspaceId,
    turn: Schema.NullOr(TurnId),
    paths: Schema.Array(ChangedPath),
    /** Unified diff (git format), paths relative to the workspace root. */
    diff: Schema.String
  }),
  error: RpcError
}) {}

/** A history commit made for a turn: revert's, or record's. commit null: nothing to commit. */
const TurnCommitResult = Schema.Struct({
  workspace: WorkspaceId,
  turn: TurnId,
  commit: Schema.NullOr(Schema.String),
  paths: Schema.Array(ChangedPath)
})

/** Undo one recorded turn with a new history commit (null when there was nothing left to undo). */
export class WorkspaceRevertRpc extends Rpc.make("workspace.revert", {
  payload: { workspace: WorkspaceRef, turn: TurnRef },
  success: TurnCommitResult,
  error: RpcError
}) {}

/**
 * Record what changed in a workspace since its last recorded turn as one turn of `author`
 * (`substrat workspace shell`: the human's changes). commit null: nothing changed.
 */
export class WorkspaceRecordRpc extends Rpc.make("workspace.record", {
  payload: {
    workspace: WorkspaceId,
    author: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64)),
    summary: Schema.optional(Schema.String.pipe(Schema.maxLength(200)))
  },
  success: TurnCommitResult,
  error: RpcError
}) {}

/** Recorded turns touching a workspace, newest first. */
export class WorkspaceLogRpc extends Rpc.make("workspace.log", {
  payload: { workspace: WorkspaceRef, limit: Schema.optional(Schema.Number) },
  success: Schema.Struct({
    workspace: WorkspaceId,
    turns: Schema.Array(Schema.Struct({
      commit: Schema.String,
      turn_id: Schema.NullOr(Schema.String),
      agent: Schema.String,
      time: Schema.String,
      subject: Schema.String
    }))
  }),
  error: RpcError
}) {}

// Swarm mode (shapes in SwarmRpcs.ts)

export class SwarmStartRpc extends Rpc.make("swarm.start", {
  payload: {
    /** Absolute path of the code tree. */
    path: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(4096)),
    provider: Schema.optional(Schema.String),
    languages: Schema.optional(Schema.Array(SwarmLanguage)),
    name: Schema.optional(Schema.String),
    /** The swarm-wide schedule: the root directory node's (docs/swarm.md, "Schedules"). */
    cron: Schema.optional(CronExpr)
  },
  success: SwarmStatus,
  error: RpcError
}) {}
export class SwarmStopRpc extends Rpc.make("swarm.stop", { success: SwarmStatus, error: RpcError }) {}
export class SwarmStatusRpc extends Rpc.make("swarm.status", {
  success: Schema.Struct({ swarm: Schema.NullOr(SwarmStatus) }),
  error: RpcError
}) {}
export class SwarmAgentsRpc extends Rpc.make("swarm.agents", {
  payload: { parent: Schema.optional(NodeRef), status: Schema.optional(Schema.Array(SwarmNodeStatus)) },
  success: Schema.Struct({ agents: Schema.Array(SwarmAgent) }),
  error: RpcError
}) {}
export class SwarmAgentRpc extends Rpc.make("swarm.agent", {
  payload: { node: NodeRef },
  success: SwarmAgent,
  error: RpcError
}) {}
export class SwarmChatRpc extends Rpc.make("swarm.chat", {
  payload: { node: NodeRef, text: MessageText, wait: Schema.optional(Schema.Boolean) },
  success: Schema.Struct({
    message_id: MessageId,
    agent_id: AgentId,
    node_id: Schema.String,
    /** With `wait`: the agent's answer. */
    reply: Schema.NullOr(Schema.String)
  }),
  error: RpcError
}) {}
export class SwarmTriggerRpc extends Rpc.make("swarm.trigger", {
  payload: { node: NodeRef },
  success: Schema.Struct({ message_id: MessageId, agent_id: AgentId, node_id: Schema.String }),
  error: RpcError
}) {}
/** Set (or replace) a node's cron schedule. */
export class SwarmScheduleRpc extends Rpc.make("swarm.schedule", {
  payload: { node: NodeRef, cron: CronExpr },
  success: SwarmSchedule,
  error: RpcError
}) {}
export class SwarmUnscheduleRpc extends Rpc.make("swarm.unschedule", {
  payload: { node: NodeRef },
  success: SwarmSchedule,
  error: RpcError
}) {}
/** Per node agent (or one node), its turns and the files each changed. */
export class SwarmLogRpc extends Rpc.make("swarm.log", {
  payload: { node: Schema.optional(NodeRef) },
  success: Schema.Struct({ nodes: Schema.Array(SwarmLogNode) }),
  error: RpcError
}) {}
export class SwarmSchedulesRpc extends Rpc.make("swarm.schedules", {
  success: Schema.Struct({ schedules: Schema.Array(SwarmSchedule) }),
  error: RpcError
}) {}


export class AdminRpcs extends RpcGroup.make(
  DaemonStatusRpc,
  DaemonStopRpc,
  AgentCreateRpc,
  AgentListRpc,
  AgentSendRpc,
  AgentWaitRpc,
  AgentAttachRpc,
  AgentInspectRpc,
  AgentTerminateRpc,
  AgentResumeRpc,
  AgentLogsRpc,
  EventsFollowRpc,
  SessionListRpc,
  SessionSuspendRpc,
  SessionResumeRpc,
  SessionDeleteRpc,
  WorkspaceCreateRpc,
  WorkspaceListRpc,
  WorkspaceLinkRpc,
  WorkspaceDeleteRpc,
  WorkspaceDiffRpc,
  WorkspaceRevertRpc,
  WorkspaceLogRpc,
  WorkspaceRecordRpc,
  SwarmStartRpc,
  SwarmStopRpc,
  SwarmStatusRpc,
  SwarmAgentsRpc,
  SwarmAgentRpc,
  SwarmChatRpc,
  SwarmTriggerRpc,
  SwarmScheduleRpc,
  SwarmUnscheduleRpc,
  SwarmSchedulesRpc,
  SwarmLogRpc,
  BudgetSetRpc,
  BudgetShowRpc,
  CapsSetRpc,
  CapsShowRpc,
  InboxListRpc,
  InboxAnswerRpc
) {}

/** Every method name, for the frame guard and the docs. */
export const methodNames: ReadonlyArray<string> = Array.from(AdminRpcs.requests.keys())
