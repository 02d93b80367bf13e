// Admin methods `swarm.*` (docs/swarm.md; their shapes are in ../SwarmRpcs.ts).
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import { Schema } from "effect"
import { AgentId, MessageId } from "../../domain/ids.js"
import { SwarmLanguage } from "../../swarm/SwarmNode.js"
import { CronExpr, NodeRef, SwarmAgent, SwarmLogNode, SwarmNodeStatus, SwarmSchedule, SwarmStatus } from "../SwarmRpcs.js"
import { AdminMiddleware, MessageText, Mutation, RpcError } from "./common.js"

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
/** A node's source: the node's lines of its file (the whole file for a file node), read no-follow within the swarm's root. */
export class SwarmSourceRpc extends Rpc.make("swarm.source", {
  payload: { node: NodeRef },
  success: Schema.Struct({
    node_id: Schema.String,
    path: Schema.String,
    /** The first line shown (1-based). */
    first_line: Schema.Number,
    text: Schema.String
  }),
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

export const SwarmGroup = RpcGroup.make(
  SwarmStartRpc.annotate(Mutation, true),
  SwarmStopRpc.annotate(Mutation, true),
  SwarmStatusRpc,
  SwarmAgentsRpc,
  SwarmAgentRpc,
  SwarmSourceRpc,
  SwarmChatRpc.annotate(Mutation, true),
  SwarmTriggerRpc.annotate(Mutation, true),
  SwarmScheduleRpc.annotate(Mutation, true),
  SwarmUnscheduleRpc.annotate(Mutation, true),
  SwarmSchedulesRpc,
  SwarmLogRpc
).middleware(AdminMiddleware)
