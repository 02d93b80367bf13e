// The explicit no-isolation Sandbox (`--unsafe-no-sandbox` / config). The command runs directly on
// the host with cwd = the workspace root (a sandbox cwd under /workspace is mapped onto it), the
// layer's small default environment plus the request's, and the same rlimits (prlimit) and
// wall-clock timeout. It does NOT confine anything: no mount/network/pid isolation, and a process
// that calls setsid() escapes the process-group kill on scope close. The first use in a process
// logs exactly one warning.
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Layer } from "effect"
import type { ResourceLimits } from "../domain/workspace.js"
import { WORKSPACE } from "./BwrapArgs.js"
import { SandboxPathError, SandboxUnavailableError } from "./errors.js"
import { hasRlimits, prlimitPrefix } from "./Limits.js"
import { isWithin, relativeTo } from "./PathPolicy.js"
import { Sandbox, type SandboxRequest, type SandboxService } from "./Sandbox.js"
import { fixes, which } from "./BwrapProbe.js"
import { runCollect, spawnScoped } from "./spawn.js"
import { parentEnv } from "../config/Config.js"

let warned = false

export const unsafeWarning =
  "substrat: running agents WITHOUT a sandbox (unsafe-no-sandbox): commands see the whole host filesystem, network and processes"

/** Exposed for tests: has this process already printed the warning? */
export const unsafeWarningPrinted = (): boolean => warned

export const make = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const executor = yield* CommandExecutor.CommandExecutor
  const prlimit = yield* Effect.cached(which(fs, "prlimit"))

  const start = Effect.fn("Sandbox.start")(function*(request: SandboxRequest) {
    if (!warned) {
      warned = true
      yield* Effect.logWarning(unsafeWarning)
    }
    const root = request.workspace.root_path
    const info = yield* fs.stat(root).pipe(Effect.option)
    if (info._tag === "None" || info.value.type !== "Directory") {
      return yield* new SandboxPathError({ field: "root_path", path: root, reason: "missing", message: `root_path: does not exist (${root})` })
    }
    const cwdIn = request.cwd ?? WORKSPACE
    const cwd = isWithin(WORKSPACE, cwdIn) ? (cwdIn === WORKSPACE ? root : `${root}/${relativeTo(WORKSPACE, cwdIn)}`) : cwdIn
    const limits: ResourceLimits = request.limits ?? request.workspace.limits
    const pl = yield* prlimit
    if (hasRlimits(limits) && pl === null) {
      return yield* new SandboxUnavailableError({ reason: "prlimit-missing", message: "prlimit not found", fix: fixes.prlimitMissing })
    }
    const parent = parentEnv()
    const env = {
      PATH: parent["PATH"] ?? "/usr/local/bin:/usr/bin:/bin",
      HOME: parent["HOME"] ?? root,
      TMPDIR: parent["TMPDIR"] ?? "/tmp",
      LANG: "C.UTF-8",
      SUBSTRAT_WORKSPACE: root,
      ...request.env
    }
    return yield* spawnScoped(executor, {
      argv: [...prlimitPrefix(limits, pl ?? "prlimit"), ...request.command],
      env,
      cwd,
      ...(request.stdin === undefined ? {} : { stdin: request.stdin }),
      limits,
      graceMs: 2000
    })
  })
  const run = Effect.fn("Sandbox.run")((request: SandboxRequest) => runCollect(start(request)))
  const service: SandboxService = { kind: "unsafe", start, run }
  return service
})

/** No isolation at all. Choose it only on an explicit user request. */
export const layerUnsafeNoSandbox: Layer.Layer<Sandbox, never, FileSystem.FileSystem | CommandExecutor.CommandExecutor> =
  Layer.effect(Sandbox, make)
