// Handlers of the `workspace.*` methods (src/protocol/admin/workspace.ts): thin adapters to the
// WorkspaceStore and WorkspaceHistory; egress allow/deny through the workspace's policy.
import { Effect, Either, Option, Stream } from "effect"
import { randomBytes } from "node:crypto"
import * as Path from "node:path"
import { SubstratPaths } from "../../config/Paths.js"
import { Egress } from "../../egress/Egress.js"
import { Orchestrator } from "../../agent/Orchestrator.js"
import { EgressPolicy } from "../../domain/egress.js"
import { InvalidInputError } from "../../domain/errors.js"
import { newTurnId, type WorkspaceId } from "../../domain/ids.js"
import { WorkspaceHistory } from "../../sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../../sandbox/WorkspaceStore.js"
import { makeResolver } from "../Resolver.js"
import { MergeQueue } from "../MergeQueue.js"
import { syncClone } from "../../sandbox/CloneSync.js"
import { Sandbox } from "../../sandbox/Sandbox.js"
import { Unavailable, WorkspaceGroup } from "../../protocol/AdminRpcs.js"
import { handlersOf, served } from "./Middleware.js"
import { checkWithRepo, makeEgressRequests } from "./Shared.js"

/** A workspace and every workspace below it. */
const withDescendants = (id: WorkspaceId, all: ReadonlyArray<{ readonly id: WorkspaceId; readonly parent_id: WorkspaceId | null }>) => {
  const gone = new Set([id])
  for (let grew = true; grew;) {
    grew = false
    for (const w of all) {
      if (w.parent_id !== null && gone.has(w.parent_id) && !gone.has(w.id)) {
        gone.add(w.id)
        grew = true
      }
    }
  }
  return gone
}

