// Lifecycle: creating agents. Roots: session first, then the tree, then `agent.created`.
// Children (spawn_agent): added to the tree at once; when the parent is mid-turn the session
// is created after that turn ends (deferred spawn, seed 001) and `agent.created` is logged
// then; messages sent to the child meanwhile are held and delivered at birth. A child inherits
// its parent's workspace, or (`workspace_subdir`) gets the child workspace at that subdirectory
// of it, through the optional ChildWorkspaces port (refused when absent). A child runs on its
// parent's provider unless `provider` names another one, which must resolve in the
// ProviderRegistry and pass its readiness check (CLI binary present) when spawn_agent is called.
import { Effect, Either, Option, Schema } from "effect"
import { AgentName, AgentNode } from "../domain/agent.js"
import { InvalidInputError, NotFoundError } from "../domain/errors.js"
import { makeEvent } from "../domain/events.js"
import { type AgentId, newAgentId, newSessionId, type WorkspaceId } from "../domain/ids.js"
import { makeSession } from "../domain/session.js"
import { EventLog } from "../storage/EventLog.js"
import { ProviderRegistry } from "../provider/ProviderRegistry.js"
import { SessionStore } from "../storage/SessionStore.js"
import { USER } from "./AgentTree.js"
import { ChildWorkspaces } from "./ChildWorkspaces.js"
import { OrchestratorState } from "./OrchestratorState.js"
import { Router } from "./Router.js"

export interface CreateRootArgs {
  readonly name: string
  readonly instructions: string
  readonly provider: string
  readonly role?: string | undefined
  readonly workspace_id?: WorkspaceId | null | undefined
}
export interface SpawnArgs {
  readonly name: string
  readonly instructions: string
  readonly role?: string | undefined
  readonly workspace_subdir?: string | null | undefined
  /** The child's provider string; absent/null/"": the parent's. */
  readonly provider?: string | null | undefined
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
    const s = yield* OrchestratorState
    const log = yield* EventLog
    const store = yield* SessionStore
    const router = yield* Router
    const childWorkspaces = yield* Effect.serviceOption(ChildWorkspaces)
    const providers = yield* ProviderRegistry

    const now = Effect.sync(() => new Date().toISOString())

    const createSession = (node: AgentNode) =>
      Effect.gen(function*() {
        yield* store.save(makeSession({ id: node.session_id, provider_name: node.provider, now: yield* now }))
        yield* log.append(
          node.session_id,
          makeEvent("session.created", { provider: node.provider, model: null, system_prompt: node.instructions })
        )
      })

    const logCreated = (node: AgentNode) =>
      log.append(
        node.session_id,
        makeEvent("agent.created", {
          agent_id: node.id,
          name: node.name,
          parent_session_id: node.parent_id === null ? null : s.tree.get(node.parent_id)?.session_id ?? null,
          instructions: node.instructions,
          role: node.role,
          provider: node.provider,
          workspace: node.workspace_id
        })
      )

    const createRoot = Effect.fn("Lifecycle.createRoot")(function*(args: CreateRootArgs) {
      const name = yield* checkName(args.name)
      if (s.tree.childNamed(null, name)) {
        return yield* new InvalidInputError({ field: "name", message: `a root agent named "${name}" exists` })
      }
      const node = new AgentNode({
        id: newAgentId(),
        name,
        session_id: newSessionId(),
        parent_id: null,
        instructions: args.instructions,
        role: args.role ?? "manager",
        provider: args.provider,
        workspace_id: args.workspace_id ?? null,
        state: "idle"
      })
      yield* createSession(node)
      const added = s.tree.add(node)
      if (Either.isLeft(added)) return yield* added.left
      s.tree = added.right
      s.inboxes.set(node.id, [])
      // Not durable, not acknowledged: out of memory too (the record left is an orphan recovery removes).
      yield* logCreated(node).pipe(Effect.tapError(() => forget(node.id)))
      return node
    })

    /** Undo an agent's creation that did not become durable (it has no children yet). */
    const forget = (id: AgentId) =>
      Effect.sync(() => {
        const removed = s.tree.remove(id)
        if (Either.isRight(removed)) s.tree = removed.right
        s.inboxes.delete(id)
        s.unborn.delete(id)
      })

    /** Create the session of a spawned child and deliver what was held for it. */
    const birth = Effect.fn("Lifecycle.birth")(function*(id: AgentId) {
      const node = s.tree.get(id)
      if (!node || !s.unborn.has(id)) return
      yield* createSession(node)
      yield* logCreated(node)
      const held = s.unborn.get(id) ?? []
      s.unborn.delete(id)
      for (const env of held) yield* router.deliver(env)
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
      const p = s.tree.get(parent)
      if (!p || s.terminating.has(parent)) {
        return yield* new NotFoundError({ kind: "agent", id: parent, message: `no live agent ${parent}` })
      }
      const name = yield* checkName(args.name)
      const provider = args.provider === undefined || args.provider === null || args.provider === "" ? p.provider : args.provider
      if (provider !== p.provider) yield* checkProvider(provider)
      const subdir = args.workspace_subdir ?? ""
      let workspace = p.workspace_id
      if (subdir !== "") {
        if (p.workspace_id === null) {
          return yield* new InvalidInputError({ field: "workspace_subdir", message: "workspace_subdir needs a workspace, and you have none" })
        }
        if (Option.isNone(childWorkspaces)) {
          return yield* new InvalidInputError({ field: "workspace_subdir", message: "workspaces are not available here" })
        }
        if (s.tree.childNamed(parent, name)) {
          return yield* new InvalidInputError({ field: "name", message: `name "${name}" is taken among your children` })
        }
        workspace = yield* childWorkspaces.value.forSubdir(p.workspace_id, subdir)
        if (!s.tree.get(parent) || s.terminating.has(parent)) {
          return yield* new NotFoundError({ kind: "agent", id: parent, message: `no live agent ${parent}` })
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
        state: "idle"
      })
      const added = s.tree.add(node)
      if (Either.isLeft(added)) return yield* added.left
      s.tree = added.right
      s.inboxes.set(node.id, [])
      s.unborn.set(node.id, [])
      const turn = s.turns.get(parent)
      if (turn) turn.deferredSpawns.push(node.id)
      else yield* birth(node.id).pipe(Effect.tapError(() => s.unborn.has(node.id) ? forget(node.id) : Effect.void))
      return node
    })

    return { createRoot, spawn, birth } as const
  })
}) {}
