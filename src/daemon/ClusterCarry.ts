// Cluster mode (docs/cluster.md "What moves with a tree"): what a tree needs on the runner it moves
// to, beside its session records and event logs (already in Postgres).
//   - Workspaces: after every turn of an agent with a workspace, the history's HEAD (the turn's
//     commit, or the last one) is pushed to `cluster.workspace_remote` as `refs/substrat/ws/<top
//     workspace id>` (and the turn's commit as `refs/substrat/turns/<top>/<turn id>`), and the
//     specs of that workspace family are noted in `substrat_workspaces` with the pushed commit.
//     A runner that takes a tree over (ClusterTrees.layerTakeover) and lacks one of its workspaces,
//     or has an older commit than the recorded one, fetches the ref into a fresh history and checks
//     it out: the last recorded turn; what an interrupted turn left uncommitted is not there.
//     A repository or branch workspace's HEAD is its branch: the new runner makes a fresh clone of
//     the fetched history on the same branch name (restoreClone); the user's repository is not read.
//     A workspace made on an existing directory (--root) is not pushed: it stays on its runner.
//   - Provider state: the agent's directory's `cli-resume.json` and sandbox `home/` (claude/codex
//     session files) are packed after every turn into `substrat_provider_state` (at most
//     `maxStateBytes`; more is omitted with a log line and the earlier state dropped), and unpacked
//     on the new runner before the tree's first turn there. The suspend blob is in the session
//     record (Postgres) already.
// Everything packed is agent-written: packing never follows a link (links, FIFOs, devices are left
// out, NoFollow.ts); unpacking accepts only `cli-resume.json` and plain relative paths under `home/`
// (no `..`, no absolute path), writes them without following a link the target has, and refuses
// more than the size and file-count limits.
// Over 300 lines because the two carries are one step of a takeover: they share the remote, the
// no-follow packing rules and the limits, and are read together when a moved tree looks wrong.
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { SqlClient } from "@effect/sql"
import { Context, Data, Effect, Either, Layer, Option, Schema } from "effect"
import { createHash } from "node:crypto"
import * as Fs from "node:fs"
import { Tree } from "../agent/Tree.js"
import { DaemonConfig } from "../config/DaemonConfig.js"
import { SubstratPaths } from "../config/Paths.js"
import { parentEnv } from "../config/Config.js"
import type { AgentNode } from "../domain/agent.js"
import type { AgentId } from "../domain/ids.js"
import { WorkspaceSpec } from "../domain/workspace.js"
import { gitBaseEnv, type GitRepo, runGitAt, safeArgs } from "../sandbox/git.js"
import { initHistory } from "../sandbox/HistoryInit.js"
import { cloneRepo } from "../sandbox/RepoGit.js"
import * as NoFollow from "../sandbox/NoFollow.js"
import { relativeTo } from "../sandbox/PathPolicy.js"
import { Sandbox } from "../sandbox/Sandbox.js"
import { runCollect, spawnScoped } from "../sandbox/spawn.js"
import { WorkspaceStore } from "../sandbox/WorkspaceStore.js"
import { noLimits } from "../domain/workspace.js"

/** Largest provider state kept per agent (the files' bytes, before encoding). */
export const maxStateBytes = 16 * 1024 * 1024
/** Most files in one provider state. */
export const maxStateFiles = 10_000

export class CarryError extends Data.TaggedError("CarryError")<{
  readonly reason: "too-large" | "path" | "decode" | "io"
  readonly message: string
}> {}

const StateFile = Schema.Struct({ path: Schema.String, mode: Schema.Number, data: Schema.String })
const StateJson = Schema.parseJson(Schema.Struct({ v: Schema.Literal(1), files: Schema.Array(StateFile) }))
const encodeState = Schema.encodeSync(StateJson)
const decodeState = Schema.decodeUnknownEither(StateJson)

const RESUME = "cli-resume.json"
const HOME = "home"

/**
 * The provider state of the agent whose directory is `agentDir`: `cli-resume.json` and every
 * regular file under `home/`, never through a link (links, FIFOs, sockets, devices are left out).
 * None when there is nothing; CarryError(too-large) past `limit` bytes or `maxStateFiles` files.
 */
