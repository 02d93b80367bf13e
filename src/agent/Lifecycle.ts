// Lifecycle: creating and terminating agents. Roots: session first, then the tree, then
// `agent.created`.
// Children (spawn_agent): added to the tree at once; when the parent is mid-turn the session
// is created after that turn ends (deferred spawn, seed 001) and `agent.created` is logged
// then; messages sent to the child meanwhile are held and delivered at birth. A child inherits
// its parent's workspace, or (`workspace_subdir`) gets the child workspace at that subdirectory
// of it, through the optional ChildWorkspaces port (refused when absent). A child runs on its
// parent's provider unless `provider` names another one, which must resolve in the
// ProviderRegistry and pass its readiness check (CLI binary present) when spawn_agent is called.
// Termination: children first; `agent.terminated` is logged before anything changes in memory.
// Over 300 lines because create, spawn (with its deferred birth) and terminate write the same
// tree, sessions and log in an order recovery depends on, so they are read side by side.
import { Effect, Option, Schema } from "effect"
import { AgentName, AgentNode, type ApprovePolicy } from "../domain/agent.js"
import type { BudgetShare } from "../domain/caps.js"
import { InvalidInputError, NotFoundError } from "../domain/errors.js"
import { makeEvent } from "../domain/events.js"
import { type AgentId, newAgentId, newSessionId, type WorkspaceId } from "../domain/ids.js"
import { Session } from "../domain/session.js"
import { ProviderRegistry } from "../provider/ProviderRegistry.js"
import { Multiplexer } from "../session/Multiplexer.js"
import { TurnScheduler } from "../session/TurnScheduler.js"
import { EventLog } from "../storage/EventLog.js"
import { SessionStore } from "../storage/SessionStore.js"
import { Activity } from "./Activity.js"
import { USER } from "./AgentTree.js"
import { ChildWorkspaces } from "./ChildWorkspaces.js"
import { Mailbox } from "./Mailbox.js"
import { Requests } from "./Requests.js"
import { Router } from "./Router.js"
import { Sessions } from "./Sessions.js"
import { Tree } from "./Tree.js"
import { BudgetShares } from "./TurnGate.js"
import { settle, Turns } from "./Turns.js"

export interface CreateRootArgs {
  readonly name: string
  readonly instructions: string
  readonly provider: string
  readonly role?: string | undefined
  readonly workspace_id?: WorkspaceId | null | undefined
  /** The root's id, chosen by the caller (cluster mode: the tree's entity key); else a new one. */
  readonly id?: AgentId | undefined
  /** Its ACP permission policy (its children inherit it); absent: the config's. */
  readonly approve?: ApprovePolicy | undefined
}
export interface SpawnArgs {
  readonly name: string
  readonly instructions: string
  readonly role?: string | undefined
  readonly workspace_subdir?: string | null | undefined
  /** shared (the parent's workspace) or branch (a clone on its own branch, merged back through the queue). */
  readonly workspace?: "shared" | "branch" | undefined
  /** The child's provider string; absent/null/"": the parent's. */
  readonly provider?: string | null | undefined
  /** The child's own budget, carved from what its parent's path has left (docs/budgets.md). */
  readonly budget?: BudgetShare | null | undefined
}

const checkName = (name: string) =>
  Schema.decodeUnknown(AgentName)(name).pipe(
    Effect.mapError((e) => new InvalidInputError({ field: "name", message: e.message })),
    Effect.filterOrFail(
      (n) => n !== USER,
      () => new InvalidInputError({ field: "name", message: `"${USER}" is reserved for the human` })
    )
  )

