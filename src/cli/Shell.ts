// `substrat workspace shell` / `agent shell`: an interactive shell inside a workspace's sandbox,
// in the user's own terminal. The CLI builds the same bwrap command line the daemon's sandbox
// layer builds for the workspace (its binds, limits, network setting; SandboxBwrap with the
// daemon's default configuration), minus `--new-session` so the shell keeps the controlling
// terminal: it gets the real PTY, its window size, Ctrl-C and Ctrl-Z (the CLI ignores those while
// the shell runs). A workspace with an egress policy (and no network access) gets its proxy as an
// agent's sandbox does: the daemon serves it on a socket of its own while the CLI keeps the
// `workspace.shell_egress` stream open, bound read-only at /run/substrat/egress.sock with the relay
// and the proxy settings (HTTPS_PROXY, npm_config_https_proxy, PIP_PROXY, …) around the shell.
// When the shell exits, the daemon records what changed in the workspace as one
// turn of "human" (workspace.record), so `workspace log/diff/revert` see it like an agent's turn.
import { CommandExecutor, FileSystem } from "@effect/platform"
import { Deferred, Effect, Either, Stream } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { parentEnv } from "../config/Config.js"
import { isEmptyPolicy } from "../domain/egress.js"
import type { WorkspaceSpec } from "../domain/workspace.js"
import type * as RpcClient from "@effect/rpc/RpcClient"
import type * as RpcGroup from "@effect/rpc/RpcGroup"
import type { WorkspaceGroup } from "../protocol/admin/workspace.js"
import { call, CliError } from "./Client.js"

/** The shell to run: $SHELL when the sandbox has it (system paths are bound), else /bin/sh. */
const shellProgram = (): string => {
  const s = parentEnv()["SHELL"]
  return s !== undefined && /^\/(usr\/)?s?bin\/[A-Za-z0-9._-]+$/.test(s) && fs.existsSync(s) ? s : "/bin/sh"
}

/** The host command line of an interactive shell in `spec`'s sandbox. */
const commandLine = (spec: WorkspaceSpec, label: string, egressSocket: string | null): Effect.Effect<ReadonlyArray<string>, CliError> =>
  Effect.gen(function*() {
    const Bwrap = yield* Effect.promise(() => import("../sandbox/SandboxBwrap.js"))
    const Limits = yield* Effect.promise(() => import("../sandbox/Limits.js"))
    const Settings = yield* Effect.promise(() => import("../provider/cli/CliSettings.js"))
    // The Node platform layer (workers, sockets, …) only for a shell, not for every agent command.
    const { layer: nodeContext } = yield* Effect.promise(() => import("@effect/platform-node/NodeContext"))
    return yield* commandLineWith(Bwrap, Limits, Settings, spec, label, egressSocket).pipe(Effect.provide(nodeContext))
  })

const commandLineWith = (
  Bwrap: typeof import("../sandbox/SandboxBwrap.js"),
  Limits: typeof import("../sandbox/Limits.js"),
  Settings: typeof import("../provider/cli/CliSettings.js"),
  spec: WorkspaceSpec,
  label: string,
  egressSocket: string | null
) =>
  Effect.gen(function*() {
    const files = yield* FileSystem.FileSystem
    const executor = yield* CommandExecutor.CommandExecutor
    const probe = yield* Bwrap.probeBwrap(files, executor).pipe(
      Effect.mapError((e) => new CliError({ kind: "unavailable", message: `no sandbox: ${e.message}; ${e.fix}` }))
    )
    const shell = {
      command: [shellProgram(), "-i"],
      cwd: "/workspace",
      interactive: true,
      env: { TERM: parentEnv()["TERM"] ?? "xterm", PS1: `[substrat ${label}] $ ` }
    }
    // The relay runs on the node running this CLI, from the install the daemon's sandboxes use.
    const install = { nodePath: process.execPath, installDir: Settings.defaultInstallDir(parentEnv()["SUBSTRAT_INSTALL_DIR"]) }
    const request = { workspace: spec, ...(egressSocket === null ? shell : Settings.withEgress(shell, install, egressSocket)) }
    yield* Bwrap.prepareHostPaths(request).pipe(Effect.mapError((e) => new CliError({ kind: "invalid-input", message: e.message })))
    const argv = Bwrap.sandboxCommandLine(probe, request, Limits.withDefaults(spec.limits))
    if (Either.isLeft(argv)) return yield* new CliError({ kind: "invalid-input", message: argv.left.message })
    return argv.right
  })

