// Cluster mode's side of the agent methods (docs/cluster.md): the admin methods routed to the
// runner that owns an agent's tree, and the `Tree` entity's handlers on that runner — the same
// local operations the admin methods run (Agents.ts, `makeAgentOps`).
import { Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import { Orchestrator } from "../../agent/Orchestrator.js"
import { AgentId, newAgentId } from "../../domain/ids.js"
import { Internal, type RpcError, Unavailable } from "../../protocol/admin/common.js"
import { AgentGroup } from "../../protocol/AdminRpcs.js"
import { classify, message, type ServiceError } from "../../protocol/WireErrors.js"
import { callRemote, messageIdOf, type RemoteFailure, Tree, type TreeClient, TreeRouter, TreeTakeover } from "../ClusterTrees.js"
import type { AgentOps } from "./Agents.js"
import { handlersOf } from "./Middleware.js"

/** A live agent of this daemon's trees is `ref` (id, session id, name, id prefix). */
const isLocal = (lookup: Orchestrator["lookup"], ref: string) =>
  lookup.byId(ref) !== undefined || lookup.bySession(ref) !== undefined || lookup.named(ref).length > 0 ||
  (ref.length >= 4 && lookup.prefixed(ref.toLowerCase()).length > 0)

/**
 * A tree whose shard this runner (`self`) holds but which is still on another runner: that runner
 * died (its shard locks went with its connection) and its lease has not run out, so the tree is
 * not taken over yet — or that runner is alive and is handing the tree over (its running turns
 * finish first; ClusterTrees.layerTakeover). Either way a retry soon reaches it here.
 */
const notHereYet = (t: { readonly name: string; readonly runner: string }, self: string) =>
  t.runner === "" ? new Unavailable({
    reason: "tree-elsewhere",
    message: `the tree of ${t.name} was handed over and its shard's runner has not taken it over yet (it does within a pass, about a second). Nothing was sent; retry`
  }) : new Unavailable({
    reason: "tree-elsewhere",
    message: `the tree of ${t.name} is on runner ${t.runner} while its shard is now ${self}'s: ` +
      `if ${t.runner} is alive it hands the tree over once its running turns end; ` +
      `if it died, ${self} takes the tree over once its lease runs out (cluster.lease_ms). Nothing was sent; retry`
  })

/**
 * The agent methods in cluster mode: a method naming an agent runs here when its tree is this
 * runner's, else on the tree's owner; `agent.create` places the new tree by its root's id;
 * `agent.list` gathers every tree.
 */
export const routedAgentHandlers = (ops: AgentOps, cluster: TreeRouter["Type"]) => Effect.gen(function*() {
  const { listTree: _, createTree: __, sendOnce: ___, ...handlers } = ops
  const { lookup } = yield* Orchestrator
  const router = cluster
  const takeover = Option.getOrUndefined(yield* Effect.serviceOption(TreeTakeover))
  const ensure = (root: AgentId) => takeover === undefined ? Effect.void : takeover.ensure(root)
  /**
   * `local` when `ref` is one of this runner's agents, else the call to the tree's owner (`far`).
   * A local call that finds the agent gone because its tree left this runner meanwhile (a
   * handover: Orchestrator.unloadTree) is routed as a call to a tree elsewhere.
   */
  const routed = <A>(ref: string, local: Effect.Effect<A, ServiceError>, far: (tree: TreeClient) => Effect.Effect<A, RemoteFailure>): Effect.Effect<A, ServiceError> => {
    const elsewhere = Effect.flatMap(router.find(ref), (tree): Effect.Effect<A, ServiceError> =>
      Option.isNone(tree) ? local : router.owns(tree.value.root_id)
        ? Effect.zipRight(ensure(tree.value.root_id), Effect.suspend(() => lookup.byId(tree.value.root_id) === undefined ? Effect.fail(notHereYet(tree.value, router.self)) : local))
        : callRemote(far(router.client(tree.value.root_id))))
    return isLocal(lookup, ref)
      ? Effect.catchIf(local, (e) => (e._tag === "NotFoundError" || e._tag === "NotFound") && e.kind === "agent" && !isLocal(lookup, ref), () => elsewhere)
      : elsewhere
  }

  return handlersOf(AgentGroup)({
    ...handlers,
    // A new tree lives where the engine places its root's id.
    "agent.create": (p) => {
      const root = newAgentId()
      return cluster.owns(root)
        ? ops.createTree(p, root)
        : callRemote(cluster.client(root).create({ ...p, root_id: root }))
    },
    "agent.send": (p) => routed(p.agent, ops["agent.send"](p), (t) => t.send({ ...p, request_id: randomUUID() })),
    "agent.wait": (p) => routed(p.agent, ops["agent.wait"](p), (t) => t.wait(p)),
    "agent.inspect": (p) => routed(p.agent, ops["agent.inspect"](p), (t) => t.inspect(p)),
    "agent.terminate": (p) => routed(p.agent, ops["agent.terminate"](p), (t) => t.terminate(p)),
    // Every tree of the cluster: this runner's, and each other tree from its owner.
    "agent.list": (p) =>
      p?.limit !== undefined || p?.after !== undefined || p?.depth !== undefined
        ? ops["agent.list"](p)
        : Effect.gen(function*() {
          const mine = yield* ops["agent.list"](p)
          const trees = yield* cluster.all
          const far = yield* Effect.forEach(
            trees.filter((t) => !cluster.owns(t.root_id)),
            (t) => callRemote(cluster.client(t.root_id).list({ root_id: t.root_id, all: p?.all ?? false })).pipe(Effect.timeout("10 seconds"), Effect.option),
            { concurrency: 8 }
          )
          const parts = [mine, ...far.flatMap((o) => Option.isSome(o) ? [o.value] : [])]
          return {
            agents: parts.flatMap((x) => x.agents),
            activity: parts.flatMap((x) => x.activity ?? []),
            details: parts.flatMap((x) => x.details ?? []),
            placement: trees.map((t) => ({ root_id: t.root_id, runner: t.runner }))
          }
        })
  })
})

/**
 * A tree this runner is letting go of (a handover: its shard is another runner's now, and
 * Orchestrator.unloadTree took it out, or is taking it, while the row still names this runner).
 * A request the engine delivered here before the shard moved is refused as retryable, never as
 * an unknown agent: the tree lives on, on the shard's new runner.
 */
const leavingHere = (t: { readonly name: string }, self: string) =>
  new Unavailable({
    reason: "tree-elsewhere",
    message: `the tree of ${t.name} is leaving runner ${self}: its shard is another runner's now, which takes the tree over ` +
      `once it has left. Nothing was done; retry`
  })

/**
 * How the `Tree` entity serves a request for the tree whose root is `root` on this runner:
 * a tree this runner just took the shard of is recovered first (`ensure`); one still on another
 * runner (not taken over yet) is refused, nothing done (`tree-elsewhere`); so is one that left
 * this runner — before the request ran (the row still names this runner or names none) or while
 * it ran (`run` found its agent gone and the tree is no longer loaded here). Every other result
 * of `run` is the request's.
 */
export const serveHere = <A>(
  deps: {
    readonly self: string
    readonly ensure: (root: AgentId) => Effect.Effect<void>
    readonly find: (ref: string) => Effect.Effect<Option.Option<{ readonly name: string; readonly runner: string }>, RpcError>
    readonly loaded: (root: AgentId) => boolean
  },
  root: AgentId,
  run: Effect.Effect<A, RpcError>
): Effect.Effect<A, RpcError> => {
  // Not loaded here: where its row says it is decides (no row: the tree is gone, `run` says so).
  const refuse = (otherwise: Effect.Effect<A, RpcError>) =>
    Effect.flatMap(deps.find(root), (row) =>
      Option.isNone(row) || deps.loaded(root) ? otherwise
        : row.value.runner === deps.self ? Effect.fail(leavingHere(row.value, deps.self))
        : Effect.fail(notHereYet(row.value, deps.self)))
  return Effect.zipRight(
    deps.ensure(root),
    Effect.suspend(() =>
      deps.loaded(root)
        ? Effect.catchIf(run, (e) => e._tag === "NotFound" && e.kind === "agent" && !deps.loaded(root), (e) => refuse(Effect.fail(e)))
        : refuse(run)
    )
  )
}

/** The `Tree` entity's handlers on the runner that owns the tree: the local operations (`makeOps`). */
export const treeEntityLayer = <R>(makeOps: Effect.Effect<AgentOps, never, R>) => Tree.toLayer(Effect.gen(function*() {
  const ops = yield* makeOps
  const takeover = yield* TreeTakeover
  const router = yield* TreeRouter
  const { lookup } = yield* Orchestrator
  const wire = <A>(e: Effect.Effect<A, ServiceError>): Effect.Effect<A, RpcError> =>
    e.pipe(
      Effect.mapError((x) => classify(x).wire),
      Effect.catchAllDefect((d) => Effect.fail(new Internal({ message: message(d) })))
    )
  const deps = { self: router.self, ensure: takeover.ensure, find: router.find, loaded: (root: AgentId) => lookup.byId(root) !== undefined }
  const here = <A>(address: { readonly entityId: string }, e: Effect.Effect<A, ServiceError>) =>
    serveHere(deps, AgentId.make(address.entityId), wire(e))
  return Tree.of({
    create: ({ payload: { root_id, ...p } }) => wire(ops.createTree(p, root_id)),
    // The message's id is the request's (the same on every delivery of it): a request the engine
    // delivers again after the owner logged it is not logged twice.
    send: ({ address, payload: { request_id, ...p } }) => {
      const id = messageIdOf(request_id)
      return here(address, Effect.flatMap(router.claimSend(id), (fresh) => ops.sendOnce(p, { id, fresh })))
    },
    wait: ({ address, payload }) => here(address, ops["agent.wait"](payload)),
    inspect: ({ address, payload }) => here(address, ops["agent.inspect"](payload)),
    terminate: ({ address, payload }) => here(address, ops["agent.terminate"](payload)),
    list: ({ address, payload }) => here(address, ops.listTree(payload.root_id, payload.all))
  })
}), { concurrency: "unbounded" })