export const packState = (agentDir: string, limit = maxStateBytes): Effect.Effect<Option.Option<string>, CarryError> =>
  Effect.gen(function*() {
    if (!Fs.existsSync(agentDir)) return Option.none()
    const files: Array<typeof StateFile.Type> = []
    let total = 0
    const add = (rel: string, data: Uint8Array, mode: number) => {
      total += data.length
      if (total > limit) return Effect.fail(new CarryError({ reason: "too-large", message: `provider state over ${limit} bytes` }))
      if (files.length >= maxStateFiles) return Effect.fail(new CarryError({ reason: "too-large", message: `provider state over ${maxStateFiles} files` }))
      files.push({ path: rel, mode, data: Buffer.from(data).toString("base64") })
      return Effect.void
    }
    const io = (e: NoFollow.NoFollowError) => new CarryError({ reason: e.reason === "too-large" ? "too-large" : "io", message: e.message })
    const read = (rel: string) =>
      NoFollow.readFile(agentDir, rel, limit).pipe(
        Effect.map(Option.some),
        // Swapped for a link, a FIFO, … between the listing and the read, or gone: left out.
        Effect.catchIf((e) => e.reason === "link" || e.reason === "not-a-file" || e.reason === "missing", () => Effect.succeed(Option.none())),
        Effect.mapError(io)
      )
    if ((yield* NoFollow.entryType(agentDir, RESUME).pipe(Effect.mapError(io))) === "file") {
      const data = yield* read(RESUME)
      if (Option.isSome(data)) yield* add(RESUME, data.value, 0o600)
    }
    const walk = (rel: string, depth: number): Effect.Effect<void, CarryError> =>
      Effect.gen(function*() {
        if (depth > 64) return
        const entries = yield* NoFollow.readDirectory(agentDir, rel).pipe(
          Effect.catchIf((e) => e.reason === "link" || e.reason === "missing", () => Effect.succeed([])),
          Effect.mapError(io)
        )
        for (const e of entries) {
          const child = `${rel}/${e.name}`
          if (e.type === "directory") yield* walk(child, depth + 1)
          else if (e.type === "file") {
            const data = yield* read(child)
            if (Option.isSome(data)) yield* add(child, data.value, 0o600)
          }
        }
      })
    if ((yield* NoFollow.entryType(agentDir, HOME).pipe(Effect.mapError(io))) === "directory") yield* walk(HOME, 0)
    if (files.length === 0) return Option.none()
    return Option.some(encodeState({ v: 1, files }))
  })

/** A path a provider state may hold: `cli-resume.json`, or a plain relative path under `home/`. */
export const statePathRefusal = (path: string): string | null => {
  const parts = path.split("/")
  if (path.startsWith("/") || path.includes("\0") || parts.some((p) => p === "" || p === "." || p === "..")) return "not a plain relative path"
  if (path === RESUME) return null
  if (parts[0] !== HOME || parts.length < 2) return "neither cli-resume.json nor under home/"
  return null
}

/**
 * Unpack a provider state into `agentDir` (made when missing): every path checked
 * (statePathRefusal), written without following a link already there (NoFollow.writeFile);
 * files under `home/` get `owner` (the sandbox uid). Refused as a whole, nothing written, when a
 * path is bad or the state is over the limits. How many files were written.
 */
export const unpackState = (
  agentDir: string,
  state: string,
  options: { readonly owner?: NoFollow.Owner | undefined; readonly limit?: number } = {}
): Effect.Effect<number, CarryError> =>
  Effect.gen(function*() {
    const decoded = decodeState(state)
    if (Either.isLeft(decoded)) return yield* new CarryError({ reason: "decode", message: `provider state: ${decoded.left.message}` })
    const files = decoded.right.files
    const limit = options.limit ?? maxStateBytes
    if (files.length > maxStateFiles) return yield* new CarryError({ reason: "too-large", message: `provider state has ${files.length} files (at most ${maxStateFiles})` })
    let total = 0
    const data: Array<Uint8Array> = []
    for (const f of files) {
      const why = statePathRefusal(f.path)
      if (why !== null) return yield* new CarryError({ reason: "path", message: `provider state: ${JSON.stringify(f.path)}: ${why}` })
      const bytes = Buffer.from(f.data, "base64")
      total += bytes.length
      if (total > limit) return yield* new CarryError({ reason: "too-large", message: `provider state over ${limit} bytes` })
      data.push(bytes)
    }
    yield* Effect.try({
      try: () => Fs.mkdirSync(agentDir, { recursive: true, mode: 0o700 }),
      catch: (e) => new CarryError({ reason: "io", message: `${agentDir}: ${String(e)}` })
    })
    if (files.some((f) => f.path !== RESUME)) {
      yield* NoFollow.makeDirectory(agentDir, HOME, { mode: 0o700, owner: options.owner }).pipe(
        Effect.mapError((e) => new CarryError({ reason: e.reason === "link" ? "path" : "io", message: e.message }))
      )
    }
    for (const [i, f] of files.entries()) {
      yield* NoFollow.writeFile(agentDir, f.path, data[i]!, { mode: 0o600, owner: f.path === RESUME ? undefined : options.owner }).pipe(
        Effect.mapError((e) => new CarryError({ reason: e.reason === "link" || e.reason === "path" ? "path" : "io", message: e.message }))
      )
    }
    return files.length
  })

