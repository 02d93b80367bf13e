// The saved swarm: a SwarmSnapshot JSON file (`nodes.json`, an atomic replace through Durable)
// plus its file journal (`nodes.<epoch>.jsonl`: one fsync'd line per batch of saves, the new nodes
// of just those files), and the start-up reconcile (seed 1.5) against them: load (snapshot, then
// the journal replayed over it) → discover (reusing unchanged files' nodes) → diff. The caller
// acts on the diff (spawn / orphan / notify, durably) and then saves: a save writes the whole
// snapshot with the next epoch and drops the older journals (compaction), so a save of one file
// costs one appended line, not a rewrite of every node.
import { Effect, Either, Option, Schema, type Types } from "effect"
import { basename, dirname, join } from "node:path"
import { Durable } from "../storage/Durable.js"
import { diffNodes, type SwarmDiff } from "./Diff.js"
import { type DiscoverOptions, Discovery, dirNodes, groupByPath } from "./Discovery.js"
import { FileRecords, type SwarmNode, type SwarmNodeId, SwarmSnapshot, SwarmSnapshotJson } from "./SwarmNode.js"

/** The snapshot file could not be read or written, does not decode, or is of another root. */
export class SwarmStoreError extends Schema.TaggedError<SwarmStoreError>()("SwarmStoreError", {
  reason: Schema.Literal("io", "corrupt", "other-root"),
  path: Schema.String,
  message: Schema.String
}) {}

export interface Reconciled {
  /** The discovered nodes: the snapshot to save once the diff has been acted on. */
  readonly snapshot: SwarmSnapshot
  readonly diff: SwarmDiff
  /** False on the first start (no snapshot yet: every node is added). */
  readonly hadSnapshot: boolean
  /**
   * The snapshot on disk is exactly `snapshot`: no journal was replayed and every file's nodes
   * were reused as saved (same bytes). Then it need not be rewritten.
   */
  readonly upToDate: boolean
}

const decodeWithErrors = Schema.decodeUnknownEither(SwarmSnapshotJson)
const isSnapshot = Schema.is(SwarmSnapshot)
/**
 * The snapshot's JSON, checked against the Schema and used as parsed (no node is copied: the
 * Schema has no transformations, and a large swarm's snapshot is 100,000 nodes); the Schema's
 * own decode only to say what is wrong.
 */
const decode = (text: string): Either.Either<SwarmSnapshot, { readonly message: string }> => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return decodeWithErrors(text)
  }
  if (!isSnapshot(parsed)) return decodeWithErrors(text)
  shareStrings(parsed.nodes)
  return Either.right(parsed)
}
/**
 * A parsed snapshot's nodes made to share one string per path and per node id (JSON.parse makes
 * a copy of every occurrence: a file's path in each of its nodes, a parent's id in each child).
 * In place: the nodes were just parsed and nobody else holds them.
 */
const shareStrings = (nodes: ReadonlyArray<SwarmNode>): void => {
  const ids = new Map<string, SwarmNodeId>()
  const paths = new Map<string, string>()
  for (const n of nodes) ids.set(n.id, n.id)
  for (const n of nodes as ReadonlyArray<Types.Mutable<SwarmNode>>) {
    const path = paths.get(n.path)
    if (path === undefined) paths.set(n.path, n.path)
    else n.path = path
    if (n.name === n.path) n.name = n.path
    if (n.parent !== null) n.parent = ids.get(n.parent) ?? n.parent
  }
}
const encode = Schema.encodeSync(SwarmSnapshotJson)
const RecordsJson = Schema.parseJson(FileRecords)
const decodeRecords = Schema.decodeUnknownEither(RecordsJson)
const encodeRecords = Schema.encodeSync(RecordsJson)

/** Every file's nodes in `now` are the very objects of `before` (reused unparsed), and no file came or went. */
const sameNodes = (before: ReadonlyArray<SwarmNode>, now: ReadonlyArray<SwarmNode>): boolean => {
  const was = new Set<SwarmNode>()
  for (const n of before) if (n.kind !== "dir") was.add(n)
  let count = 0
  for (const n of now) {
    if (n.kind === "dir") continue
    if (!was.has(n)) return false
    count++
  }
  return count === was.size
}

/** The journal of the snapshot `file` at `epoch`: `nodes.json` → `nodes.3.jsonl`. */
export const journalOf = (file: string, epoch: number): string =>
  join(dirname(file), `${basename(file).replace(/\.json$/, "")}.${epoch}.jsonl`)

/** `nodes` with each record's file replaced by its nodes (a file without nodes is gone); directories re-derived. */
export const replay = (nodes: ReadonlyArray<SwarmNode>, records: ReadonlyArray<FileRecords>): Array<SwarmNode> => {
  const byPath = groupByPath(nodes)
  for (const r of records) {
    for (const f of r.files) {
      if (f.nodes.length === 0) byPath.delete(f.path)
      else byPath.set(f.path, [...f.nodes])
    }
  }
  const out = dirNodes(byPath.keys())
  for (const list of byPath.values()) for (const n of list) out.push(n)
  return out
}

