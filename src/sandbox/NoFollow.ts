// The daemon's file operations inside trees a sandbox can write (agent homes, workspaces, RW
// links, a swarm's code tree): they never follow a symbolic link and never resolve a path through
// one, whatever the agent planted or swaps in while the operation runs (docs/sandbox.md
// "No-follow rule").
//
// Why a module of its own: Node has no openat/mkdirat/renameat/unlinkat, and no O_PATH, and the
// platform FileSystem follows links (stat, readFile, writeFile, makeDirectory). Checking each
// path component with lstat/realpath and then using the path again is racy (an agent swaps a
// directory for a link between the check and the use). Instead every operation here works like
// the *at() system calls, through Linux's `/proc/self/fd/<fd>` magic links:
//   - the trusted root (a daemon-owned path; never itself replaceable by the agent) is opened;
//   - each further directory is opened relative to the previous one's descriptor,
//     `open("/proc/self/fd/<dirfd>/<name>", O_DIRECTORY | O_NOFOLLOW)`: the kernel jumps straight to
//     the directory that descriptor holds (no re-walk of the parents) and refuses a link as the
//     last component (ELOOP/ENOTDIR), so the chain of descriptors is exactly the tree under the
//     root, whatever is renamed or swapped meanwhile;
//   - the last step (open, mkdir, rename, unlink, rmdir, lchown) names `/proc/self/fd/<dirfd>/<name>`
//     likewise, files with O_NOFOLLOW (and O_NONBLOCK, so a planted FIFO cannot block the daemon;
//     anything but a regular file is refused);
//   - a file is written to a fresh name (O_CREAT | O_EXCL) in that directory and renamed over the
//     target, so a link at the target is replaced, never written through.
// The alternative (files the daemon writes kept in a daemon-only directory bound read-only into
// the sandbox) does not fit CLIs that rewrite their own config in their home, and does not cover
// reads, deletes or the swarm's walk of a code tree; this covers all of them with one rule.
import { Data, Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { randomBytes } from "node:crypto"

export class NoFollowError extends Data.TaggedError("NoFollowError")<{
  /** `link`: a symbolic link (or something else than a directory) where a directory was expected, or a link as the file;
   * `not-a-file`: a FIFO, socket, device or directory where a regular file was expected; `too-large`; `path`: a bad
   * relative path (absolute, `..`, empty segment); `missing`; `io`: anything else. */
  readonly reason: "link" | "not-a-file" | "too-large" | "path" | "missing" | "io"
  readonly path: string
  readonly message: string
}> {}

export interface Owner {
  readonly uid: number
  readonly gid: number
}

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY, O_NONBLOCK } = Fs.constants

const fdPath = (fd: number, name?: string) => (name === undefined ? `/proc/self/fd/${fd}` : `/proc/self/fd/${fd}/${name}`)

const code = (e: unknown): string | undefined =>
  typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? e.code : undefined

const fail = (reason: NoFollowError["reason"], path: string, message: string): never => {
  throw new NoFollowError({ reason, path, message: `${path}: ${message}` })
}

const toError = (path: string, e: unknown): NoFollowError => {
  if (e instanceof NoFollowError) return e
  const c = code(e)
  if (c === "ELOOP" || c === "ENOTDIR") return new NoFollowError({ reason: "link", path, message: `${path}: a symbolic link or not a directory on the way; refusing to follow it` })
  if (c === "ENOENT") return new NoFollowError({ reason: "missing", path, message: `${path}: does not exist` })
  return new NoFollowError({ reason: "io", path, message: `${path}: ${e instanceof Error ? e.message : String(e)}` })
}

/** The segments of a relative path; refuses absolute paths, `..`, `.` and empty segments. */
export const segments = (rel: string): ReadonlyArray<string> => {
  if (rel === "" || rel === ".") return []
  const parts = rel.split("/")
  if (rel.startsWith("/") || rel.includes("\0") || parts.some((p) => p === "" || p === "." || p === "..")) {
    return fail("path", rel, "not a plain relative path")
  }
  return parts
}

