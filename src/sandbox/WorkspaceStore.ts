// Workspace specs on disk: create (top-level or nested), list, get, link host paths, delete.
//
// Layout under $SUBSTRAT_HOME/workspaces/<id>/ (only `root/` is ever visible inside a sandbox):
//   workspace.json   the spec (atomic replace through Durable)
//   egress-usage.json  bytes moved through the egress proxy today (the daily limit survives a restart)
//   root/            the tree bound at /workspace            (top-level workspaces only)
//   history.git/     the per-turn git history of that tree   (top-level workspaces only)
// A child workspace's root is a subdirectory of its parent's root; its spec lives in its own
// workspaces/<child-id>/ dir and it shares the top-level ancestor's history (commits scoped to its
// subtree). A child's permissions are never wider than its parent's.
//
// Over 300 lines because it is one service whose operations (create, nest, link, delete) check the
// same rules against the same specs; the pure rules are the exported functions before it.
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Either, Option, Schema } from "effect"
import { SubstratPaths } from "../config/Paths.js"
import { NotFoundError } from "../domain/errors.js"
import { newWorkspaceId, WorkspaceId } from "../domain/ids.js"
import { type BindMode, noLimits, RepoSource, ResourceLimits, SymlinkSpec, WorkspaceSpec } from "../domain/workspace.js"
import { EgressDayUsage, EgressPolicy, narrowerThan, noEgress, type PresetTable } from "../domain/egress.js"
import { Durable } from "../storage/Durable.js"
import { SandboxPathError, WorkspaceError } from "./errors.js"
import { initHistory } from "./HistoryInit.js"
import * as NoFollow from "./NoFollow.js"
import { cloneRepo, ignoredBind, openFork, openRepo } from "./RepoGit.js"
import { Sandbox } from "./Sandbox.js"
import { runCollect, spawnScoped } from "./spawn.js"
import { absolutePath, isWithin, linkRefusal, relativePath, relativeTo } from "./PathPolicy.js"
import { WorkspaceUsage } from "./WorkspaceUsage.js"

export interface CreateWorkspace {
  readonly name?: string | null
  /** Create as a child of this workspace (a subdirectory of its root). */
  readonly parent?: WorkspaceId
  /** Child only: the subdirectory of the parent's root (default: the name, else the id). */
  readonly subdir?: string
  readonly network_access?: boolean
  readonly limits?: ResourceLimits
  /**
   * Top-level only: an existing host directory to use as the root in place (e.g. a swarm's code
   * tree) instead of a new `root/`. It is never chowned or removed (delete removes the spec and
   * history only); its history is a git dir of its own, beside the tree's own `.git` if any.
   */
  readonly root?: string
  /** Top-level only: gitignore patterns the history never records (its `info/exclude`), e.g. `node_modules`. */
  readonly exclude?: ReadonlyArray<string>
  /** Top-level only: the root agent it is the default workspace of. */
  readonly default_for?: string
  /**
   * Top-level only: a repository workspace — the root is a clone of this git repository at `ref`
   * (default its HEAD commit) on branch `substrat/<name or id>` (src/sandbox/RepoGit.ts).
   */
  readonly repo?: { readonly path: string; readonly ref?: string; readonly bind_ignored?: string }
  /**
   * Top-level only: a branch child's workspace — a clone of `parent`'s branch (a top-level
   * repository workspace) at its last recorded commit, on `substrat/<parent name or id>/<child>`;
   * limits, network, egress and check are the parent's.
   */
  readonly fork?: { readonly parent: WorkspaceId; readonly child: string }
  /** Top-level only: the check command its merge queue runs (`--check`). */
  readonly check?: string
  /**
   * Hosts and presets its sandboxes may reach (docs/sandbox.md "Egress"), checked by the caller
   * (normaliseAllow). A child's must be allowed by its parent (`table`: the presets' hosts);
   * absent: none for a top-level workspace, the parent's for a child.
   */
  readonly egress?: { readonly hosts: ReadonlyArray<string>; readonly presets: ReadonlyArray<string>; readonly table: PresetTable }
  /** chown the (new) root directory, e.g. to the sandbox uid of the `inner`/`outer` identities. */
  readonly owner?: { readonly uid: number; readonly gid: number }
  readonly now?: string
}

