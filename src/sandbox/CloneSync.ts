// After the daemon records a turn of a repository workspace, the clone the agents work in gets
// that commit too (its branch moves to it, the index follows, the files are already there), so
// `git status` inside the sandbox is clean and `git log` shows the team's turns. After a merge
// queue moved the branch (src/daemon/MergeQueue.ts), `files` mode also brings the merged files
// (`git reset --keep`: refuses rather than overwrite a local change). The clone's config and
// hooks are the agents', so this git runs inside the workspace's sandbox, never on the host: it
// fetches from the daemon's history repository bound read-only for this one command.
// The other way, the agents' own commits are read from the clone inside the sandbox too
// (`packAgentCommits`): a link anywhere in the clone's `.git` resolves there, where neither the
// user's repository nor $SUBSTRAT_HOME is, and the daemon only indexes the pack (fsck'd).
import { Effect, Stream } from "effect"
import { ResourceLimits } from "../domain/workspace.js"
import type { HistoryLocation } from "./WorkspaceStore.js"
import { Sandbox } from "./Sandbox.js"

const HISTORY = "/run/substrat-history"

const fetchPublished = `git fetch -q --no-tags --no-write-fetch-head --no-recurse-submodules ${HISTORY} "+refs/heads/$B:refs/substrat/published"`

const script = (mode: "index" | "files") =>
  [
    "set -e",
    fetchPublished,
    // Stat data may be stale (a chown of the clone): refresh, or --keep sees every file as changed.
    ...(mode === "files" ? ["git update-index -q --refresh >/dev/null || true"] : []),
    `if [ "$(git symbolic-ref -q HEAD)" = "refs/heads/$B" ]; then git reset -q ${mode === "files" ? "--keep" : ""} refs/substrat/published; else git update-ref "refs/heads/$B" refs/substrat/published; fi`
  ].join("\n")

const limits = new ResourceLimits({ memory_bytes: null, cpu_seconds: 60, max_processes: 64, max_file_bytes: null, wall_clock_seconds: 60 })

const gitEnv = { GIT_TERMINAL_PROMPT: "0", GIT_CONFIG_PARAMETERS: "'safe.directory'='*'" }

/** Run `sh -c body` in the clone at `root`, `gitDir` bound read-only at /run/substrat-history; "" when it worked, else its stderr. */
const inClone = (root: string, gitDir: string, body: string, env: Record<string, string>) =>
  Effect.gen(function*() {
    const sandbox = yield* Sandbox
    const r = yield* sandbox.run({
      workspace: { root_path: root, network_access: false, symlinks: [], limits },
      command: ["sh", "-c", body],
      env: { ...env, ...gitEnv },
      extraBinds: [{ host_path: gitDir, sandbox_path: HISTORY, mode: "ro" }]
    })
    return r.exit.code === 0 ? "" : (r.stderr.trim() || `exit ${r.exit.code}`)
  }).pipe(Effect.catchAll((e) => Effect.succeed(e.message)))

/** Bring the clone's branch to the history's; true when done (a failure is logged). */
export const syncCloneChecked = (loc: HistoryLocation, mode: "index" | "files") =>
  Effect.gen(function*() {
    if (loc.repo === null) return true
    const err = yield* inClone(loc.topRoot, loc.gitDir, script(mode), { B: loc.repo.branch })
    if (err !== "") yield* Effect.logWarning(`workspace ${loc.workspaceId}: the clone was not brought to ${loc.repo.branch}: ${err}`)
    return err === ""
  })

/** Move the clone's branch to the history's (a failure is logged: the next recorded turn tries again). */
export const syncClone = (loc: HistoryLocation) =>
  syncCloneChecked(loc, "index").pipe(
    Effect.asVoid,
    Effect.catchAllCause((c) => Effect.logWarning(`workspace ${loc.workspaceId}: the clone was not synced`, c))
  )

/**
 * Put another workspace's branch into a clone as `refs/remotes/parent/head` (a branch child whose
 * merge conflicted: it merges `parent/head` itself). `from`: that workspace's history repository.
 */
export const fetchParentInto = (root: string, from: { readonly gitDir: string; readonly branch: string }) =>
  inClone(
    root,
    from.gitDir,
    `git fetch -q --no-tags --no-write-fetch-head --no-recurse-submodules ${HISTORY} "+refs/heads/$P:refs/remotes/parent/head"`,
    { P: from.branch }
  )

