// Cluster mode (docs/cluster.md): the daemon is also an `@effect/cluster` runner. This module
// composes the engine's pieces — `SocketRunner` (the runner server and its clients over TCP,
// `NodeClusterSocket`), `RunnerHealth.layerPing`, `SqlMessageStorage` and `SqlRunnerStorage` on
// the daemon's Postgres client — with a `ShardingConfig` built from Substrat's own settings
// (`cluster.listen`, `cluster.lease_ms`), not from the engine's `layerFromEnv`, which would read
// generic variables such as HOST and PORT. Placement, shard locks, heartbeats and failure
// detection are the engine's; `ClusterRunner.status` only reads its runner table and computes the
// same shard assignment the engine does (its hash ring over the healthy runners).
import * as MessageStorage from "@effect/cluster/MessageStorage"
import type * as Runner from "@effect/cluster/Runner"
import * as RunnerAddress from "@effect/cluster/RunnerAddress"
import * as RunnerHealth from "@effect/cluster/RunnerHealth"
import * as Runners from "@effect/cluster/Runners"
import * as RunnerStorage from "@effect/cluster/RunnerStorage"
import * as Sharding from "@effect/cluster/Sharding"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as ShardId from "@effect/cluster/ShardId"
import * as SocketRunner from "@effect/cluster/SocketRunner"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import { SqlClient } from "@effect/sql"
import { sqlMessage } from "../storage/internal/sqlSchema.js"
import { Context, Duration, Effect, HashRing, Layer, Option } from "effect"
import type { ClusterDrainResult, ClusterStatus } from "../protocol/admin/cluster.js"
import { Internal, InvalidInput } from "../protocol/admin/common.js"

export interface RunnerSettings {
  readonly host: string
  readonly port: number
  /** A runner that stopped heartbeating is dropped after this long; it heartbeats every quarter of it. */
  readonly leaseMs: number
}

/** The engine's configuration for this runner. */
export const shardingConfig = (s: RunnerSettings): ShardingConfig.ShardingConfig["Type"] => {
  const address = RunnerAddress.make(s.host, s.port)
  return {
    ...ShardingConfig.defaults,
    runnerAddress: Option.some(address),
    runnerListenAddress: Option.some(address),
    shardLockExpiration: Duration.millis(s.leaseMs),
    shardLockRefreshInterval: Duration.millis(Math.max(250, Math.floor(s.leaseMs / 4))),
    refreshAssignmentsInterval: Duration.millis(Math.max(250, Math.min(3000, Math.floor(s.leaseMs / 4)))),
    runnerHealthCheckInterval: Duration.millis(Math.max(1000, Math.floor(s.leaseMs / 2)))
  }
}

/** What `cluster status` shows, read by any runner; `cluster drain` / `undrain` of this runner. */
export class ClusterRunner extends Context.Tag("substrat/daemon/ClusterRunner")<ClusterRunner, {
  readonly status: Effect.Effect<ClusterStatus, string>
  /** Refused (InvalidInput) when no other runner is healthy: its shards would have nowhere to go. */
  readonly drain: Effect.Effect<ClusterDrainResult, InvalidInput | Internal>
  readonly undrain: Effect.Effect<ClusterDrainResult, Internal>
}>() {}

