// The bwrap implementation of the Sandbox port: probes the host once (system dirs, bwrap, prlimit,
// user namespaces), validates the request's paths against the real filesystem, builds the argv
// (BwrapArgs), applies the limits (the request's, nulls filled from the defaults — Limits.ts) with
// `prlimit` inside the sandbox, a bounded /tmp, and a cgroup sub-group when one is writable (v2, or
// a v1 pids hierarchy), and runs it as a scoped process (spawn.ts).
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Either, Layer, Option } from "effect"
import { lstatSync, realpathSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { basename, dirname } from "node:path"
import * as NoFollow from "./NoFollow.js"
import { ResourceLimits } from "../domain/workspace.js"
import { buildBwrapArgs, type HostEntry, type HostLayout } from "./BwrapArgs.js"
import { createCgroupRun, detectCgroup } from "./Cgroup.js"
import { SandboxPathError, SandboxProcessError, SandboxUnavailableError } from "./errors.js"
import { defaultSandboxLimits, hasRlimits, prlimitPrefix, type SandboxDefaults, withDefaults } from "./Limits.js"
import { Sandbox, type SandboxRequest, type SandboxService } from "./Sandbox.js"
import { runCollect, spawnScoped } from "./spawn.js"
import { makeGrowthBaselines } from "./WorkspaceGrowth.js"
import { parentEnv } from "../config/Config.js"

/**
 * Who the sandboxed command runs as. A sandbox never holds host root: `as-is` under a root daemon
 * means `inner` with `BwrapConfig.sandboxUser` (default 65534:65534) — see `resolveIdentity`.
 * - `as-is`: bwrap runs as the daemon's user (the normal, unprivileged case): a user namespace
 *   mapping that uid to itself, every capability dropped.
 * - `outer`: `setpriv` switches to uid/gid before bwrap (bwrap then runs unprivileged and creates a user
 *   namespace). Every bound host path must be reachable by that uid.
 * - `inner`: bwrap runs as root without a user namespace (it can bind anything) and `setpriv` inside
 *   the sandbox drops to uid/gid with no capabilities, an empty bounding set and no_new_privs; then
 *   `unshare --user --map-current-user` puts the command in a user namespace of its own that maps
 *   only that uid (uid_map `uid uid 1`: no host root in it; CapEff 0 after the exec). Where the host
 *   refuses an unprivileged user namespace the command runs without one (still that uid, no
 *   capabilities; `doctor` warns). The workspace root and the rw binds must be writable by that uid:
 *   the layer hands their top directories (and bound sockets) to it, without following links.
 */
export type SandboxIdentity =
  | { readonly mode: "as-is" }
  | { readonly mode: "outer" | "inner"; readonly uid: number; readonly gid: number }

export interface BwrapConfig {
  readonly bwrap?: string
  readonly identity?: SandboxIdentity
  /** The unprivileged host uid/gid sandboxes run as when the daemon is root (identity `as-is`); default 65534:65534. */
  readonly sandboxUser?: { readonly uid: number; readonly gid: number }
  readonly systemPaths?: ReadonlyArray<string>
  readonly etcBase?: ReadonlyArray<string>
  readonly etcNetwork?: ReadonlyArray<string>
  readonly hostname?: string
  /** SIGTERM → SIGKILL grace on scope close (ms). */
  readonly killGraceMs?: number
  /**
   * Use a cgroup v2 sub-group under this base when /sys/fs/cgroup is writable cgroup2 (default
   * `/sys/fs/cgroup/substrat`); else a v1 pids sub-group under `<pids hierarchy>/substrat` when
   * that is writable. null: rlimits only.
   */
  readonly cgroupBase?: string | null
  /** The limits every command gets where its own are null (default `defaultSandboxLimits`). */
  readonly defaultLimits?: Partial<SandboxDefaults>
  /** How often the workspace-growth watcher re-measures /workspace at most (ms; default 250). */
  readonly growthPollMs?: number
  /** Appended to a workspace-growth error: how the operator raises the limit. */
  readonly growthHint?: string
  /** How long a workspace stays quiet after a command before its size is re-measured (ms; default 250). */
  readonly growthIdleMs?: number
}

export const defaultSystemPaths: ReadonlyArray<string> = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]
export const defaultEtcBase: ReadonlyArray<string> = [
  "/etc/passwd",
  "/etc/group",
  "/etc/localtime",
  "/etc/ld.so.cache",
  "/etc/ld.so.conf",
  "/etc/ld.so.conf.d",
  "/etc/alternatives"
]
export const defaultEtcNetwork: ReadonlyArray<string> = [
  "/etc/resolv.conf",
  "/etc/hosts",
  "/etc/nsswitch.conf",
  "/etc/host.conf",
  "/etc/gai.conf",
  "/etc/services",
  "/etc/protocols",
  "/etc/ssl",
  "/etc/ca-certificates",
  "/etc/ca-certificates.conf",
  "/etc/pki"
]
export const defaultSandboxEnv: Readonly<Record<string, string>> = {
  PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  HOME: "/tmp",
  TMPDIR: "/tmp",
  LANG: "C.UTF-8"
}

