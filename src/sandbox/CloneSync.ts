// After the daemon records a turn of a repository workspace, the clone the agents work in gets
// that commit too (its branch moves to it, the index follows, the files are already there), so
// `git status` inside the sandbox is clean and `git log` shows the team's turns. After a merge
// queue moved the branch (src/daemon/MergeQueue.ts), `files` mode also brings the merged files
// (`git reset --keep`: refuses rather than overwrite a local change). The clone's config and
// hooks are the agents', so this git runs inside the workspace's sandbox, never on the host: it
// fetches from the daemon's history repository bound read-only for this one command.
import { Effect } from "effect"
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
