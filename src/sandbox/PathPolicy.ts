// Pure path validation for workspace specs and sandbox requests: no `..` escapes, mount paths
// relative and normalised, host paths absolute and normalised. Existence and symlink checks are
// effectful and live in the bwrap layer / WorkspaceStore.
import { Either } from "effect"
import { SandboxPathError } from "./errors.js"

type R = Either.Either<string, SandboxPathError>

const fail = (field: string, path: string, reason: SandboxPathError["reason"], message: string): R =>
  Either.left(new SandboxPathError({ field, path, reason, message: `${field}: ${message} (${JSON.stringify(path)})` }))

const segmentsOk = (field: string, path: string, segments: ReadonlyArray<string>): R | null => {
  for (const s of segments) {
    if (s === "..") return fail(field, path, "dot-dot", "`..` is not allowed")
    if (s === "." || s === "") return fail(field, path, "not-normalized", "path must be normalised (no `.` or empty segments)")
  }
  return null
}

/** A path relative to /workspace: non-empty, no leading `/`, no `..`, no `.`/empty segments. Trailing `/` is dropped. */
export const relativePath = (field: string, path: string): R => {
  if (path.length === 0) return fail(field, path, "empty", "path is empty")
  if (path.includes("\0")) return fail(field, path, "nul-byte", "path contains a NUL byte")
  if (path.startsWith("/")) return fail(field, path, "not-relative", "must be relative to the workspace")
  const trimmed = path.endsWith("/") ? path.slice(0, -1) : path
  return segmentsOk(field, path, trimmed.split("/")) ?? Either.right(trimmed)
}

/** An absolute, normalised path (`/a/b`). Trailing `/` is dropped; `/` itself is allowed. */
export const absolutePath = (field: string, path: string): R => {
  if (path.length === 0) return fail(field, path, "empty", "path is empty")
  if (path.includes("\0")) return fail(field, path, "nul-byte", "path contains a NUL byte")
  if (!path.startsWith("/")) return fail(field, path, "not-absolute", "must be an absolute path")
  if (path === "/") return Either.right("/")
  const trimmed = path.endsWith("/") ? path.slice(0, -1) : path
  return segmentsOk(field, path, trimmed.slice(1).split("/")) ?? Either.right(trimmed)
}

/** Sandbox-side paths we never let a bind cover (they are set up by bwrap itself). */
export const reservedSandboxPaths: ReadonlyArray<string> = ["/", "/proc", "/dev", "/tmp", "/workspace"]

/** An absolute path inside the sandbox for an extra bind: not `/`, `/proc/…`, `/dev/…`, nor exactly `/tmp` or `/workspace`. */
export const sandboxTarget = (field: string, path: string): R =>
  Either.flatMap(absolutePath(field, path), (p) =>
    p === "/" || p === "/tmp" || p === "/workspace" || isWithin("/proc", p) || isWithin("/dev", p)
      ? fail(field, path, "reserved", "this sandbox path is reserved")
      : Either.right(p))

/** `child` equals `parent` or lies below it. Both must be normalised absolute paths. */
export const isWithin = (parent: string, child: string): boolean =>
  parent === "/" ? child.startsWith("/") : child === parent || child.startsWith(parent + "/")

/** The part of `child` below `parent` ("" when equal); assumes `isWithin(parent, child)`. */
export const relativeTo = (parent: string, child: string): string =>
  child === parent ? "" : parent === "/" ? child.slice(1) : child.slice(parent.length + 1)

// ── Link policy: which host paths a workspace may bind, and where ────────────────────────────
// Checked on `workspace link` (WorkspaceStore) and again when a sandbox is built (BwrapArgs), so
// a spec written before a rule existed cannot bind it either. Host paths are canonical here.

/** Host trees never bound, in any mode. bwrap binds recursively, so `/` is refused with them. */
const hostNever: ReadonlyArray<readonly [string, string]> = [
  ["/proc", "it exposes every host process (command lines, environments, open files) and kernel knobs"],
  ["/sys", "it exposes the host's kernel and device state"],
  ["/dev", "it exposes the host's devices (disks, memory, terminals)"],
  ["/run", "it holds host daemons' sockets (a read-only bind does not stop connect(2))"]
]

/** Host system trees never bound read-write (read-only is fine). */
const systemTrees: ReadonlyArray<string> = [
  "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/var", "/opt", "/srv"
]

/** Home directories: never bound read-write whole, nor their hidden entries (keys, shell start-up files, tool configs). */
const homeDirs = (home: string): boolean => home === "/root" || home === "/home" || /^\/home\/[^/]+$/.test(home)

/** Mount paths (relative to /workspace) that would shadow the workspace's history or the tools' files. */
const reservedMounts: ReadonlyArray<readonly [string, string]> = [
  [".git", "it would shadow the workspace's git metadata (its history and hooks)"],
  // Bound there for cursor-agent (src/provider/cursor/CursorProvider.ts SANDBOX_CURSOR_MCP).
  [".cursor/mcp.json", "the agent's MCP configuration is bound there"]
]

const refuse = (field: string, path: string, why: string): SandboxPathError =>
  new SandboxPathError({ field, path, reason: "reserved", message: `${field}: refused: ${why} (${JSON.stringify(path)})` })

/**
 * May a workspace bind canonical host path `host` at `/workspace/<mount>` with `mode`? Returns the
 * refusal (a `reserved` SandboxPathError saying why), or null.
 */
export const linkRefusal = (
  host: string,
  mount: string,
  mode: "ro" | "rw",
  fields: { readonly host: string; readonly mount: string } = { host: "host_path", mount: "mount_path" }
): SandboxPathError | null => {
  for (const [tree, why] of hostNever) {
    if (isWithin(tree, host)) return refuse(fields.host, host, `${tree} cannot be linked: ${why}`)
    if (isWithin(host, tree)) return refuse(fields.host, host, `it contains ${tree}, which cannot be linked: ${why}`)
  }
  if (mode === "rw") {
    for (const tree of systemTrees) {
      if (isWithin(tree, host)) return refuse(fields.host, host, `${tree} is a system directory; link it read-only`)
      if (isWithin(host, tree)) return refuse(fields.host, host, `it contains the system directory ${tree}; link it read-only`)
    }
    const parent = host.slice(0, host.lastIndexOf("/")) || "/"
    const base = host.slice(host.lastIndexOf("/") + 1)
    if (homeDirs(host)) {
      return refuse(fields.host, host, "a whole home directory (keys, shell start-up files) cannot be linked read-write; link a project directory")
    }
    if (homeDirs(parent) && base.startsWith(".")) {
      return refuse(fields.host, host, `hidden entries of ${parent} (keys, shell start-up files, tool configs) cannot be linked read-write`)
    }
  }
  for (const [reserved, why] of reservedMounts) {
    if (isWithin(reserved, mount)) return refuse(fields.mount, mount, why)
    if (isWithin(mount, reserved)) return refuse(fields.mount, mount, `it would cover ${reserved}: ${why}`)
  }
  return null
}