/** The ref a workspace family's last recorded turn is pushed to. */
export const workspaceRef = (top: string) => `refs/substrat/ws/${top}`

/**
 * git for the remote: the history's safe overrides, any transport but `ext` (the remote is the
 * owner's), the daemon's HOME and ssh settings. Submodules are never fetched or updated: a fetch
 * runs in the agent-writable worktree, where a gitlink the agent recorded and a nested repository
 * it planted would otherwise be fetched with that repository's own configuration, outside the sandbox.
 */
const remoteGit = (executor: CommandExecutor.CommandExecutor, repo: GitRepo, args: ReadonlyArray<string>, workspaceId: string) => {
  const env = parentEnv()
  const passed: Record<string, string> = {}
  for (const k of ["HOME", "GIT_SSH_COMMAND", "SSH_AUTH_SOCK"]) if (env[k] !== undefined) passed[k] = env[k]
  return runGitAt(
    executor,
    {
      cwd: repo.workTree,
      env: { ...gitBaseEnv(repo), ...passed },
      pre: [
        ...safeArgs.filter((a, i) => a !== "core.sshCommand=false" && safeArgs[i + 1] !== "core.sshCommand=false"),
        "-c", "protocol.allow=always",
        "-c", "protocol.ext.allow=never",
        "-c", "submodule.recurse=false",
        "-c", "fetch.recurseSubmodules=false"
      ]
    },
    args,
    { workspaceId }
  )
}

/**
 * Fetch a workspace family's pushed branch and turn refs into its history (`at`: the history and
 * the worktree, which may be one the agent wrote in).
 */
export const fetchRecorded = (executor: CommandExecutor.CommandExecutor, at: GitRepo, remote: string, top: string) =>
  remoteGit(executor, at, [
    "fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--update-head-ok", "--no-write-fetch-head", remote,
    `+${workspaceRef(top)}:refs/heads/master`,
    `+refs/substrat/turns/${top}/*:refs/substrat/turns/*`
  ], top)

/** The carrying a runner does after each turn (the daemon's turn hook calls it; absent outside cluster mode). */
export class TreeCarry extends Context.Tag("substrat/daemon/TreeCarry")<TreeCarry, {
  /**
   * After a turn of `agent` (its workspace's turn already recorded): push the workspace family's
   * history and note its specs; save the agent's provider state. Never fails: a failure is a
   * daemon log line (and `failures` counts it); the next turn pushes again.
   */
  readonly afterTurn: (
    agent: AgentNode,
    input: {
      readonly turnId: string
      readonly commit: string | null
      /** The workspace family (top-level first), or empty when the agent has none. */
      readonly specs: ReadonlyArray<WorkspaceSpec>
    }
  ) => Effect.Effect<void>
}>() {}