const closeQuietly = (fd: number) => {
  try {
    Fs.closeSync(fd)
  } catch {
    // already closed
  }
}

const openDirAt = (dirfd: number, name: string): number => Fs.openSync(fdPath(dirfd, name), O_RDONLY | O_DIRECTORY | O_NOFOLLOW)

/**
 * Run `f` with a descriptor of the directory `rel` under `root` (opened component by component,
 * never through a link). `create`: missing directories are made (mode, owner) on the way.
 */
const withDir = <A>(
  root: string,
  rel: string,
  f: (dirfd: number) => A,
  create?: { readonly mode: number; readonly owner?: Owner | undefined }
): A => {
  const parts = segments(rel)
  let fd = Fs.openSync(root, O_RDONLY | O_DIRECTORY)
  try {
    for (const part of parts) {
      let next: number
      try {
        next = openDirAt(fd, part)
      } catch (e) {
        if (create === undefined || code(e) !== "ENOENT") throw e
        try {
          Fs.mkdirSync(fdPath(fd, part), create.mode)
        } catch (m) {
          if (code(m) !== "EEXIST") throw m
        }
        next = openDirAt(fd, part)
        if (create.owner !== undefined) Fs.fchownSync(next, create.owner.uid, create.owner.gid)
      }
      closeQuietly(fd)
      fd = next
    }
    return f(fd)
  } finally {
    closeQuietly(fd)
  }
}

const split = (rel: string): { readonly dir: string; readonly name: string } => {
  const parts = segments(rel)
  if (parts.length === 0) return fail("path", rel, "names no file")
  return { dir: parts.slice(0, -1).join("/"), name: parts[parts.length - 1]! }
}

const attempt = <A>(path: string, f: () => A): Effect.Effect<A, NoFollowError> =>
  Effect.try({ try: f, catch: (e) => toError(path, e) })

/** Make the directory `rel` (and missing parents) under `root`; each made one gets `mode` and `owner`. */
export const makeDirectory = (
  root: string,
  rel: string,
  options: { readonly mode?: number; readonly owner?: Owner | undefined } = {}
): Effect.Effect<void, NoFollowError> =>
  attempt(Path.join(root, rel), () => withDir(root, rel, () => undefined, { mode: options.mode ?? 0o700, owner: options.owner }))

/**
 * Replace the file `rel` under `root` with `data`: written to a fresh name in the same directory,
 * then renamed over `rel` (a link there is replaced, not followed). Missing parent directories are
 * made (0700, `owner`). The file gets `mode` (default 0600) and `owner`.
 */
export const writeFile = (
  root: string,
  rel: string,
  data: string | Uint8Array,
  options: { readonly mode?: number; readonly owner?: Owner | undefined } = {}
): Effect.Effect<void, NoFollowError> =>
  attempt(Path.join(root, rel), () => {
    const { dir, name } = split(rel)
    withDir(root, dir, (dirfd) => {
      const tmp = `.${name}.${randomBytes(6).toString("hex")}.tmp`
      const fd = Fs.openSync(fdPath(dirfd, tmp), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, options.mode ?? 0o600)
      try {
        try {
          Fs.writeFileSync(fd, data)
          if (options.owner !== undefined) Fs.fchownSync(fd, options.owner.uid, options.owner.gid)
        } finally {
          closeQuietly(fd)
        }
        Fs.renameSync(fdPath(dirfd, tmp), fdPath(dirfd, name))
      } catch (e) {
        try {
          Fs.unlinkSync(fdPath(dirfd, tmp))
        } catch {
          // renamed already, or gone
        }
        throw e
      }
    }, { mode: 0o700, owner: options.owner })
  })

/**
 * The bytes of the regular file `rel` under `root`, at most `maxBytes` (default 16 MiB). A link,
 * a FIFO, a device or a directory there is refused without being read (a FIFO does not block).
 */
