// After the daemon records a turn of a repository workspace, the clone the agents work in gets
// that commit too (its branch moves to it, the index follows, the files are already there), so
// `git status` inside the sandbox is clean and `git log` shows the team's turns. The clone's
// config and hooks are the agents', so this git runs inside the workspace's sandbox, never on the
// host: it fetches from the daemon's history repository bound read-only for this one command.
import { Effect } from "effect"
import { ResourceLimits } from "../domain/workspace.js"
import type { HistoryLocation } from "./WorkspaceStore.js"
import { Sandbox } from "./Sandbox.js"

const HISTORY = "/run/substrat-history"

const script = [
  "set -e",
  `git fetch -q --no-tags --no-write-fetch-head --no-recurse-submodules ${HISTORY} "+refs/heads/$B:refs/substrat/published"`,
  `if [ "$(git symbolic-ref -q HEAD)" = "refs/heads/$B" ]; then git reset -q refs/substrat/published; else git update-ref "refs/heads/$B" refs/substrat/published; fi`
].join("\n")

const limits = new ResourceLimits({ memory_bytes: null, cpu_seconds: 60, max_processes: 64, max_file_bytes: null, wall_clock_seconds: 60 })

/** Move the clone's branch to the history's (a failure is logged: the next recorded turn tries again). */
export const syncClone = (loc: HistoryLocation) =>
  Effect.gen(function*() {
    if (loc.repo === null) return
    const sandbox = yield* Sandbox
    const r = yield* sandbox.run({
      workspace: { root_path: loc.topRoot, network_access: false, symlinks: [], limits },
      command: ["sh", "-c", script],
      env: { B: loc.repo.branch, GIT_TERMINAL_PROMPT: "0", GIT_CONFIG_PARAMETERS: "'safe.directory'='*'" },
      extraBinds: [{ host_path: loc.gitDir, sandbox_path: HISTORY, mode: "ro" }]
    })
    if (r.exit.code !== 0) yield* Effect.logWarning(`workspace ${loc.workspaceId}: the clone was not brought to ${loc.repo.branch}: ${r.stderr.trim()}`)
  }).pipe(Effect.catchAllCause((c) => Effect.logWarning(`workspace ${loc.workspaceId}: the clone was not synced`, c)))