/** TreeCarry on the runner's Postgres client; pushes only when `cluster.workspace_remote` is set. */
export const layer: Layer.Layer<TreeCarry, never, SqlClient.SqlClient | SubstratPaths | DaemonConfig> = Layer.effect(
  TreeCarry,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const paths = yield* SubstratPaths
    const config = yield* DaemonConfig
    const remote = Option.getOrUndefined(config.cluster.workspaceRemote)
    const executor = yield* Effect.provide(CommandExecutor.CommandExecutor, NodeContext.layer)
    const pushLock = yield* Effect.makeSemaphore(1)
    // The last state saved per session (its hash): an unchanged state is not written again.
    const saved = new Map<string, string>()
    const skipped = new Set<string>()

    const rootOf = (agent: AgentNode) =>
      Effect.map(Effect.serviceOption(Tree), (t) => {
        if (Option.isNone(t)) return agent.id
        let node: AgentNode = agent
        for (let i = 0; i < 1000 && node.parent_id !== null; i++) {
          const up = t.value.get(node.parent_id)
          if (up === undefined) break
          node = up
        }
        return node.id
      })

    const push = (root: AgentId, turnId: string, commit: string | null, specs: ReadonlyArray<WorkspaceSpec>) =>
      Effect.gen(function*() {
        const top = specs[0]
        if (remote === undefined || top === undefined) return
        if (!top.root_path.endsWith(`/${top.id}/root`)) {
          if (!skipped.has(top.id)) {
            skipped.add(top.id)
            yield* Effect.logWarning(`workspace ${top.id} is not pushed to ${remote}: a workspace made on an existing directory (--root) stays on its runner; only workspaces under the daemon's workspaces directory (its own, --repo and branch workspaces) move with a tree`)
          }
          return
        }
        const repo = { gitDir: `${paths.workspaceDir(top.id)}/history.git`, workTree: top.root_path }
        yield* pushLock.withPermits(1)(Effect.gen(function*() {
          const head = (yield* remoteGit(executor, repo, ["rev-parse", "--verify", "HEAD"], top.id)).stdout.trim()
          // A repository or branch workspace's HEAD is its branch (`substrat/<name>`, RepoSource.branch);
          // a turn that kept the agents' own commits marks where it started (refs/substrat/bases/<turn>).
          const refs = [
            `${head}:${workspaceRef(top.id)}`,
            ...(commit === null ? [] : [`${commit}:refs/substrat/turns/${top.id}/${turnId}`]),
            ...(top.repo === null ? [] : [`refs/substrat/bases/*:refs/substrat/bases/${top.id}/*`])
          ]
          yield* remoteGit(executor, repo, ["push", "--quiet", "--no-verify", remote, ...refs], top.id)
          const rows = specs.map((s) => ({
            id: s.id,
            top_id: top.id,
            tree_root: root,
            spec: JSON.stringify(Schema.encodeSync(WorkspaceSpec)(s)),
            commit: head
          }))
          yield* sql`INSERT INTO substrat_workspaces ${sql.insert(rows)}
            ON CONFLICT (id) DO UPDATE SET top_id = EXCLUDED.top_id, tree_root = EXCLUDED.tree_root, spec = EXCLUDED.spec, commit = EXCLUDED.commit`
        }))
      }).pipe(
        Effect.catchAllCause((cause) =>
          Effect.logWarning(`workspace ${specs[0]?.id ?? "?"}: turn ${turnId} not pushed to ${remote ?? "?"} (pushed again after the next turn)`, cause)
        )
      )

    const saveState = (root: AgentId, agent: AgentNode, turnId: string) =>
      Effect.gen(function*() {
        const packed = yield* packState(paths.sessionDir(agent.session_id)).pipe(
          Effect.catchIf((e) => e.reason === "too-large", (e) =>
            Effect.as(
              Effect.zipRight(
                Effect.logWarning(`provider state of ${agent.name} (${agent.id}) not saved: ${e.message}; it does not move with its tree`),
                sql`DELETE FROM substrat_provider_state WHERE session_id = ${agent.session_id}`
              ),
              Option.none<string>()
            ))
        )
        if (Option.isNone(packed)) {
          saved.delete(agent.session_id)
          return
        }
        const hash = createHash("sha256").update(packed.value).digest("hex")
        if (saved.get(agent.session_id) === hash) return
        yield* sql`INSERT INTO substrat_provider_state (session_id, tree_root, turn_id, state)
          VALUES (${agent.session_id}, ${root}, ${turnId}, ${packed.value})
          ON CONFLICT (session_id) DO UPDATE SET tree_root = EXCLUDED.tree_root, turn_id = EXCLUDED.turn_id, state = EXCLUDED.state`
        saved.set(agent.session_id, hash)
      }).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning(`provider state of ${agent.name} (${agent.id}) after turn ${turnId} not saved`, cause))
      )

    return TreeCarry.of({
      afterTurn: (agent, input) =>
        Effect.gen(function*() {
          const root = yield* rootOf(agent)
          yield* push(root, input.turnId, input.commit, input.specs)
          yield* saveState(root, agent, input.turnId)
        }).pipe(Effect.withSpan("TreeCarry.afterTurn"))
    })
  })
)

