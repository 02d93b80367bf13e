// The swarm file-change trigger with the real @parcel/watcher backend on real files: a save
// yields exactly the ids of the nodes whose text changed; a burst of saves is one batch.
import { NodePath } from "@effect/platform-node"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option, Queue, Stream } from "effect"
import * as fs from "node:fs"
import { dirname, join } from "node:path"
import { Discovery } from "../../src/swarm/Discovery.js"
import { layerParcelFileSystem, type SwarmChange, SwarmWatcher } from "../../src/swarm/Watcher.js"
import { tmpDir } from "../support/tmpDir.js"

const write = (root: string, rel: string, text: string) => {
  fs.mkdirSync(dirname(join(root, rel)), { recursive: true })
  fs.writeFileSync(join(root, rel), text)
}

const modelPy = (greeting: string) => `class User:
    def __init__(self, name):
        self.name = name

    def greet(self):
        return "${greeting}, " + self.name

    def farewell(self):
        return "bye " + self.name


def helper():
    return 1
`

const utilTs = (n: number) => `export const one = () => 1

export function count(): number {
  return ${n}
}

export class Box {
  get() { return ${n} }
}
`

const TestLayer = SwarmWatcher.DefaultWithoutDependencies.pipe(
  Layer.provideMerge(Discovery.Default),
  Layer.provideMerge(Layer.mergeAll(layerParcelFileSystem, NodePath.layer))
)

/** The next batch; a missing one fails the test instead of hanging it. */
const next = (queue: Queue.Queue<SwarmChange>) =>
  Queue.take(queue).pipe(Effect.timeoutFail({ duration: "30 seconds", onTimeout: () => new Error("no batch within 30 s") }))

/** Start watching `root` into a queue; returns once the watcher has reported a probe save. */
const startWatching = (root: string, debounceMs: number) =>
  Effect.gen(function*() {
    const nodes = yield* (yield* Discovery).discover(root)
    const queue = yield* Queue.unbounded<SwarmChange>()
    // Runs until the test's scope closes.
    yield* (yield* SwarmWatcher).watch(root, nodes, { debounce: `${debounceMs} millis` }).pipe(
      Stream.runForEach((c) => Queue.offer(queue, c)),
      Effect.forkScoped
    )
    // The subscription is asynchronous: save a probe file until the watcher reports it.
    for (let i = 0; ; i++) {
      write(root, "probe.py", `def probe_${i}():\n    pass\n`)
      const got = yield* Queue.take(queue).pipe(Effect.timeoutOption(`${debounceMs + 400} millis`))
      if (Option.isSome(got)) break
      if (i > 50) return yield* Effect.die("the watcher never reported a save")
    }
    // Let the probe's trailing events (if any) settle, then start clean.
    yield* Effect.sleep(`${debounceMs * 3} millis`)
    yield* Queue.takeAll(queue)
    return queue
  })

// Real time (debounce, the OS watcher): no TestClock.
layer(TestLayer, { excludeTestServices: true })("swarm watcher (real files, @parcel/watcher)", (it) => {
  it.scoped("a save yields exactly the changed nodes; new, deleted and unchanged files too", () =>
    Effect.gen(function*() {
      const root = yield* tmpDir("swarm-watch-")
      write(root, "app/models.py", modelPy("hello"))
      write(root, "src/util.ts", utilTs(1))
      write(root, "node_modules/dep/x.ts", "export function dep() {}\n")
      const queue = yield* startWatching(root, 150)

      write(root, "app/models.py", modelPy("hi"))
      const edit = yield* next(queue)
      expect(edit.files).toEqual(["app/models.py"])
      expect(edit.changed).toEqual(["app/models.py#method:User.greet"])
      expect([edit.diff.added, edit.diff.orphaned]).toEqual([[], []])

      // Two files in one save burst: one batch, each changed node once.
      write(root, "src/util.ts", utilTs(2))
      write(root, "app/models.py", modelPy("hey"))
      const both = yield* next(queue)
      expect(both.files).toEqual(["app/models.py", "src/util.ts"])
      expect(both.changed).toEqual(["app/models.py#method:User.greet", "src/util.ts#function:count", "src/util.ts#method:Box.get"])

      // A new file in a new directory: its directory, file and code are new.
      write(root, "lib/extra/new.ts", "export class Extra {\n  run() {}\n}\n")
      const created = yield* next(queue)
      expect(created.diff.added.map((n) => n.id)).toEqual([
        "lib#dir",
        "lib/extra#dir",
        "lib/extra/new.ts#file",
        "lib/extra/new.ts#class:Extra",
        "lib/extra/new.ts#method:Extra.run"
      ])
      expect(created.changed).toEqual([])

      // A deleted file: its subtree orphaned.
      fs.rmSync(join(root, "src/util.ts"))
      const deleted = yield* next(queue)
      expect(deleted.diff.orphaned.map((n) => n.id)).toEqual([
        "src#dir",
        "src/util.ts#file",
        "src/util.ts#function:one",
        "src/util.ts#function:count",
        "src/util.ts#class:Box",
        "src/util.ts#method:Box.get"
      ])

      // Saving identical bytes, or touching ignored and non-source files: no batch.
      write(root, "app/models.py", modelPy("hey"))
      write(root, "node_modules/dep/x.ts", "export function dep() { return 2 }\n")
      write(root, "README.md", "# hi\n")
      yield* Effect.sleep("1 second")
      expect(yield* Queue.takeAll(queue)).toHaveLength(0)
    }), 120_000)

  it.scoped("a burst of saves is debounced into one batch", () =>
    Effect.gen(function*() {
      const root = yield* tmpDir("swarm-watch-")
      write(root, "app/models.py", modelPy("hello"))
      const queue = yield* startWatching(root, 400)
      for (let i = 0; i < 8; i++) {
        write(root, "app/models.py", modelPy(`hello ${i}`))
        yield* Effect.sleep("30 millis")
      }
      const batch = yield* next(queue)
      expect(batch.files).toEqual(["app/models.py"])
      expect(batch.changed).toEqual(["app/models.py#method:User.greet"])
      // Nothing else follows the burst.
      yield* Effect.sleep("1500 millis")
      expect(yield* Queue.takeAll(queue)).toHaveLength(0)
      // The batch reflects the last save.
      const nodes = yield* (yield* Discovery).discover(root)
      expect(nodes.find((n) => n.id === "app/models.py#method:User.greet")?.hash).toBe(
        batch.diff.changed[0]?.after.hash
      )
    }), 120_000)
})