export class Lifecycle extends Effect.Service<Lifecycle>()("substrat/Lifecycle", {
  effect: Effect.gen(function*() {
    const tree = yield* Tree
    const mailbox = yield* Mailbox
    const turns = yield* Turns
    const requests = yield* Requests
    const activity = yield* Activity
    const log = yield* EventLog
    const store = yield* SessionStore
    const router = yield* Router
    const scheduler = yield* TurnScheduler
    const mux = yield* Multiplexer
    const childWorkspaces = yield* Effect.serviceOption(ChildWorkspaces)
    const providers = yield* ProviderRegistry
    const sessions = yield* Sessions

    const { createSession, logCreated } = sessions
    const shares = Option.getOrNull(yield* Effect.serviceOption(BudgetShares))
    /** Budget shares of children not born yet (given at birth, with their `budget.set`). */
    const pendingShares = new Map<AgentId, BudgetShare>()

    const createRoot = Effect.fn("Lifecycle.createRoot")(function*(args: CreateRootArgs) {
      const name = yield* checkName(args.name)
      if (tree.current().childNamed(null, name)) {
        return yield* new InvalidInputError({ field: "name", message: `a root agent named "${name}" exists` })
      }
      // No workspace given: one of its own (with history), which its children share by default.
      const workspace = args.workspace_id !== undefined
        ? args.workspace_id
        : Option.isSome(childWorkspaces)
        ? yield* childWorkspaces.value.forRoot(name)
        : null
      const node = new AgentNode({
        id: args.id ?? newAgentId(),
        name,
        session_id: newSessionId(),
        parent_id: null,
        instructions: args.instructions,
        role: args.role ?? "manager",
        provider: args.provider,
        workspace_id: workspace,
        state: "idle",
        ...(args.approve === undefined ? {} : { approve: args.approve })
      })
      yield* createSession(node)
      yield* tree.add(node)
      mailbox.open(node.id, { unborn: false })
      // Not durable, not acknowledged: out of memory too (the record left is an orphan recovery removes).
      yield* logCreated(node).pipe(Effect.tapError(() => forget(node.id)))
      return node
    })

    /** Undo an agent's creation that did not become durable (it has no children yet). */
    const forget = (id: AgentId) =>
      Effect.sync(() => {
        tree.remove(id)
        mailbox.close(id)
      })

    /** Create the session of a spawned child and deliver what was held for it. */
    const birth = Effect.fn("Lifecycle.birth")(function*(id: AgentId) {
      const node = tree.get(id)
      if (!node || !mailbox.isUnborn(id)) return
      yield* createSession(node)
      yield* logCreated(node)
      const share = pendingShares.get(id)
      pendingShares.delete(id)
      if (share !== undefined && shares !== null) {
        yield* shares.give(node, share).pipe(
          Effect.catchAll((e) => Effect.logWarning(`budget share of ${node.name} not set: ${e.message}`))
        )
      }
      for (const env of mailbox.takeHeld(id)) yield* router.deliver(env)
    })

    /** A spawn's share of the budget, checked against what `parent`'s path has left now. */
    const checkShare = (parent: AgentNode, share: BudgetShare | null | undefined) =>
      share === null || share === undefined || Object.keys(share).length === 0
        ? Effect.void
        : shares === null
        ? Effect.fail(new InvalidInputError({ field: "budget", message: "budgets are not available here" }))
        : shares.carve(parent, share, (id) => pendingShares.get(id)).pipe(Effect.mapError((e) => new InvalidInputError({ field: e.field, message: e.message })))

    /**
     * What `spawn` would refuse, checked without creating anything (a spawn that waits in the
     * queue for room is checked when queued, and again when it starts).
     */
    const checkSpawn = Effect.fn("Lifecycle.checkSpawn")(function*(parent: AgentId, args: SpawnArgs) {
      const p = tree.get(parent)
      if (!p || !tree.isLive(parent)) {
        return yield* new NotFoundError({ kind: "agent", id: parent, message: `no live agent ${parent}` })
      }
      const name = yield* checkName(args.name)
      if (tree.current().childNamed(parent, name)) {
        return yield* new InvalidInputError({ field: "name", code: "name_taken", message: `name "${name}" is taken among your children` })
      }
      const provider = args.provider === undefined || args.provider === null || args.provider === "" ? p.provider : args.provider
      if (provider !== p.provider) yield* checkProvider(provider)
      if ((args.workspace_subdir ?? "") !== "" && p.workspace_id === null) {
        return yield* new InvalidInputError({ field: "workspace_subdir", message: "workspace_subdir needs a workspace, and you have none" })
      }
      yield* checkShare(p, args.budget)
      return name
    })

    /**
     * A provider string a child may run on: known to the registry (variant included, e.g. a
     * scripted book that exists and decodes) and ready (its CLI binary is there).
     */
    const checkProvider = (spec: string) =>
      providers.get(spec).pipe(
        Effect.flatMap((f) => f.check ?? Effect.void),
        Effect.mapError((e) => new InvalidInputError({ field: "provider", message: e.message }))
      )

    /** Add a child; born now, or after the parent's running turn (deferred spawn). */
    const spawn = Effect.fn("Lifecycle.spawn")(function*(parent: AgentId, args: SpawnArgs) {
      const p = tree.get(parent)
      if (!p || !tree.isLive(parent)) {
        return yield* new NotFoundError({ kind: "agent", id: parent, message: `no live agent ${parent}` })
      }
      const name = yield* checkName(args.name)
      const provider = args.provider === undefined || args.provider === null || args.provider === "" ? p.provider : args.provider
      if (provider !== p.provider) yield* checkProvider(provider)
      yield* checkShare(p, args.budget)
      const subdir = args.workspace_subdir ?? ""
      let workspace = p.workspace_id
      if (subdir !== "") {
        if (p.workspace_id === null) {
          return yield* new InvalidInputError({ field: "workspace_subdir", message: "workspace_subdir needs a workspace, and you have none" })
        }
        if (Option.isNone(childWorkspaces)) {
          return yield* new InvalidInputError({ field: "workspace_subdir", message: "workspaces are not available here" })
        }
        if (tree.current().childNamed(parent, name)) {
          return yield* new InvalidInputError({ field: "name", code: "name_taken", message: `name "${name}" is taken among your children` })
        }
        workspace = yield* childWorkspaces.value.forSubdir(p.workspace_id, subdir)
        if (!tree.isLive(parent)) {
          return yield* new NotFoundError({ kind: "agent", id: parent, message: `no live agent ${parent}` })
        }
      }
      // A branch child: its own clone of the parent's branch (asked, or the configured default
      // where the parent's workspace allows it).
      const asked = args.workspace
      const mode = asked ?? (Option.isSome(childWorkspaces) ? childWorkspaces.value.spawnMode : "shared")
      if (mode === "branch") {
        const cw = Option.getOrUndefined(childWorkspaces)
        const able = cw !== undefined && p.workspace_id !== null && subdir === "" && (yield* cw.branchable(p.workspace_id))
        if (!able && asked === "branch") {
          return yield* new InvalidInputError({
            field: "workspace",
            message: subdir !== ""
              ? "workspace \"branch\" and workspace_subdir are exclusive"
              : "workspace \"branch\" needs your workspace to be made from a git repository (workspace create --repo / agent create --repo)"
          })
        }
        if (able && cw !== undefined && p.workspace_id !== null) {
          if (tree.current().childNamed(parent, name)) {
            return yield* new InvalidInputError({ field: "name", message: `name "${name}" is taken among your children` })
          }
          workspace = yield* cw.forBranch(p.workspace_id, name)
          if (!tree.isLive(parent)) {
            return yield* new NotFoundError({ kind: "agent", id: parent, message: `no live agent ${parent}` })
          }
        }
      }
      const node = new AgentNode({
        id: newAgentId(),
        name,
        session_id: newSessionId(),
        parent_id: parent,
        instructions: args.instructions,
        role: args.role ?? "worker",
        provider,
        workspace_id: workspace,
        state: "idle",
        // A child asks as its parent does: spawning cannot loosen the human's policy.
        ...(p.approve === undefined ? {} : { approve: p.approve })
      })
      yield* tree.add(node)
      mailbox.open(node.id, { unborn: true })
      if (args.budget !== null && args.budget !== undefined && Object.keys(args.budget).length > 0) pendingShares.set(node.id, args.budget)
      if (!turns.deferSpawn(parent, node.id)) {
        yield* birth(node.id).pipe(Effect.tapError(() => mailbox.isUnborn(node.id) ? forget(node.id) : Effect.void))
      }
      return node
    })

    /**
     * Terminate one agent (a leaf by now). `agent.terminated` is logged first: if that append
     * fails nothing changes and the termination fails (it is not acknowledged). The record's
     * `terminated` state is best-effort — recovery sets it from the log.
     */
    const terminateOne = (id: AgentId, why?: string) =>
      Effect.gen(function*() {
        const node = tree.get(id)
        if (!node) return
        // Unborn (deferred spawn) and dormant agents have no session to record the end in.
        const born = !mailbox.isUnborn(id) && !tree.isDormant(id)
        pendingShares.delete(id)
        if (born) yield* log.append(node.session_id, makeEvent("agent.terminated", { agent_id: id }))
        yield* requests.failPending(id, why ?? `${node.name} was terminated`)
        for (const t of mailbox.close(id)) yield* settle(t, null)
        tree.remove(id)
        activity.retire(id, node.parent_id)
        yield* mux.drop(node.session_id)
        if (born) {
          yield* store.load(node.session_id).pipe(
            Effect.flatMap((rec) => store.save(new Session({ ...rec, state: "terminated" }))),
            Effect.catchAll((e) => Effect.logWarning(`record of ${node.session_id} not set to terminated: ${e.message}`))
          )
          yield* log.close(node.session_id)
        }
        tree.unmarkTerminating([id])
      })

    /**
     * Terminate an agent and its whole subtree (children first). Each agent's running turn
     * finishes first; its queued turns are dropped; sync requests waiting on it are answered
     * with an error. Returns the terminated ids (the agent first). Fails, with the agents
     * terminated so far staying terminated and the rest alive, when an `agent.terminated`
     * cannot be logged.
     */
    const terminate = Effect.fn("Lifecycle.terminate")(function*(agent: AgentId) {
      const ids = tree.current().subtree(agent).map((n) => n.id)
      tree.markTerminating(ids)
      yield* Effect.forEach([...ids].reverse(), (id) => {
        const node = tree.get(id)
        return node ? scheduler.serialize(node.session_id, terminateOne(id)) : Effect.void
      }, { discard: true }).pipe(Effect.ensuring(Effect.sync(() => tree.unmarkTerminating(ids))))
      return ids
    })

    /** Remove an agent that never got a durable birth (and anything spawned below it). */
    const dropUnborn = (id: AgentId, why: string) =>
      Effect.gen(function*() {
        const ids = tree.current().subtree(id).map((n) => n.id)
        tree.markTerminating(ids)
        for (const k of [...ids].reverse()) {
          yield* terminateOne(k, why).pipe(
            Effect.catchAll((e) => Effect.logWarning(`dropping unborn agent ${k}: ${e.message}`))
          )
        }
        tree.unmarkTerminating(ids)
      })

    return { createRoot, spawn, checkSpawn, birth, terminate, dropUnborn } as const
  })
}) {}
