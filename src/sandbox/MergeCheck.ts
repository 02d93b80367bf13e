// The merge queue's check (docs/sandbox.md, "Branch children and the merge queue", step 3): the
// merged tree is checked out from the daemon's history repository (objects only, no `.git` in
// it) into a scratch directory beside that repository, handed to the sandbox uid (links
// themselves, never followed), and the workspace's check command runs there in a sandbox with
// the workspace's limits and network. The tree is an agent's: its links and scripts resolve
// inside that sandbox, where only the scratch directory (and the workspace's own binds) exist —
// neither the parent's workspace, its history, $SUBSTRAT_HOME nor the user's repository.
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect } from "effect"
import { dirname } from "node:path"
import { noLimits, ResourceLimits, type WorkspaceSpec } from "../domain/workspace.js"
import { Sandbox } from "./Sandbox.js"
import { runCollect, spawnScoped } from "./spawn.js"
import type { HistoryGit } from "./WorkspaceHistory.js"

const TAIL = 2000
export const outputTail = (s: string) => (s.length > TAIL ? `…${s.slice(-TAIL)}` : s)

/**
 * Check out `commit` of the history repository `gitDir` into a scratch directory and run `spec`'s
 * check there, sandboxed. Null: passed (or no check); else the output's tail (or why it could not run).
 */
export const runMergeCheck = (args: {
  readonly spec: Pick<WorkspaceSpec, "check" | "network_access" | "symlinks" | "limits">
  readonly git: HistoryGit
  readonly gitDir: string
  readonly commit: string
  readonly item: string
  readonly timeoutSeconds: number
}) =>
  Effect.gen(function*() {
    const { spec, git, gitDir, commit, item } = args
    const check = spec.check
    if (check === null) return null
    const sandbox = yield* Sandbox
    const executor = yield* CommandExecutor.CommandExecutor
    const fs = yield* FileSystem.FileSystem
    const dir = `${dirname(gitDir)}/check-${item}`
    const index = `${gitDir}/index.check-${item}`
    return yield* Effect.gen(function*() {
      yield* fs.remove(dir, { recursive: true }).pipe(Effect.ignore)
      yield* fs.makeDirectory(dir, { mode: 0o755 })
      yield* git(["read-tree", commit], { env: { GIT_INDEX_FILE: index } })
      yield* git(["checkout-index", "-a", "-f", `--prefix=${dir}/`], { env: { GIT_INDEX_FILE: index } })
      const owner = sandbox.owner
      if (owner !== undefined && owner !== null) {
        yield* runCollect(spawnScoped(executor, {
          argv: ["chown", "-R", "-h", `${owner.uid}:${owner.gid}`, "--", dir],
          env: { PATH: "/usr/bin:/bin" },
          limits: noLimits,
          graceMs: 1000
        }))
      }
      const wall = Math.min(spec.limits.wall_clock_seconds ?? args.timeoutSeconds, args.timeoutSeconds)
      return yield* sandbox.run({
        workspace: { root_path: dir, network_access: spec.network_access, symlinks: spec.symlinks, limits: spec.limits },
        limits: new ResourceLimits({ ...spec.limits, wall_clock_seconds: wall }),
        command: ["sh", "-c", check]
      }).pipe(
        Effect.map((r) => (r.exit.code === 0 ? null : outputTail(`${r.stdout}${r.stderr}`.trimEnd() + `\n(exit ${r.exit.code ?? r.exit.signal})`))),
        Effect.catchTag("LimitExceededError", (e) => Effect.succeed(`the check was stopped: ${e.message}`))
      )
    }).pipe(
      Effect.catchAll((e) => Effect.succeed(`the check could not run: ${"message" in e ? e.message : String(e)}`)),
      // Node's recursive remove unlinks links, never follows them (a link the check left behind).
      Effect.ensuring(Effect.all([fs.remove(dir, { recursive: true }), fs.remove(index)], { mode: "either" }).pipe(Effect.ignore))
    )
  })
