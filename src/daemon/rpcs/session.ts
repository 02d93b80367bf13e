// Admin methods `session.*` (docs/protocol.md).
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import { Schema } from "effect"
import { AgentId, SessionId } from "../../domain/ids.js"
import { SessionState } from "../../domain/session.js"
import { RpcError, SessionRef } from "./common.js"

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

export const SessionGroup = RpcGroup.make(SessionListRpc, SessionSuspendRpc, SessionResumeRpc, SessionDeleteRpc)
