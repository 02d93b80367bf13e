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
