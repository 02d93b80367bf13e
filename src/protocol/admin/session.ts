// Admin methods `session.*` (docs/protocol.md).
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import { Schema, Struct } from "effect"
import { AgentId, SessionId } from "../../domain/ids.js"
import { Session } from "../../domain/session.js"
import { AdminMiddleware, Mutation, RpcError, SessionRef } from "./common.js"

/** A session's record without its provider blob, and the agent it backs. */
export const SessionInfo = Schema.Struct({
  ...Struct.omit(Session.fields, "provider_state"),
  agent_id: Schema.NullOr(AgentId),
  agent_name: Schema.NullOr(Schema.String)
})
export type SessionInfo = typeof SessionInfo.Type

const SessionListParams = Schema.Struct({
  /** Page size: at most this many sessions, oldest first. */
  limit: Schema.optional(Schema.Int.pipe(Schema.between(1, 100_000))),
  /** Continue after this session id (the previous page's `next`). */
  after: Schema.optional(SessionId)
})

export class SessionListRpc extends Rpc.make("session.list", {
  /**
   * No params: every session, oldest first. With `limit` and/or `after`: one page of that order;
   * `next` (when more follow) is the `after` of the next page; a page after a session deleted since
   * its page was answered starts where it was. Any other `after` no session has: InvalidInput.
   */
  payload: Schema.UndefinedOr(SessionListParams),
  success: Schema.Struct({ sessions: Schema.Array(SessionInfo), next: Schema.optional(SessionId) }),
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

export const SessionGroup = RpcGroup.make(SessionListRpc, SessionSuspendRpc.annotate(Mutation, true), SessionResumeRpc.annotate(Mutation, true), SessionDeleteRpc.annotate(Mutation, true)).middleware(AdminMiddleware)
