// The event catalog (ARCHITECTURE §5, docs/events.md). Every line of `events.jsonl` is
// `{"ts", "event", "data", ...context}`; this file is the stability contract: old lines must
// keep decoding. Add events and optional fields; never rename or retype an existing one.
// Over 300 lines because it is the catalog: every event's data Schema and the union of them in one
// place, so an event's wire shape is found (and kept stable) by reading one file.
import { Schema } from "effect"
import { AgentId, MessageId, SessionId, TurnId, WorkspaceId } from "./ids.js"
import { ApprovePolicy } from "./agent.js"
import { Budget } from "./budget.js"
import { BudgetShare, TreeCaps } from "./caps.js"
import { MessageEnvelopeFromLog } from "./message.js"

/**
 * Any JSON value (null, boolean, string, finite number, arrays and plain objects of those).
 * Tool arguments/results are opaque but must survive the JSON line: a value JSON cannot carry
 * (NaN, undefined, a function, …) fails the encode instead of being written lossily.
 */
export type JsonValue = null | boolean | number | string | ReadonlyArray<JsonValue> | { readonly [k: string]: JsonValue }
export const isJsonValue = (u: unknown): u is JsonValue => {
  if (u === null || typeof u === "boolean" || typeof u === "string") return true
  if (typeof u === "number") return Number.isFinite(u)
  if (Array.isArray(u)) return u.every(isJsonValue)
  if (typeof u === "object") {
    const proto = Object.getPrototypeOf(u)
    return (proto === Object.prototype || proto === null) && Object.values(u).every(isJsonValue)
  }
  return false
}
/** Typed `unknown` (callers pass opaque values); checked to be a JsonValue on encode and decode. */
export const JsonValue: Schema.Schema<unknown> = Schema.declare((u: unknown): u is unknown => isJsonValue(u), {
  identifier: "JsonValue",
  description: "a JSON value",
  arbitrary: () => (fc) => fc.jsonValue()
})

const event = <const E extends string, D extends Schema.Schema.AnyNoContext>(name: E, data: D) =>
  Schema.Struct({ event: Schema.Literal(name), data })

export const SessionCreatedData = Schema.Struct({
  provider: Schema.String,
  model: Schema.NullOr(Schema.String),
  system_prompt: Schema.String
})
export const TurnStartData = Schema.Struct({ turn_id: TurnId, prompt: Schema.String })
/**
 * `duration_ms`: from just before `turn.start` was appended to just before this entry was, on the
 * daemon's monotonic clock (µs precision; what the two entries' `ts`, in ms, measure). Absent in
 * logs written before it existed.
 */
export const TurnCompleteData = Schema.Struct({ turn_id: TurnId, response: Schema.String, duration_ms: Schema.optional(Schema.JsonNumber) })
export const SuspendResultData = Schema.Struct({ state_size: Schema.JsonNumber })
export const SessionRestoredData = Schema.Struct({ provider: Schema.String, model: Schema.NullOr(Schema.String) })
export const AgentCreatedData = Schema.Struct({
  agent_id: AgentId,
  name: Schema.String,
  parent_session_id: Schema.NullOr(SessionId),
  instructions: Schema.String,
  role: Schema.String,
  provider: Schema.String,
  workspace: Schema.NullOr(WorkspaceId),
  /** Its ACP permission policy (`agent create --approve`, or its parent's); absent: the config's. */
  approve: Schema.optional(ApprovePolicy)
})
export const AgentTerminatedData = Schema.Struct({ agent_id: AgentId })
/**
 * Start-up recovery stopped re-running this agent's turns: the daemon died `attempts` times in
 * a row while one of its turns was in flight (a crash loop). Its turns wait until `agent.resumed`.
 */
export const AgentQuarantinedData = Schema.Struct({
  agent_id: AgentId,
  attempts: Schema.JsonNumber,
  /** The prompt of the turn that was in flight (excerpt). */
  prompt: Schema.String
})
/** The user lifted the agent's quarantine (`agent resume`): its held turns run again. */
export const AgentResumedData = Schema.Struct({ agent_id: AgentId })
/** The envelope; older lines carry its typed fields in `metadata` (domain/message.ts). */
export const MessageEnqueuedData = MessageEnvelopeFromLog
export const MessageDeliveredData = Schema.Struct({ message_id: MessageId })
/**
 * A `find:<symbol>` hop (logged in this agent's log) was passed on by the daemon: to the next
 * hop (`next_message_id` in `to`'s log), or ended here (`to` null: not found, the searcher told).
 */
