// The swarm's code-tree node: one Schema for the swarm record on disk and for the API.
// Ids, the derived agent names and the own-text hash are defined here (see docs/swarm.md).
import { Schema } from "effect"
import { createHash } from "node:crypto"

export const NodeKind = Schema.Literal("dir", "file", "class", "function", "method")
export type NodeKind = typeof NodeKind.Type

export const SwarmLanguage = Schema.Literal("typescript", "tsx", "javascript", "python")
export type SwarmLanguage = typeof SwarmLanguage.Type

/**
 * `<path>#<kind>` for directories and files (`src#dir`, `src/a.ts#file`, the root is `.#dir`),
 * `<path>#<kind>:<qualified name>` for code (`src/a.ts#class:User`, `src/a.ts#method:User.format`).
 * A second declaration with the same id in one file gets `~2`, a third `~3`, … in source order.
 */
export const SwarmNodeId = Schema.String.pipe(Schema.brand("SwarmNodeId"))
export type SwarmNodeId = typeof SwarmNodeId.Type

/** 1-based, inclusive line range of a node's source text. */
export const LineRange = Schema.Struct({
  start: Schema.Int,
  end: Schema.Int
})
export type LineRange = typeof LineRange.Type

export const SwarmNode = Schema.Struct({
  id: SwarmNodeId,
  kind: NodeKind,
  /** Path relative to the swarm root, `/`-separated; `.` for the root directory. */
  path: Schema.String,
  /** The path for directories and files; the dotted qualified name for code (`User.format`). */
  name: Schema.String,
  /** The enclosing node; null for the root directory. */
  parent: Schema.NullOr(SwarmNodeId),
  /** Null for directories. */
  language: Schema.NullOr(SwarmLanguage),
  /** Null for directories. */
  lines: Schema.NullOr(LineRange),
  /** sha256 (hex) of the node's own text: its source with its child nodes' text cut out. */
  hash: Schema.String,
  /** Files only: sha256 (hex) of the whole file, to reuse an unchanged file's nodes unparsed. */
  fileHash: Schema.NullOr(Schema.String),
  /** The grammar could not parse all of the node's text (its children may be incomplete). */
  syntaxError: Schema.Boolean,
  /** Display name after the seed (`file_main_py`, `class_user`, `func_format_date`); not unique. */
  agentName: Schema.String
})
export type SwarmNode = typeof SwarmNode.Type

/** The saved swarm: the root it was discovered from and its live nodes. */
export const SwarmSnapshot = Schema.Struct({
  version: Schema.Literal(1),
  root: Schema.String,
  nodes: Schema.Array(SwarmNode),
  /** The epoch of the file journal replayed over these nodes (`nodes.<epoch>.jsonl`; absent: 0). */
  journal: Schema.optional(Schema.Number)
})
export type SwarmSnapshot = typeof SwarmSnapshot.Type

/** The snapshot as one JSON document (the form it has on disk). */
export const SwarmSnapshotJson = Schema.parseJson(SwarmSnapshot)

/** One line of the file journal: the current nodes of each file of a batch of saves (none: the file is gone). */
export const FileRecords = Schema.Struct({
  files: Schema.Array(Schema.Struct({ path: Schema.String, nodes: Schema.Array(SwarmNode) }))
})
export type FileRecords = typeof FileRecords.Type

export const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex")

export const makeNodeId = (path: string, kind: NodeKind, name?: string): SwarmNodeId =>
  SwarmNodeId.make(name === undefined ? `${path}#${kind}` : `${path}#${kind}:${name}`)

const agentPrefix: Record<NodeKind, string> = {
  dir: "dir",
  file: "file",
  class: "class",
  function: "func",
  method: "method"
}

/** `formatDate` → `format_date`, `main.py` → `main_py`, `HTTPServer.get` → `http_server_get`. */
export const snakeCase = (s: string): string =>
  s
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1_$2")
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .replace(/[^A-Za-z0-9]+/g, "_")
    .replace(/^_+|_+$/g, "")
    .toLowerCase()

export const agentNameOf = (kind: NodeKind, name: string): string => {
  const base = snakeCase(name)
  return `${agentPrefix[kind]}_${base === "" ? "root" : base}`
}
