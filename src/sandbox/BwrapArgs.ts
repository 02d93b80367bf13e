// Pure bwrap argv builder: WorkspaceSpec + host layout (as data) + command → the arguments after
// `bwrap`. No I/O: which system directories exist on the host is probed by the layer
// (SandboxBwrap.probeHost) and passed in, so this is fully unit-testable.
import { Either } from "effect"
import type { BindMode, WorkspaceSpec } from "../domain/workspace.js"
import { SandboxPathError } from "./errors.js"
import { absolutePath, isWithin, linkRefusal, relativePath, sandboxTarget } from "./PathPolicy.js"

/** One system path on the host as `lstat` saw it. Symlinks are recreated as symlinks (usrmerge: /bin → usr/bin). */
export interface HostEntry {
  readonly path: string
  readonly kind: "dir" | "file" | "symlink"
  /** Link target (only for `symlink`), verbatim from readlink. */
  readonly target?: string
}

export interface HostLayout {
  /** Read-only system paths that exist on the host (/usr, /bin, /lib, /lib64, …). */
  readonly system: ReadonlyArray<HostEntry>
  /** Files/dirs under /etc always bound read-only (missing ones are skipped by bwrap: `--ro-bind-try`). */
  readonly etcBase: ReadonlyArray<string>
  /** Extra /etc entries bound only when the network is on (DNS, certificates, …). */
  readonly etcNetwork: ReadonlyArray<string>
}

/** A file or socket bound at an absolute sandbox path (agent socket, MCP config, …). */
export interface ExtraBind {
  readonly host_path: string
  readonly sandbox_path: string
  readonly mode: BindMode
}

export interface BwrapInput {
  readonly spec: Pick<WorkspaceSpec, "root_path" | "network_access" | "symlinks">
  readonly host: HostLayout
  /** argv of the program to run inside (already including any limit wrapper such as prlimit). */
  readonly command: ReadonlyArray<string>
  /** The complete environment inside the sandbox (bwrap gets `--clearenv` first). */
  readonly env: Readonly<Record<string, string>>
  /** Working directory inside the sandbox; default `/workspace`. */
  readonly cwd?: string
  readonly extraBinds?: ReadonlyArray<ExtraBind>
  /**
   * true (default): `--unshare-all` including a user namespace, `--cap-drop ALL`.
   * false: every namespace but the user one, capabilities kept so that a `setpriv` inside can drop
   * to an unprivileged uid (the "inner" identity mode for a daemon running as root).
   */
  readonly userNamespace?: boolean
  /**
   * A person's shell on their terminal (`substrat workspace shell`): no `--new-session`, so the
   * shell keeps the controlling terminal and gets Ctrl-C, Ctrl-Z and window-size changes.
   */
  readonly interactive?: boolean
  readonly hostname?: string
  /** Size of the RAM-backed /tmp in bytes (bwrap `--size`); unbounded when absent. */
  readonly tmpBytes?: number
}

export const WORKSPACE = "/workspace"

const depth = (p: string) => p.split("/").length

const pathError = (field: string, path: string, reason: SandboxPathError["reason"], message: string) =>
  new SandboxPathError({ field, path, reason, message: `${field}: ${message} (${JSON.stringify(path)})` })