export const MessageForwardedData = Schema.Struct({
  message_id: MessageId,
  to: Schema.NullOr(AgentId),
  next_message_id: Schema.NullOr(MessageId)
})
/** A sync request (logged in the SENDER's log) got no reply within its `timeout_s`. */
export const MessageTimedOutData = Schema.Struct({
  message_id: MessageId,
  recipient: AgentId,
  recipient_name: Schema.String,
  timeout_s: Schema.JsonNumber
})
/** `provider`: the backend's own tool (claude's Write, codex's exec_command); absent: a Substrat tool. */
export const ToolSource = Schema.Literal("provider")
export const ToolCallInvokedData = Schema.Struct({
  call_id: Schema.String,
  tool: Schema.String,
  arguments: JsonValue,
  source: Schema.optional(ToolSource)
})
export const ToolCallResultData = Schema.Struct({
  call_id: Schema.String,
  tool: Schema.String,
  result: JsonValue,
  is_error: Schema.Boolean,
  source: Schema.optional(ToolSource)
})
export const ProviderErrorData = Schema.Struct({
  turn_id: Schema.NullOr(TurnId),
  reason: Schema.String,
  message: Schema.String,
  /**
   * Set when the turn failed because a budget on the agent's path ran out: the turn is parked,
   * not failed — nobody is answered, the messages it read are pending again and wait (with a
   * note saying why, this text) until a raise re-runs it or the subtree is stopped.
   */
  parked: Schema.optional(Schema.String)
})
/**
 * Tokens and cost. `source: "request"`: one model request metered at the model forwarder (or by
 * the openai provider's own calls) — the source of truth. Absent: a turn's total as its provider
 * reported it; it counts only for a turn without request-level events (providers not metered).
 */
export const UsageData = Schema.Struct({
  turn_id: Schema.NullOr(TurnId),
  input_tokens: Schema.JsonNumber,
  output_tokens: Schema.JsonNumber,
  cost_usd: Schema.JsonNumber,
  cache_read_tokens: Schema.optional(Schema.JsonNumber),
  cache_write_tokens: Schema.optional(Schema.JsonNumber),
  source: Schema.optional(Schema.Literal("request")),
  model: Schema.optional(Schema.NullOr(Schema.String)),
  /** The `usage.reserved` this request settles (its hold is released). */
  reservation_id: Schema.optional(Schema.String)
})
/**
 * A model request's most expensive outcome, held against every budget on the agent's path
 * before the request leaves (docs/budgets.md, "Reservations"): input estimated from the body,
 * output at the request's own cap. Settled by a `usage` with the same `reservation_id`; one
 * never settled (the daemon died mid-request) counts at this size on recovery.
 */
export const UsageReservedData = Schema.Struct({
  reservation_id: Schema.String,
  turn_id: Schema.NullOr(TurnId),
  model: Schema.NullOr(Schema.String),
  input_tokens: Schema.JsonNumber,
  output_tokens: Schema.JsonNumber,
  cost_usd: Schema.JsonNumber
})
/** A request to the agent's model forwarder outside its allowlist: refused (403), never relayed. */
export const ForwarderRefusedData = Schema.Struct({
  method: Schema.String,
  /** The request target as sent (at most 200 characters). */
  path: Schema.String,
  reason: Schema.String,
  /** Refusals not logged since the last one (the log keeps a few per minute). */
  suppressed: Schema.optional(Schema.Number)
})
/** The agent's subtree budget (docs/budgets.md); the last one logged is in force. */
export const BudgetSetData = Budget
/** The agent's subtree budget is spent: an inbox item until a `budget.set` raises it (or the agent goes). */
export const BudgetBreachedData = Schema.Struct({ item_id: Schema.String, reason: Schema.String })
/** `ask_human`: the agent is parked until the human answers (`human.answered`, same item id). */
export const HumanAskedData = Schema.Struct({ item_id: Schema.String, question: Schema.String })
export const HumanAnsweredData = Schema.Struct({ item_id: Schema.String, answer: Schema.String })
/**
 * An ACP agent's permission request under `approve = ask` (src/provider/acp/Asks.ts): an inbox item
 * until its `permission.answered`. `key` identifies the question (its text and the tool's input,
 * hashed): a turn re-run after a restart that asks the same question gets the same item, or the
 * answer already given.
 */
