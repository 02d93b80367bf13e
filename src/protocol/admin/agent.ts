// Admin methods `agent.*` (docs/protocol.md).
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import { ParseResult, Schema, SchemaAST, Struct } from "effect"
import { AgentNode, ApprovePolicy } from "../../domain/agent.js"
import { TreeCaps } from "../../domain/caps.js"
import { AgentId, MessageId } from "../../domain/ids.js"
import { AgentBrief, AgentInspection } from "../../domain/inspection.js"
import { QuotaView } from "../../domain/quota.js"
import { AdminMiddleware, AgentRef, BudgetPatch, CheckCommand, EgressHosts, EgressPresets, MessageText, Mutation, RpcError, Traced, WorkspaceRef } from "./common.js"
import { SessionInfo } from "./session.js"

const decodeAgentNode = ParseResult.decodeUnknown(AgentNode)
const encodeAgentNode = ParseResult.encodeUnknown(AgentNode)
/** `AgentNode`'s fields, in its declaration order (the order of the JSON's keys). */
const agentNodeKeys = Object.keys(AgentNode.fields) as Array<keyof typeof AgentNode.fields>
const isObject = (u: unknown): u is object => typeof u === "object" && u !== null && !Array.isArray(u)
/**
 * Whether a JSON object has every field of `AgentNode`, each valid by `AgentNode`'s own field
 * Schemas. Its fields decode to themselves (no field transforms), so such an object needs no
 * decoding: only a check and a copy of its fields.
 */
const hasAgentNodeFields = Schema.is(Schema.Struct(AgentNode.fields))

/**
 * `AgentNode` as the admin methods send it: the same JSON and, decoded, the same checked
 * `AgentNode` instance. Only encoding differs. `AgentNode` itself would check every field of an
 * instance against its refinements again (UUID and name patterns) on every answer, although the
 * instance was checked when it was built; here an `AgentNode` instance is encoded by copying its
 * fields, and any other value goes through `AgentNode`'s own encoding (a plain object with valid
 * fields is accepted, anything else refused, as by `AgentNode`). Decoding takes any JSON object,
 * checks every field with `AgentNode`'s field Schemas and builds the instance from the checked
 * fields (no parse tree per field: a list of thousands of agents is one check each); an object
 * that fails the check is decoded with `AgentNode` itself, for `AgentNode`'s messages. JSON Schema
 * (the OpenAPI document) is `AgentNode`'s, refinements included (the surrogate annotation).
 */
export const AgentNodeOnWire: Schema.Schema<AgentNode, typeof AgentNode.Encoded> = Schema.transformOrFail(
  Schema.declare(
    (u): u is typeof AgentNode.Encoded => isObject(u),
    { identifier: "AgentNode (JSON object)" }
  ),
  Schema.declare((u): u is AgentNode => isObject(u), { identifier: "AgentNode" }),
  {
    strict: true,
    decode: (fields, options) =>
      hasAgentNodeFields(fields)
        ? ParseResult.succeed(new AgentNode(Struct.pick(fields, ...agentNodeKeys), true))
        : decodeAgentNode(fields, options),
    encode: (n, options) =>
      !(n instanceof AgentNode) ? encodeAgentNode(n, options) : ParseResult.succeed(Struct.pick(n, ...agentNodeKeys))
  }
).annotations({ identifier: "AgentNode", [SchemaAST.SurrogateAnnotationId]: AgentNode.ast })

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

const facts = AgentInspection.fields

/**
 * `agent.inspect`: the facts of `AgentInspection` (src/domain/inspection.ts, `inspect_agent`'s
 * result; the same Schemas), with the agent, its children and its session as the admin methods
 * show them, the inbox count named `inbox`, its running turn and its quotas.
 */
