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

export const runGit = (
  executor: CommandExecutor.CommandExecutor,
  repo: GitRepo,
  args: ReadonlyArray<string>,
  options: GitOptions = {}
): Effect.Effect<GitResult, WorkspaceHistoryError> => {
  const wsId = options.workspaceId ?? ""
  return runCollect(spawnScoped(executor, {
    argv: ["git", ...fixedArgs, ...args],
    env: { ...gitBaseEnv(repo), ...options.env },
    cwd: repo.workTree,
    ...(options.input === undefined ? {} : { stdin: Stream.make(new TextEncoder().encode(options.input)) }),
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

/** Create the history repo with an initial empty commit so every turn commit has a parent. */
export const initHistory = (executor: CommandExecutor.CommandExecutor, repo: GitRepo, workspaceId: string) =>
  Effect.gen(function*() {
    const git = (args: ReadonlyArray<string>, input?: string) =>
      runGit(executor, repo, args, { workspaceId, ...(input === undefined ? {} : { input }) })
    yield* git(["init", "-q"])
    for (
      const [k, v] of [
        ["core.preloadIndex", "true"],
        ["core.untrackedCache", "true"],
        ["core.autocrlf", "false"],
        ["core.quotePath", "false"],
        ["index.version", "4"],
        ["gc.autoDetach", "true"],
        ["user.name", "substrat"],
        ["user.email", "substrat@localhost"]
      ] as const
    ) yield* git(["config", k, v])
    yield* git(["commit", "-q", "--allow-empty", "--no-verify", "-F", "-"], `workspace ${workspaceId} created\n`)
  })