export const PermissionAskedData = Schema.Struct({ item_id: Schema.String, key: Schema.String, question: Schema.String })
export const PermissionAnsweredData = Schema.Struct({ item_id: Schema.String, choice: Schema.Literal("allow", "allow-always", "reject") })
/**
 * A permission question of an ACP agent (`permission.asked`), with the human's logged choice
 * (`permission.answered`) or null: what recovery's fold keeps of an unfinished turn's questions.
 */
export interface LoggedPermission {
  readonly item_id: string
  readonly key: string
  readonly choice: Schema.Schema.Type<typeof PermissionAnsweredData>["choice"] | null
}
/** A root's own tree caps (docs/budgets.md, "Caps"); null fields: the config's. The last one logged is in force. */
export const CapsSetData = TreeCaps
/**
 * A `spawn_agent` beyond a cap, queued (in the PARENT's log) until room frees: everything needed
 * to spawn the child later. Done by its `spawn.started` or `spawn.failed`.
 */
export const SpawnQueuedData = Schema.Struct({
  queue_id: Schema.String,
  name: Schema.String,
  instructions: Schema.String,
  role: Schema.String,
  workspace_subdir: Schema.NullOr(Schema.String),
  /** spawn_agent's `workspace` (absent in logs written before it existed: the default). */
  workspace: Schema.optional(Schema.Literal("shared", "branch")),
  provider: Schema.NullOr(Schema.String),
  budget: Schema.NullOr(BudgetShare),
  /** Which cap it waits for, in words. */
  reason: Schema.String
})
/** A queued spawn's child was born (logged in the parent's log after the child's `agent.created`). */
export const SpawnStartedData = Schema.Struct({ queue_id: Schema.String, agent_id: AgentId })
/** A queued spawn that will not start (its spawn failed when room freed, or the human cancelled it). */
export const SpawnFailedData = Schema.Struct({ queue_id: Schema.String, message: Schema.String })
/** The human read these messages a root sent to USER (`inbox read`, `agent send --wait`): out of the inbox. */
export const UserReadData = Schema.Struct({ message_ids: Schema.Array(MessageId) })
export const WorkspaceDiffData = Schema.Struct({
  workspace_id: WorkspaceId,
  turn_id: TurnId,
  commit: Schema.String,
  paths: Schema.Array(Schema.Struct({ path: Schema.String, change: Schema.Literal("added", "modified", "deleted") }))
})

/**
 * One request through the agent's egress proxy (docs/sandbox.md "Egress"): `method` is the HTTP
 * method or `CONNECT` (a TLS tunnel); `reason` says why it was refused or ended early; bytes are
 * what went up (to the host) and down, counted at the proxy.
 */
export const EgressRequestData = Schema.Struct({
  workspace_id: Schema.NullOr(WorkspaceId),
  host: Schema.String,
  port: Schema.JsonNumber,
  method: Schema.String,
  allowed: Schema.Boolean,
  reason: Schema.NullOr(Schema.String),
  rule: Schema.NullOr(Schema.String),
  status: Schema.NullOr(Schema.JsonNumber),
  bytes_up: Schema.JsonNumber,
  bytes_down: Schema.JsonNumber,
  duration_ms: Schema.JsonNumber,
  /** The inbox item a refusal raised (one per host per workspace), if any. */
  item_id: Schema.optional(Schema.String)
})

/** Two agents' turns that ran at the same time in one workspace changed the same paths (src/daemon/Overlaps.ts). */
export const WorkspaceOverlapData = Schema.Struct({
  workspace_id: WorkspaceId,
  paths: Schema.Array(Schema.String),
  /** The earlier-recorded turn first. */
  turns: Schema.Array(Schema.Struct({ agent_id: AgentId, agent: Schema.String, turn_id: Schema.String })),
  /** Who got a SYSTEM note: the two agents and their nearest common ancestor. */
  notified: Schema.Array(AgentId)
})
/**
 * A branch child's branch entered its parent workspace's merge queue (logged in the parent
 * agent's log, the queue's durable record). Done by its `merge.merged` or `merge.failed`.
 */
