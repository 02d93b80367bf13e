// Per-turn filesystem history of workspaces (seed 003 fs_diff): after each turn the daemon calls
// `commitTurn`, which commits the workspace's subtree to the top-level workspace's git history
// (git dir outside the sandbox-visible tree), attributed to the agent and turn id, and returns the
// changed paths for the `workspace.diff` event. `diff` shows a turn (or the pending changes),
// `revert` undoes one turn with a new commit.
//
// Attribution: a change is recorded by the first commitTurn of a workspace whose subtree contains
// it — a parent's turn also records uncommitted changes in its children's subtrees.
//
// Over 300 lines because commit, diff and revert share one history repository and the attribution
// rule above.
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import { Deferred, Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import { NotFoundError } from "../domain/errors.js"
import type { AgentId, TurnId, WorkspaceId } from "../domain/ids.js"
import { WorkspaceError, WorkspaceHistoryError } from "./errors.js"
import { type GitOptions, type GitRepo, runGit } from "./git.js"
import { packAgentCommits, writeTreeChange } from "./CloneSync.js"
import * as NoFollow from "./NoFollow.js"
import { mergeBranch, publishBranch } from "./RepoGit.js"
import { Sandbox } from "./Sandbox.js"
import { type HistoryLocation, WorkspaceStore } from "./WorkspaceStore.js"

export type ChangeKind = "added" | "modified" | "deleted"

export interface ChangedPath {
  readonly path: string
  readonly change: ChangeKind
}

export interface TurnCommit {
  /** null when the turn changed nothing (no commit is made). */
  readonly commit: string | null
  readonly paths: ReadonlyArray<ChangedPath>
}

/** A turn's changes as recorded (what `onRecorded` listeners get). */
export interface Recorded {
  readonly workspace: WorkspaceId
  readonly agent: string
  readonly agentId: AgentId | null
  readonly turnId: TurnId
  /** The turn's commit; null (only for `everyTurn` listeners): the turn changed nothing. */
  readonly commit: string | null
  readonly paths: ReadonlyArray<ChangedPath>
}

export interface TurnInfo {
  readonly commit: string
  readonly turn_id: string | null
  readonly agent: string
  readonly time: string
  readonly subject: string
}

/** Parse `git diff --name-status -z --no-renames`. Paths are made relative to `prefix`. */
export const parseNameStatus = (out: string, prefix: string): Array<ChangedPath> => {
  const parts = out.split("\0")
  const res: Array<ChangedPath> = []
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const status = parts[i]!
    const path = parts[i + 1]!
    const change: ChangeKind = status.startsWith("A") ? "added" : status.startsWith("D") ? "deleted" : "modified"
    const rel = prefix === "" ? path : path.startsWith(prefix + "/") ? path.slice(prefix.length + 1) : path
    res.push({ path: rel, change })
  }
  return res.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
}

/** One staged entry of `git diff --cached --raw -z --no-renames --no-abbrev`. */
interface RawEntry {
  readonly path: string
  readonly change: ChangeKind
  readonly srcMode: string
  readonly srcId: string
  readonly dstMode: string
}

const parseRaw = (out: string): Array<RawEntry> => {
  const parts = out.split("\0")
  const res: Array<RawEntry> = []
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const [srcMode = "", dstMode = "", srcId = "", , status = ""] = parts[i]!.replace(/^:/, "").split(" ")
    const change: ChangeKind = status.startsWith("A") ? "added" : status.startsWith("D") ? "deleted" : "modified"
    res.push({ path: parts[i + 1]!, change, srcMode, srcId, dstMode })
  }
  return res
}

const GITLINK = "160000"

const turnRef = (turnId: string) => `refs/substrat/turns/${turnId}`
/** A turn whose commits are more than one (the agent's own commits, then the daemon's): where it started. */
const baseRef = (turnId: string) => `refs/substrat/bases/${turnId}`
const agentHeadRef = "refs/substrat/agent-head"
/** Set (to the merge commit) from just before a merge queue moves the branch until the clone has its files. */
export const MERGE_PENDING = "refs/substrat/merge-pending"

/** What a git call on the history takes besides its arguments. */
export type HistoryGitOptions = Pick<GitOptions, "input" | "stdin" | "okCodes"> & { readonly env?: Record<string, string> }

