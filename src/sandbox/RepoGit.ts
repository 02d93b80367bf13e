// Git on the user's repository and on a repository workspace's clone (docs/sandbox.md,
// "Repository workspaces").
//
// Trust: the user's repository is the owner's (its config is trusted, its hooks are never run);
// the clone inside a workspace is written by agents, so the daemon never runs git in it on the
// host once agents have had it: git in the clone runs inside the workspace's sandbox
// (src/sandbox/CloneSync.ts), where links in its `.git` cannot reach the user's repository or
// $SUBSTRAT_HOME.
//   - open:     validate path/ref (not a repository, unknown ref, inside $SUBSTRAT_HOME, submodules,
//               LFS: refused, nothing created)
//   - clone:    `git clone --no-local` (no hardlinks, no shared objects) into the new root, on
//               branch `substrat/<name>`, no remote, no hooks
//   - publish:  `git fetch` run in the user's repository from the daemon's history repo, writing
//               only `refs/heads/substrat/<name>`; a locked ref is retried
//   - merge:    `git merge-tree --write-tree` (no index, no work tree), then the checked-out work
//               tree (only when clean) and the branch move, compare-and-swap
//
// Over 300 lines because every git command the host runs on the user's repository or a new clone is
// here, under the trust rules above, so they are checked in one place.
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import { Duration, Effect, Either } from "effect"
import { parentEnv } from "../config/Config.js"
import { WorkspaceError, type WorkspaceHistoryError } from "./errors.js"
import { type GitPlace, type GitResult, runGitAt, safeArgs } from "./git.js"
import { absolutePath, isWithin, linkRefusal, relativePath } from "./PathPolicy.js"

const invalid = (id: string, message: string) => new WorkspaceError({ workspace_id: id, reason: "invalid", message })
const conflict = (id: string, message: string) => new WorkspaceError({ workspace_id: id, reason: "conflict", message })