/** Build the argv (without the leading `bwrap`). Fails with the first invalid path. */
export const buildBwrapArgs = (input: BwrapInput): Either.Either<ReadonlyArray<string>, SandboxPathError> =>
  Either.gen(function*() {
    const root = yield* absolutePath("root_path", input.spec.root_path)
    if (root === "/") return yield* Either.left(pathError("root_path", root, "reserved", "the host root cannot be a workspace"))
    const cwd = yield* absolutePath("cwd", input.cwd ?? WORKSPACE)
    if (input.command.length === 0 || input.command[0] === "") {
      return yield* Either.left(pathError("command", "", "empty", "no command given"))
    }

    const links: Array<{ host: string; target: string; mode: BindMode }> = []
    const seen = new Set<string>()
    for (const [i, s] of input.spec.symlinks.entries()) {
      const host = yield* absolutePath(`symlinks[${i}].host_path`, s.host_path)
      const mount = yield* relativePath(`symlinks[${i}].mount_path`, s.mount_path)
      const refusal = linkRefusal(host, mount, s.mode, { host: `symlinks[${i}].host_path`, mount: `symlinks[${i}].mount_path` })
      if (refusal !== null) return yield* Either.left(refusal)
      const target = `${WORKSPACE}/${mount}`
      if (seen.has(target)) {
        return yield* Either.left(pathError(`symlinks[${i}].mount_path`, s.mount_path, "duplicate", "mount path used twice"))
      }
      seen.add(target)
      links.push({ host, target, mode: s.mode })
    }
    const extras: Array<{ host: string; target: string; mode: BindMode }> = []
    for (const [i, b] of (input.extraBinds ?? []).entries()) {
      const host = yield* absolutePath(`extraBinds[${i}].host_path`, b.host_path)
      const target = yield* sandboxTarget(`extraBinds[${i}].sandbox_path`, b.sandbox_path)
      if (seen.has(target)) {
        return yield* Either.left(pathError(`extraBinds[${i}].sandbox_path`, b.sandbox_path, "duplicate", "sandbox path used twice"))
      }
      seen.add(target)
      extras.push({ host, target, mode: b.mode })
    }
    for (const k of Object.keys(input.env)) {
      if (k.length === 0 || k.includes("=") || k.includes("\0")) {
        return yield* Either.left(pathError("env", k, "reserved", "invalid environment variable name"))
      }
    }

    const userNs = input.userNamespace ?? true
    const argv: Array<string> = input.interactive === true ? ["--die-with-parent"] : ["--die-with-parent", "--new-session"]
    if (userNs) {
      argv.push("--unshare-all")
      if (input.spec.network_access) argv.push("--share-net")
      argv.push("--cap-drop", "ALL")
    } else {
      argv.push("--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try")
      if (!input.spec.network_access) argv.push("--unshare-net")
    }
    if (input.hostname !== undefined) argv.push("--hostname", input.hostname)

    for (const e of input.host.system) {
      if (e.kind === "symlink" && e.target !== undefined) argv.push("--symlink", e.target, e.path)
      else if (e.kind !== "symlink") argv.push("--ro-bind", e.path, e.path)
    }
    const etc = input.spec.network_access ? [...input.host.etcBase, ...input.host.etcNetwork] : input.host.etcBase
    // bwrap running as root makes missing parents 0700; /etc must stay searchable for an unprivileged uid.
    if (etc.length > 0) argv.push("--perms", "0755", "--dir", "/etc")
    for (const p of etc) argv.push("--ro-bind-try", p, p)

    // /tmp is sticky and world-writable, so the `inner` identity (bwrap as root, command as another uid) can use it.
    // /proc/sys read-only: with --proc alone its files stay writable by whoever owns them on the host.
    argv.push("--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev", "--perms", "1777")
    if (input.tmpBytes !== undefined) argv.push("--size", String(Math.max(4096, Math.floor(input.tmpBytes))))
    argv.push("--tmpfs", "/tmp")
    argv.push("--bind", root, WORKSPACE)
    // Parents before children, so a nested bind lands inside its parent bind.
    const byDepth = <T extends { target: string }>(xs: Array<T>) =>
      [...xs].sort((a, b) => depth(a.target) - depth(b.target) || (a.target < b.target ? -1 : a.target > b.target ? 1 : 0))
    for (const l of byDepth(links)) argv.push(l.mode === "rw" ? "--bind" : "--ro-bind", l.host, l.target)
    // The directories above an extra bind (/opt/substrat, /run/substrat, /home) as bwrap would
    // make them are 0700 when it runs as root: made 0755 first, so an unprivileged uid inside reaches the binds.
    // Below /workspace too (a bind at /workspace/.cursor/mcp.json): bwrap makes a missing parent in
    // the bound host directory, and as root that one is 0700 — the sandbox uid could not enter it.
    const made = ["/proc", "/dev", "/tmp", "/etc", ...input.host.system.map((e) => e.path)]
    const parents = new Set<string>()
    for (const x of extras) {
      for (let d = x.target.slice(0, x.target.lastIndexOf("/")); d.length > 0; d = d.slice(0, d.lastIndexOf("/"))) {
        if (d !== WORKSPACE && !made.some((m) => isWithin(m, d))) parents.add(d)
      }
    }
    for (const d of [...parents].sort((a, b) => depth(a) - depth(b) || (a < b ? -1 : 1))) argv.push("--perms", "0755", "--dir", d)
    for (const x of byDepth(extras)) argv.push(x.mode === "rw" ? "--bind" : "--ro-bind", x.host, x.target)
    // The root itself is a bwrap tmpfs: make it read-only once every mount point exists.
    argv.push("--remount-ro", "/")

    argv.push("--clearenv")
    for (const k of Object.keys(input.env).sort()) argv.push("--setenv", k, input.env[k]!)
    argv.push("--chdir", cwd)
    argv.push("--", ...input.command)
    return argv
  })