const terminalSignals: ReadonlyArray<NodeJS.Signals> = ["SIGINT", "SIGQUIT", "SIGTSTP", "SIGTTIN", "SIGTTOU"]

/** Run `argv` on the inherited terminal; the CLI ignores terminal signals until it exits. */
const runOnTerminal = (argv: ReadonlyArray<string>): Effect.Effect<number, CliError> =>
  Effect.async<number, CliError>((resume) => {
    const ignore = () => {}
    for (const s of terminalSignals) process.on(s, ignore)
    const done = () => {
      for (const s of terminalSignals) process.off(s, ignore)
    }
    const child = spawn(argv[0]!, argv.slice(1), { stdio: "inherit" })
    child.on("error", (e) => {
      done()
      resume(Effect.fail(new CliError({ kind: "unavailable", message: `cannot start the sandbox: ${e.message}` })))
    })
    child.on("exit", (code, signal) => {
      done()
      resume(Effect.succeed(code ?? (signal === null ? 0 : 128)))
    })
  })

/** Open the shell in `spec`, then record its changes as a human turn. */
/** A client of the `workspace.*` methods (or of a group that has them). */
export type WorkspaceClient = RpcClient.RpcClient<RpcGroup.Rpcs<typeof WorkspaceGroup>>

/**
 * The workspace's egress proxy for as long as the scope lives: the host socket the daemon serves
 * it on (null: network access or no egress policy, nothing served).
 */
const egressFor = (socket: string, client: WorkspaceClient, spec: WorkspaceSpec) =>
  Effect.gen(function*() {
    if (spec.network_access || isEmptyPolicy(spec.egress)) return null
    const first = yield* Deferred.make<string | null, CliError>()
    yield* call(socket, Stream.runForEach(client.workspace.shell_egress({ workspace: spec.id }), (x) => Deferred.succeed(first, x.socket))).pipe(
      Effect.catchAll((e) => Deferred.fail(first, e)),
      Effect.forkScoped
    )
    return yield* Deferred.await(first)
  })

export const shellIn = (socket: string, client: WorkspaceClient, spec: WorkspaceSpec, label: string): Effect.Effect<void, CliError> =>
  Effect.gen(function*() {
    yield* Effect.scoped(Effect.gen(function*() {
      const egress = yield* egressFor(socket, client, spec)
      const argv = yield* commandLine(spec, label, egress)
      const allowed = [...spec.egress.presets.map((p) => `preset ${p}`), ...spec.egress.hosts].join(", ")
      const where = spec.network_access ? "network allowed" : egress !== null ? `egress through the proxy to ${allowed}` : "no network"
      yield* Effect.sync(() => process.stderr.write(`shell in workspace ${spec.id} (/workspace, ${where}); exit to return\n`))
      yield* runOnTerminal(argv)
    }))
    const r = yield* call(socket, client.workspace.record({ workspace: spec.id, author: "human", summary: `human: shell in ${label}` }))
    const line = r.commit === null
      ? "no changes to record"
      : `recorded ${r.paths.length} changed path(s) as turn ${r.turn} of human (commit ${r.commit.slice(0, 12)})`
    // Straight to stderr: main.ts captures Console.error for @effect/cli's own messages.
    yield* Effect.sync(() => process.stderr.write(`${line}\n`))
  })

/** The workspace named by `ref` (id, name or unique id prefix), from the daemon's list. */
export const workspaceById = (socket: string, client: WorkspaceClient, ref: string): Effect.Effect<WorkspaceSpec, CliError> =>
  call(socket, client.workspace.list()).pipe(
    Effect.flatMap((r) => {
      const exact = r.workspaces.find((x) => x.id === ref) ?? r.workspaces.find((x) => x.name === ref)
      const byPrefix = r.workspaces.filter((x) => x.id.startsWith(ref))
      const w = exact ?? (byPrefix.length === 1 ? byPrefix[0] : undefined)
      if (w !== undefined) return Effect.succeed(w)
      return Effect.fail(
        byPrefix.length > 1
          ? new CliError({ kind: "invalid-input", message: `workspace '${ref}' is ambiguous: ${byPrefix.map((x) => x.id).join(", ")}` })
          : new CliError({ kind: "not-found", message: `no workspace ${ref}` })
      )
    })
  )