export const WorkspaceHandlers = served(WorkspaceGroup, Effect.gen(function*() {
  const orchestrator = yield* Orchestrator
  const workspaces = yield* WorkspaceStore
  const history = yield* WorkspaceHistory
  const resolver = yield* makeResolver
  const egress = yield* makeEgressRequests

  const queue = yield* MergeQueue
  const sandbox = yield* Effect.serviceOption(Sandbox)
  const proxy = yield* Egress
  const paths = yield* SubstratPaths

  return handlersOf(WorkspaceGroup)({
    "workspace.queue": (p) =>
      Effect.gen(function*() {
        const ws = yield* resolver.workspaceId(p.workspace)
        const spec = yield* workspaces.get(ws)
        return { workspace: ws, check: spec.check, ...queue.view(ws) }
      }),

    "workspace.create": (p) =>
      Effect.gen(function*() {
        const parent = p.parent === undefined ? undefined : yield* resolver.workspaceId(p.parent)
        if (p.bind_ignored !== undefined && p.repo === undefined) return yield* new InvalidInputError({ field: "bind_ignored", message: "--bind-ignored goes with --repo" })
        const given = p.allow_hosts !== undefined || p.allow_presets !== undefined
        const allow = yield* egress.asked(p.allow_hosts, p.allow_presets)
        return yield* workspaces.create({
          ...(p.name === undefined ? {} : { name: p.name }),
          ...(parent === undefined ? {} : { parent }),
          ...(p.network === undefined ? {} : { network_access: p.network }),
          ...(p.repo === undefined ? {} : { repo: { path: p.repo, ...(p.ref === undefined ? {} : { ref: p.ref }), ...(p.bind_ignored === undefined ? {} : { bind_ignored: p.bind_ignored }) } }),
          ...(p.check === undefined ? {} : { check: yield* checkWithRepo(p.check, p.repo) }),
          ...(given ? { egress: { ...allow, table: egress.presets } } : {})
        })
      }),

    "workspace.merge": (p) =>
      Effect.gen(function*() {
        const ws = yield* resolver.workspaceId(p.workspace)
        const spec = yield* workspaces.get(ws)
        const r = yield* history.merge(ws, {
          ...(p.into === undefined ? {} : { into: p.into }),
          ...(p.squash === undefined ? {} : { squash: p.squash }),
          ...(p.message === undefined ? {} : { message: p.message })
        })
        return { workspace: ws, branch: spec.repo?.branch ?? "", ...r }
      }),

    "workspace.export": (p) =>
      Effect.gen(function*() {
        const ws = yield* resolver.workspaceId(p.workspace)
        return { workspace: ws, patches: yield* history.exportPatches(ws) }
      }),

    "workspace.allow": (p) =>
      Effect.gen(function*() {
        const id = yield* resolver.workspaceId(p.workspace)
        const add = yield* egress.asked(p.hosts, p.presets)
        if (add.hosts.length === 0 && add.presets.length === 0) {
          return yield* new InvalidInputError({ field: "allow", message: "give at least one host or preset to allow" })
        }
        return yield* egress.allowIn(id, add)
      }),

    "workspace.deny": (p) =>
      Effect.gen(function*() {
        const id = yield* resolver.workspaceId(p.workspace)
        const drop = yield* egress.asked(p.hosts, p.presets)
        if (drop.hosts.length === 0 && drop.presets.length === 0) {
          return yield* new InvalidInputError({ field: "deny", message: "give at least one host or preset to remove" })
        }
        return yield* workspaces.updateEgress(id, (pol) => {
          const missing = [...drop.hosts.filter((h) => !pol.hosts.includes(h)), ...drop.presets.filter((n) => !pol.presets.includes(n)).map((n) => `preset ${n}`)]
          if (missing.length > 0) return Either.left(`not in the egress policy: ${missing.join(", ")} (it allows: ${[...pol.presets.map((n) => `preset ${n}`), ...pol.hosts].join(", ") || "nothing"})`)
          return Either.right(new EgressPolicy({
            ...pol,
            hosts: pol.hosts.filter((h) => !drop.hosts.includes(h)),
            presets: pol.presets.filter((n) => !drop.presets.includes(n))
          }))
        }).pipe(Effect.mapError((e) => e._tag === "WorkspaceError" && e.reason === "wider-than-parent" ? new InvalidInputError({ field: "deny", message: e.message }) : e))
      }),

    // A human's shell: the workspace's egress proxy on a socket of its own (in the workspace's
    // daemon-owned directory, not in its agent-writable root) while the caller keeps the stream open.
    "workspace.shell_egress": (p) =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const spec = yield* workspaces.get(p.workspace)
        const socketPath = Path.join(paths.workspaceDir(spec.id), `shell-egress-${randomBytes(4).toString("hex")}.sock`)
        const served = yield* proxy.serveTurn({ session_id: null, agent_id: "human", agent_name: "human shell", workspace_id: spec.id, socketPath }).pipe(
          Effect.mapError((e) => new Unavailable({ message: `egress proxy for workspace ${spec.id}: ${e.message}` }))
        )
        return Stream.concat(Stream.make({ socket: served ? socketPath : null }), Stream.never)
      })),

    "workspace.list": () => Effect.map(workspaces.list(), (ws) => ({ workspaces: ws })),

    "workspace.link": (p) =>
      Effect.flatMap(
        resolver.workspaceId(p.workspace),
        (id) => workspaces.link(id, { host_path: p.host_path, mount_path: p.mount_path, mode: p.mode ?? "ro" })
      ),

    "workspace.delete": (p) =>
      Effect.gen(function*() {
        const id = yield* resolver.workspaceId(p.workspace)
        if (p.force === true) {
          // Agents running in it (or in a workspace below it): their turns are stopped first, so
          // no sandbox runs in a directory being removed.
          const gone = withDescendants(id, yield* workspaces.list())
          for (const n of yield* orchestrator.list) {
            if (n.workspace_id !== null && gone.has(n.workspace_id)) {
              yield* orchestrator.stopTurn(n.id, `workspace ${n.workspace_id} is being deleted (workspace delete --force)`)
            }
          }
        }
        const r = yield* workspaces.delete(id, { force: p.force ?? false })
        return { workspace: id, deleted: true, removed: r.deleted }
      }),

    "workspace.diff": (p) =>
      Effect.gen(function*() {
        const ws = yield* resolver.workspaceId(p.workspace)
        if (p.turn === undefined) {
          const paths = yield* history.pendingChanges(ws)
          const diff = yield* history.diff(ws)
          return { workspace: ws, turn: null, paths, diff }
        }
        const turn = yield* resolver.turn(ws, p.turn)
        const paths = yield* history.changes(ws, turn)
        const diff = yield* history.diff(ws, turn)
        return { workspace: ws, turn, paths, diff }
      }),

    "workspace.revert": (p) =>
      Effect.gen(function*() {
        const ws = yield* resolver.workspaceId(p.workspace)
        const turn = yield* resolver.turn(ws, p.turn)
        const r = yield* history.revert(ws, turn, { agent: "USER" })
        // The revert's commit is in the history; a repository workspace's clone follows now.
        if (r.commit !== null && Option.isSome(sandbox)) {
          const loc = yield* workspaces.historyLocation(ws)
          if (loc.repo !== null) yield* syncClone(loc).pipe(Effect.provideService(Sandbox, sandbox.value))
        }
        return { workspace: ws, turn, commit: r.commit, paths: r.paths }
      }),

    "workspace.record": (p) =>
      Effect.gen(function*() {
        yield* workspaces.get(p.workspace)
        const turn = newTurnId()
        const r = yield* history.commitTurn(p.workspace, { agent: p.author, turnId: turn, summary: p.summary ?? `${p.author}: changes made by hand` })
        return { workspace: p.workspace, turn, commit: r.commit, paths: r.paths }
      }),

    "workspace.log": (p) =>
      Effect.gen(function*() {
        const ws = yield* resolver.workspaceId(p.workspace)
        const turns = yield* history.log(ws, { limit: Math.max(1, Math.min(10_000, Math.floor(p.limit ?? 100))) })
        return { workspace: ws, turns }
      })
  })
}))