export type HistoryGit = (
  args: ReadonlyArray<string>,
  opts?: HistoryGitOptions
) => Effect.Effect<{ code: number; stdout: string; stderr: string }, WorkspaceHistoryError>

/** The commit a clone's HEAD names in its files (`.git/HEAD`, a loose ref), read without following a link; "" when unknown. */
const cloneHeadHint = (root: string) =>
  Effect.gen(function*() {
    const text = (rel: string) => Effect.map(NoFollow.readFile(root, rel, 4096), (b) => new TextDecoder().decode(b).trim())
    const head = yield* text(".git/HEAD")
    if (/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(head)) return head
    const ref = /^ref: (refs\/heads\/\S+)$/.exec(head)?.[1]
    return ref === undefined ? "" : yield* text(`.git/${ref}`)
  }).pipe(Effect.orElseSucceed(() => ""))

export interface PatchFile {
  readonly name: string
  readonly text: string
}

/**
 * A three-way merge of two trees on the commit `base`, objects only: `git merge-tree` (2.38+)
 * takes no base, so each tree is put on a scratch commit whose parent is `base` — their merge
 * base. Only unreferenced objects remain. Conflict: the conflicting paths.
 */
export const threeWay = (git: HistoryGit, base: string, ours: string, theirs: string) =>
  Effect.gen(function*() {
    const scratch = (tree: string) => Effect.map(git(["commit-tree", tree, "-p", base, "-m", "merge base"]), (r) => r.stdout.trim())
    const mt = yield* git(["merge-tree", "--write-tree", "--name-only", "--no-messages", yield* scratch(ours), yield* scratch(theirs)], { okCodes: [0, 1] })
    const lines = mt.stdout.split("\n")
    if (mt.code === 1) return { _tag: "conflict", paths: [...new Set(lines.slice(1).map((l) => l.trim()).filter((l) => l.length > 0))] } as const
    return { _tag: "merged", tree: lines[0]!.trim() } as const
  })