export interface LinkRequest {
  readonly host_path: string
  readonly mount_path: string
  readonly mode: BindMode
}

/** Where a workspace's history lives: the top-level ancestor's repo, scoped to `prefix`. */
export interface HistoryLocation {
  readonly workspaceId: WorkspaceId
  readonly gitDir: string
  readonly topRoot: string
  /** The workspace root relative to `topRoot` ("" for a top-level workspace). */
  readonly prefix: string
  /** The top-level ancestor's repository source (a repository workspace), else null. */
  readonly repo: RepoSource | null
  /** A branch child's workspace: the workspace it merges back into; its branch is not published to the user's repository. */
  readonly fork_of: WorkspaceId | null
}

const SPEC = "workspace.json"
const encodeSpec = Schema.encodeSync(Schema.parseJson(WorkspaceSpec, { space: 2 }))
const decodeSpec = Schema.decodeUnknownEither(Schema.parseJson(WorkspaceSpec))

const wsError = (id: string, reason: WorkspaceError["reason"], message: string) =>
  new WorkspaceError({ workspace_id: id, reason, message })

const pathError = (field: string, path: string, reason: SandboxPathError["reason"], message: string) =>
  new SandboxPathError({ field, path, reason, message: `${field}: ${message} (${JSON.stringify(path)})` })

const limitKeys = ["memory_bytes", "cpu_seconds", "max_processes", "max_file_bytes", "wall_clock_seconds"] as const

/** Child limits: nulls inherit the parent's; anything above the parent's is refused. */
export const narrowLimits = (
  parent: ResourceLimits,
  child: ResourceLimits
): Either.Either<ResourceLimits, string> => {
  const out: Record<(typeof limitKeys)[number], number | null> = { ...noLimits }
  for (const k of limitKeys) {
    const p = parent[k]
    const c = child[k]
    if (c === null) out[k] = p
    else if (p !== null && c > p) return Either.left(`${k} ${c} exceeds the parent's ${p}`)
    else out[k] = c
  }
  return Either.right(new ResourceLimits(out))
}

/** What a workspace can see on the host: its root (rw) and its links. */
export const visibleAreas = (spec: WorkspaceSpec): ReadonlyArray<{ readonly path: string; readonly mode: BindMode }> => [
  { path: spec.root_path, mode: "rw" },
  ...spec.symlinks.map((s) => ({ path: s.host_path, mode: s.mode }))
]

/**
 * May a child of `parent` bind `hostPath` with `mode`? The most specific area of the parent that
 * contains the path decides; a path under one of the parent's mount points (inside its root) is
 * hidden by that mount and refused.
 */
export const parentAllows = (parent: WorkspaceSpec, hostPath: string, mode: BindMode): string | null => {
  for (const s of parent.symlinks) {
    const mountHost = `${parent.root_path}/${s.mount_path}`
    if (isWithin(mountHost, hostPath)) return `${hostPath} is hidden under the parent's mount ${s.mount_path}; link ${s.host_path} instead`
  }
  const areas = visibleAreas(parent).filter((a) => isWithin(a.path, hostPath)).sort((a, b) => b.path.length - a.path.length)
  const area = areas[0]
  if (area === undefined) return `${hostPath} is not visible to the parent workspace`
  if (mode === "rw" && area.mode === "ro") return `${hostPath} is read-only for the parent workspace`
  return null
}

