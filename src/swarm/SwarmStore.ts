// The saved swarm: one SwarmSnapshot JSON file, written atomically through Durable, and the
// start-up reconcile (seed 1.5) against it: load → discover (reusing unchanged files' nodes)
// → diff. The caller acts on the diff (spawn / orphan / notify, durably) and then saves.
import { Effect, Option, Schema } from "effect"
import { dirname } from "node:path"
import { Durable } from "../storage/Durable.js"
import { diffNodes, type SwarmDiff } from "./Diff.js"
import { type DiscoverOptions, Discovery } from "./Discovery.js"
import { type SwarmNode, type SwarmSnapshot, SwarmSnapshotJson } from "./SwarmNode.js"

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
}

const decode = Schema.decodeUnknownEither(SwarmSnapshotJson)
const encode = Schema.encodeSync(SwarmSnapshotJson)

export class SwarmStore extends Effect.Service<SwarmStore>()("substrat/swarm/SwarmStore", {
  effect: Effect.gen(function*() {
    const durable = yield* Durable
    const discovery = yield* Discovery
    const ioError = (path: string) => (e: { readonly message: string }) =>
      new SwarmStoreError({ reason: "io", path, message: e.message })

    /** The snapshot at `file`, or None when there is none yet. */
    const load = Effect.fn("SwarmStore.load")(function*(file: string) {
      const bytes = yield* durable.readFile(file).pipe(Effect.mapError(ioError(file)))
      if (Option.isNone(bytes)) return Option.none<SwarmSnapshot>()
      const decoded = decode(new TextDecoder().decode(bytes.value))
      if (decoded._tag === "Left") {
        return yield* new SwarmStoreError({ reason: "corrupt", path: file, message: decoded.left.message })
      }
      return Option.some(decoded.right)
    })

    /** Replace the snapshot at `file` atomically (write tmp, fsync, rename, fsync the directory). */
    const save = Effect.fn("SwarmStore.save")(function*(file: string, snapshot: SwarmSnapshot) {
      yield* durable.mkdir(dirname(file)).pipe(Effect.mapError(ioError(file)))
      yield* durable.replaceAtomic(file, new TextEncoder().encode(encode(snapshot) + "\n")).pipe(
        Effect.mapError(ioError(file))
      )
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
        hadSnapshot: Option.isSome(saved)
      } satisfies Reconciled
    })

    return { load, save, reconcile } as const
  })
}) {}