/** lstat-like probe of the system paths (missing ones are left out). */
export const probeHostLayout = (fs: FileSystem.FileSystem, config: BwrapConfig = {}) =>
  Effect.gen(function*() {
    const system: Array<HostEntry> = []
    for (const path of config.systemPaths ?? defaultSystemPaths) {
      const link = yield* fs.readLink(path).pipe(Effect.option)
      if (link._tag === "Some") {
        system.push({ path, kind: "symlink", target: link.value })
        continue
      }
      const info = yield* fs.stat(path).pipe(Effect.option)
      if (info._tag === "Some") system.push({ path, kind: info.value.type === "Directory" ? "dir" : "file" })
    }
    const layout: HostLayout = {
      system,
      etcBase: config.etcBase ?? defaultEtcBase,
      etcNetwork: config.etcNetwork ?? defaultEtcNetwork
    }
    return layout
  })

/** First executable `name` on PATH (or `name` itself when it contains a `/`). */
export const which = (fs: FileSystem.FileSystem, name: string, path = parentEnv()["PATH"] ?? "/usr/bin:/bin") =>
  Effect.gen(function*() {
    const candidates = name.includes("/") ? [name] : path.split(":").filter((d) => d.length > 0).map((d) => `${d}/${name}`)
    for (const c of candidates) {
      const ok = yield* fs.access(c, { readable: true }).pipe(Effect.as(true), Effect.orElseSucceed(() => false))
      if (ok) return c
    }
    return null
  })

export const fixes = {
  bwrapMissing: "install bubblewrap: `apt-get install bubblewrap` (Debian/Ubuntu) or `dnf install bubblewrap` (Fedora)",
  usernsDenied:
    "allow unprivileged user namespaces: `sysctl -w kernel.unprivileged_userns_clone=1` (Debian/Ubuntu kernels), " +
    "`sysctl -w user.max_user_namespaces=15000` (must be > 0); on Ubuntu ≥ 23.10 also " +
    "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (or an AppArmor profile for bwrap); " +
    "inside a container, the container must allow unshare/mount (e.g. seccomp profile permitting it)",
  prlimitMissing: "install util-linux (provides `prlimit`), needed for resource limits",
  setprivMissing: "install util-linux (provides `setpriv`), needed to drop privileges"
} as const

/** Classify a failed probe from bwrap's stderr. */
export const classifyBwrapFailure = (stderr: string): SandboxUnavailableError =>
  /namespace|uid map|unshare|Operation not permitted|setting up uid|No permissions/i.test(stderr)
    ? new SandboxUnavailableError({
      reason: "userns-denied",
      message: `bwrap cannot create the sandbox namespaces: ${stderr.trim()}`,
      fix: fixes.usernsDenied
    })
    : new SandboxUnavailableError({
      reason: "bwrap-broken",
      message: `bwrap failed to start a trivial sandbox: ${stderr.trim()}`,
      fix: "run `substrat doctor` and check the bwrap installation"
    })

export interface BwrapProbe {
  readonly bwrap: string
  readonly prlimit: string | null
  readonly setpriv: string | null
  /** `unshare` (util-linux): the `inner` identity's own user namespace; null when absent or refused. */
  readonly unshare: string | null
  readonly host: HostLayout
  readonly version: string
}

export const defaultSandboxUser = { uid: 65534, gid: 65534 } as const

const isRootProcess = () => typeof process.geteuid === "function" && process.geteuid() === 0