/** git in the user's repository: the user's own config and identity, never a hook. */
export const userPlace = (top: string): GitPlace => {
  const env = parentEnv()
  const keep: Record<string, string> = { PATH: env["PATH"] ?? "/usr/bin:/bin", LC_ALL: "C", GIT_TERMINAL_PROMPT: "0" }
  for (const k of ["HOME", "XDG_CONFIG_HOME", "USER"]) if (env[k] !== undefined) keep[k] = env[k]!
  return {
    cwd: top,
    env: keep,
    pre: ["-c", "core.hooksPath=/dev/null", "-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "core.pager=cat", "-c", "color.ui=false", "-c", "advice.detachedHead=false"]
  }
}

/** git with no user/system config at all (the new clone, before any agent has touched it). */
export const cleanPlace = (cwd: string, gitDir?: string): GitPlace => ({
  cwd,
  env: {
    PATH: parentEnv()["PATH"] ?? "/usr/bin:/bin",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_TERMINAL_PROMPT: "0",
    HOME: "/nonexistent",
    LC_ALL: "C",
    GIT_AUTHOR_NAME: "substrat",
    GIT_AUTHOR_EMAIL: "substrat@localhost",
    GIT_COMMITTER_NAME: "substrat",
    GIT_COMMITTER_EMAIL: "substrat@localhost",
    ...(gitDir === undefined ? {} : { GIT_DIR: gitDir, GIT_WORK_TREE: cwd })
  },
  pre: safeArgs
})

export interface OpenedRepo {
  /** Canonical top level of the user's working tree. */
  readonly top: string
  readonly commit: string
  readonly target: string | null
  readonly branch: string
  /** Cloned from a parent workspace's history (a branch child): its branches are not copied. */
  readonly fork?: boolean
}

/**
 * Validate `--repo`/`--ref`/the branch name before anything is created. `home`: canonical
 * $SUBSTRAT_HOME (a repository in it or containing it is refused).
 */
export const openRepo = (
  executor: CommandExecutor.CommandExecutor,
  fs: FileSystem.FileSystem,
  args: { readonly id: string; readonly path: string; readonly ref: string | undefined; readonly name: string; readonly home: string }
) =>
  Effect.gen(function*() {
    const { id } = args
    const abs = yield* Either.match(absolutePath("repo", args.path), {
      onLeft: (e) => Effect.fail(invalid(id, e.message)),
      onRight: Effect.succeed
    })
    const real = yield* fs.realPath(abs).pipe(Effect.mapError(() => invalid(id, `--repo ${abs}: does not exist`)))
    const isDir = yield* fs.stat(real).pipe(Effect.map((i) => i.type === "Directory"), Effect.orElseSucceed(() => false))
    if (!isDir) return yield* invalid(id, `--repo ${abs}: not a directory`)
    const inUser = (a: ReadonlyArray<string>, okCodes: ReadonlyArray<number> = [0]) =>
      runGitAt(executor, userPlace(real), a, { okCodes, workspaceId: id })
    const top0 = yield* inUser(["rev-parse", "--show-toplevel"], [0, 128])
    if (top0.code !== 0 || top0.stdout.trim() === "") {
      return yield* invalid(id, `--repo ${abs}: not a git repository with a working tree (${top0.stderr.trim().split("\n")[0] ?? ""})`)
    }
    const top = yield* fs.realPath(top0.stdout.trim()).pipe(Effect.mapError(() => invalid(id, `--repo ${abs}: cannot resolve its top level`)))
    if (isWithin(top, args.home) || isWithin(args.home, top)) {
      return yield* invalid(id, `--repo ${top}: overlaps $SUBSTRAT_HOME (${args.home}); use a repository outside it`)
    }
    const inTop = (a: ReadonlyArray<string>, okCodes: ReadonlyArray<number> = [0]) =>
      runGitAt(executor, userPlace(top), a, { okCodes, workspaceId: id })
    const ref = args.ref ?? "HEAD"
    if (ref.startsWith("-") || ref.length === 0) return yield* invalid(id, `--ref ${JSON.stringify(ref)}: not a branch or commit`)
    const c = yield* inTop(["rev-parse", "--verify", "-q", "--end-of-options", `${ref}^{commit}`], [0, 1, 128])
    if (c.code !== 0) {
      return yield* invalid(
        id,
        args.ref === undefined ? `--repo ${top}: has no commit checked out (an empty repository?)` : `--ref ${ref}: no such branch or commit in ${top}`
      )
    }
    const commit = c.stdout.trim()
    const branch = `substrat/${args.name}`
    const fmt = yield* inTop(["check-ref-format", `refs/heads/${branch}`], [0, 1])
    if (fmt.code !== 0) return yield* invalid(id, `workspace name ${JSON.stringify(args.name)}: ${branch} is not a valid branch name`)
    const exists = yield* inTop(["show-ref", "--verify", "-q", `refs/heads/${branch}`], [0, 1])
    if (exists.code === 0) return yield* invalid(id, `branch ${branch} already exists in ${top}; choose another --name (or delete that branch)`)
    const sub = yield* inTop(["cat-file", "-e", `${commit}:.gitmodules`], [0, 1, 128])
    if (sub.code === 0) {
      return yield* invalid(id, `--repo ${top}: has submodules (.gitmodules at ${commit.slice(0, 12)}); repository workspaces do not support submodules`)
    }
    const lfs = yield* inTop(["grep", "-q", "-I", "-F", "filter=lfs", commit, "--", ":(glob)**/.gitattributes"], [0, 1, 128])
    if (lfs.code === 0) {
      return yield* invalid(id, `--repo ${top}: uses Git LFS (filter=lfs in .gitattributes); repository workspaces do not support LFS files`)
    }
    const head = yield* inTop(["symbolic-ref", "-q", "--short", "HEAD"], [0, 1])
    const target = head.code === 0 && head.stdout.trim() !== "" ? head.stdout.trim() : null
    return { top, commit, target, branch } satisfies OpenedRepo
  })

/**
 * `--bind-ignored <path>`: one directory of the user's repository that git ignores (e.g.
 * `node_modules`), bound read-only into the sandbox at the same place (docs/sandbox.md
 * "Repository workspaces"). Refused: a path that is absolute or has `..`, one that resolves
 * through a symbolic link (itself or a parent: the canonical path must be the spelled one), a
 * missing one or not a directory, one git does not ignore, `.git`, and one that overlaps
 * $SUBSTRAT_HOME. The bind is the canonical host path: every sandbox start checks it still is
 * (SandboxBwrap.checkHostPaths), so a link swapped in later refuses the start, never widens it.
 */
export const ignoredBind = (
  executor: CommandExecutor.CommandExecutor,
  fs: FileSystem.FileSystem,
  args: { readonly id: string; readonly top: string; readonly path: string; readonly home: string }
) =>
  Effect.gen(function*() {
    const { id, top } = args
    const what = `--bind-ignored ${JSON.stringify(args.path)}`
    const rel = yield* Either.match(relativePath("bind_ignored", args.path), {
      onLeft: (e) => Effect.fail(invalid(id, `${what}: ${e.message}; give a directory relative to the repository's top level`)),
      onRight: Effect.succeed
    })
    if (rel.split("/")[0] === ".git") return yield* invalid(id, `${what}: the repository's .git cannot be bound`)
    const spelled = `${top}/${rel}`
    const real = yield* fs.realPath(spelled).pipe(Effect.mapError(() => invalid(id, `${what}: ${spelled} does not exist`)))
    if (real !== spelled) return yield* invalid(id, `${what}: ${spelled} resolves through a symbolic link to ${real}; only a directory inside ${top} can be bound`)
    const isDir = yield* fs.stat(real).pipe(Effect.map((i) => i.type === "Directory"), Effect.orElseSucceed(() => false))
    if (!isDir) return yield* invalid(id, `${what}: ${spelled} is not a directory`)
    if (isWithin(real, args.home) || isWithin(args.home, real)) return yield* invalid(id, `${what}: overlaps $SUBSTRAT_HOME (${args.home})`)
    const ignored = yield* runGitAt(executor, userPlace(top), ["check-ignore", "-q", "--", rel], { okCodes: [0, 1, 128], workspaceId: id })
    if (ignored.code !== 0) {
      return yield* invalid(id, `${what}: not ignored by git in ${top}; only an ignored directory (e.g. node_modules) is bound — tracked files are in the clone already`)
    }
    const refusal = linkRefusal(real, rel, "ro")
    if (refusal !== null) return yield* invalid(id, `${what}: ${refusal.message}`)
    return { host_path: real, mount_path: rel }
  })

/**
 * A branch child's source: the parent workspace's history repository (the daemon's own, never
 * agent-written config) at its branch's last recorded commit, on `substrat/<parent>/<child>`.
 */
export const openFork = (
  executor: CommandExecutor.CommandExecutor,
  args: { readonly id: string; readonly parent: { readonly id: string; readonly name: string | null; readonly root_path: string; readonly repo: { readonly branch: string } | null }; readonly gitDir: string; readonly child: string }
) =>
  Effect.gen(function*() {
    const { id } = args
    if (args.parent.repo === null) return yield* invalid(id, `workspace ${args.parent.id} was not made from a git repository`)
    const git = (a: ReadonlyArray<string>, okCodes: ReadonlyArray<number> = [0]) =>
      runGitAt(executor, cleanPlace(args.parent.root_path, args.gitDir), a, { okCodes, workspaceId: id })
    const c = yield* git(["rev-parse", "--verify", "-q", `refs/heads/${args.parent.repo.branch}^{commit}`], [0, 1, 128])
    if (c.code !== 0) return yield* invalid(id, `workspace ${args.parent.id} has no branch ${args.parent.repo.branch} yet`)
    const branch = `substrat/${args.parent.name ?? args.parent.id}/${args.child}`
    if ((yield* git(["check-ref-format", `refs/heads/${branch}`], [0, 1])).code !== 0 || args.child.startsWith("-")) {
      return yield* invalid(id, `${branch} is not a valid branch name`)
    }
    return { top: args.gitDir, commit: c.stdout.trim(), target: args.parent.repo.branch, branch, fork: true } satisfies OpenedRepo
  })

/**
 * Clone `repo` into the (new, empty) `root` on its branch, then seed the daemon's history repo
 * `historyGitDir` from that fresh clone (so turn commits descend from the user's commit).
 */
export const cloneRepo = (
  executor: CommandExecutor.CommandExecutor,
  args: { readonly id: string; readonly repo: OpenedRepo; readonly root: string; readonly historyGitDir: string }
) =>
  Effect.gen(function*() {
    const { id, repo, root } = args
    const clean = (cwd: string, a: ReadonlyArray<string>, gitDir?: string) => runGitAt(executor, cleanPlace(cwd, gitDir), a, { workspaceId: id })
    yield* clean(root, ["clone", "-q", "--no-local", "--no-checkout", "--template=", "--no-recurse-submodules", "--", repo.top, root])
    const inClone = (a: ReadonlyArray<string>) => clean(root, a, `${root}/.git`)
    yield* inClone(["remote", "remove", "origin"])
    for (
      const [k, v] of [["user.name", "substrat agent"], ["user.email", "agent@agents.substrat"], ["core.autocrlf", "false"], ["advice.detachedHead", "false"]] as const
    ) yield* inClone(["config", k, v])
    if (repo.fork === true) {
      // The parent's branch (substrat/<parent>) would block substrat/<parent>/<child>.
      yield* inClone(["checkout", "-q", "--detach", repo.commit])
      const heads = (yield* inClone(["for-each-ref", "--format=%(refname)", "refs/heads"])).stdout.split("\n").filter((l) => l !== "")
      for (const h of heads) yield* inClone(["update-ref", "-d", h])
    }
    yield* inClone(["checkout", "-q", "-b", repo.branch, repo.commit])
    const inHistory = (a: ReadonlyArray<string>, okCodes: ReadonlyArray<number> = [0]) =>
      runGitAt(executor, cleanPlace(root, args.historyGitDir), a, { workspaceId: id, okCodes })
    yield* inHistory(["fetch", "-q", "--no-tags", "--no-write-fetch-head", `file://${root}/.git`, `refs/heads/${repo.branch}:refs/heads/${repo.branch}`])
    // The daemon always names the work tree itself; recorded in the config, it would break
    // serving objects where that path does not exist (inside the sandbox, src/sandbox/CloneSync.ts).
    yield* inHistory(["config", "--unset", "core.worktree"], [0, 5])
    yield* inHistory(["symbolic-ref", "HEAD", `refs/heads/${repo.branch}`])
    yield* inHistory(["read-tree", "HEAD"])
    yield* inHistory(["update-index", "-q", "--refresh"], [0, 1])
  })

const lockedRef = (r: GitResult | WorkspaceHistoryError) => /\.lock|cannot lock|unable to (create|lock)|Unable to create/i.test("stderr" in r ? r.stderr : r.message)

/**
 * Publish the history's branch to the user's repository: only `refs/heads/<branch>` is written
 * (a fetch run in the user's repository from the daemon's history repo, no FETCH_HEAD, no hooks,
 * no gc). A held lock (a running gc, another git) is retried for a few seconds.
 */
export const publishBranch = (
  executor: CommandExecutor.CommandExecutor,
  args: { readonly id: string; readonly top: string; readonly historyGitDir: string; readonly branch: string }
) =>
  Effect.gen(function*() {
    const run = runGitAt(
      executor,
      userPlace(args.top),
      ["fetch", "-q", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "--no-auto-gc", `file://${args.historyGitDir}`, `+refs/heads/${args.branch}:refs/heads/${args.branch}`],
      { workspaceId: args.id, okCodes: [0, 1, 128] }
    )
    for (let attempt = 0;; attempt++) {
      const r = yield* run
      if (r.code === 0) return
      if (!lockedRef(r) || attempt >= 30) {
        return yield* new WorkspaceError({ workspace_id: args.id, reason: "io", message: `publishing ${args.branch} to ${args.top}: ${r.stderr.trim()}` })
      }
      yield* Effect.sleep(Duration.millis(Math.min(1000, 50 * (attempt + 1))))
    }
  })

export interface MergeResult {
  readonly into: string
  readonly commit: string
  readonly previous: string
  readonly fast_forward: boolean
  readonly paths: ReadonlyArray<string>
  readonly worktree_updated: boolean
}

/**
 * Merge `branch` into `into` in the user's repository, only when it applies cleanly: the merge is
 * computed with `git merge-tree --write-tree` (no index or work tree touched); a conflict is
 * reported with its paths and nothing moves. When `into` is checked out, its work tree must be
 * clean; it is updated with `read-tree -m -u` (refuses to overwrite anything) before the branch
 * moves (update-ref with the old value: a branch moved meanwhile is refused, not overwritten).
 */
export const mergeBranch = (
  executor: CommandExecutor.CommandExecutor,
  args: {
    readonly id: string
    readonly top: string
    readonly branch: string
    readonly into: string
    readonly squash: boolean
    readonly message: string | undefined
  }
) =>
  Effect.gen(function*() {
    const { id } = args
    const git = (a: ReadonlyArray<string>, okCodes: ReadonlyArray<number> = [0], env?: Record<string, string>, input?: string) =>
      runGitAt(executor, userPlace(args.top), a, { okCodes, workspaceId: id, ...(env === undefined ? {} : { env }), ...(input === undefined ? {} : { input }) })
    const into = args.into.startsWith("refs/heads/") ? args.into.slice("refs/heads/".length) : args.into
    if (into.startsWith("-") || (yield* git(["check-ref-format", `refs/heads/${into}`], [0, 1])).code !== 0) {
      return yield* invalid(id, `--into ${JSON.stringify(args.into)}: not a valid branch name`)
    }
    if (into === args.branch) return yield* invalid(id, `--into ${into}: that is the workspace's own branch`)
    const resolve = (ref: string) =>
      Effect.map(git(["rev-parse", "--verify", "-q", `${ref}^{commit}`], [0, 1, 128]), (r) => (r.code === 0 ? r.stdout.trim() : null))
    const old = yield* resolve(`refs/heads/${into}`)
    if (old === null) return yield* invalid(id, `--into ${into}: no such branch in ${args.top}`)
    const theirs = yield* resolve(`refs/heads/${args.branch}`)
    if (theirs === null) return yield* invalid(id, `${args.branch} is not in ${args.top} (nothing recorded yet?)`)
    // Work trees with `into` checked out (the main one or linked ones): each must be clean.
    const wt = yield* git(["worktree", "list", "--porcelain"])
    const checkedOut: Array<string> = []
    let cur = ""
    for (const line of wt.stdout.split("\n")) {
      if (line.startsWith("worktree ")) cur = line.slice("worktree ".length)
      else if (line === `branch refs/heads/${into}`) checkedOut.push(cur)
    }
    for (const w of checkedOut) {
      const st = yield* runGitAt(executor, { ...userPlace(w), cwd: w }, ["status", "--porcelain", "--untracked-files=no"], { workspaceId: id })
      if (st.stdout.trim() !== "") {
        return yield* conflict(id, `the working tree ${w} (on ${into}) has uncommitted changes; commit or stash them first:\n${st.stdout.trimEnd()}`)
      }
    }
    const isAncestor = (a: string, b: string) => Effect.map(git(["merge-base", "--is-ancestor", a, b], [0, 1]), (r) => r.code === 0)
    if (yield* isAncestor(theirs, old)) return yield* invalid(id, `${args.branch} is already merged into ${into}: nothing to merge`)
    const ff = !args.squash && (yield* isAncestor(old, theirs))
    let next: string
    if (ff) next = theirs
    else {
      const mt = yield* git(["merge-tree", "--write-tree", "--name-only", "--no-messages", old, theirs], [0, 1])
      const lines = mt.stdout.split("\n")
      if (mt.code === 1) {
        const paths = [...new Set(lines.slice(1).map((l) => l.trim()).filter((l) => l.length > 0))]
        return yield* conflict(id, `merging ${args.branch} into ${into} conflicts in: ${paths.join(", ")} — nothing was changed`)
      }
      const tree = lines[0]!.trim()
      const ident = yield* git(["var", "GIT_COMMITTER_IDENT"], [0, 128])
      const env: Record<string, string> = ident.code === 0
        ? {}
        : { GIT_AUTHOR_NAME: "substrat", GIT_AUTHOR_EMAIL: "substrat@localhost", GIT_COMMITTER_NAME: "substrat", GIT_COMMITTER_EMAIL: "substrat@localhost" }
      const message = args.message ?? (args.squash ? `Squashed ${args.branch} into ${into}` : `Merge branch '${args.branch}' into ${into}`)
      const parents = args.squash ? ["-p", old] : ["-p", old, "-p", theirs]
      next = (yield* git(["commit-tree", tree, ...parents, "-F", "-"], [0], env, message.endsWith("\n") ? message : message + "\n")).stdout.trim()
    }
    const changed = yield* git(["diff", "--name-only", "-z", "--no-renames", old, next])
    const paths = changed.stdout.split("\0").filter((p) => p.length > 0)
    for (const w of checkedOut) {
      const rt = yield* runGitAt(executor, { ...userPlace(w), cwd: w }, ["read-tree", "-m", "-u", old, next], { workspaceId: id, okCodes: [0, 1, 128] })
      if (rt.code !== 0) return yield* conflict(id, `cannot update the working tree ${w}: ${rt.stderr.trim()} — nothing was changed`)
    }
    const up = yield* git(["update-ref", "-m", `substrat: merge ${args.branch}`, `refs/heads/${into}`, next, old], [0, 1, 128])
    if (up.code !== 0) {
      for (const w of checkedOut) {
        yield* runGitAt(executor, { ...userPlace(w), cwd: w }, ["read-tree", "-m", "-u", next, old], { workspaceId: id, okCodes: [0, 1, 128] })
      }
      return yield* conflict(id, `${into} moved while merging; nothing was changed, try again (${up.stderr.trim()})`)
    }
    return { into, commit: next, previous: old, fast_forward: ff, paths, worktree_updated: checkedOut.length > 0 } satisfies MergeResult
  })
