// Links an agent plants in a swarm's code tree are never followed: discovery (and the start-up
// reconcile, which is a discovery) and the watcher neither list nor read what a link points at
// — a host directory holding a parseable file gives no node, and the host file is never read
// (its access time stays where the test put it).
import { NodePath } from "@effect/platform-node"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Option, Queue, Stream } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { Discovery } from "../../src/swarm/Discovery.js"
import { layerParcelFileSystem, type SwarmChange, SwarmWatcher } from "../../src/swarm/Watcher.js"
import { tmpDir } from "../support/tmpDir.js"

const TestLayer = SwarmWatcher.DefaultWithoutDependencies.pipe(
  Layer.provideMerge(Discovery.Default),
  Layer.provideMerge(Layer.mergeAll(layerParcelFileSystem, NodePath.layer))
)

const SECRET = "def host_secret():\n    return 42\n"

/** A host directory with a parseable file whose access time is set far in the past (any read moves it). */
const hostDir = (dir: string) => {
  fs.mkdirSync(dir)
  const file = join(dir, "secret.py")
  fs.writeFileSync(file, SECRET)
  fs.utimesSync(file, new Date(0), new Date())
  return { dir, file, atime: () => fs.statSync(file).atimeMs }
}

const paths = (nodes: Iterable<{ readonly path: string }>) => [...nodes].map((n) => n.path)

layer(TestLayer, { excludeTestServices: true })("swarm: planted links", (it) => {
  it.scoped("discovery lists and reads nothing behind a link to a host directory or file", () =>
    Effect.gen(function*() {
      const base = yield* tmpDir("swarm-links-")
      const host = hostDir(join(base, "host"))
      const root = join(base, "code")
      fs.mkdirSync(join(root, "app"), { recursive: true })
      fs.writeFileSync(join(root, "app", "main.py"), "def main():\n    pass\n")
      fs.symlinkSync(host.dir, join(root, "x"))
      fs.symlinkSync(host.dir, join(root, "app", "up"))
      fs.symlinkSync(host.file, join(root, "linked.py"))
      fs.symlinkSync(host.file, join(root, ".gitignore"))
      const nodes = yield* (yield* Discovery).discover(root)
      expect(paths(nodes).filter((p) => p.startsWith("x") || p.includes("up") || p.startsWith("linked"))).toEqual([])
      expect(nodes.some((n) => n.name.includes("host_secret"))).toBe(false)
      expect(nodes.some((n) => n.name.includes("main"))).toBe(true)
      // Asked for the linked file by name (the watcher's path), it is not read either.
      const direct = yield* (yield* Discovery).discoverFiles(root, ["linked.py", "x/secret.py", "app/up/secret.py"])
      expect(direct).toEqual([])
      expect(host.atime()).toBe(0)
    }))

  it.scoped("a link made after the watcher started is a file, not a directory: no node, the host file unread", () =>
    Effect.gen(function*() {
      const base = yield* tmpDir("swarm-links-watch-")
      const host = hostDir(join(base, "host"))
      const root = join(base, "code")
      fs.mkdirSync(root)
      fs.writeFileSync(join(root, "a.py"), "def a():\n    pass\n")
      const nodes = yield* (yield* Discovery).discover(root)
      const queue = yield* Queue.unbounded<SwarmChange>()
      yield* (yield* SwarmWatcher).watch(root, nodes, { debounce: "50 millis" }).pipe(
        Stream.runForEach((c) => Queue.offer(queue, c)),
        Effect.forkScoped
      )
      // Wait for the subscription with probe saves.
      for (let i = 0; ; i++) {
        fs.writeFileSync(join(root, "probe.py"), `def probe_${i}():\n    pass\n`)
        const got = yield* Queue.take(queue).pipe(Effect.timeoutOption("500 millis"))
        if (Option.isSome(got)) break
        if (i > 50) return yield* Effect.die("the watcher never reported a save")
      }
      yield* Effect.sleep("200 millis")
      yield* Queue.takeAll(queue)
      // The agent plants links, then saves a real file: the batch that reports the save must not
      // hold anything from behind the links.
      fs.symlinkSync(host.dir, join(root, "x"))
      fs.symlinkSync(host.file, join(root, "linked.py"))
      yield* Effect.sleep("200 millis")
      fs.writeFileSync(join(root, "b.py"), "def b():\n    pass\n")
      const seen: Array<SwarmChange> = []
      for (let i = 0; i < 50; i++) {
        const got = yield* Queue.take(queue).pipe(Effect.timeoutOption("2 seconds"))
        if (Option.isNone(got)) break
        seen.push(got.value)
        if (got.value.files.includes("b.py")) break
      }
      expect(seen.some((c) => c.files.includes("b.py"))).toBe(true)
      const all = seen.flatMap((c) => [...c.files, ...c.diff.added.map((n) => n.path)])
      expect(all.filter((p) => p.startsWith("x/") || p === "linked.py")).toEqual([])
      expect(host.atime()).toBe(0)
    }))
})