export const MergeQueuedData = Schema.Struct({
  item_id: Schema.String,
  /** The workspace merged into (the parent's). */
  workspace_id: WorkspaceId,
  /** The branch child's workspace and branch. */
  from_workspace: WorkspaceId,
  branch: Schema.String,
  agent_id: AgentId,
  agent: Schema.String,
  /** The child's branch head when queued (the merge takes its head at merge time). */
  head: Schema.String
})
/**
 * A branch child's turn recorded changes while a request to it was still open: they wait for the
 * turn that answers (logged in the PARENT agent's log, once until that child's next
 * `merge.queued`; read back after a restart).
 */
export const MergeHeldData = Schema.Struct({
  /** The workspace it will merge into (the parent's). */
  workspace_id: WorkspaceId,
  from_workspace: WorkspaceId,
  agent_id: AgentId,
  agent: Schema.String
})
/** A queue item merged: the parent's branch moved from `previous` to `commit`. */
export const MergeMergedData = Schema.Struct({
  item_id: Schema.String,
  workspace_id: WorkspaceId,
  commit: Schema.String,
  previous: Schema.String,
  fast_forward: Schema.Boolean,
  paths: Schema.Array(Schema.String),
  /** The workspace's check ran and passed. */
  checked: Schema.Boolean,
  /** From `merge.queued` to the branch move, in ms (this daemon process's clock). */
  queued_ms: Schema.Number
})
/** A queue item not merged (nothing moved): a conflict (with its paths) or a failing check (with its output's tail). */
export const MergeFailedData = Schema.Struct({
  item_id: Schema.String,
  workspace_id: WorkspaceId,
  reason: Schema.Literal("conflict", "check", "error"),
  paths: Schema.Array(Schema.String),
  output: Schema.String
})

/** What callers append. */
export const LogEvent = Schema.Union(
  event("session.created", SessionCreatedData),
  event("turn.start", TurnStartData),
  event("turn.complete", TurnCompleteData),
  event("suspend.result", SuspendResultData),
  event("session.restored", SessionRestoredData),
  event("agent.created", AgentCreatedData),
  event("agent.terminated", AgentTerminatedData),
  event("agent.quarantined", AgentQuarantinedData),
  event("agent.resumed", AgentResumedData),
  event("message.enqueued", MessageEnqueuedData),
  event("message.delivered", MessageDeliveredData),
  event("message.forwarded", MessageForwardedData),
  event("message.timed_out", MessageTimedOutData),
  event("tool_call.invoked", ToolCallInvokedData),
  event("tool_call.result", ToolCallResultData),
  event("provider.error", ProviderErrorData),
  event("usage", UsageData),
  event("usage.reserved", UsageReservedData),
  event("forwarder.refused", ForwarderRefusedData),
  event("workspace.diff", WorkspaceDiffData),
  event("workspace.overlap", WorkspaceOverlapData),
  event("merge.queued", MergeQueuedData),
  event("merge.held", MergeHeldData),
  event("merge.merged", MergeMergedData),
  event("merge.failed", MergeFailedData),
  event("budget.set", BudgetSetData),
  event("budget.breached", BudgetBreachedData),
  event("human.asked", HumanAskedData),
  event("human.answered", HumanAnsweredData),
  event("permission.asked", PermissionAskedData),
  event("permission.answered", PermissionAnsweredData),
  event("caps.set", CapsSetData),
  event("spawn.queued", SpawnQueuedData),
  event("spawn.started", SpawnStartedData),
  event("spawn.failed", SpawnFailedData),
  event("user.read", UserReadData),
  event("egress.request", EgressRequestData)
)
export type LogEvent = typeof LogEvent.Type
export type LogEventName = LogEvent["event"]
/** The `data` type of one event name. */
export type EventData<E extends LogEventName> = Extract<LogEvent, { readonly event: E }>["data"]

/** Context fields the log instance injects into every entry. */
export const LogContext = Schema.Struct({ session_id: SessionId })
export type LogContext = typeof LogContext.Type

/** One line of `events.jsonl`, as decoded. */
export const LogEntry = Schema.extend(LogEvent, Schema.Struct({ ts: Schema.String, session_id: SessionId }))
export type LogEntry = typeof LogEntry.Type

/** Decode/encode one JSONL line (without the trailing newline). */
export const LogLine = Schema.parseJson(LogEntry)

export const makeEvent = <E extends LogEventName>(name: E, data: EventData<E>): LogEvent =>
  ({ event: name, data }) as LogEvent
