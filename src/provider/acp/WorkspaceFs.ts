// `fs/read_text_file` and `fs/write_text_file`, served by the daemon for an ACP agent: only inside
// its workspace. The agent names sandbox paths (its workspace is /workspace). A path is accepted
// only when it is absolute, free of NUL, `.`/`..` and empty segments, and below /workspace; the
// file is then read or written below the workspace's host root without following any link
// (src/sandbox/NoFollow.ts), so neither a spelling (`/workspace/../etc`, `//`, `\0`) nor a link the
// agent planted (`/workspace/out -> /`) reaches anything else. Reads are capped (MAX_READ_BYTES).
import { Effect } from "effect"
import * as NoFollow from "../../sandbox/NoFollow.js"

export const SANDBOX_WORKSPACE = "/workspace"
export const MAX_READ_BYTES = 16 * 1024 * 1024

export class FsRefused extends Error {
  constructor(readonly path: string, message: string) {
    super(message)
  }
}

/** The path below the workspace root (`""` for the root itself), or why it is refused. */
export const confine = (path: string): string | FsRefused => {
  const refuse = (why: string) => new FsRefused(path, `refused: ${JSON.stringify(path)} ${why}; only files inside ${SANDBOX_WORKSPACE} can be read or written`)
  if (typeof path !== "string" || path.length === 0) return refuse("is empty")
  if (path.includes("\0")) return refuse("contains a NUL byte")
  if (!path.startsWith("/")) return refuse("is not an absolute path")
  if (path.includes("\\")) return refuse("contains a backslash")
  const parts = path.split("/").slice(1)
  if (parts.some((p) => p === "" || p === "." || p === "..")) return refuse("has empty, '.' or '..' segments")
  if (parts[0] !== SANDBOX_WORKSPACE.slice(1)) return refuse("is outside the workspace")
  return parts.slice(1).join("/")
}

const describe = (path: string, e: NoFollow.NoFollowError): FsRefused =>
  new FsRefused(
    path,
    e.reason === "link"
      ? `refused: ${JSON.stringify(path)} goes through a symbolic link; links are not followed`
      : e.reason === "missing"
      ? `${path}: no such file`
      : e.reason === "too-large"
      ? `${path}: larger than ${MAX_READ_BYTES} bytes`
      : e.reason === "not-a-file"
      ? `${path}: not a regular file`
      : `${path}: ${e.reason === "path" ? "not a plain path" : "cannot be accessed"}`
  )

/** The text of `path` (lines from `line`, 1-based, at most `limit` of them). */
export const readText = (
  root: string,
  path: string,
  line?: number | null,
  limit?: number | null
): Effect.Effect<string, FsRefused> =>
  Effect.gen(function*() {
    const rel = confine(path)
    if (rel instanceof FsRefused) return yield* Effect.fail(rel)
    if (rel === "") return yield* Effect.fail(new FsRefused(path, `${path}: not a regular file`))
    const bytes = yield* NoFollow.readFile(root, rel, MAX_READ_BYTES).pipe(Effect.mapError((e) => describe(path, e)))
    const text = new TextDecoder().decode(bytes)
    if ((line === undefined || line === null) && (limit === undefined || limit === null)) return text
    const lines = text.split("\n")
    const from = Math.max(0, (line ?? 1) - 1)
    return lines.slice(from, limit === undefined || limit === null ? undefined : from + Math.max(0, limit)).join("\n")
  })

/** Replace (or create) `path` with `content`, owned by the sandbox's user. */
export const writeText = (
  root: string,
  path: string,
  content: string,
  owner: NoFollow.Owner | undefined
): Effect.Effect<void, FsRefused> =>
  Effect.gen(function*() {
    const rel = confine(path)
    if (rel instanceof FsRefused) return yield* Effect.fail(rel)
    if (rel === "") return yield* Effect.fail(new FsRefused(path, `${path}: not a regular file`))
    yield* NoFollow.writeFile(root, rel, content, { mode: 0o644, owner }).pipe(Effect.mapError((e) => describe(path, e)))
  })
