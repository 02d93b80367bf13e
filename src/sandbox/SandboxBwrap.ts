// The bwrap implementation of the Sandbox port: with the host probed once (BwrapProbe.ts: system
// dirs, bwrap, prlimit, user namespaces, the sandbox identity), validates the request's paths
// against the real filesystem, builds the argv (BwrapArgs), applies the limits (the request's,
// nulls filled from the defaults — Limits.ts) with `prlimit` inside the sandbox, a bounded /tmp,
// and a cgroup sub-group when one is writable (v2, or a v1 pids hierarchy), and runs it as a
// scoped process (spawn.ts).
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Either, Layer, Option } from "effect"
import { lstatSync, realpathSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { basename, dirname } from "node:path"
import * as NoFollow from "./NoFollow.js"
import { ResourceLimits } from "../domain/workspace.js"
import { buildBwrapArgs } from "./BwrapArgs.js"
import { createCgroupRun, detectCgroup } from "./Cgroup.js"
import { SandboxPathError, SandboxProcessError, SandboxUnavailableError } from "./errors.js"
import { defaultSandboxLimits, hasRlimits, prlimitPrefix, type SandboxDefaults, withDefaults } from "./Limits.js"
import { Sandbox, type SandboxRequest, type SandboxService } from "./Sandbox.js"
import { runCollect, spawnScoped } from "./spawn.js"
import { makeGrowthBaselines } from "./WorkspaceGrowth.js"
import { parentEnv } from "../config/Config.js"
import {
  type BwrapConfig,
  type BwrapProbe,
  defaultSandboxEnv,
  fixes,
  identityPrefix,
  innerPrefix,
  probeBwrap,
  resolveIdentity
} from "./BwrapProbe.js"

// The probe's names stay reachable here (SandboxBwrap is the embedders' namespace: src/index.ts).
export * from "./BwrapProbe.js"

const pathErr = (field: string, path: string, reason: SandboxPathError["reason"], message: string) =>
  new SandboxPathError({ field, path, reason, message: `${field}: ${message} (${JSON.stringify(path)})` })

/**
 * Existence + "no symlink swapped in" checks for every host path a request binds. Synchronous
 * syscalls on purpose: a stat/realpath of a hot dentry takes microseconds on the main thread, while
 * the async (thread-pool) versions cost milliseconds per spawn on a busy machine.
 */
export const checkHostPaths = (request: SandboxRequest): Effect.Effect<void, SandboxPathError> =>
  Effect.suspend(() => {
    const canonical = (field: string, path: string, wantDir: boolean): SandboxPathError | null => {
      const info = statSync(path, { throwIfNoEntry: false })
      if (info === undefined) return pathErr(field, path, "missing", "does not exist")
      if (wantDir && !info.isDirectory()) return pathErr(field, path, "not-a-directory", "is not a directory")
      let real: string
      try {
        real = realpathSync.native(path)
      } catch {
        return pathErr(field, path, "missing", "cannot be resolved")
      }
      return real === path ? null : pathErr(field, path, "symlink-swapped", `resolves through a symlink to ${real}; refusing to bind it`)
    }
    const root = canonical("root_path", request.workspace.root_path, true)
    if (root !== null) return Effect.fail(root)
    for (const [i, s] of request.workspace.symlinks.entries()) {
      const e = canonical(`symlinks[${i}].host_path`, s.host_path, false)
      if (e !== null) return Effect.fail(e)
    }
    for (const [i, b] of (request.extraBinds ?? []).entries()) {
      if (statSync(b.host_path, { throwIfNoEntry: false }) === undefined) {
        return Effect.fail(pathErr(`extraBinds[${i}].host_path`, b.host_path, "missing", "does not exist"))
      }
    }
    return Effect.void
  })

/**
 * Make what a request binds usable by the sandbox's own uid (identities `inner`/`outer`): the
 * workspace root and every read-write directory bind, and every bound socket (connect(2) needs
 * write permission on it), when the daemon owns them. Only the entry itself changes owner (its
 * contents stay as they are), never through a link (NoFollow.chown; the paths were checked to be
 * canonical just before).
 */
const handOver = (request: SandboxRequest, owner: NoFollow.Owner): Effect.Effect<void, SandboxPathError> =>
  Effect.suspend(() => {
    const self = process.geteuid?.() ?? -1
    const dirs = [
      request.workspace.root_path,
      ...request.workspace.symlinks.filter((s) => s.mode === "rw").map((s) => s.host_path),
      ...(request.extraBinds ?? []).filter((b) => b.mode === "rw").map((b) => b.host_path)
    ]
    const targets: Array<{ readonly path: string; readonly isDir: boolean }> = []
    for (const path of dirs) {
      const info = lstatSync(path, { throwIfNoEntry: false })
      if (info !== undefined && info.isDirectory() && info.uid === self && info.uid !== owner.uid) targets.push({ path, isDir: true })
    }
    for (const b of request.extraBinds ?? []) {
      const info = lstatSync(b.host_path, { throwIfNoEntry: false })
      if (info !== undefined && info.isSocket() && info.uid === self && info.uid !== owner.uid) targets.push({ path: b.host_path, isDir: false })
    }
    return Effect.forEach(targets, (t) =>
      (t.isDir ? NoFollow.chown(t.path, "", owner) : NoFollow.chown(dirname(t.path), basename(t.path), owner)).pipe(
        Effect.mapError((e) => pathErr("root_path", t.path, e.reason === "link" ? "symlink-swapped" : "missing", `cannot hand it to the sandbox uid ${owner.uid}: ${e.message}`))
      ), { discard: true })
  })

/**
 * What `start` does to a request's host paths before bwrap runs, for a sandbox started elsewhere
 * (the CLI's `workspace shell`): checked, and handed to the sandbox uid where the identity has one.
 */
export const prepareHostPaths = (request: SandboxRequest, config: BwrapConfig = {}): Effect.Effect<void, SandboxPathError> =>
  Effect.gen(function*() {
    yield* checkHostPaths(request)
    const identity = resolveIdentity(config)
    if (identity.mode !== "as-is") yield* handOver(request, { uid: identity.uid, gid: identity.gid })
  })

/**
 * The full host command line for a request: [setpriv …] bwrap <args> -- [setpriv …] [prlimit …] command.
 * Pure (no I/O): host paths are checked separately (`checkHostPaths`); a cgroup `prefix`, when one is
 * used, goes in front. Exported so the benchmark runs bare bwrap with exactly the layer's argv.
 */
export const sandboxCommandLine = (
  p: BwrapProbe,
  request: SandboxRequest,
  limits: ResourceLimits,
  config: BwrapConfig = {}
): Either.Either<ReadonlyArray<string>, SandboxPathError> => {
  const identity = resolveIdentity(config)
  const tmpBytes = config.defaultLimits?.tmp_bytes ?? defaultSandboxLimits.tmp_bytes
  const inner = [...innerPrefix(identity, p.setpriv, p.unshare), ...prlimitPrefix(limits, p.prlimit ?? "prlimit"), ...request.command]
  return Either.map(
    buildBwrapArgs({
      spec: request.workspace,
      host: p.host,
      command: inner,
      env: { ...defaultSandboxEnv, ...request.env },
      ...(request.cwd === undefined ? {} : { cwd: request.cwd }),
      ...(request.extraBinds === undefined ? {} : { extraBinds: request.extraBinds }),
      ...(request.interactive === undefined ? {} : { interactive: request.interactive }),
      userNamespace: identity.mode !== "inner",
      tmpBytes,
      ...(config.hostname === undefined ? {} : { hostname: config.hostname })
    }),
    (args) => [...identityPrefix(identity, p.setpriv), p.bwrap, ...args]
  )
}

/** Who a sandboxed command is, as it sees itself (`/proc/self/status`, `uid_map`) and on the host. */
export interface SandboxIdentityReport {
  readonly uid: number
  readonly gid: number
  /** The host uid that uid maps to (through every uid_map line). */
  readonly hostUid: number
  readonly hostGid: number
  /** `/proc/self/uid_map`, whitespace-normalised lines. */
  readonly uidMap: ReadonlyArray<string>
  /** CapEff as hex. */
  readonly capEff: string
  /** A user namespace of its own (not the host's initial one). */
  readonly ownUserNamespace: boolean
}

const mapToHost = (id: number, map: ReadonlyArray<string>): number => {
  for (const line of map) {
    const [inside, outside, count] = line.split(" ").map(Number)
    if (inside !== undefined && outside !== undefined && count !== undefined && id >= inside && id < inside + count) return outside + (id - inside)
  }
  return -1
}

/** Start a trivial sandbox exactly as the layer would and read who it runs as (for `doctor` and tests). */
export const probeIdentity = (
  fs: FileSystem.FileSystem,
  executor: CommandExecutor.CommandExecutor,
  config: BwrapConfig = {}
) =>
  Effect.gen(function*() {
    const p = yield* probeBwrap(fs, executor, config)
    const request: SandboxRequest = {
      workspace: { root_path: tmpdir(), network_access: false, symlinks: [], limits: new ResourceLimits({ memory_bytes: null, cpu_seconds: null, max_processes: null, max_file_bytes: null, wall_clock_seconds: null }) },
      command: ["cat", "/proc/self/uid_map", "/proc/self/gid_map", "/proc/self/status"]
    }
    const limits = request.workspace.limits
    const argv = sandboxCommandLine(p, request, limits, config)
    if (Either.isLeft(argv)) return yield* new SandboxUnavailableError({ reason: "bwrap-broken", message: argv.left.message, fix: "check the configuration" })
    const out = yield* runCollect(spawnScoped(executor, {
      argv: argv.right,
      env: { PATH: parentEnv()["PATH"] ?? "/usr/bin:/bin" },
      limits: { ...limits, wall_clock_seconds: 30 },
      graceMs: 1000
    })).pipe(Effect.mapError((e) => new SandboxUnavailableError({ reason: "bwrap-broken", message: e.message, fix: "run `substrat doctor`" })))
    const lines = out.stdout.split("\n").map((l) => l.trim().replace(/\s+/g, " "))
    const maps = lines.filter((l) => /^\d+ \d+ \d+$/.test(l))
    const field = (name: string) => lines.find((l) => l.startsWith(`${name}:`))?.slice(name.length + 1).trim().split(" ") ?? []
    const uid = Number(field("Uid")[1] ?? NaN)
    const gid = Number(field("Gid")[1] ?? NaN)
    // uid_map then gid_map: the status file follows them.
    const half = maps.length / 2
    const uidMap = maps.slice(0, half)
    const gidMap = maps.slice(half)
    const report: SandboxIdentityReport = {
      uid,
      gid,
      hostUid: mapToHost(uid, uidMap),
      hostGid: mapToHost(gid, gidMap),
      uidMap,
      capEff: field("CapEff")[0] ?? "?",
      ownUserNamespace: !uidMap.includes("0 0 4294967295")
    }
    return report
  })

export const make = (config: BwrapConfig = {}) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const executor = yield* CommandExecutor.CommandExecutor
    const identity = resolveIdentity(config)
    const owner = identity.mode === "as-is" ? undefined : { uid: identity.uid, gid: identity.gid }
    const probe = yield* Effect.cached(probeBwrap(fs, executor, config))
    const cgroupInfo = yield* Effect.cached(detectCgroup(fs))
    const cgroupBase = config.cgroupBase === undefined ? "/sys/fs/cgroup/substrat" : config.cgroupBase
    const defaults: SandboxDefaults = { ...defaultSandboxLimits, ...config.defaultLimits }
    const baselines = yield* makeGrowthBaselines(config.growthIdleMs === undefined ? {} : { idleMs: config.growthIdleMs })

    const start = Effect.fn("Sandbox.start")(function*(request: SandboxRequest) {
      const p = yield* probe
      yield* checkHostPaths(request)
      if (owner !== undefined) yield* handOver(request, owner)
      const limits: ResourceLimits = withDefaults(request.limits ?? request.workspace.limits, defaults)
      if (hasRlimits(limits) && p.prlimit === null) {
        return yield* new SandboxUnavailableError({ reason: "prlimit-missing", message: "prlimit not found", fix: fixes.prlimitMissing })
      }
      const argv = sandboxCommandLine(p, request, limits, config)
      if (Either.isLeft(argv)) return yield* argv.left
      let prefix: ReadonlyArray<string> = []
      let cgroupEvents: Effect.Effect<{ oomKills: number; pidsMax: number }> | undefined
      if (cgroupBase !== null && (limits.memory_bytes !== null || limits.max_processes !== null)) {
        const info = yield* cgroupInfo
        const made = info.mode === "v2-writable"
          ? yield* Effect.option(createCgroupRun(fs, cgroupBase, limits))
          : info.pidsV1 !== undefined && limits.max_processes !== null
          ? yield* Effect.option(createCgroupRun(fs, `${info.pidsV1}/substrat`, limits, "v1-pids"))
          : Option.none()
        if (Option.isSome(made)) {
          prefix = made.value.prefix
          cgroupEvents = made.value.events
          yield* Effect.addFinalizer(() => made.value.remove)
        }
      }
      // A person's shell is not bounded by the per-turn growth budget; agent commands are.
      const growth = defaults.workspace_growth_bytes === null || request.interactive === true
        ? undefined
        : {
          root: request.workspace.root_path,
          bytes: defaults.workspace_growth_bytes,
          baselines,
          ...(config.growthPollMs === undefined ? {} : { pollMs: config.growthPollMs })
        }
      return yield* spawnScoped(executor, {
        argv: [...prefix, ...argv.right],
        env: { PATH: parentEnv()["PATH"] ?? "/usr/bin:/bin" },
        ...(request.stdin === undefined ? {} : { stdin: request.stdin }),
        limits,
        graceMs: config.killGraceMs ?? 2000,
        setupErrorPrefix: "bwrap: ",
        tmpBytes: defaults.tmp_bytes,
        ...(growth === undefined ? {} : { growth }),
        ...(config.growthHint === undefined ? {} : { growthHint: config.growthHint }),
        ...(cgroupEvents === undefined ? {} : { cgroupEvents })
      })
    })

    const run = Effect.fn("Sandbox.run")((request: SandboxRequest) => runCollect(start(request)))
    const service: SandboxService = { kind: "bwrap", start, run, owner: owner ?? null }
    return service
  })

/** The bwrap Sandbox. Building it never fails: an unusable bwrap surfaces as `SandboxUnavailableError` on `start`. */
export const layerBwrap = (
  config: BwrapConfig = {}
): Layer.Layer<Sandbox, never, FileSystem.FileSystem | CommandExecutor.CommandExecutor> => Layer.scoped(Sandbox, make(config))

export { SandboxProcessError }
