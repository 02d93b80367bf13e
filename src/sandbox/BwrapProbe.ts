// The host side of the bwrap sandbox, probed once: which system directories exist (the layout
// bound read-only), where bwrap, prlimit, setpriv and unshare are, who sandboxes run as (the
// identity: never host root), and a trivial sandbox started to prove user namespaces work —
// with the fix to print when they do not. The sandbox itself (paths checked, argv, limits, the
// scoped process) is SandboxBwrap.ts; `substrat doctor` reports this probe (Doctor.ts).
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Either } from "effect"
import { tmpdir } from "node:os"
import { buildBwrapArgs, type HostEntry, type HostLayout } from "./BwrapArgs.js"
import { SandboxUnavailableError } from "./errors.js"
import type { SandboxDefaults } from "./Limits.js"
import { runCollect, spawnScoped } from "./spawn.js"
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

/** setpriv before bwrap (identity `outer`). */
export const identityPrefix = (identity: SandboxIdentity, setpriv: string | null) =>
  identity.mode === "outer" && setpriv !== null
    ? [setpriv, `--reuid=${identity.uid}`, `--regid=${identity.gid}`, "--clear-groups", "--"]
    : []

/** setpriv (and unshare) inside the sandbox (identity `inner`). */
export const innerPrefix = (identity: SandboxIdentity, setpriv: string | null, unshare: string | null) =>
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
