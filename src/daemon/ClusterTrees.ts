// Cluster mode's trees (docs/cluster.md): a root agent and its descendants are one `@effect/cluster`
// entity, `Tree`, keyed by the root's id; the engine's shard of that key decides which runner
// the tree lives on. What reaches a tree from outside — create, send, wait, inspect, terminate,
// list — goes through the entity client when the tree is on another runner; on the owner the
// entity's handlers run the same local operations the admin methods run (handlers/Agents.ts).
// `send` is a persisted message of the engine (SqlMessageStorage); its message id is made from the
// request id, so a `send` the engine delivers again after the owner logged it is not logged twice.
// The table `substrat_trees` (storage/internal/sqlSchema.ts) names every live tree: its root's id,
// its name (unique in the cluster, as a root's name is in one daemon) and the runner it is on,
// written by the owner; any runner finds a tree by its root's name or id there.
import type { AlreadyProcessingMessage, MailboxFull, PersistenceError } from "@effect/cluster/ClusterError"
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as Entity from "@effect/cluster/Entity"
import * as EntityId from "@effect/cluster/EntityId"
import * as Sharding from "@effect/cluster/Sharding"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as Rpc from "@effect/rpc/Rpc"
import { SqlClient, type SqlError } from "@effect/sql"
import * as RunnerStorage from "@effect/cluster/RunnerStorage"
import { Cause, Context, Effect, Layer, Option, Schedule, Schema } from "effect"
import { Orchestrator } from "../agent/Orchestrator.js"
import { DaemonConfig } from "../config/DaemonConfig.js"
import { Recovery } from "../recovery/Recovery.js"
import * as Carry from "./ClusterCarry.js"
import { RunnerPresence } from "./ClusterPresence.js"
import { addressText, shardOwners } from "./Cluster.js"
import { AgentId, MessageId } from "../domain/ids.js"
import { createHash } from "node:crypto"
import { InvalidInput, type RpcError, Unavailable } from "../protocol/AdminRpcs.js"
import {
  AgentCreateRpc,
  AgentInspectRpc,
  AgentListRpc,
  AgentNodeOnWire,
  AgentSendRpc,
  AgentTerminateRpc,
  AgentWaitRpc
} from "../protocol/admin/agent.js"
import { RpcError as RpcErrorSchema } from "../protocol/admin/common.js"
import { sqlMessage } from "../storage/internal/sqlSchema.js"

const ListResult = AgentListRpc.successSchema

export const Tree = Entity.make("Tree", [
  Rpc.make("create", { payload: { root_id: AgentId, ...AgentCreateRpc.payloadSchema.fields }, success: AgentNodeOnWire, error: RpcErrorSchema }),
  Rpc.make("send", {
    payload: { request_id: Schema.String, ...AgentSendRpc.payloadSchema.fields },
    success: AgentSendRpc.successSchema,
    error: RpcErrorSchema,
    primaryKey: (p) => p.request_id
  }).annotate(ClusterSchema.Persisted, true),
  Rpc.make("wait", { payload: AgentWaitRpc.payloadSchema.fields, success: AgentWaitRpc.successSchema, error: RpcErrorSchema }),
  Rpc.make("inspect", { payload: AgentInspectRpc.payloadSchema.fields, success: AgentInspectRpc.successSchema, error: RpcErrorSchema }),
  Rpc.make("terminate", { payload: AgentTerminateRpc.payloadSchema.fields, success: AgentTerminateRpc.successSchema, error: RpcErrorSchema }),
  Rpc.make("list", { payload: { root_id: AgentId, all: Schema.Boolean }, success: ListResult, error: RpcErrorSchema })
])

export type TreeClient = ReturnType<Effect.Effect.Success<typeof Tree.client>>

/** A row of `substrat_trees`. */
export interface TreeRow {
  readonly root_id: AgentId
  readonly name: string
  readonly runner: string
}

/** What the admin handlers ask of the cluster (absent on a single daemon). */
export class TreeRouter extends Context.Tag("substrat/daemon/TreeRouter")<TreeRouter, {
  /** This runner's address (host:port). */
  readonly self: string
  /** This runner holds the shard of the tree whose root is `root`. */
  readonly owns: (root: AgentId) => boolean
  /** The entity client of the tree whose root is `root`; its failures are wire errors. */
  readonly client: (root: AgentId) => TreeClient
  /** The live tree whose root's id, unique id prefix (8+ characters) or name is `ref`. */
  readonly find: (ref: string) => Effect.Effect<Option.Option<TreeRow>, RpcError>
  readonly all: Effect.Effect<ReadonlyArray<TreeRow>, RpcError>
  /** Record a new tree on this runner; refused when a live root has that name. */
  readonly claim: (root: AgentId, name: string) => Effect.Effect<void, RpcError>
  /** The tree is gone (its creation failed, or its root was terminated). */
  readonly release: (root: AgentId) => Effect.Effect<void, RpcError>
  /** Note that a `send` with this message id reached its owner: false when it had before. */
  readonly claimSend: (id: MessageId) => Effect.Effect<boolean, RpcError>
}>() {}

