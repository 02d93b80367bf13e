// The saved swarm snapshot: reconcile at start against it, atomic saves (a crash at any I/O
// step leaves the old or the new snapshot, never a broken one), corrupt and foreign files refused;
// the file journal a save batch appends to (replayed by load, a torn last line cut, compacted by save).
import { NodeContext } from "@effect/platform-node"
import { expect, layer } from "@effect/vitest"
import { Effect, Exit, Layer, Option } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { Discovery } from "../../src/swarm/Discovery.js"
import { journalOf, SwarmStore } from "../../src/swarm/SwarmStore.js"
import { Durable } from "../../src/storage/Durable.js"
import { makeCrashing } from "../../src/storage/DurableCrash.js"
import { tmpDir } from "../support/tmpDir.js"

const code = (body: string) => `class User:
    def greet(self):
        return ${body}


def helper():
    return 1
`

const TestLayer = SwarmStore.Default.pipe(
  Layer.provideMerge(Discovery.Default),
  Layer.provideMerge(Durable.layer),
  Layer.provideMerge(NodeContext.layer)
)

layer(TestLayer)("swarm snapshot store", (it) => {
  it.scoped("first start adds everything; a saved swarm reconciles an edit to one changed node", () =>
    Effect.gen(function*() {
      const root = yield* tmpDir("swarm-root-")
      const home = yield* tmpDir("swarm-home-")
      const file = join(home, "swarm", "snapshot.json")
      fs.writeFileSync(join(root, "main.py"), code(`"hi"`))
      const store = yield* SwarmStore

      const first = yield* store.reconcile(root, file)
      expect(first.hadSnapshot).toBe(false)
      expect(first.diff.added.map((n) => n.id)).toEqual([
        ".#dir",
        "main.py#file",
        "main.py#class:User",
        "main.py#method:User.greet",
        "main.py#function:helper"
      ])
      expect(fs.existsSync(file)).toBe(false)
      yield* store.save(file, first.snapshot)
      const onDisk = JSON.parse(fs.readFileSync(file, "utf8")) as { version: number; root: string; nodes: Array<{ id: string }> }
      expect([onDisk.version, onDisk.root, onDisk.nodes.length]).toEqual([1, root, 5])
      expect(Option.getOrThrow(yield* store.load(file))).toEqual(first.snapshot)

      fs.writeFileSync(join(root, "main.py"), code(`"hello"`))
      const second = yield* store.reconcile(root, file)
      expect(second.hadSnapshot).toBe(true)
      expect([second.diff.added, second.diff.orphaned]).toEqual([[], []])
      expect(second.diff.changed.map((c) => c.after.id)).toEqual(["main.py#method:User.greet"])
      yield* store.save(file, second.snapshot)
      const third = yield* store.reconcile(root, file)
      expect([third.diff.added, third.diff.orphaned, third.diff.changed]).toEqual([[], [], []])
    }))

  it.scoped("a corrupt snapshot and another root's snapshot are refused", () =>
    Effect.gen(function*() {
      const root = yield* tmpDir("swarm-root-")
      const home = yield* tmpDir("swarm-home-")
      const file = join(home, "snapshot.json")
      fs.writeFileSync(join(root, "main.py"), code("1"))
      const store = yield* SwarmStore
      fs.writeFileSync(file, `{"version":1,"root":"${root}","nodes":[{"id":`)
      const corrupt = yield* Effect.flip(store.reconcile(root, file))
      expect([corrupt._tag, corrupt.reason]).toEqual(["SwarmStoreError", "corrupt"])
      yield* store.save(file, { version: 1, root: "/elsewhere", nodes: [] })
      const other = yield* Effect.flip(store.reconcile(root, file))
      expect(other.reason).toBe("other-root")
    }))

  it.scoped("a crash at any step of a save leaves the old or the new snapshot", () =>
    Effect.gen(function*() {
      const root = yield* tmpDir("swarm-root-")
      const home = yield* tmpDir("swarm-home-")
      const file = join(home, "swarm", "snapshot.json")
      fs.writeFileSync(join(root, "main.py"), code("1"))
      const store = yield* SwarmStore
      const old = (yield* store.reconcile(root, file)).snapshot
      yield* store.save(file, old)
      fs.writeFileSync(join(root, "main.py"), code("2"))
      const next = (yield* store.reconcile(root, file)).snapshot
      expect(next).not.toEqual(old)

      const discovery = Layer.succeed(Discovery, yield* Discovery)
      const saveWith = (crash: ReturnType<typeof makeCrashing>) =>
        Effect.flatMap(SwarmStore, (s) => s.save(file, next)).pipe(
          Effect.provide(SwarmStore.Default.pipe(Layer.provide(crash.layer), Layer.provide(discovery))),
          Effect.exit
        )
      const probe = makeCrashing()
      expect(Exit.isSuccess(yield* saveWith(probe))).toBe(true)
      const steps = probe.control.stepCount()
      expect(steps).toBeGreaterThanOrEqual(4)
      let sawOld = 0
      let sawNew = 0
      for (let k = 1; k <= steps; k++) {
        yield* store.save(file, old)
        const crash = makeCrashing({ crashAt: k })
        expect(Exit.isFailure(yield* saveWith(crash))).toBe(true)
        const after = Option.getOrThrow(yield* store.load(file))
        if (JSON.stringify(after) === JSON.stringify(old)) sawOld++
        else {
          expect(after).toEqual(next)
          sawNew++
        }
      }
      // Before the rename the old snapshot stands; after it, the new one.
      expect(sawOld).toBeGreaterThan(0)
      expect(sawNew).toBeGreaterThan(0)
    }))

  it.scoped("a save batch appends its files to the journal; load replays it, cuts a torn line; a whole save compacts it", () =>
    Effect.gen(function*() {
      const root = yield* tmpDir("swarm-root-")
      const home = yield* tmpDir("swarm-home-")
      const file = join(home, "swarm", "nodes.json")
      fs.writeFileSync(join(root, "main.py"), code("1"))
      fs.writeFileSync(join(root, "other.py"), code("9"))
      const store = yield* SwarmStore
      const discovery = yield* Discovery
      const first = (yield* store.reconcile(root, file)).snapshot
      yield* store.save(file, first)
      const epoch = (JSON.parse(fs.readFileSync(file, "utf8")) as { journal: number }).journal
      const snapshotBytes = fs.readFileSync(file, "utf8")

      // Edit main.py, delete other.py: one journal line; nodes.json is not rewritten.
      fs.writeFileSync(join(root, "main.py"), code("2"))
      fs.rmSync(join(root, "other.py"))
      const edited = yield* discovery.discoverFiles(root, ["main.py"])
      yield* store.appendFiles(file, [{ path: "main.py", nodes: edited }, { path: "other.py", nodes: [] }])
      expect(fs.readFileSync(file, "utf8")).toBe(snapshotBytes)
      const journal = journalOf(file, epoch)
      expect(fs.readFileSync(journal, "utf8").split("\n").filter((l) => l !== "")).toHaveLength(1)
      const now = yield* discovery.discover(root)
      const loaded = Option.getOrThrow(yield* store.load(file))
      expect(loaded.nodes.map((n) => [n.id, n.hash])).toEqual(now.map((n) => [n.id, n.hash]))
      // A warm reconcile against the replayed nodes finds nothing to do.
      const warm = yield* store.reconcile(root, file)
      expect([warm.diff.added, warm.diff.orphaned, warm.diff.changed]).toEqual([[], [], []])
      expect(warm.upToDate).toBe(false) // the journal is to be compacted

      // A crash mid-append leaves a torn last line: load ignores it and cuts it off, so the next append is whole.
      const good = fs.readFileSync(journal, "utf8")
      fs.appendFileSync(journal, `{"files":[{"path":"main.py","nod`)
      expect(Option.getOrThrow(yield* store.load(file)).nodes).toEqual(loaded.nodes)
      expect(fs.readFileSync(journal, "utf8")).toBe(good)

      // A whole save starts the next epoch and removes the old journal.
      yield* store.save(file, loaded)
      expect((JSON.parse(fs.readFileSync(file, "utf8")) as { journal: number }).journal).toBe(epoch + 1)
      expect(fs.existsSync(journal)).toBe(false)
      expect(Option.getOrThrow(yield* store.load(file)).nodes).toEqual(loaded.nodes)
      // Now nodes.json alone is the tree: a start need not rewrite it; an edit makes it stale.
      expect((yield* store.reconcile(root, file)).upToDate).toBe(true)
      fs.writeFileSync(join(root, "main.py"), code("3"))
      expect((yield* store.reconcile(root, file)).upToDate).toBe(false)
    }))
})