/**
 * A repository or branch workspace (its root a git clone on branch `spec.repo.branch`) moved to
 * this runner: a new `history.git` gets the pushed branch (at the recorded `commit`) and the turn
 * and base refs from the remote, and the root is a fresh clone of that history checked out on the
 * same branch at `commit` (RepoGit.cloneRepo: no remote, no hooks, the clone's identity), so the
 * agents find the branch and its log as they left them at the last recorded turn. A copy already
 * here that is behind (`stale`: this runner had the tree before) is removed first: it is
 * agent-written and older than the remote. The user's repository (`spec.repo.path`) is not read:
 * it need not exist on this machine. Mount points of bound ignored directories are made in the
 * clone without following links (one that cannot be made, say a recorded link in its place, is a
 * log line).
 */
export const restoreClone = (args: {
  readonly executor: CommandExecutor.CommandExecutor
  readonly fs: FileSystem.FileSystem
  readonly remote: string
  readonly dir: string
  readonly repo: GitRepo
  readonly top: string
  readonly commit: string
  readonly spec: WorkspaceSpec
  readonly stale: boolean
  readonly owner: NoFollow.Owner | undefined
}) =>
  Effect.gen(function*() {
    const { executor, fs, repo, top, commit } = args
    const branch = args.spec.repo!.branch
    if (args.stale) yield* fs.remove(args.dir, { recursive: true })
    yield* fs.makeDirectory(args.dir, { recursive: true, mode: 0o700 })
    yield* fs.makeDirectory(repo.workTree, { recursive: true, mode: 0o755 })
    yield* initHistory(fs, repo, top, { empty: false })
    yield* remoteGit(executor, repo, [
      "fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--no-write-fetch-head", args.remote,
      `+${workspaceRef(top)}:refs/heads/${branch}`,
      `+refs/substrat/turns/${top}/*:refs/substrat/turns/*`,
      `+refs/substrat/bases/${top}/*:refs/substrat/bases/*`
    ], top)
    // The branch at the recorded turn (the remote may be ahead of the row: a push whose row failed).
    yield* remoteGit(executor, repo, ["update-ref", `refs/heads/${branch}`, commit], top)
    yield* cloneRepo(executor, { id: top, repo: { top: repo.gitDir, commit, target: null, branch, fork: true }, root: repo.workTree, historyGitDir: repo.gitDir })
    for (const b of args.spec.symlinks) {
      yield* NoFollow.makeDirectory(repo.workTree, b.mount_path, { mode: 0o755, owner: args.owner }).pipe(
        Effect.catchAll((e) => Effect.logWarning(`workspace ${top}: no mount point for ${b.mount_path} in the restored clone (${e.message}); its sandbox refuses to start until it is a directory`))
      )
    }
  })

/** What restoring needs from the runner's services. */
export type RestoreNeeds = SqlClient.SqlClient | SubstratPaths | DaemonConfig | WorkspaceStore

/** `restoreTrees` with the services it needs (and the Sandbox's owner, when there is one) taken from the caller's context now. */
export const restorer: Effect.Effect<(roots: ReadonlyArray<AgentId>) => Effect.Effect<Restored>, never, RestoreNeeds> = Effect.map(
  Effect.context<RestoreNeeds>(),
  (ctx) => (roots) => Effect.provide(restoreTrees(roots), ctx)
)

/** What `restoreTrees` did. */
export interface Restored {
  readonly workspaces: number
  readonly states: number
}

/**
 * Before a runner recovers the trees whose roots are `roots`: their workspaces (from the remote,
 * when missing here or older than the recorded commit) and their agents' provider states. Never
 * fails: what cannot be restored is a log line (the agent then runs as before this existed: a
 * missing workspace fails its turns, a missing state starts a new conversation).
 */