/** The identity sandboxes really run as: `as-is` under a root daemon becomes `inner` with the sandbox user. */
export const resolveIdentity = (config: BwrapConfig = {}, root = isRootProcess()): SandboxIdentity => {
  const identity = config.identity ?? { mode: "as-is" }
  if (identity.mode !== "as-is" || !root) return identity
  const user = config.sandboxUser ?? defaultSandboxUser
  return { mode: "inner", uid: user.uid, gid: user.gid }
}

const identityPrefix = (identity: SandboxIdentity, setpriv: string | null) =>
  identity.mode === "outer" && setpriv !== null
    ? [setpriv, `--reuid=${identity.uid}`, `--regid=${identity.gid}`, "--clear-groups", "--"]
    : []

const innerPrefix = (identity: SandboxIdentity, setpriv: string | null, unshare: string | null) =>
  identity.mode === "inner" && setpriv !== null
    ? [
      setpriv,
      `--reuid=${identity.uid}`,
      `--regid=${identity.gid}`,
      "--clear-groups",
      "--inh-caps=-all",
      "--bounding-set=-all",
      "--no-new-privs",
      "--",
      ...(unshare === null ? [] : [unshare, "--user", "--map-current-user", "--"])
    ]
    : []

/** Find bwrap (+ prlimit, setpriv), and start a trivial sandbox to prove namespaces work. */
export const probeBwrap = (
  fs: FileSystem.FileSystem,
  executor: CommandExecutor.CommandExecutor,
  config: BwrapConfig = {}
) =>
  Effect.gen(function*() {
    const identity = resolveIdentity(config)
    const bwrap = yield* which(fs, config.bwrap ?? "bwrap")
    if (bwrap === null) {
      return yield* new SandboxUnavailableError({
        reason: "bwrap-missing",
        message: `bwrap (bubblewrap) was not found on PATH`,
        fix: fixes.bwrapMissing
      })
    }
    const prlimit = yield* which(fs, "prlimit")
    const setpriv = yield* which(fs, "setpriv")
    if (identity.mode !== "as-is" && setpriv === null) {
      return yield* new SandboxUnavailableError({ reason: "setpriv-missing", message: "setpriv not found", fix: fixes.setprivMissing })
    }
    const host = yield* probeHostLayout(fs, config)
    const trial = (unshare: string | null) =>
      Effect.gen(function*() {
        const args = buildBwrapArgs({
          spec: { root_path: tmpdir(), network_access: false, symlinks: [] },
          host,
          command: [...innerPrefix(identity, setpriv, unshare), "true"],
          env: defaultSandboxEnv,
          userNamespace: identity.mode !== "inner"
        })
        if (Either.isLeft(args)) {
          return yield* new SandboxUnavailableError({ reason: "bwrap-broken", message: args.left.message, fix: "check the configuration" })
        }
        const result = yield* Effect.either(runCollect(spawnScoped(executor, {
          argv: [...identityPrefix(identity, setpriv), bwrap, ...args.right],
          env: { PATH: parentEnv()["PATH"] ?? "/usr/bin:/bin" },
          limits: { memory_bytes: null, cpu_seconds: null, max_processes: null, max_file_bytes: null, wall_clock_seconds: 30 },
          graceMs: 1000
        })))
        if (Either.isLeft(result)) return yield* classifyBwrapFailure(result.left.message)
        if (result.right.exit.code !== 0) return yield* classifyBwrapFailure(result.right.stderr)
      })
    // The inner identity's own user namespace, where the host allows one to an unprivileged uid.
    let unshare = identity.mode === "inner" ? yield* which(fs, "unshare") : null
    if (unshare !== null && Either.isLeft(yield* Effect.either(trial(unshare)))) unshare = null
    if (unshare === null) yield* trial(null)
    const version = yield* Effect.either(runCollect(spawnScoped(executor, {
      argv: [bwrap, "--version"],
      env: {},
      limits: { memory_bytes: null, cpu_seconds: null, max_processes: null, max_file_bytes: null, wall_clock_seconds: 10 },
      graceMs: 1000
    })))
    const probe: BwrapProbe = {
      bwrap,
      prlimit,
      setpriv,
      unshare,
      host,
      version: Either.isRight(version) ? version.right.stdout.trim() : "unknown"
    }
    return probe
  })

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