export const InspectResult = Schema.Struct({
  agent: AgentNodeOnWire,
  session: Schema.NullOr(SessionInfo),
  parent: facts.parent,
  children: Schema.Array(AgentNodeOnWire),
  /** Messages waiting in the agent's inbox. */
  inbox: facts.pending_inbox,
  queued_turns: facts.queued_turns,
  waiting_for_replies: facts.waiting_for_replies,
  usage: Schema.Struct(Struct.omit(facts.usage.fields, "agent_id")),
  recent_turns: facts.recent_turns,
  recent_messages: facts.recent_messages,
  /** Its running turn, when it has one. */
  activity: Schema.optional(Schema.NullOr(AgentActivity)),
  /** Its quotas: limits in force, use in the current windows, a park (docs/tools.md, "Quotas"). */
  quotas: Schema.optional(QuotaView)
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

export class AgentCreateRpc extends Rpc.make("agent.create", {
  payload: {
    name: Schema.optional(Schema.String),
    instructions: Schema.optional(Schema.String),
    provider: Schema.optional(Schema.String),
    role: Schema.optional(Schema.String),
    /** A workspace reference (id, name or unique id prefix). */
    workspace_id: Schema.optional(WorkspaceRef),
    /** A repository workspace for the new root (not with `workspace_id`): a clone of this repository (docs/sandbox.md). */
    repo: Schema.optional(Schema.String),
    /** With `repo`: the branch or commit to start from (default the repository's HEAD). */
    ref: Schema.optional(Schema.String),
    /** With `repo`: one ignored directory of it bound read-only at the same place (`--bind-ignored`). */
    bind_ignored: Schema.optional(Schema.String),
    /** With `repo`: the check its merge queue runs (`workspace create --check`). */
    check: Schema.optional(CheckCommand),
    /** The new root's subtree budget (docs/budgets.md). */
    budget: Schema.optional(BudgetPatch),
    /** The new tree's own caps (docs/budgets.md, "Caps"); absent/null fields: the config's. */
    caps: Schema.optional(Schema.partial(TreeCaps)),
    /** Added to its workspace's egress policy (docs/sandbox.md "Egress"). */
    allow_hosts: Schema.optional(EgressHosts),
    allow_presets: Schema.optional(EgressPresets),
    /** Its ACP agents' permission policy (docs/providers.md "ACP agents"); its children inherit it; absent: the config's. */
    approve: Schema.optional(ApprovePolicy)
  },
  success: AgentNodeOnWire,
  error: RpcError
}) {}

const AgentListParams = Schema.Struct({
  all: Schema.optional(Schema.Boolean),
  /** Page size: at most this many agents, the tree in pre-order (each agent before its children). */
  limit: Schema.optional(Schema.Int.pipe(Schema.between(1, 100_000))),
  /** Continue after this agent (the previous page's `next`). */
  after: Schema.optional(Schema.String),
  /** Only agents at most this many levels below their root (0: roots only). */
  depth: Schema.optional(Schema.Int.pipe(Schema.nonNegative()))
})

export class AgentListRpc extends Rpc.make("agent.list", {
  /**
   * `all`: terminated agents too (state `terminated`), after the live tree. No params: live only.
   * With `limit`, `after` or `depth`: one page, the live tree in pre-order; `next` (when more
   * follow) is the `after` of the next page. `activity` and `details` cover the page's agents.
   */
  payload: Schema.UndefinedOr(AgentListParams),
  /**
   * `activity`: the running turn of each busy agent. `details`: per live agent, only where there
   * is something to say — dormant (a swarm node agent with no session yet), a turn waiting to start, its own
   * tokens and USD.
   */
  success: Schema.Struct({
    agents: Schema.Array(AgentNodeOnWire),
    activity: Schema.optional(Schema.Array(AgentActivity)),
    details: Schema.optional(Schema.Array(AgentBrief)),
    next: Schema.optional(Schema.String),
    /** Cluster mode (docs/cluster.md): every live tree's root and the runner (host:port) it is on. */
    placement: Schema.optional(Schema.Array(Schema.Struct({ root_id: AgentId, runner: Schema.String })))
  }),
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

export const AgentGroup = RpcGroup.make(
  AgentCreateRpc.annotate(Mutation, true).annotate(Traced, true),
  AgentListRpc,
  AgentSendRpc.annotate(Mutation, true).annotate(Traced, true),
  AgentWaitRpc,
  AgentAttachRpc,
  AgentInspectRpc,
  AgentTerminateRpc.annotate(Mutation, true),
  AgentResumeRpc.annotate(Mutation, true),
  AgentLogsRpc
).middleware(AdminMiddleware)