export const restoreTrees = (
  roots: ReadonlyArray<AgentId>
): Effect.Effect<Restored, never, SqlClient.SqlClient | SubstratPaths | DaemonConfig | WorkspaceStore> =>
  Effect.gen(function*() {
    if (roots.length === 0) return { workspaces: 0, states: 0 }
    const sql = yield* SqlClient.SqlClient
    const paths = yield* SubstratPaths
    const config = yield* DaemonConfig
    const store = yield* WorkspaceStore
    const owner = Option.getOrUndefined(Option.flatMap(yield* Effect.serviceOption(Sandbox), (s) => Option.fromNullable(s.owner)))
    const remote = Option.getOrUndefined(config.cluster.workspaceRemote)
    const { executor, fs } = yield* Effect.provide(
      Effect.all({ executor: CommandExecutor.CommandExecutor, fs: FileSystem.FileSystem }),
      NodeContext.layer
    )
    let workspaces = 0
    let states = 0

    const rows = remote === undefined ? [] : yield* sql<{ id: string; top_id: string; spec: string; commit: string }>`
      SELECT id, top_id, spec, commit FROM substrat_workspaces WHERE tree_root IN ${sql.in(roots)}`
    const decode = Schema.decodeUnknownEither(Schema.parseJson(WorkspaceSpec))
    for (const top of rows.filter((r) => r.id === r.top_id)) {
      yield* Effect.gen(function*() {
        const spec = decode(top.spec)
        if (Either.isLeft(spec)) return yield* Effect.fail(`its recorded spec does not decode: ${spec.left.message}`)
        const dir = paths.workspaceDir(top.id)
        const root = `${dir}/root`
        const repo = { gitDir: `${dir}/history.git`, workTree: root }
        const here = yield* store.get(spec.right.id).pipe(Effect.option)
        if (Option.isSome(here)) {
          const local = { gitDir: repo.gitDir, workTree: here.value.root_path }
          const has = yield* remoteGit(executor, local, ["merge-base", "--is-ancestor", top.commit, "HEAD"], top.id).pipe(Effect.isSuccess)
          if (has) return
        }
        if (spec.right.repo !== null) {
          // A repository or branch workspace: a fresh clone of the pushed branch.
          yield* restoreClone({ executor, fs, remote: remote!, dir, repo, top: top.id, commit: top.commit, spec: spec.right, stale: Option.isSome(here), owner })
        } else {
          if (Option.isNone(here)) {
            yield* fs.makeDirectory(root, { recursive: true, mode: 0o755 })
            yield* initHistory(fs, repo, top.id)
          }
          const at = Option.isSome(here) ? { gitDir: repo.gitDir, workTree: here.value.root_path } : repo
          yield* fetchRecorded(executor, at, remote!, top.id)
          yield* remoteGit(executor, at, ["reset", "--quiet", "--hard", top.commit], top.id)
          yield* remoteGit(executor, at, ["clean", "--quiet", "-f", "-d"], top.id)
        }
        const family = rows.filter((r) => r.top_id === top.id && r.id !== top.id)
        const oldTop = spec.right.root_path
        const newTop = Option.isSome(here) && spec.right.repo === null ? here.value.root_path : (yield* store.adopt(spec.right)).root_path
        for (const c of family) {
          const child = decode(c.spec)
          if (Either.isLeft(child)) continue
          const rel = relativeTo(oldTop, child.right.root_path)
          if (rel === "" || rel === child.right.root_path) continue
          yield* NoFollow.makeDirectory(newTop, rel, { mode: 0o755, owner })
          if (Option.isNone(yield* store.get(child.right.id).pipe(Effect.option))) {
            yield* store.adopt(new WorkspaceSpec({ ...child.right, root_path: `${newTop}/${rel}` }))
          }
        }
        if (owner !== undefined) {
          yield* runCollect(spawnScoped(executor, {
            argv: ["chown", "-R", "-h", `${owner.uid}:${owner.gid}`, "--", newTop],
            env: { PATH: "/usr/bin:/bin" },
            limits: noLimits,
            graceMs: 1000
          }))
        }
        workspaces++
        yield* Effect.logInfo(`workspace ${top.id} checked out from ${remote} at ${top.commit.slice(0, 12)} (its last recorded turn)`)
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning(`workspace ${top.id} not restored from ${remote ?? "?"}`, cause)))
    }

    const saved = yield* sql<{ session_id: string; state: string }>`
      SELECT session_id, state FROM substrat_provider_state WHERE tree_root IN ${sql.in(roots)}`
    for (const s of saved) {
      yield* unpackState(paths.sessionDir(s.session_id), s.state, { owner }).pipe(
        Effect.tap(() => Effect.sync(() => states++)),
        Effect.catchAll((e) => Effect.logWarning(`provider state of session ${s.session_id} not restored: ${e.message}`))
      )
    }
    return { workspaces, states }
  }).pipe(
    Effect.catchAllCause((cause) => Effect.as(Effect.logWarning("restoring moved trees' workspaces and provider state failed", cause), { workspaces: 0, states: 0 })),
    Effect.withSpan("TreeCarry.restoreTrees")
  )
