// The swarm's file-change trigger: watch a code tree (@parcel/watcher through TreeWatch.ts, which
// says when the watch is in place), debounce bursts of saves, re-discover
// only the files that changed and emit the diff of their nodes — `changed` are the nodes whose
// own-text hash differs, i.e. the node agents a save should wake.
import { FileSystem, Path } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { NodeFileSystem } from "@effect/platform-node"
import * as ParcelWatcher from "@effect/platform-node/NodeFileSystem/ParcelWatcher"
import { Duration, Effect, Layer, Ref, Stream } from "effect"
import * as NoFollow from "../sandbox/NoFollow.js"
import { watchTree } from "./TreeWatch.js"
import { diffNodes, isEmptyDiff, type SwarmDiff } from "./Diff.js"
import { dirNodes, Discovery, groupByPath } from "./Discovery.js"
import { type DiscoveryError, languageOf } from "./Grammars.js"
import { defaultIgnoredNames, makeIgnore } from "./Ignore.js"
import type { SwarmLanguage, SwarmNode, SwarmNodeId } from "./SwarmNode.js"

/**
 * The platform FileSystem the watcher reads with, its `watch` backed by @parcel/watcher (recursive,
 * inotify on Linux). `SwarmWatcher.watch` itself subscribes through TreeWatch.ts, which says when the
 * watch is in place.
 */
export const layerParcelFileSystem: Layer.Layer<FileSystem.FileSystem> = NodeFileSystem.layer.pipe(
  Layer.provide(ParcelWatcher.layer)
)

export interface SwarmWatchOptions {
  /** Quiet time after the last save before a batch is re-discovered (default 100 ms). */
  readonly debounce?: Duration.DurationInput
  /** Names skipped wherever they occur (default: node_modules, .git, dist). */
  readonly ignore?: ReadonlyArray<string>
  readonly languages?: ReadonlyArray<SwarmLanguage>
  /** Run once the OS watch is in place: saves from then on are seen. */
  readonly subscribed?: Effect.Effect<void>
}

/** One debounced batch of saves. */
export interface SwarmChange {
  /** The files re-discovered (relative paths), sorted. */
  readonly files: ReadonlyArray<string>
  /** Ids of the nodes whose own-text hash changed: the agents to trigger. */
  readonly changed: ReadonlyArray<SwarmNodeId>
  /** The whole diff of the batch (new and orphaned nodes too, directories included). */
  readonly diff: SwarmDiff
}

export class SwarmWatcher extends Effect.Service<SwarmWatcher>()("substrat/swarm/SwarmWatcher", {
  effect: Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const discovery = yield* Discovery

    /**
     * Watch `root`, starting from `nodes` (a discovery of it). Each emitted batch is one
     * debounced burst of saves with a non-empty diff; the watcher keeps the nodes current.
     */
    const watch = (
      root: string,
      nodes: Iterable<SwarmNode>,
      options: SwarmWatchOptions = {}
    ): Stream.Stream<SwarmChange, PlatformError | DiscoveryError> =>
      Stream.unwrap(Effect.gen(function*() {
        const realRoot = yield* fs.realPath(root)
        const gitignore = yield* NoFollow.readFile(realRoot, ".gitignore", 1_000_000).pipe(
          Effect.map((b) => new TextDecoder().decode(b)),
          Effect.orElseSucceed(() => "")
        )
        const skip = makeIgnore(options.ignore ?? defaultIgnoredNames, gitignore)
        const languages = new Set(options.languages ?? ["typescript", "tsx", "javascript", "python"])
        // The watcher's own copy of the swarm's file nodes, by path; only this stream touches it.
        const byPath = groupByPath(nodes)
        const pending = yield* Ref.make(new Set<string>())

        const skipped = (rel: string): boolean => {
          const parts = rel.split("/")
          for (let i = 1; i < parts.length; i++) if (skip(parts.slice(0, i).join("/"), true)) return true
          return false
        }

        // A watch event → the relative source paths it may have changed. A created directory
        // is scanned in the batch (files written into it before the OS watch was set on it
        // raise no event of their own); a removed one takes the known files under it.
        const affected = (event: FileSystem.WatchEvent): ReadonlyArray<string> => {
          const rel = path.relative(realRoot, event.path).split(path.sep).join("/")
          if (rel === "" || rel.startsWith("../") || skipped(rel)) return []
          const lang = languageOf(rel)
          if (lang !== undefined) return languages.has(lang) && !skip(rel, false) ? [rel] : []
          if (skip(rel, true)) return []
          if (event._tag === "Create") return [`${rel}/`]
          if (event._tag !== "Remove") return []
          const out: Array<string> = []
          for (const p of byPath.keys()) if (p.startsWith(`${rel}/`)) out.push(p)
          return out
        }

        // The batch's files: its source paths, plus the source files under its new directories.
        const expand = (entries: ReadonlySet<string>) =>
          Effect.gen(function*() {
            const files = new Set<string>()
            for (const e of entries) {
              if (!e.endsWith("/")) {
                files.add(e)
                continue
              }
              const dir = e.slice(0, -1)
              // Agents write in the tree: a link (also one made after the start) is no directory to scan.
              const isDir = yield* NoFollow.entryType(realRoot, dir).pipe(
                Effect.map((type) => type === "directory"),
                Effect.orElseSucceed(() => false)
              )
              if (!isDir) continue
              const under = yield* discovery.listFiles(realRoot, {
                under: dir,
                ...(options.ignore === undefined ? {} : { ignore: options.ignore }),
                ...(options.languages === undefined ? {} : { languages: options.languages })
              }).pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))
              for (const f of under) if (!skipped(`${dir}/${f}`) && !skip(`${dir}/${f}`, false)) files.add(`${dir}/${f}`)
            }
            return [...files].sort()
          })

        const rediscover = (files: ReadonlyArray<string>) =>
          Effect.gen(function*() {
            const before: Array<SwarmNode> = dirNodes(byPath.keys())
            for (const f of files) for (const n of byPath.get(f) ?? []) before.push(n)
            const found = yield* discovery.discoverFiles(realRoot, files, byPath)
            for (const f of files) byPath.delete(f)
            for (const n of found) {
              const list = byPath.get(n.path)
              if (list === undefined) byPath.set(n.path, [n])
              else list.push(n)
            }
            const diff = diffNodes(before, [...dirNodes(byPath.keys()), ...found])
            return { files, changed: diff.changed.map((c) => c.after.id), diff } satisfies SwarmChange
          })

        return watchTree(realRoot, options.subscribed ?? Effect.void).pipe(
          Stream.mapConcat(affected),
          Stream.tap((rel) => Ref.update(pending, (s) => s.add(rel))),
          Stream.debounce(options.debounce ?? Duration.millis(100)),
          Stream.mapEffect(() => Ref.getAndSet(pending, new Set<string>())),
          Stream.mapEffect(expand),
          Stream.filter((files) => files.length > 0),
          Stream.mapEffect(rediscover),
          Stream.filter((change) => !isEmptyDiff(change.diff))
        )
      }))

    return { watch } as const
  }),
  dependencies: [Discovery.Default]
}) {}