export class WorkspaceStore extends Effect.Service<WorkspaceStore>()("substrat/WorkspaceStore", {
  effect: Effect.gen(function*() {
    const durable = yield* Durable
    const paths = yield* SubstratPaths
    const fs = yield* FileSystem.FileSystem
    const executor = yield* CommandExecutor.CommandExecutor
    const usage = yield* WorkspaceUsage
    // Roots the daemon makes belong to the uid its sandboxes run as (a root daemon's: unprivileged).
    const sandboxOwner = Option.getOrUndefined(Option.flatMap(yield* Effect.serviceOption(Sandbox), (s) => Option.fromNullable(s.owner)))

    const dirOf = (id: string) => paths.workspaceDir(id)
    const specFile = (id: string) => `${dirOf(id)}/${SPEC}`
    const io = (id: string) => (e: { readonly message: string }) => wsError(id, "io", e.message)

    const write = (spec: WorkspaceSpec) =>
      durable.replaceAtomic(specFile(spec.id), new TextEncoder().encode(encodeSpec(spec) + "\n")).pipe(
        Effect.mapError(io(spec.id))
      )

    const read = (id: string) =>
      Effect.gen(function*() {
        const bytes = yield* durable.readFile(specFile(id)).pipe(Effect.mapError(io(id)))
        if (Option.isNone(bytes)) return Option.none<WorkspaceSpec>()
        const spec = decodeSpec(new TextDecoder().decode(bytes.value))
        if (Either.isLeft(spec)) return yield* wsError(id, "decode", `${specFile(id)}: ${spec.left.message}`)
        return Option.some(spec.right)
      })

    const get = Effect.fn("WorkspaceStore.get")(function*(id: WorkspaceId) {
      const spec = yield* read(id)
      if (Option.isNone(spec)) {
        return yield* new NotFoundError({ kind: "workspace", id, message: `no workspace ${id}` })
      }
      return spec.value
    })

    const list = Effect.fn("WorkspaceStore.list")(function*() {
      const entries = yield* durable.readDir(paths.workspacesDir).pipe(Effect.mapError(io("")))
      const specs: Array<WorkspaceSpec> = []
      for (const e of entries) {
        if (!e.isDirectory || !Schema.is(WorkspaceId)(e.name)) continue
        const spec = yield* read(e.name)
        if (Option.isSome(spec)) specs.push(spec.value)
      }
      return specs.sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : 1))
    })

    /** By id, or by (unique) name. */
    const find = Effect.fn("WorkspaceStore.find")(function*(ref: string) {
      if (Schema.is(WorkspaceId)(ref)) {
        const spec = yield* read(ref)
        if (Option.isSome(spec)) return spec.value
      }
      const byName = (yield* list()).filter((s) => s.name === ref)
      if (byName.length === 1) return byName[0]!
      return yield* new NotFoundError({
        kind: "workspace",
        id: ref,
        message: byName.length > 1 ? `workspace name ${ref} is ambiguous` : `no workspace ${ref}`
      })
    })

    const children = Effect.fn("WorkspaceStore.children")(function*(id: WorkspaceId) {
      return (yield* list()).filter((s) => s.parent_id === id)
    })

    const canonicalDir = (field: string, path: string) =>
      fs.realPath(path).pipe(
        Effect.mapError(() => pathError(field, path, "missing", "does not exist")),
        Effect.flatMap((real) =>
          real === path ? Effect.void : Effect.fail(pathError(field, path, "symlink-swapped", `resolves to ${real}`))
        )
      )

    /** A host directory used as a workspace root in place: canonical, a directory, bindable read-write. */
    const existingRoot = (asked: string) =>
      Effect.gen(function*() {
        const abs = yield* Either.match(absolutePath("root", asked), { onLeft: Effect.fail, onRight: Effect.succeed })
        const host = yield* fs.realPath(abs).pipe(Effect.mapError(() => pathError("root", abs, "missing", "does not exist")))
        const isDir = yield* fs.stat(host).pipe(Effect.map((i) => i.type === "Directory"), Effect.orElseSucceed(() => false))
        if (!isDir) return yield* pathError("root", host, "not-a-directory", "is not a directory")
        const refusal = linkRefusal(host, "workspace", "rw", { host: "root", mount: "root" })
        if (refusal !== null) return yield* refusal
        const substratHome = yield* fs.realPath(paths.home).pipe(Effect.orElseSucceed(() => paths.home))
        if (isWithin(host, substratHome) || isWithin(substratHome, host)) {
          return yield* pathError("root", host, "reserved", "overlaps $SUBSTRAT_HOME (other workspaces, histories, agent sockets)")
        }
        return host
      })

    const create = Effect.fn("WorkspaceStore.create")(function*(input: CreateWorkspace = {}) {
      const id = newWorkspaceId()
      const name = input.name ?? null
      const owner = input.owner ?? sandboxOwner
      if (name !== null) {
        if (name.length === 0 || /[\s/]/.test(name) || Schema.is(WorkspaceId)(name)) {
          return yield* wsError(id, "invalid", `invalid workspace name ${JSON.stringify(name)}`)
        }
        if ((yield* list()).some((s) => s.name === name)) return yield* wsError(id, "exists", `a workspace named ${name} exists`)
      }
      const now = input.now ?? new Date().toISOString()
      const wantLimits = input.limits ?? noLimits
      yield* durable.mkdir(paths.workspacesDir, 0o700).pipe(Effect.mapError(io(id)))
      const home = yield* fs.realPath(paths.workspacesDir).pipe(Effect.mapError(io(id)))
      const dir = `${home}/${id}`

      if (input.parent === undefined) {
        if (input.repo !== undefined && input.root !== undefined) return yield* wsError(id, "invalid", "a workspace is made from a repository or from an existing root, not both")
        const substratHome = yield* fs.realPath(paths.home).pipe(Effect.orElseSucceed(() => paths.home))
        if (input.fork !== undefined && (input.repo !== undefined || input.root !== undefined)) return yield* wsError(id, "invalid", "a branch workspace is made from its parent only")
        const forkParent = input.fork === undefined ? null : yield* get(input.fork.parent)
        if (forkParent !== null && (forkParent.parent_id !== null || forkParent.repo === null)) {
          return yield* wsError(id, "invalid", `workspace ${forkParent.id} was not made from a git repository: no branch workspaces under it`)
        }
        const opened = input.repo !== undefined
          ? yield* openRepo(executor, fs, { id, path: input.repo.path, ref: input.repo.ref, name: name ?? id, home: substratHome }).pipe(
            Effect.catchTag("WorkspaceHistoryError", (e) => Effect.fail(wsError(id, "io", e.message)))
          )
          : forkParent !== null && input.fork !== undefined
          ? yield* openFork(executor, { id, parent: forkParent, gitDir: `${dirOf(forkParent.id)}/history.git`, child: input.fork.child }).pipe(
            Effect.catchTag("WorkspaceHistoryError", (e) => Effect.fail(wsError(id, "io", e.message)))
          )
          : null
        const bound = opened !== null && input.repo?.bind_ignored !== undefined
          ? yield* ignoredBind(executor, fs, { id, top: opened.top, path: input.repo.bind_ignored, home: substratHome })
          : null
        const root = input.root === undefined ? `${dir}/root` : yield* existingRoot(input.root)
        yield* durable.mkdir(dir, 0o700).pipe(Effect.mapError(io(id)))
        if (input.root === undefined) {
          yield* durable.mkdir(root, 0o755).pipe(Effect.mapError(io(id)))
        }
        yield* initHistory(fs, { gitDir: `${dir}/history.git`, workTree: root }, id, { empty: opened === null }).pipe(
          Effect.mapError((e) => wsError(id, "io", e.message))
        )
        if (opened !== null) {
          yield* cloneRepo(executor, { id, repo: opened, root, historyGitDir: `${dir}/history.git` }).pipe(
            Effect.mapError((e) => wsError(id, "io", e.message)),
            Effect.tapError(() => durable.removeTree(dir).pipe(Effect.ignore))
          )
        }
        if (input.root === undefined && owner !== undefined) {
          if (opened === null) yield* fs.chown(root, owner.uid, owner.gid).pipe(Effect.mapError(io(id)))
          else {
            // The whole clone, links themselves (-h), never followed (-R without -L).
            const r = yield* runCollect(spawnScoped(executor, {
              argv: ["chown", "-R", "-h", `${owner.uid}:${owner.gid}`, "--", root],
              env: { PATH: "/usr/bin:/bin" },
              limits: noLimits,
              graceMs: 1000
            })).pipe(Effect.mapError(io(id)))
            if (r.exit.code !== 0) return yield* wsError(id, "io", `chown ${root}: ${r.stderr.trim()}`)
          }
        }
        // A bound ignored directory (a branch child keeps its parent's): its mount point in the
        // clone, made never through a link the clone has there.
        const binds = bound !== null ? [new SymlinkSpec({ ...bound, mode: "ro" })] : forkParent?.symlinks ?? []
        for (const b of binds) {
          yield* NoFollow.makeDirectory(root, b.mount_path, { mode: 0o755, owner }).pipe(
            Effect.mapError((e) => wsError(id, "invalid", `--bind-ignored ${b.mount_path}: no directory can be made there in the clone (${e.message})`)),
            Effect.tapError(() => durable.removeTree(dir).pipe(Effect.ignore))
          )
        }
        if (input.exclude !== undefined && input.exclude.length > 0) {
          yield* fs.makeDirectory(`${dir}/history.git/info`, { recursive: true }).pipe(
            Effect.zipRight(fs.writeFileString(`${dir}/history.git/info/exclude`, input.exclude.join("\n") + "\n")),
            Effect.mapError(io(id))
          )
        }
        const spec = new WorkspaceSpec({
          id,
          name,
          parent_id: null,
          root_path: root,
          network_access: forkParent?.network_access ?? input.network_access ?? false,
          symlinks: binds,
          limits: forkParent?.limits ?? wantLimits,
          default_for: input.default_for ?? null,
          repo: opened === null
            ? null
            : new RepoSource({ path: forkParent?.repo?.path ?? opened.top, branch: opened.branch, base: opened.commit, target: opened.target }),
          egress: forkParent !== null
            ? forkParent.egress
            : input.egress === undefined
            ? noEgress
            : new EgressPolicy({ ...noEgress, hosts: input.egress.hosts, presets: input.egress.presets }),
          fork_of: forkParent?.id ?? null,
          check: input.check ?? forkParent?.check ?? null,
          created_at: now
        })
        yield* write(spec)
        return spec
      }

      const parent = yield* get(input.parent)
      const sub = yield* Either.match(relativePath("subdir", input.subdir ?? name ?? id), {
        onLeft: (e) => Effect.fail(e),
        onRight: (s) => Effect.succeed(s)
      })
      const root = `${parent.root_path}/${sub}`
      const hidden = parentAllows(parent, root, "rw")
      if (hidden !== null) return yield* wsError(id, "wider-than-parent", hidden)
      if ((input.network_access ?? false) && !parent.network_access) {
        return yield* wsError(id, "wider-than-parent", "network access requested under a parent without network")
      }
      const limits = narrowLimits(parent.limits, wantLimits)
      if (Either.isLeft(limits)) return yield* wsError(id, "wider-than-parent", limits.left)
      if (input.egress !== undefined) {
        const narrow = narrowerThan(parent.egress, input.egress, input.egress.table)
        if (Either.isLeft(narrow)) return yield* wsError(id, "wider-than-parent", narrow.left)
      }
      const egress = input.egress === undefined
        ? new EgressPolicy({ ...noEgress, hosts: parent.egress.hosts, presets: parent.egress.presets })
        : new EgressPolicy({ ...noEgress, hosts: input.egress.hosts, presets: input.egress.presets })
      yield* canonicalDir("parent.root_path", parent.root_path)
      // Inside the parent's tree, which its agents write: never through a link they planted (NoFollow).
      yield* NoFollow.makeDirectory(parent.root_path, sub, { mode: 0o755, owner }).pipe(
        Effect.mapError((e) => pathError("root_path", root, e.reason === "link" ? "symlink-swapped" : "missing", e.message))
      )
      yield* canonicalDir("root_path", root)
      yield* durable.mkdir(dir, 0o700).pipe(Effect.mapError(io(id)))
      const spec = new WorkspaceSpec({
        id,
        name,
        parent_id: parent.id,
        root_path: root,
        network_access: input.network_access ?? false,
        symlinks: [],
        limits: limits.right,
        egress,
        created_at: now
      })
      yield* write(spec)
      return spec
    })

    const link = Effect.fn("WorkspaceStore.link")(function*(id: WorkspaceId, request: LinkRequest) {
      const spec = yield* get(id)
      const mount = yield* Either.match(relativePath("mount_path", request.mount_path), {
        onLeft: (e) => Effect.fail(e),
        onRight: (s) => Effect.succeed(s)
      })
      const asked = yield* Either.match(absolutePath("host_path", request.host_path), {
        onLeft: (e) => Effect.fail(e),
        onRight: (s) => Effect.succeed(s)
      })
      const host = yield* fs.realPath(asked).pipe(
        Effect.mapError(() => pathError("host_path", asked, "missing", "does not exist"))
      )
      if (spec.symlinks.some((s) => s.mount_path === mount)) {
        return yield* pathError("mount_path", mount, "duplicate", "already linked")
      }
      const refusal = linkRefusal(host, mount, request.mode)
      if (refusal !== null) return yield* refusal
      if (spec.parent_id !== null) {
        const parent = yield* get(spec.parent_id)
        const why = parentAllows(parent, host, request.mode)
        if (why !== null) return yield* wsError(id, "wider-than-parent", why)
      } else {
        const substratHome = yield* fs.realPath(paths.home).pipe(Effect.orElseSucceed(() => paths.home))
        if (isWithin(host, substratHome) || isWithin(substratHome, host)) {
          return yield* pathError("host_path", host, "reserved", "overlaps $SUBSTRAT_HOME (other workspaces, histories, agent sockets)")
        }
        if (isWithin(host, spec.root_path)) {
          return yield* pathError("host_path", host, "reserved", "contains the workspace itself")
        }
      }
      const next = new WorkspaceSpec({
        ...spec,
        symlinks: [...spec.symlinks, new SymlinkSpec({ host_path: host, mount_path: mount, mode: request.mode })]
      })
      yield* write(next)
      return next
    })

    const descendants = (id: WorkspaceId, all: ReadonlyArray<WorkspaceSpec>): Array<WorkspaceSpec> => {
      const direct = all.filter((s) => s.parent_id === id)
      return direct.flatMap((c) => [...descendants(c.id, all), c])
    }

    /** Delete a workspace. Refused while it (or a descendant) is in use or has children, unless `force`. */
    const remove = Effect.fn("WorkspaceStore.delete")(function*(id: WorkspaceId, options: { readonly force?: boolean } = {}) {
      const spec = yield* get(id)
      const all = yield* list()
      const below = descendants(id, all)
      if (!options.force) {
        if (below.length > 0) {
          return yield* wsError(id, "has-children", `workspace ${id} has ${below.length} child workspace(s); delete them first, or all together with force`)
        }
        for (const s of [spec, ...below]) {
          const user = yield* usage.user(s.id)
          if (user !== undefined) {
            return yield* wsError(id, "in-use", `workspace ${s.id} is in use by ${user}; terminate it first, or delete anyway with force`)
          }
        }
      }
      // Children first (deepest first): only their spec dirs — their files are part of this tree.
      for (const c of below) yield* durable.removeTree(dirOf(c.id)).pipe(Effect.mapError(io(c.id)))
      yield* durable.removeTree(dirOf(id)).pipe(Effect.mapError(io(id)))
      return { deleted: [...below.map((c) => c.id), id] as ReadonlyArray<WorkspaceId> }
    })

    /** The history repo a workspace's turns are recorded in (its top-level ancestor's). */
    const historyLocation = Effect.fn("WorkspaceStore.historyLocation")(function*(id: WorkspaceId) {
      let spec = yield* get(id)
      const self = spec
      while (spec.parent_id !== null) spec = yield* get(spec.parent_id)
      const loc: HistoryLocation = {
        workspaceId: self.id,
        gitDir: `${dirOf(spec.id)}/history.git`,
        topRoot: spec.root_path,
        prefix: relativeTo(spec.root_path, self.root_path),
        repo: spec.repo,
        fork_of: spec.fork_of
      }
      return loc
    })

    /**
     * Change a workspace's egress policy: `f` gets the current one and returns the next (or a
     * refusal message). One change at a time, so concurrent asks and approvals are not lost.
     */
    const egressLock = yield* Effect.makeSemaphore(1)
    const updateEgress = Effect.fn("WorkspaceStore.updateEgress")(function*(
      id: WorkspaceId,
      f: (policy: EgressPolicy, spec: WorkspaceSpec) => Either.Either<EgressPolicy, string>
    ) {
      return yield* egressLock.withPermits(1)(Effect.gen(function*() {
        const spec = yield* get(id)
        const next = f(spec.egress, spec)
        if (Either.isLeft(next)) return yield* wsError(id, "wider-than-parent", next.left)
        if (next.right === spec.egress) return spec
        const updated = new WorkspaceSpec({ ...spec, egress: next.right })
        yield* write(updated)
        return updated
      }))
    })

    const usageFile = (id: WorkspaceId) => `${dirOf(id)}/egress-usage.json`
    const decodeUsage = Schema.decodeUnknownOption(Schema.parseJson(EgressDayUsage))
    /** The egress bytes recorded for the workspace's day (null: none, or unreadable). */
    const egressUsage = (id: WorkspaceId) =>
      durable.readFile(usageFile(id)).pipe(
        Effect.map((b) => Option.isNone(b) ? null : Option.getOrNull(decodeUsage(new TextDecoder().decode(b.value)))),
        Effect.orElseSucceed(() => null)
      )
    const writeEgressUsage = (id: WorkspaceId, u: EgressDayUsage) =>
      durable.replaceAtomic(usageFile(id), new TextEncoder().encode(JSON.stringify(u) + "\n")).pipe(Effect.mapError(io(id)))

    /** The workspace and its ancestors, itself first. */
    const chain = Effect.fn("WorkspaceStore.chain")(function*(id: WorkspaceId) {
      const out: Array<WorkspaceSpec> = [yield* get(id)]
      for (let p = out[0]!.parent_id; p !== null && out.length < 64; p = out[out.length - 1]!.parent_id) out.push(yield* get(p))
      return out as ReadonlyArray<WorkspaceSpec>
    })

    /**
     * Record a workspace made on another runner whose files were just checked out here (cluster
     * mode's moved tree, daemon/ClusterCarry.ts): a top-level one's root becomes this home's
     * `workspaces/<id>/root`; a child's must be inside its (recorded) parent's root.
     */
    const adopt = Effect.fn("WorkspaceStore.adopt")(function*(spec: WorkspaceSpec) {
      yield* durable.mkdir(paths.workspacesDir, 0o700).pipe(Effect.mapError(io(spec.id)))
      const home = yield* fs.realPath(paths.workspacesDir).pipe(Effect.mapError(io(spec.id)))
      let root = `${home}/${spec.id}/root`
      if (spec.parent_id !== null) {
        const parent = yield* get(spec.parent_id)
        if (!isWithin(parent.root_path, spec.root_path) || spec.root_path === parent.root_path) {
          return yield* wsError(spec.id, "invalid", `${spec.root_path} is not inside its parent's root ${parent.root_path}`)
        }
        root = spec.root_path
      }
      yield* durable.mkdir(dirOf(spec.id), 0o700).pipe(Effect.mapError(io(spec.id)))
      const adopted = new WorkspaceSpec({ ...spec, root_path: root })
      yield* write(adopted)
      return adopted
    })

    return { create, get, find, list, children, link, delete: remove, historyLocation, updateEgress, chain, egressUsage, writeEgressUsage, adopt } as const
  })
}) {}