/**
 * The message id of the entity's `send` whose request is `request_id`: a name-based UUID (its
 * SHA-256, version 5 layout), the same each time the engine delivers that request.
 */
export const messageIdOf = (request_id: string): MessageId => {
  const h = createHash("sha256").update(`substrat-send:${request_id}`).digest("hex")
  const variant = ((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16)
  return MessageId.make(`${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`)
}

/** What a call to another runner fails with: the owner's wire error, or the engine's. */
export type RemoteFailure = RpcError | MailboxFull | AlreadyProcessingMessage | PersistenceError

/** The engine's failures of a call to another runner, as the wire's Unavailable. */
export const remoteError = (e: RemoteFailure): RpcError =>
  e._tag === "NotFound" || e._tag === "InvalidInput" || e._tag === "Unavailable" || e._tag === "Internal"
    ? e
    : new Unavailable({ message: `the runner holding the tree did not answer (${e._tag}: ${e.message})` })

/**
 * A call to another runner with its failures as wire errors. An interruption that comes back as
 * the call's result (the engine stopped the entity while its shard moved) is Unavailable, so the
 * client gets exit 5 and retries; this request's own interruption is not caught and still
 * interrupts it (the runtime skips the handler for an interrupted fiber).
 */
export const callRemote = <A>(call: Effect.Effect<A, RemoteFailure>): Effect.Effect<A, RpcError> =>
  Effect.catchAllCause(Effect.mapError(call, remoteError), (cause) =>
    Cause.isInterruptedOnly(cause)
      ? Effect.fail(new Unavailable({ message: "the runner holding the tree stopped the call (its shard is moving); retry" }))
      : Effect.failCause(cause))

const unavailable = (e: SqlError.SqlError) => new Unavailable({ message: `cluster storage (Postgres): ${sqlMessage(e)}` })

/** TreeRouter on this runner's Sharding and Postgres client. */
export const layerRouter = (self: string): Layer.Layer<TreeRouter, never, Sharding.Sharding | SqlClient.SqlClient> =>
  Layer.effect(TreeRouter, Effect.gen(function*() {
    const sharding = yield* Sharding.Sharding
    const sql = yield* SqlClient.SqlClient
    const makeClient = yield* Tree.client
    const owns = (root: AgentId) => {
      const id = EntityId.make(root)
      return sharding.hasShardId(sharding.getShardId(id, Tree.getShardGroup(id)))
    }
    const client = (root: AgentId) => makeClient(root)
    const rows = (q: Effect.Effect<ReadonlyArray<{ root_id: string; name: string; runner: string }>, SqlError.SqlError>) =>
      Effect.mapError(Effect.map(q, (rs) => rs.map((r) => ({ root_id: AgentId.make(r.root_id), name: r.name, runner: r.runner }))), unavailable)
    const find = (ref: string) =>
      Effect.map(
        rows(sql`SELECT root_id, name, runner FROM substrat_trees
          WHERE name = ${ref} OR root_id = ${ref} OR (length(${ref}) >= 8 AND root_id LIKE ${`${ref.toLowerCase().replace(/[%_\\]/g, "")}%`})
          ORDER BY root_id LIMIT 2`),
        (found) => {
          const exact = found.find((r) => r.name === ref || r.root_id === ref)
          return exact !== undefined ? Option.some(exact) : found.length === 1 ? Option.some(found[0]!) : Option.none()
        }
      )
    const all = rows(sql`SELECT root_id, name, runner FROM substrat_trees ORDER BY name COLLATE "C"`)
    const claim = (root: AgentId, name: string) =>
      sql`INSERT INTO substrat_trees (root_id, name, runner) VALUES (${root}, ${name}, ${self}) ON CONFLICT DO NOTHING RETURNING root_id`.pipe(
        Effect.mapError(unavailable),
        Effect.flatMap((r) =>
          r.length > 0 ? Effect.void : Effect.fail(new InvalidInput({ field: "name", message: `a root agent named "${name}" exists in the cluster` }))
        )
      )
    // The tree's saved provider states go with it (ClusterCarry.ts); its workspaces' rows stay (a workspace may outlive its tree).
    const release = (root: AgentId) =>
      Effect.asVoid(Effect.mapError(
        sql.withTransaction(Effect.zipRight(
          sql`DELETE FROM substrat_provider_state WHERE tree_root = ${root}`,
          sql`DELETE FROM substrat_trees WHERE root_id = ${root}`
        )),
        unavailable
      ))
    const claimSend = (id: MessageId) =>
      Effect.map(
        Effect.mapError(sql`INSERT INTO substrat_sends (message_id) VALUES (${id}) ON CONFLICT DO NOTHING RETURNING message_id`, unavailable),
        (r) => r.length > 0
      )
    return TreeRouter.of({ self, owns, client, find, all, claim, release, claimSend })
  }))

/** Trees this runner takes over from a runner that is gone (their shard is this runner's now). */
export class TreeTakeover extends Context.Tag("substrat/daemon/TreeTakeover")<TreeTakeover, {
  /** The tree whose root is `root` is here once this returns, if this runner holds it and it lives. */
  readonly ensure: (root: AgentId) => Effect.Effect<void>
}>() {}

/**
 * Every second (and at once when a request needs it): the live trees of `substrat_trees` whose
 * shard this runner holds, that are not here, and whose runner is gone — handed over (`''`), or
 * died: not in the engine's list of live runners (its lease ran out) and no longer connected to
 * Postgres (ClusterPresence.ts; a runner only late may still be running the tree) — or this
 * runner's own from before a restart (read on the first pass; taken when this runner holds their
 * shard) — are recovered from Postgres (Recovery.recoverTrees) and recorded as this runner's.
 */
export const layerTakeover: Layer.Layer<
  TreeTakeover,
  never,
  | TreeRouter
  | Recovery
  | Orchestrator
  | RunnerStorage.RunnerStorage
  | SqlClient.SqlClient
  | Carry.RestoreNeeds
  | Sharding.Sharding
  | ShardingConfig.ShardingConfig
  | RunnerPresence
> = Layer.scoped(TreeTakeover, Effect.gen(function*() {
  const router = yield* TreeRouter
  const recovery = yield* Recovery
  const { lookup } = yield* Orchestrator
  const runners = yield* RunnerStorage.RunnerStorage
  const sql = yield* SqlClient.SqlClient
  const restore = yield* Carry.restorer
  const orchestrator = yield* Orchestrator
  const sharding = yield* Sharding.Sharding
  const engine = yield* ShardingConfig.ShardingConfig
  const config = yield* DaemonConfig
  const presence = yield* RunnerPresence
  const lock = yield* Effect.makeSemaphore(1)
  // Late runners still connected, said once each until they are gone or on time again.
  const late = new Set<string>()
  // Trees this runner let go of (handover, below) whose row does not say so yet (Postgres failed):
  // marked on the next pass, or taken back here if their shard is this runner's again.
  const released = new Set<AgentId>()
  // This runner's own trees from before its restart (read on the first pass): recovered here once
  // this runner holds their shard — which may be some passes later, when the engine has assigned
  // and acquired this runner's shards. Until then no other runner takes them (this one is alive).
  let restarted: Set<AgentId> | undefined
  // The sessions of the trees whose roots are `roots`: from the roots' `agent.created` entries
  // (parent none, agent one of `roots`) down through the entries naming a found session as
  // parent, in one recursive query on the index of those entries' parent (sqlSchema.ts). Only the
  // taken trees' entries are read, and only these sessions' records and logs by the recovery.
  const sessionsOf = (roots: ReadonlyArray<string>) =>
    Effect.map(
      sql<{ session_id: string }>`WITH RECURSIVE tree(session_id) AS (
          SELECT session_id FROM substrat_events
            WHERE line LIKE '{"event":"agent.created",%' AND (line::json)->'data'->>'parent_session_id' IS NULL
              AND (line::json)->'data'->>'agent_id' IN ${sql.in(roots)}
          UNION
          SELECT e.session_id FROM substrat_events e JOIN tree ON (e.line::json)->'data'->>'parent_session_id' = tree.session_id
            WHERE e.line LIKE '{"event":"agent.created",%')
        SELECT session_id FROM tree`,
      (rows) => new Set(rows.map((r) => r.session_id))
    )
  const pass = lock.withPermits(1)(Effect.gen(function*() {
    const rows = yield* router.all
    const alive = new Set((yield* runners.getRunners).map(([r]) => addressText(r.address)))
    const own = restarted ??= new Set(rows.filter((t) => t.runner === router.self && lookup.byId(t.root_id) === undefined).map((t) => t.root_id))
    const recorded = new Map(rows.map((t) => [t.root_id, t.runner]))
    for (const id of own) if (recorded.get(id) !== router.self || lookup.byId(id) !== undefined) own.delete(id)
    for (const id of released) if (recorded.get(id) !== router.self || lookup.byId(id) !== undefined) released.delete(id)
    const candidates = rows.filter((t) =>
      lookup.byId(t.root_id) === undefined && router.owns(t.root_id) &&
      ((own.has(t.root_id) || released.has(t.root_id)) && t.runner === router.self || !alive.has(t.runner))
    )
    // A runner past its lease that still holds its connection is late, not gone: it may be
    // running these trees' turns (a handover whose shard has moved already); they wait for it.
    const connected = yield* presence.connected(candidates.flatMap((t) => t.runner === "" || t.runner === router.self ? [] : [t.runner]))
    for (const r of late) if (!connected.has(r)) late.delete(r)
    for (const r of connected) {
      if (late.has(r)) continue
      late.add(r)
      yield* Effect.logWarning(
        `runner ${r} is not heartbeating but still connected to Postgres: its ${candidates.filter((t) => t.runner === r).length} tree(s) ` +
          `whose shards are this runner's are not taken over while it may still run them (it is late, or paused; retried)`
      )
    }
    const take = candidates.filter((t) => !connected.has(t.runner))
    if (take.length === 0) return
    const ids = take.map((t) => t.root_id)
    // Their workspaces and provider state first (ClusterCarry.ts): recovery re-runs turns.
    yield* restore(ids)
    const agents = yield* recovery.recoverTrees(new Set(ids), yield* sessionsOf(ids))
    for (const id of ids) own.delete(id)
    yield* sql`UPDATE substrat_trees SET runner = ${router.self} WHERE root_id IN ${sql.in(ids)}`
    yield* Effect.logInfo(`took over ${take.length} tree(s), ${agents} agent(s), from ${[...new Set(take.map((t) => t.runner))].join(", ")}`)
  })).pipe(Effect.catchAllCause((c) => Effect.logWarning("tree takeover failed (retried)", c)))
  // Handover: a tree loaded here whose shard the engine now assigns to another healthy runner
  // (one joined, or this one is draining) is let go of — its turns finish (those still running
  // after `cluster.handover_grace_ms` are interrupted and re-run there), it leaves this daemon
  // (Orchestrator.unloadTree) — and its row is marked as on no runner (''), so that runner's pass
  // above takes it over from Postgres. Until then a request for it there is refused (`tree-elsewhere`).
  // Nothing is let go of while the runners cannot be read (Postgres down): the assignment is unknown.
  const handover = Effect.gen(function*() {
    const rows = yield* router.all
    const owners = shardOwners(engine, yield* runners.getRunners)
    const elsewhere = (root: AgentId) => {
      const id = EntityId.make(root)
      const shard = sharding.getShardId(id, Tree.getShardGroup(id))
      const owner = owners.get(shard.toString())
      return !sharding.hasShardId(shard) && owner !== undefined && owner !== router.self
    }
    const leaving = rows.filter((t) => t.runner === router.self && lookup.byId(t.root_id) !== undefined && elsewhere(t.root_id))
    yield* Effect.forEach(leaving, (t) =>
      orchestrator.unloadTree(t.root_id, config.cluster.handoverGraceMs).pipe(
        Effect.tap((unloaded) => unloaded ? Effect.sync(() => released.add(t.root_id)) : Effect.void)
      ), { concurrency: "unbounded", discard: true })
    const mark = [...released].filter(elsewhere)
    if (mark.length === 0) return
    yield* sql`UPDATE substrat_trees SET runner = '' WHERE runner = ${router.self} AND root_id IN ${sql.in(mark)}`
    for (const id of mark) released.delete(id)
    yield* Effect.logInfo(`handed over ${mark.length} tree(s): their shards are other runners' now`)
  }).pipe(Effect.catchAllCause((c) => Effect.logWarning("tree handover failed (retried)", c)))
  yield* Effect.forkScoped(Effect.repeat(pass, Schedule.spaced("1 second")))
  yield* Effect.forkScoped(Effect.repeat(handover, Schedule.spaced("1 second")))
  return TreeTakeover.of({
    ensure: (root) => lookup.byId(root) !== undefined || !router.owns(root) ? Effect.void : pass
  })
}))