export class WorkspaceHistory extends Effect.Service<WorkspaceHistory>()("substrat/WorkspaceHistory", {
  effect: Effect.gen(function*() {
    const store = yield* WorkspaceStore
    const executor = yield* CommandExecutor.CommandExecutor
    const fs = yield* FileSystem.FileSystem
    // Agents' own commits are read inside their sandbox; without one (a test of the history
    // alone) they are not read, and the turn's files are recorded as one commit.
    const sandbox = yield* Effect.serviceOption(Sandbox)
    const listeners = new Set<(r: Recorded) => Effect.Effect<void>>()
    const everyTurnListeners = new Set<(r: Recorded) => Effect.Effect<void>>()
    // Where each workspace's history is: fixed for a workspace's life (its root, its parent and
    // the top-level ancestor's git dir never change), so it is read once. A deleted workspace's
    // entry only makes its git commands fail (the caller reports it as before).
    const locations = new Map<WorkspaceId, HistoryLocation>()
    const locationOf = (id: WorkspaceId) =>
      Effect.suspend(() => {
        const known = locations.get(id)
        if (known !== undefined) return Effect.succeed(known)
        return Effect.tap(store.historyLocation(id), (loc) => Effect.sync(() => locations.set(id, loc)))
      })
    // One git operation at a time per repository (parent and children share one).
    const locks = new Map<string, Effect.Semaphore>()
    const lockFor = (gitDir: string) => {
      let s = locks.get(gitDir)
      if (s === undefined) {
        s = Effect.unsafeMakeSemaphore(1)
        locks.set(gitDir, s)
      }
      return s
    }

    const withRepo = <A, E>(
      id: WorkspaceId,
      f: (loc: HistoryLocation, git: HistoryGit, scope: ReadonlyArray<string>) => Effect.Effect<A, E>
    ) =>
      Effect.gen(function*() {
        const loc = yield* locationOf(id)
        const repo: GitRepo = { gitDir: loc.gitDir, workTree: loc.topRoot }
        const git = (args: ReadonlyArray<string>, opts: HistoryGitOptions = {}) =>
          runGit(executor, repo, args, { ...opts, workspaceId: id })
        const scope = loc.prefix === "" ? [":/"] : [`:(top,literal)${loc.prefix}`]
        return yield* lockFor(loc.gitDir).withPermits(1)(f(loc, git, scope))
      })

    // Histories (git dirs) whose index is known to hold exactly HEAD's tree: after a commitTurn
    // that committed, or found nothing staged in the whole tree. Then a turn whose `git add`
    // stages nothing changed nothing, and needs no `git diff`. Anything else that moves the index
    // or HEAD (a revert, a failed commitTurn) drops the entry; unknown after a restart.
    const indexMatchesHead = new Set<string>()

    type Git = HistoryGit

    /**
     * The clone's HEAD, when the agents moved it: read inside the sandbox (CloneSync.packAgentCommits:
     * whatever links or config they put in their `.git` resolve there, never on the host), its objects
     * indexed here with every object checked (`index-pack --strict`); when it continues the
     * history's branch, the branch moves to it. True when it moved. Anything odd (no HEAD, unrelated
     * history, a refused pack, no sandbox) keeps the branch as is: the files are still recorded.
     */
    const absorbAgentCommits = (loc: HistoryLocation, git: Git, before: string) =>
      Effect.gen(function*() {
        if (Option.isNone(sandbox)) return false
        // The clone's HEAD as its files say (read without following a link): when it is still
        // `before`, nothing to read (a wrong answer only costs the agents their own commits).
        if ((yield* cloneHeadHint(loc.topRoot)) === before) return false
        const agentHead = yield* packAgentCommits(loc.topRoot, before, (pack) =>
          Effect.map(
            git(["index-pack", "--stdin", "--fix-thin", "--strict"], { stdin: pack, okCodes: [0, 1, 128] }),
            (r) => r.code === 0
          )).pipe(Effect.provideService(Sandbox, sandbox.value))
        if (agentHead === null || agentHead === before) return false
        const descends = yield* git(["merge-base", "--is-ancestor", before, agentHead], { okCodes: [0, 1, 128] })
        if (descends.code !== 0) return false
        yield* git(["update-ref", "-m", "agent commits", agentHeadRef, agentHead])
        yield* git(["update-ref", "-m", "agent commits", "HEAD", agentHead, before])
        return true
      })

    /**
     * What `git add` staged (against HEAD, in `scope`), as changed paths relative to the workspace.
     * A directory with its own `.git` (a gitfile or a link naming any repository on the host) is a
     * gitlink to git, whose commit id git reads from behind that `.git`: such entries are put back
     * as HEAD has them (`update-index --index-info`, which reads nothing) and never recorded, so
     * nothing from behind a nested `.git` reaches the history, a diff or the user's repository.
     */
    const stagedChanges = (git: Git, scope: ReadonlyArray<string>, prefix: string, env?: Record<string, string>) =>
      Effect.gen(function*() {
        const opts = env === undefined ? {} : { env }
        const st = yield* git(["diff", "--cached", "--raw", "-z", "--no-renames", "--no-abbrev", "HEAD", "--", ...scope], opts)
        const entries = parseRaw(st.stdout)
        const links = entries.filter((e) => e.dstMode === GITLINK)
        if (links.length > 0) {
          const absent = /^0+$/
          const input = links.map((e) => `${absent.test(e.srcId) ? `0 ${e.srcId}` : `${e.srcMode} ${e.srcId}`}\t${e.path}\0`).join("")
          yield* git(["update-index", "-z", "--index-info"], { ...opts, input })
        }
        const rel = (p: string) => (prefix === "" ? p : p.startsWith(prefix + "/") ? p.slice(prefix.length + 1) : p)
        return entries
          .filter((e) => e.dstMode !== GITLINK)
          .map((e): ChangedPath => ({ path: rel(e.path), change: e.change }))
          .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
      })

    /** A repository workspace: its branch to the user's repository (a failure is logged; the next turn publishes it). */
    const publish = (id: WorkspaceId, loc: HistoryLocation) =>
      loc.repo === null || loc.fork_of !== null
        ? Effect.void
        : publishBranch(executor, { id, top: loc.repo.path, historyGitDir: loc.gitDir, branch: loc.repo.branch }).pipe(
          Effect.catchAllCause((c) => Effect.logWarning(`workspace ${id}: ${loc.repo?.branch} not published`, c))
        )

    /**
     * Record the workspace's pending changes as one turn of `agent`. `paths` (relative to the
     * workspace root) limits what is recorded; `locked` is completed once this commit holds the
     * repository (a caller can then start work whose own record must come after this one);
     * `proceed`, when given, runs next, still holding the repository, before any git command
     * (a caller can keep this record's work off a path it wants fast, its place kept).
     */
    const commitTurn = Effect.fn("WorkspaceHistory.commitTurn")(function*(
      id: WorkspaceId,
      turn: {
        readonly agent: string
        readonly turnId: TurnId
        readonly summary?: string
        readonly paths?: ReadonlyArray<string>
        readonly locked?: Deferred.Deferred<void>
        readonly proceed?: Effect.Effect<void>
        /** The agent's id, for `onRecorded` listeners. */
        readonly agentId?: AgentId
      }
    ) {
      const r = yield* withRepo(id, (loc, git, whole) =>
        Effect.gen(function*() {
          if (turn.locked !== undefined) yield* Deferred.succeed(turn.locked, undefined)
          if (turn.proceed !== undefined) yield* turn.proceed
          const scope = turn.paths === undefined
            ? whole
            : turn.paths.map((p) => `:(top,literal)${loc.prefix === "" ? p : `${loc.prefix}/${p}`}`)
          if (scope.length === 0) return { commit: null, paths: [] } satisfies TurnCommit
          // A merge moved the branch but its files are not in the clone yet (src/daemon/MergeQueue.ts):
          // recording now would undo it, so the changes wait for a later record. (A loose ref the
          // queue writes and deletes while it holds this repository: no git process per turn.)
          if (yield* fs.exists(`${loc.gitDir}/${MERGE_PENDING}`).pipe(Effect.orElseSucceed(() => false))) {
            yield* Effect.logWarning(`workspace ${id}: a merge is being finished; turn ${turn.turnId} is recorded later`)
            return { commit: null, paths: [] } satisfies TurnCommit
          }
          const wholeTree = loc.prefix === "" && turn.paths === undefined
          const wasClean = indexMatchesHead.delete(loc.gitDir)
          // A repository workspace: the agents' own commits of this turn (in the clone's .git) are
          // kept when they continue the branch.
          const absorbing = loc.repo !== null && wholeTree
          const before = absorbing ? (yield* git(["rev-parse", "HEAD"])).stdout.trim() : ""
          const absorbed = absorbing ? yield* absorbAgentCommits(loc, git, before) : false
          const added = yield* git(["add", "-A", "-v", "--", ...scope])
          // The index held HEAD and `add` staged nothing: nothing changed (one process per quiet turn).
          if (wasClean && !absorbed && added.stdout.trim() === "") {
            indexMatchesHead.add(loc.gitDir)
            return { commit: null, paths: [] } satisfies TurnCommit
          }
          const staged = yield* stagedChanges(git, scope, loc.prefix)
          if (staged.length === 0 && !absorbed) {
            if (wasClean || wholeTree) indexMatchesHead.add(loc.gitDir)
            return { commit: null, paths: staged } satisfies TurnCommit
          }
          if (staged.length > 0) {
            const message = `${turn.summary ?? `turn ${turn.turnId}`}\n\nSubstrat-Workspace: ${id}\nSubstrat-Agent: ${turn.agent}\nSubstrat-Turn: ${turn.turnId}\n`
            yield* git(["commit", "-q", "--no-verify", "-F", "-"], {
              input: message,
              env: { GIT_AUTHOR_NAME: turn.agent, GIT_AUTHOR_EMAIL: `${turn.agent.replace(/[^A-Za-z0-9._-]/g, "_")}@agents.substrat` }
            })
          }
          const head = (yield* git(["rev-parse", "HEAD"])).stdout.trim()
          const paths = absorbed
            ? parseNameStatus((yield* git(["diff", "--name-status", "-z", "--no-renames", before, head, "--", ...scope])).stdout, loc.prefix)
            : staged
          if (absorbed) yield* git(["update-ref", baseRef(turn.turnId), before])
          yield* git(["update-ref", turnRef(turn.turnId), head])
          indexMatchesHead.add(loc.gitDir)
          yield* publish(id, loc)
          return { commit: head, paths } satisfies TurnCommit
        }))
      const recorded: Recorded = { workspace: id, agent: turn.agent, agentId: turn.agentId ?? null, turnId: turn.turnId, commit: r.commit, paths: r.paths }
      for (const f of r.commit !== null ? [...listeners, ...everyTurnListeners] : everyTurnListeners) {
        yield* f(recorded).pipe(Effect.catchAllCause((c) => Effect.logWarning("workspace history: a listener failed", c)))
      }
      return r
    })

    /**
     * Call `f` after each recorded turn (in the recording fiber, before commitTurn returns) while
     * the scope lasts; `everyTurn`: also after a turn that changed nothing (`commit` null).
     */
    const onRecorded = (f: (r: Recorded) => Effect.Effect<void>, options?: { readonly everyTurn?: boolean }) => {
      const set = options?.everyTurn === true ? everyTurnListeners : listeners
      return Effect.acquireRelease(Effect.sync(() => set.add(f)), () => Effect.sync(() => set.delete(f))).pipe(Effect.asVoid)
    }

    /** A turn's commit and where it started (its parent, or the commit before the agent's own commits). */
    const commitOf = (id: WorkspaceId, git: Git, turnId: string) =>
      Effect.gen(function*() {
        const r = yield* git(["rev-parse", "--verify", "-q", `${turnRef(turnId)}^{commit}`], { okCodes: [0, 1] })
        if (r.code !== 0) {
          return yield* new NotFoundError({ kind: "turn", id: turnId, message: `no recorded changes for turn ${turnId} in workspace ${id}` })
        }
        const c = r.stdout.trim()
        const b = yield* git(["rev-parse", "--verify", "-q", `${baseRef(turnId)}^{commit}`], { okCodes: [0, 1] })
        return { c, base: b.code === 0 ? b.stdout.trim() : `${c}^`, several: b.code === 0 }
      })

    /** Stage into a throwaway copy of the index so the real one is untouched. */
    const withTempIndex = <A, E>(loc: HistoryLocation, f: (env: Record<string, string>) => Effect.Effect<A, E>) => {
      const tmpIndex = `${loc.gitDir}/index.diff-${randomUUID()}`
      return fs.copyFile(`${loc.gitDir}/index`, tmpIndex).pipe(
        Effect.ignore,
        Effect.zipRight(f({ GIT_INDEX_FILE: tmpIndex })),
        Effect.ensuring(fs.remove(tmpIndex).pipe(Effect.ignore))
      )
    }

    const relative = (loc: HistoryLocation) => (loc.prefix === "" ? [] : [`--relative=${loc.prefix}/`])

    /** Unified diff of one turn, or (no turn) of the changes not yet recorded. */
    const diff = Effect.fn("WorkspaceHistory.diff")(function*(id: WorkspaceId, turnId?: TurnId) {
      return yield* withRepo(id, (loc, git, scope) =>
        Effect.gen(function*() {
          const flags = ["--no-ext-diff", "--no-textconv", "--no-color", ...relative(loc)]
          if (turnId !== undefined) {
            const { base, c } = yield* commitOf(id, git, turnId)
            return (yield* git(["diff", ...flags, base, c, "--", ...scope])).stdout
          }
          return yield* withTempIndex(loc, (env) =>
            Effect.gen(function*() {
              yield* git(["add", "-A", "--", ...scope], { env })
              yield* stagedChanges(git, scope, loc.prefix, env)
              return (yield* git(["diff", "--cached", ...flags, "HEAD", "--", ...scope], { env })).stdout
            }))
        }))
    })

    /** Changed paths not recorded yet (what the next commitTurn of this workspace would record). */
    const pendingChanges = Effect.fn("WorkspaceHistory.pendingChanges")(function*(id: WorkspaceId) {
      return yield* withRepo(id, (loc, git, scope) =>
        withTempIndex(loc, (env) =>
          Effect.gen(function*() {
            yield* git(["add", "-A", "--", ...scope], { env })
            return yield* stagedChanges(git, scope, loc.prefix, env)
          })))
    })

    /** Changed paths of one recorded turn. */
    const changes = Effect.fn("WorkspaceHistory.changes")(function*(id: WorkspaceId, turnId: TurnId) {
      return yield* withRepo(id, (loc, git, scope) =>
        Effect.gen(function*() {
          const { base, c } = yield* commitOf(id, git, turnId)
          const st = yield* git(["diff", "--name-status", "-z", "--no-renames", base, c, "--", ...scope])
          return parseNameStatus(st.stdout, loc.prefix)
        }))
    })

    /**
     * Undo one turn with a new commit. Fails with reason `conflict` when later changes overlap it,
     * or a local change is in the way of its files (nothing is changed then). The undone tree is
     * made from objects only; its files are written inside the workspace's sandbox
     * (CloneSync.writeTreeChange), never by git on the host through the agents' tree.
     */
    const revert = Effect.fn("WorkspaceHistory.revert")(function*(
      id: WorkspaceId,
      turnId: TurnId,
      by: { readonly agent?: string } = {}
    ) {
      return yield* withRepo(id, (loc, git, scope) =>
        Effect.gen(function*() {
          indexMatchesHead.delete(loc.gitDir)
          const refuse = (why: string) =>
            new WorkspaceHistoryError({ workspace_id: id, reason: "conflict", message: `cannot revert turn ${turnId}: ${why}` })
          const { base, c } = yield* commitOf(id, git, turnId)
          const old = (yield* git(["rev-parse", "--verify", "HEAD^{commit}"])).stdout.trim()
          const oldTree = (yield* git(["rev-parse", `${old}^{tree}`])).stdout.trim()
          const baseTree = (yield* git(["rev-parse", `${base}^{tree}`])).stdout.trim()
          // The turn's changes taken back out of the current tree: a three-way merge whose base is the turn's commit.
          const undone = yield* threeWay(git, c, oldTree, baseTree)
          if (undone._tag === "conflict") return yield* refuse(`later changes overlap it in ${undone.paths.join(", ")}`)
          const st = yield* git(["diff", "--name-status", "-z", "--no-renames", oldTree, undone.tree, "--", ...scope])
          const paths = parseNameStatus(st.stdout, loc.prefix)
          if (paths.length === 0) return { commit: null, paths } satisfies TurnCommit
          const written = Option.isNone(sandbox)
            ? yield* hostTreeChange(loc, git, oldTree, undone.tree)
            : yield* writeTreeChange(loc.topRoot, loc.gitDir, oldTree, undone.tree).pipe(Effect.provideService(Sandbox, sandbox.value))
          if (written !== "") return yield* refuse(written)
          const agent = by.agent ?? "substrat"
          const head = (yield* git(["commit-tree", undone.tree, "-p", old, "-F", "-"], {
            input: `revert turn ${turnId}\n\nSubstrat-Workspace: ${id}\nSubstrat-Agent: ${agent}\nSubstrat-Revert-Of: ${turnId}\n`,
            env: { GIT_AUTHOR_NAME: agent }
          })).stdout.trim()
          yield* git(["update-ref", "-m", `revert turn ${turnId}`, "HEAD", head, old])
          // The index follows without git looking at the work tree (-i).
          const idx = yield* git(["read-tree", "-m", "-i", oldTree, undone.tree], { okCodes: [0, 1, 128] })
          if (idx.code !== 0) yield* git(["read-tree", "HEAD"])
          yield* publish(id, loc)
          return { commit: head, paths } satisfies TurnCommit
        }))
    })

    /** Without a sandbox (the history alone): the same two-tree update, git on the host with a copy of the index. */
    const hostTreeChange = (loc: HistoryLocation, git: Git, from: string, to: string) =>
      Effect.gen(function*() {
        const index = `${loc.gitDir}/index.revert-${randomUUID()}`
        yield* fs.copyFile(`${loc.gitDir}/index`, index).pipe(Effect.ignore)
        const env = { GIT_INDEX_FILE: index }
        yield* git(["update-index", "-q", "--refresh"], { env, okCodes: [0, 1] })
        const r = yield* git(["read-tree", "-m", "-u", from, to], { env, okCodes: [0, 1, 128] })
        yield* fs.remove(index).pipe(Effect.ignore)
        return r.code === 0 ? "" : r.stderr.trim()
      })

    /** Recorded turns touching this workspace, newest first. */
    const log = Effect.fn("WorkspaceHistory.log")(function*(id: WorkspaceId, options: { readonly limit?: number } = {}) {
      return yield* withRepo(id, (_loc, git, scope) =>
        Effect.gen(function*() {
          const r = yield* git([
            "log",
            `--max-count=${options.limit ?? 100}`,
            "--format=%H%x1f%an%x1f%aI%x1f%s%x1f%(trailers:key=Substrat-Turn,valueonly,separator=)%x1e",
            "--",
            ...scope
          ])
          return r.stdout.split("\x1e").map((l) => l.trim()).filter((l) => l.length > 0).map((l): TurnInfo => {
            const [commit = "", agent = "", time = "", subject = "", turn = ""] = l.split("\x1f")
            return { commit, agent, time, subject, turn_id: turn.trim().length > 0 ? turn.trim() : null }
          })
        }))
    })

    const repoOf = (id: WorkspaceId, loc: HistoryLocation) =>
      loc.repo === null || loc.prefix !== ""
        ? Effect.fail(new WorkspaceError({ workspace_id: id, reason: "invalid", message: `workspace ${id} was not made from a repository (workspace create --repo)` }))
        : loc.fork_of !== null
        ? Effect.fail(new WorkspaceError({ workspace_id: id, reason: "invalid", message: `workspace ${id} is a branch child's: its work goes to workspace ${loc.fork_of} through that workspace's merge queue (substrat workspace queue ${loc.fork_of})` }))
        : Effect.succeed(loc.repo)

    /**
     * Merge a repository workspace's branch into a branch of the user's repository (default: the
     * one checked out when it was made). Publishes first, so what is merged is every recorded turn.
     */
    const merge = Effect.fn("WorkspaceHistory.merge")(function*(
      id: WorkspaceId,
      options: { readonly into?: string; readonly squash?: boolean; readonly message?: string }
    ) {
      return yield* withRepo(id, (loc) =>
        Effect.gen(function*() {
          const repo = yield* repoOf(id, loc)
          const into = options.into ?? repo.target
          if (into === null) {
            return yield* new WorkspaceError({ workspace_id: id, reason: "invalid", message: `${repo.path} was on a detached HEAD when the workspace was made: say which branch with --into` })
          }
          yield* publishBranch(executor, { id, top: repo.path, historyGitDir: loc.gitDir, branch: repo.branch })
          return yield* mergeBranch(executor, { id, top: repo.path, branch: repo.branch, into, squash: options.squash ?? false, message: options.message })
        }))
    })

    /** The workspace's recorded work since it was made from the repository, as a patch series (`git format-patch`). */
    const exportPatches = Effect.fn("WorkspaceHistory.exportPatches")(function*(id: WorkspaceId) {
      return yield* withRepo(id, (loc, git) =>
        Effect.gen(function*() {
          const repo = yield* repoOf(id, loc)
          const out = `${loc.gitDir}/export-${randomUUID()}`
          return yield* Effect.gen(function*() {
            yield* git(["format-patch", "-q", "--no-color", "--no-signature", "--no-renames", "-o", out, `${repo.base}..HEAD`])
            const names = (yield* fs.readDirectory(out).pipe(Effect.orElseSucceed(() => []))).filter((n) => n.endsWith(".patch")).sort()
            const files: Array<PatchFile> = []
            for (const name of names) files.push({ name, text: yield* fs.readFileString(`${out}/${name}`).pipe(Effect.mapError((e) => new WorkspaceHistoryError({ workspace_id: id, reason: "git", message: e.message }))) })
            return files
          }).pipe(Effect.ensuring(fs.remove(out, { recursive: true }).pipe(Effect.ignore)))
        }))
    })

    /**
     * Run `f` holding the workspace's history repository (no turn is recorded meanwhile), with git
     * on it, and `publish` (its branch to the user's repository, when it is a repository workspace).
     */
    const exclusive = <A, E>(id: WorkspaceId, f: (loc: HistoryLocation, git: HistoryGit, publish: Effect.Effect<void>) => Effect.Effect<A, E>) =>
      withRepo(id, (loc, git) =>
        Effect.suspend(() => {
          // `f` may move HEAD or the index: the next record checks with a full `git diff`.
          indexMatchesHead.delete(loc.gitDir)
          return f(loc, git, publish(id, loc))
        }))

    return { commitTurn, onRecorded, diff, pendingChanges, changes, revert, log, merge, exportPatches, exclusive, locationOf } as const
  })
}) {}

