// Admin methods `daemon.*` (docs/protocol.md).
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import { Schema } from "effect"
import { AdminMiddleware, RpcError } from "./common.js"

/** The daemon's storage health (daemon/Storage.ts). */
export const StorageStatus = Schema.Struct({
  mode: Schema.Literal("ok", "read-only"),
  /** Why read-only (null when ok). */
  reason: Schema.NullOr(Schema.String),
  /** Free bytes under the home at the last probe (null: unknown). */
  free_bytes: Schema.NullOr(Schema.Number),
  /** Read-only since start-up: only a restart leaves it (recovery's writes must run first). */
  restart_needed: Schema.Boolean,
  /** The first failed write to the daemon's own log (daemon.log), with the count of lines lost since; absent while it is written. */
  log_error: Schema.optional(Schema.String)
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

export class DaemonStatusRpc extends Rpc.make("daemon.status", { success: DaemonStatus, error: RpcError }) {}
export class DaemonStopRpc extends Rpc.make("daemon.stop", {
  success: Schema.Struct({ pid: Schema.Number, stopping: Schema.Boolean })
}) {}

export const DaemonGroup = RpcGroup.make(DaemonStatusRpc, DaemonStopRpc).middleware(AdminMiddleware)