export const readFile = (root: string, rel: string, maxBytes = 16 * 1024 * 1024): Effect.Effect<Uint8Array, NoFollowError> =>
  attempt(Path.join(root, rel), () => {
    const { dir, name } = split(rel)
    return withDir(root, dir, (dirfd) => {
      const fd = Fs.openSync(fdPath(dirfd, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
      try {
        const info = Fs.fstatSync(fd)
        if (!info.isFile()) return fail("not-a-file", Path.join(root, rel), "not a regular file")
        if (info.size > maxBytes) return fail("too-large", Path.join(root, rel), `larger than ${maxBytes} bytes`)
        return new Uint8Array(Fs.readFileSync(fd))
      } finally {
        closeQuietly(fd)
      }
    })
  })

/** What is at `rel` under `root`, not following a link there (null: nothing). */
export const entryType = (root: string, rel: string): Effect.Effect<"file" | "directory" | "link" | "other" | null, NoFollowError> =>
  attempt(Path.join(root, rel), () => {
    const { dir, name } = split(rel)
    return withDir(root, dir, (dirfd) => {
      const info = Fs.lstatSync(fdPath(dirfd, name), { throwIfNoEntry: false })
      if (info === undefined) return null
      return info.isSymbolicLink() ? "link" : info.isFile() ? "file" : info.isDirectory() ? "directory" : "other"
    })
  })

/** The entries of the directory `rel` under `root` with their types as `lstat` sees them (links are `link`). */
export const readDirectory = (
  root: string,
  rel: string
): Effect.Effect<ReadonlyArray<{ readonly name: string; readonly type: "file" | "directory" | "link" | "other"; readonly size: number }>, NoFollowError> =>
  attempt(Path.join(root, rel), () =>
    withDir(root, rel, (dirfd) =>
      Fs.readdirSync(fdPath(dirfd)).flatMap((name) => {
        const info = Fs.lstatSync(fdPath(dirfd, name), { throwIfNoEntry: false })
        if (info === undefined) return []
        const type = info.isSymbolicLink() ? "link" as const : info.isFile() ? "file" as const : info.isDirectory() ? "directory" as const : "other" as const
        return [{ name, type, size: info.size }]
      })))

/** chown the entry `rel` under `root` itself (a link there is changed, not its target); `rel` "" is the root. */
export const chown = (root: string, rel: string, owner: Owner): Effect.Effect<void, NoFollowError> =>
  attempt(Path.join(root, rel), () => {
    if (segments(rel).length === 0) {
      const fd = Fs.openSync(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
      try {
        Fs.fchownSync(fd, owner.uid, owner.gid)
      } finally {
        closeQuietly(fd)
      }
      return
    }
    const { dir, name } = split(rel)
    withDir(root, dir, (dirfd) => Fs.lchownSync(fdPath(dirfd, name), owner.uid, owner.gid))
  })

const removeIn = (dirfd: number, name: string, depth: number): void => {
  const info = Fs.lstatSync(fdPath(dirfd, name), { throwIfNoEntry: false })
  if (info === undefined) return
  if (!info.isDirectory()) {
    Fs.unlinkSync(fdPath(dirfd, name))
    return
  }
  if (depth > 4096) fail("io", name, "directory tree deeper than 4096 levels")
  const fd = openDirAt(dirfd, name)
  try {
    for (const child of Fs.readdirSync(fdPath(fd))) removeIn(fd, child, depth + 1)
  } finally {
    closeQuietly(fd)
  }
  Fs.rmdirSync(fdPath(dirfd, name))
}

/**
 * Remove `rel` under `root` and everything below it (rm -rf) without following any link: a link
 * is unlinked, never entered, also one swapped in for a directory while the removal runs.
 * Absent: nothing to do.
 */
export const removeTree = (root: string, rel: string): Effect.Effect<void, NoFollowError> =>
  attempt(Path.join(root, rel), () => {
    const { dir, name } = split(rel)
    try {
      withDir(root, dir, (dirfd) => removeIn(dirfd, name, 0))
    } catch (e) {
      if (code(e) !== "ENOENT") throw e
    }
  })
