// Swarm discovery: walk a code tree with the platform FileSystem, parse each source file with
// tree-sitter and return its nodes (directories, files, classes, functions, methods). Files
// whose bytes are unchanged since a previous discovery reuse that discovery's nodes unparsed.
import { Path } from "@effect/platform"
import { Effect, Option } from "effect"
import * as NoFollow from "../sandbox/NoFollow.js"
import { dirOf, extractFile } from "./Extract.js"
import { DiscoveryError, languageOf, loadGrammars } from "./Grammars.js"
import { defaultIgnoredNames, makeIgnore } from "./Ignore.js"
import { agentNameOf, makeNodeId, sha256, type SwarmLanguage, type SwarmNode } from "./SwarmNode.js"

export interface DiscoverOptions {
  /** Names skipped wherever they occur (default: node_modules, .git, dist). */
  readonly ignore?: ReadonlyArray<string>
  /** Languages to discover (default: all). */
  readonly languages?: ReadonlyArray<SwarmLanguage>
  /** Files larger than this are skipped (default 2 MB). */
  readonly maxFileBytes?: number
  /** Nodes of a previous discovery: a file whose bytes are unchanged reuses them. */
  readonly previous?: Iterable<SwarmNode>
}

const emptyHash = sha256("")

/** The directory nodes for a set of file paths: every ancestor directory up to the root `.`. */
export const dirNodes = (files: Iterable<string>): Array<SwarmNode> => {
  const dirs = new Set<string>(["."])
  for (const f of files) {
    for (let d = dirOf(f); d !== "." && !dirs.has(d); d = dirOf(d)) dirs.add(d)
  }
  return [...dirs].sort((a, b) => (a === "." ? -1 : b === "." ? 1 : a < b ? -1 : a > b ? 1 : 0)).map((d) => ({
    id: makeNodeId(d, "dir"),
    kind: "dir",
    path: d,
    name: d,
    parent: d === "." ? null : makeNodeId(dirOf(d), "dir"),
    language: null,
    lines: null,
    hash: emptyHash,
    fileHash: null,
    syntaxError: false,
    agentName: agentNameOf("dir", d === "." ? "" : d)
  }))
}

/** The previous nodes grouped by file path (file node first), for reuse. */
export const groupByPath = (nodes: Iterable<SwarmNode>): Map<string, Array<SwarmNode>> => {
  const byPath = new Map<string, Array<SwarmNode>>()
  for (const n of nodes) {
    if (n.kind === "dir") continue
    const list = byPath.get(n.path)
    if (list === undefined) byPath.set(n.path, [n])
    else list.push(n)
  }
  return byPath
}

export class Discovery extends Effect.Service<Discovery>()("substrat/swarm/Discovery", {
  scoped: Effect.gen(function*() {
    const path = yield* Path.Path
    const grammars = yield* loadGrammars

    /**
     * Relative paths (sorted, `/`-separated) of the source files under `root` (or under its
     * subdirectory `under`, relative to that). Agents write in the tree: a link is never followed
     * nor listed, whether it points at a directory or a file (NoFollow: each directory is opened
     * below the previous one's descriptor, so a link swapped in during the walk is not entered).
     */
    const listFiles = Effect.fn("Discovery.listFiles")(function*(
      root: string,
      options: DiscoverOptions & { readonly under?: string } = {}
    ) {
      const base = options.under ?? ""
      const at = (rel: string) => (base === "" ? rel : rel === "" ? base : `${base}/${rel}`)
      const gitignore = yield* NoFollow.readFile(root, at(".gitignore"), 1_000_000).pipe(
        Effect.map((b) => new TextDecoder().decode(b)),
        Effect.orElseSucceed(() => "")
      )
      const skip = makeIgnore(options.ignore ?? defaultIgnoredNames, gitignore)
      const languages = new Set(options.languages ?? ["typescript", "tsx", "javascript", "python"])
      const maxBytes = options.maxFileBytes ?? 2_000_000
      const files: Array<string> = []
      const walk = (rel: string): Effect.Effect<void, DiscoveryError> =>
        Effect.gen(function*() {
          // A directory that vanished or was swapped for a link after its parent's listing is skipped.
          const entries = yield* NoFollow.readDirectory(root, at(rel)).pipe(
            Effect.catchAll((e) =>
              rel !== "" && (e.reason === "link" || e.reason === "missing")
                ? Effect.succeed([])
                : Effect.fail(new DiscoveryError({ reason: "walk", path: path.join(root, at(rel)), message: e.message }))
            )
          )
          for (const entry of entries) {
            const childRel = rel === "" ? entry.name : `${rel}/${entry.name}`
            if (skip(childRel, false) && skip(childRel, true)) continue
            if (entry.type === "directory") {
              if (!skip(childRel, true)) yield* walk(childRel)
            } else if (entry.type === "file") {
              const lang = languageOf(entry.name)
              if (lang !== undefined && languages.has(lang) && entry.size <= maxBytes && !skip(childRel, false)) {
                files.push(childRel)
              }
            }
          }
        })
      yield* walk("")
      return files.sort()
    })

    /** One file's nodes (file first, then its code in source order); None when it is absent, a link or not a source file. */
    const discoverFile = (root: string, rel: string, previous?: ReadonlyArray<SwarmNode>) =>
      Effect.gen(function*() {
        const lang = languageOf(rel)
        if (lang === undefined) return Option.none<Array<SwarmNode>>()
        const abs = path.join(root, rel)
        const text = yield* NoFollow.readFile(root, rel).pipe(
          Effect.map((b) => Option.some(new TextDecoder().decode(b))),
          Effect.catchAll((e) =>
            e.reason === "missing" || e.reason === "link" || e.reason === "not-a-file" || e.reason === "path"
              ? Effect.succeed(Option.none<string>())
              : Effect.fail(new DiscoveryError({ reason: "read", path: abs, message: e.message }))
          )
        )
        if (Option.isNone(text)) return Option.none<Array<SwarmNode>>()
        const prevFile = previous?.[0]
        if (previous !== undefined && prevFile?.kind === "file" && prevFile.language === lang && prevFile.fileHash === sha256(text.value)) {
          return Option.some([...previous])
        }
        return Option.some(extractFile(grammars[lang], rel, text.value))
      })

    /**
     * The nodes of the given files (relative paths), in the order given; absent files give
     * nothing. `previous` (grouped by path) lets unchanged files skip the parse.
     */
    const discoverFiles = Effect.fn("Discovery.discoverFiles")(function*(
      root: string,
      files: ReadonlyArray<string>,
      previous?: ReadonlyMap<string, ReadonlyArray<SwarmNode>>
    ) {
      const perFile = yield* Effect.forEach(files, (rel) => discoverFile(root, rel, previous?.get(rel)), { concurrency: 8 })
      const out: Array<SwarmNode> = []
      for (const nodes of perFile) if (Option.isSome(nodes)) for (const n of nodes.value) out.push(n)
      return out
    })

    /** Every node under `root`: directories (root `.` first), then each file and its code. */
    const discover = Effect.fn("Discovery.discover")(function*(root: string, options: DiscoverOptions = {}) {
      const files = yield* listFiles(root, options)
      const previous = options.previous === undefined ? undefined : groupByPath(options.previous)
      const code = yield* discoverFiles(root, files, previous)
      const present = new Set<string>()
      for (const n of code) if (n.kind === "file") present.add(n.path)
      return [...dirNodes(present), ...code]
    })

    return { listFiles, discoverFiles, discover } as const
  })
}) {}