/** host:port (an IPv6 host in brackets), as `--listen` takes it. */
export const addressText = (a: RunnerAddress.RunnerAddress): string => (a.host.includes(":") ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`)

/**
 * The engine's shard assignment (Sharding.ts): one hash ring per shard group over the healthy
 * runners. Shard (ShardId.toString) → the address (addressText) of the runner it is assigned to.
 */
export const shardOwners = (
  config: ShardingConfig.ShardingConfig["Type"],
  runners: ReadonlyArray<readonly [Runner.Runner, boolean]>
): ReadonlyMap<string, string> => {
  const owners = new Map<string, string>()
  for (const group of config.availableShardGroups) {
    const ring = HashRing.make<RunnerAddress.RunnerAddress>()
    for (const [runner, healthy] of runners) {
      if (healthy && runner.groups.includes(group)) HashRing.add(ring, runner.address, { weight: runner.weight })
    }
    const assigned = HashRing.getShards(ring, config.shardsPerGroup) ?? []
    assigned.forEach((address, i) => owners.set(ShardId.make(group, i + 1).toString(), addressText(address)))
  }
  return owners
}

const statusOf = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const config = yield* ShardingConfig.ShardingConfig
  const storage = yield* RunnerStorage.RunnerStorage
  const sharding = yield* Sharding.Sharding
  const self = Option.getOrUndefined(config.runnerAddress)
  return Effect.gen(function*() {
    const runners = yield* storage.getRunners.pipe(Effect.mapError((e) => `cannot read the runners from Postgres: ${String(e.cause ?? e)}`))
    // Trees and versions are keyed by the address as the engine writes it (host:port).
    const [trees, versions] = yield* Effect.all([
      sql<{ runner: string; n: number }>`SELECT runner, count(*)::int AS n FROM substrat_trees GROUP BY runner`,
      sql<{ address: string; version: string; draining: boolean }>`SELECT address, version, draining FROM substrat_runners`
    ]).pipe(Effect.mapError((e) => `cannot read the trees from Postgres: ${sqlMessage(e)}`))
    const treesOn = new Map(trees.map((t) => [t.runner, t.n]))
    const versionOf = new Map(versions.map((v) => [v.address, v.version]))
    const drainingNow = new Set(versions.filter((v) => v.draining).map((v) => v.address))
    const key = (a: RunnerAddress.RunnerAddress) => `${a.host}:${a.port}`
    const counts = new Map<string, number>()
    for (const address of shardOwners(config, runners).values()) counts.set(address, (counts.get(address) ?? 0) + 1)
    let held = 0
    for (const group of config.availableShardGroups) {
      for (let i = 1; i <= config.shardsPerGroup; i++) if (sharding.hasShardId(ShardId.make(group, i))) held++
    }
    return {
      self: self === undefined ? null : addressText(self),
      lease_ms: Duration.toMillis(config.shardLockExpiration),
      shards: config.shardsPerGroup * config.availableShardGroups.length,
      held,
      runners: runners
        .map(([runner, healthy]) => ({
          address: addressText(runner.address),
          healthy,
          shards: counts.get(addressText(runner.address)) ?? 0,
          self: self !== undefined && addressText(runner.address) === addressText(self),
          trees: treesOn.get(key(runner.address)) ?? 0,
          version: versionOf.get(key(runner.address)) ?? null,
          draining: drainingNow.has(key(runner.address))
        }))
        .sort((a, b) => a.address.localeCompare(b.address)),
      trees: trees.reduce((n, t) => n + t.n, 0)
    }
  })
})

/**
 * `cluster drain` / `undrain` of this runner. Draining is recorded in `substrat_runners` and read
 * by the health check (`healthWithDrain`): the engine marks the runner unhealthy, its hash ring
 * leaves it out, its shards go to the others, and its trees follow them (ClusterTrees' handover).
 * The engine never marks its last healthy runner unhealthy, so a drain needs another healthy runner.
 */
const drainOf = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const config = yield* ShardingConfig.ShardingConfig
  const storage = yield* RunnerStorage.RunnerStorage
  const self = Option.getOrThrow(config.runnerAddress)
  const key = `${self.host}:${self.port}`
  const internal = (what: string) => (e: unknown) => new Internal({ message: `cannot ${what}: ${e instanceof Error ? e.message : String(e)}` })
  const result = (draining: boolean) =>
    Effect.map(
      sql<{ n: number }>`SELECT count(*)::int AS n FROM substrat_trees WHERE runner = ${key}`,
      (r) => ({ self: addressText(self), draining, trees: r[0]?.n ?? 0 })
    ).pipe(Effect.mapError(internal("read the trees from Postgres")))
  const mark = (draining: boolean) =>
    sql`UPDATE substrat_runners SET draining = ${draining} WHERE address = ${key}`.pipe(
      Effect.zipRight(storage.setRunnerHealth(self, !draining)),
      Effect.mapError(internal("record the drain in Postgres"))
    )
  const drain = Effect.gen(function*() {
    const runners = yield* Effect.mapError(storage.getRunners, internal("read the runners from Postgres"))
    const others = runners.filter(([r, healthy]) => healthy && addressText(r.address) !== addressText(self))
    if (others.length === 0) {
      return yield* new InvalidInput({
        field: "runner",
        message: `no other healthy runner: the shards of ${addressText(self)} would have nowhere to go (start another runner first)`
      })
    }
    yield* mark(true)
    return yield* result(true)
  })
  return { drain, undrain: Effect.zipRight(mark(false), result(false)) }
})

/**
 * The engine's health check (a ping) that also answers "not alive" for a draining runner, so the
 * engine's own health loop keeps it out of the hash ring (and does not mark it healthy again).
 */
const healthWithDrain = Layer.scoped(RunnerHealth.RunnerHealth, Effect.gen(function*() {
  const ping = yield* RunnerHealth.makePing
  const sql = yield* SqlClient.SqlClient
  const draining = (a: RunnerAddress.RunnerAddress) =>
    sql<{ draining: boolean }>`SELECT draining FROM substrat_runners WHERE address = ${`${a.host}:${a.port}`}`.pipe(
      Effect.map((r) => r[0]?.draining === true),
      Effect.orElseSucceed(() => false)
    )
  return RunnerHealth.RunnerHealth.of({
    isAlive: (address) => Effect.flatMap(draining(address), (d) => (d ? Effect.succeed(false) : ping.isAlive(address)))
  })
}))

/**
 * The runner: the engine's services (Sharding, Runners, MessageStorage, RunnerStorage) and
 * ClusterRunner, on the given SqlClient. Listening fails with the engine's SocketServerError.
 */
export const layer = (s: RunnerSettings) => {
  const config = ShardingConfig.layer(shardingConfig(s))
  const health = healthWithDrain.pipe(Layer.provide(Runners.layerRpc), Layer.provide(NodeClusterSocket.layerClientProtocol))
  const engine = SocketRunner.layer.pipe(
    Layer.provide([NodeClusterSocket.layerSocketServer, NodeClusterSocket.layerClientProtocol]),
    Layer.provide(health),
    Layer.provideMerge(Layer.orDie(SqlMessageStorage.layer)),
    Layer.provideMerge(Layer.orDie(SqlRunnerStorage.layer))
  )
  return Layer.effect(ClusterRunner, Effect.zipWith(statusOf, drainOf, (status, d) => ClusterRunner.of({ status, ...d }))).pipe(
    Layer.provideMerge(engine),
    Layer.provideMerge(config),
    Layer.provide(RpcSerialization.layerMsgPack)
  ) satisfies Layer.Layer<
    ClusterRunner | Sharding.Sharding | Runners.Runners | MessageStorage.MessageStorage | RunnerStorage.RunnerStorage | ShardingConfig.ShardingConfig,
    unknown,
    SqlClient.SqlClient
  >
}
