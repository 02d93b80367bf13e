// Minimal git runner for workspace histories. The git dir lives outside the sandbox-visible tree
// (workspaces/<id>/history.git) and the work tree is the workspace root, so agents can neither see
// nor rewrite their history. No user/system config, no hooks, no pager, no prompts.
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import { Effect, Stream } from "effect"
import { noLimits } from "../domain/workspace.js"
import { WorkspaceHistoryError } from "./errors.js"
import { runCollect, spawnScoped } from "./spawn.js"
import { parentEnv } from "../config/Config.js"

export interface GitRepo {
  readonly gitDir: string
  readonly workTree: string
}

export interface GitOptions {
  readonly input?: string
  /** Bytes for stdin (when `input` is not given). */
  readonly stdin?: Stream.Stream<Uint8Array>
  readonly env?: Readonly<Record<string, string>>
  /** Exit codes that are not errors (default [0]). */
  readonly okCodes?: ReadonlyArray<number>
  readonly workspaceId?: string
}

export interface GitResult {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

export const gitBaseEnv = (repo: GitRepo): Record<string, string> => ({
  PATH: parentEnv()["PATH"] ?? "/usr/bin:/bin",
  GIT_DIR: repo.gitDir,
  GIT_WORK_TREE: repo.workTree,
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_TERMINAL_PROMPT: "0",
  GIT_OPTIONAL_LOCKS: "0",
  HOME: repo.gitDir,
  LC_ALL: "C",
  GIT_AUTHOR_NAME: "substrat",
  GIT_AUTHOR_EMAIL: "substrat@localhost",
  GIT_COMMITTER_NAME: "substrat",
  GIT_COMMITTER_EMAIL: "substrat@localhost"
})

const fixedArgs = ["-c", "safe.directory=*", "-c", "core.hooksPath=/dev/null", "-c", "core.pager=cat", "-c", "color.ui=false"]

/**
 * Overrides for git the daemon runs on a repository whose config or files an agent may have
 * written (or on the user's repository): no hooks, no fsmonitor, no automatic gc/maintenance, no
 * commit signing program, fsck of every object received.
 */
export const safeArgs = [
  ...fixedArgs,
  "-c", "core.fsmonitor=false",
  "-c", "core.sshCommand=false",
  "-c", "gc.auto=0",
  "-c", "maintenance.auto=false",
  "-c", "commit.gpgSign=false",
  "-c", "tag.gpgSign=false",
  "-c", "fetch.fsckObjects=true",
  "-c", "transfer.fsckObjects=true",
  "-c", "protocol.allow=never",
  "-c", "protocol.file.allow=always"
]

export interface GitPlace {
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  /** Arguments before the subcommand (`-c` overrides). */
  readonly pre: ReadonlyArray<string>
}

/** Run git with `place`'s environment and overrides; fails on an exit code not in `okCodes`. */
export const runGitAt = (
  executor: CommandExecutor.CommandExecutor,
  place: GitPlace,
  args: ReadonlyArray<string>,
  options: GitOptions = {}
): Effect.Effect<GitResult, WorkspaceHistoryError> => {
  const wsId = options.workspaceId ?? ""
  return runCollect(spawnScoped(executor, {
    argv: ["git", ...place.pre, ...args],
    env: { ...place.env, ...options.env },
    cwd: place.cwd,
    ...(options.input !== undefined
      ? { stdin: Stream.make(new TextEncoder().encode(options.input)) }
      : options.stdin === undefined ? {} : { stdin: options.stdin }),
    limits: noLimits,
    graceMs: 2000
  })).pipe(
    Effect.mapError((e) =>
      new WorkspaceHistoryError({ workspace_id: wsId, reason: "git", message: `git ${args[0] ?? ""}: ${e.message}` })
    ),
    Effect.flatMap((r) => {
      const code = r.exit.code ?? -1
      return (options.okCodes ?? [0]).includes(code)
        ? Effect.succeed({ code, stdout: r.stdout, stderr: r.stderr })
        : Effect.fail(
          new WorkspaceHistoryError({
            workspace_id: wsId,
            reason: "git",
            message: `git ${args.join(" ")} exited ${code}: ${r.stderr.trim()}`
          })
        )
    })
  )
}

export const runGit = (
  executor: CommandExecutor.CommandExecutor,
  repo: GitRepo,
  args: ReadonlyArray<string>,
  options: GitOptions = {}
): Effect.Effect<GitResult, WorkspaceHistoryError> =>
  runGitAt(executor, { cwd: repo.workTree, env: gitBaseEnv(repo), pre: safeArgs }, args, options)