// A revert's files: the history's index copied into the sandbox's /tmp and refreshed there (size
// and whole-second mtime: the uids seen inside differ), then a two-tree `read-tree -m -u`, which
// writes only the paths that differ between $FROM and $TO and refuses, writing nothing, when one
// of them has a local change or an untracked file in the way (a warning, e.g. a file it could
// not remove, is reported as a failure: the revert is then not recorded).
const treeScript = [
  "set -e",
  `export GIT_DIR="$H" GIT_WORK_TREE="$(pwd -P)" GIT_INDEX_FILE=/tmp/substrat-index`,
  `if [ -f "$H/index" ]; then cp "$H/index" "$GIT_INDEX_FILE"; else git read-tree "$FROM"; fi`,
  "git -c core.checkStat=minimal update-index -q --refresh >/dev/null 2>&1 || true",
  // A file git could not remove or write (one the sandbox uid may not change) is only a warning to git.
  `out=$(git -c core.checkStat=minimal read-tree -m -u "$FROM" "$TO" 2>&1) || { printf '%s\n' "$out" >&2; exit 1; }`,
  `if [ -n "$out" ]; then printf '%s\n' "$out" >&2; exit 1; fi`
].join("\n")

/**
 * Bring the work tree at `root` from tree `from` to tree `to` of the history repository `gitDir`
 * (a revert's files) inside the workspace's sandbox, so a link the agents swap in anywhere in the
 * tree, even while git writes, resolves where neither the host's other files nor $SUBSTRAT_HOME
 * are. "" when written, else why nothing was (a local change in the way, the sandbox failed).
 */
export const writeTreeChange = (root: string, gitDir: string, from: string, to: string) =>
  Effect.gen(function*() {
    const sandbox = yield* Sandbox
    // The unsafe sandbox binds nothing: its git reads the history where it is.
    return yield* inClone(root, gitDir, treeScript, { H: sandbox.kind === "unsafe" ? gitDir : HISTORY, FROM: from, TO: to })
  })

/** Bytes of a clone's own commits the daemon reads at most per turn (a larger pack is not absorbed). */
export const AGENT_PACK_MAX_BYTES = 512 * 1024 * 1024

const HEAD_MARK = "substrat-head "

// The clone's HEAD commit (on stderr, after the pack) and a thin pack of what it has beyond $BEFORE
// (on stdout). Exit 3: no HEAD commit; 4: HEAD is $BEFORE (nothing of its own).
const packScript = [
  `h=$(git rev-parse --verify -q 'HEAD^{commit}') || exit 3`,
  `[ "$h" != "$BEFORE" ] || exit 4`,
  `if git cat-file -e "$BEFORE^{commit}" 2>/dev/null; then not="^$BEFORE"; else not=""; fi`,
  `printf '%s\\n%s\\n' "$h" "$not" | git pack-objects --revs --stdout --thin -q || exit 5`,
  `echo "${HEAD_MARK}$h" >&2`
].join("\n")

/**
 * The commits the agents made in the clone at `root` since `before`: git reads them inside the
 * workspace's sandbox and streams a thin pack to `consume` (true: the pack was taken in), at most
 * AGENT_PACK_MAX_BYTES. Returns the clone's HEAD commit once its objects are in, else null (no
 * commit of its own, a pack refused or too large, the sandbox failed).
 */
export const packAgentCommits = <E, R>(
  root: string,
  before: string,
  consume: (pack: Stream.Stream<Uint8Array>) => Effect.Effect<boolean, E, R>
) =>
  Effect.scoped(Effect.gen(function*() {
    const sandbox = yield* Sandbox
    const p = yield* sandbox.start({
      workspace: { root_path: root, network_access: false, symlinks: [], limits },
      command: ["sh", "-c", packScript],
      env: { BEFORE: before, ...gitEnv }
    })
    let bytes = 0
    const pack = p.stdout.pipe(
      Stream.catchAll(() => Stream.empty),
      Stream.takeWhile((c) => (bytes += c.length) <= AGENT_PACK_MAX_BYTES),
      // Too large: the rest is never read, so the writer is stopped (it would block, not exit).
      Stream.ensuring(Effect.suspend(() => (bytes > AGENT_PACK_MAX_BYTES ? p.kill("SIGKILL") : Effect.void)))
    )
    const stderr = p.stderr.pipe(
      Stream.catchAll(() => Stream.empty),
      Stream.decodeText(),
      Stream.runFold("", (acc, x) => (acc + x).slice(-4096))
    )
    const [taken, err] = yield* Effect.all([consume(pack), stderr], { concurrency: 2 })
    const exit = yield* Effect.either(p.exit)
    if (!taken || bytes > AGENT_PACK_MAX_BYTES || exit._tag === "Left" || exit.right.code !== 0) return null
    const head = err.split("\n").find((l) => l.startsWith(HEAD_MARK))?.slice(HEAD_MARK.length).trim() ?? ""
    return /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(head) ? head : null
  })).pipe(Effect.catchTag("SandboxPathError", "SandboxUnavailableError", "SandboxProcessError", () => Effect.succeed(null)))
