// Admin methods `cluster.*` (docs/protocol.md, docs/cluster.md).
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import { Schema } from "effect"
import { AdminMiddleware, RpcError } from "./common.js"

export const ClusterRunnerInfo = Schema.Struct({
  /** host:port the runner listens on for the other runners. */
  address: Schema.String,
  /** The engine's health flag (a runner that stops answering pings is marked unhealthy). */
  healthy: Schema.Boolean,
  /** Shards the engine assigns to it (its hash ring over the healthy runners). */
  shards: Schema.Number,
  /** The runner answering this request. */
  self: Schema.Boolean,
  /** Live trees recorded on it (`substrat_trees`). */
  trees: Schema.Number,
  /** The Substrat version it runs (null: it recorded none). */
  version: Schema.NullOr(Schema.String),
  /** `cluster drain`ed: the engine assigns it no shard; its trees are handed over (`trees`: how many are left). */
  draining: Schema.Boolean
})

export const ClusterStatus = Schema.Struct({
  /** This runner's address (null: not a cluster runner). */
  self: Schema.NullOr(Schema.String),
  /** A runner that stops heartbeating is dropped after this many ms. */
  lease_ms: Schema.Number,
  /** Shards in the cluster. */
  shards: Schema.Number,
  /** Shards this runner holds the lock of now. */
  held: Schema.Number,
  /** Runners whose heartbeat is younger than the lease, by address. */
  runners: Schema.Array(ClusterRunnerInfo),
  /** Live trees in the cluster (on a runner of the list, or on one that is gone and not yet taken over). */
  trees: Schema.Number
})
export type ClusterStatus = typeof ClusterStatus.Type

export class ClusterStatusRpc extends Rpc.make("cluster.status", { success: ClusterStatus, error: RpcError }) {}

/** What `cluster.drain` and `cluster.undrain` answer: this runner now. */
export const ClusterDrainResult = Schema.Struct({
  self: Schema.String,
  draining: Schema.Boolean,
  /** Live trees still recorded on this runner (a draining runner hands them over as their turns end). */
  trees: Schema.Number
})
export type ClusterDrainResult = typeof ClusterDrainResult.Type

/** Mark this runner draining: the engine assigns its shards to the other runners, its trees follow. */
export class ClusterDrainRpc extends Rpc.make("cluster.drain", { success: ClusterDrainResult, error: RpcError }) {}
/** This runner takes shards again. */
export class ClusterUndrainRpc extends Rpc.make("cluster.undrain", { success: ClusterDrainResult, error: RpcError }) {}

export const ClusterGroup = RpcGroup.make(ClusterStatusRpc, ClusterDrainRpc, ClusterUndrainRpc).middleware(AdminMiddleware)