export class SwarmStore extends Effect.Service<SwarmStore>()("substrat/swarm/SwarmStore", {
  effect: Effect.gen(function*() {
    const durable = yield* Durable
    const discovery = yield* Discovery
    const ioError = (path: string) => (e: { readonly message: string }) =>
      new SwarmStoreError({ reason: "io", path, message: e.message })

    // The journal epoch of each snapshot file this store has loaded or saved, and the journal
    // lines its last load replayed.
    const epochs = new Map<string, number>()
    const replayed = new Map<string, number>()

    /** The journal's records, in order; a torn last line (a crash mid-append) is cut off the file. */
    const readJournal = (journal: string) =>
      Effect.gen(function*() {
        const bytes = yield* durable.readFile(journal).pipe(Effect.mapError(ioError(journal)))
        if (Option.isNone(bytes)) return []
        const text = new TextDecoder().decode(bytes.value)
        const records: Array<FileRecords> = []
        let good = 0
        for (let at = 0; at < text.length;) {
          const end = text.indexOf("\n", at)
          if (end < 0) break
          const r = decodeRecords(text.slice(at, end))
          if (r._tag === "Left") break
          records.push(r.right)
          at = end + 1
          good = at
        }
        const goodBytes = new TextEncoder().encode(text.slice(0, good)).length
        if (goodBytes < bytes.value.length) yield* durable.truncate(journal, goodBytes).pipe(Effect.mapError(ioError(journal)))
        return records
      })

    /** The snapshot at `file` with its journal replayed, or None when there is none yet. */
    const load = Effect.fn("SwarmStore.load")(function*(file: string) {
      const bytes = yield* durable.readFile(file).pipe(Effect.mapError(ioError(file)))
      if (Option.isNone(bytes)) return Option.none<SwarmSnapshot>()
      const decoded = decode(new TextDecoder().decode(bytes.value))
      if (decoded._tag === "Left") {
        return yield* new SwarmStoreError({ reason: "corrupt", path: file, message: decoded.left.message })
      }
      const epoch = decoded.right.journal ?? 0
      epochs.set(file, epoch)
      const records = yield* readJournal(journalOf(file, epoch))
      replayed.set(file, records.length)
      const { nodes, root, version } = decoded.right
      return Option.some<SwarmSnapshot>({ version, root, nodes: records.length === 0 ? nodes : replay(nodes, records) })
    })

    /**
     * Replace the snapshot at `file` atomically (write tmp, fsync, rename, fsync the directory)
     * with the next journal epoch, then remove the older journals (a crash in between leaves a
     * journal nobody reads).
     */
    const save = Effect.fn("SwarmStore.save")(function*(file: string, snapshot: SwarmSnapshot) {
      const dir = dirname(file)
      yield* durable.mkdir(dir).pipe(Effect.mapError(ioError(file)))
      const next = (epochs.get(file) ?? snapshot.journal ?? 0) + 1
      yield* durable.replaceAtomic(file, new TextEncoder().encode(encode({ ...snapshot, journal: next }) + "\n")).pipe(
        Effect.mapError(ioError(file))
      )
      epochs.set(file, next)
      const keep = basename(journalOf(file, next))
      const stem = basename(file).replace(/\.json$/, "")
      for (const e of yield* durable.readDir(dir).pipe(Effect.mapError(ioError(dir)))) {
        if (e.name !== keep && e.name.startsWith(`${stem}.`) && e.name.endsWith(".jsonl")) {
          yield* durable.unlink(join(dir, e.name)).pipe(Effect.mapError(ioError(file)))
        }
      }
    })

    /**
     * Append one batch's files (each with all of its current nodes; none: the file is gone) to
     * the journal of the snapshot `file` (one line, fsync'd). For a store that has loaded or saved `file`.
     */
    const appendFiles = Effect.fn("SwarmStore.appendFiles")(function*(
      file: string,
      files: ReadonlyArray<{ readonly path: string; readonly nodes: ReadonlyArray<SwarmNode> }>
    ) {
      const journal = journalOf(file, epochs.get(file) ?? 0)
      yield* Effect.scoped(Effect.flatMap(durable.openAppend(journal), (h) =>
        h.append(new TextEncoder().encode(encodeRecords({ files }) + "\n")))).pipe(Effect.mapError(ioError(journal)))
    })

    /** Discover `root` and diff it against the snapshot at `file` (which is not rewritten). */
    const reconcile = Effect.fn("SwarmStore.reconcile")(function*(
      root: string,
      file: string,
      options: Omit<DiscoverOptions, "previous"> = {}
    ) {
      const saved = yield* load(file)
      if (Option.isSome(saved) && saved.value.root !== root) {
        return yield* new SwarmStoreError({
          reason: "other-root",
          path: file,
          message: `the snapshot is of ${saved.value.root}, not ${root}`
        })
      }
      const previous: ReadonlyArray<SwarmNode> = Option.isSome(saved) ? saved.value.nodes : []
      const nodes = yield* discovery.discover(root, { ...options, previous })
      return {
        snapshot: { version: 1, root, nodes },
        diff: diffNodes(previous, nodes),
        hadSnapshot: Option.isSome(saved),
        upToDate: Option.isSome(saved) && (replayed.get(file) ?? 0) === 0 && sameNodes(previous, nodes)
      } satisfies Reconciled
    })

    return { load, save, appendFiles, reconcile } as const
  })
}) {}
