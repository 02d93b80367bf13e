// Swarm discovery rules and the reconcile diff, on small real trees written by the test.
import { NodeContext } from "@effect/platform-node"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as fs from "node:fs"
import { dirname, join } from "node:path"
import { diffNodes } from "../../src/swarm/Diff.js"
import { Discovery } from "../../src/swarm/Discovery.js"
import { makeNodeId, sha256, type SwarmNode, SwarmSnapshotJson } from "../../src/swarm/SwarmNode.js"
import { tmpDir } from "../support/tmpDir.js"

const write = (root: string, rel: string, text: string) => {
  fs.mkdirSync(dirname(join(root, rel)), { recursive: true })
  fs.writeFileSync(join(root, rel), text)
}
const ids = (nodes: ReadonlyArray<SwarmNode>) => nodes.map((n) => n.id as string)

const mainPy = `import datetime


def format_date(d):
    return d.strftime("%Y-%m-%d")


class User:
    """A user."""

    def __init__(self, name):
        self.name = name

    @property
    def display(self):
        def shout(s):
            return s.upper()
        return shout(self.name)


async def fetch_user(uid):
    return User(str(uid))
`

const appTs = `import { x } from "./x.js"

export function formatDate(d: Date): string {
  return d.toISOString()
}

export const parse = (s: string): number => Number(s)

export class User {
  constructor(readonly name: string) {}
  format(): string {
    const inner = () => this.name
    return inner()
  }
  get upper() { return this.name.toUpperCase() }
  set upper(v: string) { void v }
  handler = () => this.format()
}

export function over(a: string): void
export function over(a: unknown) { void a }

abstract class Shape { abstract area(): number; describe() { return "shape" } }
const proto = { pipe() { return 1 } }
declare function ambient(): void
const Named = class { run() {} }
`

const TestLayer = Discovery.Default.pipe(Layer.provideMerge(NodeContext.layer))

layer(TestLayer)("swarm discovery", (it) => {
  it.scoped("Python: ids, kinds, parents, lines and the seed's agent names", () =>
    Effect.gen(function*() {
      const root = yield* tmpDir("swarm-")
      write(root, "main.py", mainPy)
      const nodes = yield* (yield* Discovery).discover(root)
      expect(nodes.map((n) => [n.id, n.kind, n.parent, n.lines?.start, n.lines?.end, n.agentName])).toEqual([
        [".#dir", "dir", null, undefined, undefined, "dir_root"],
        ["main.py#file", "file", ".#dir", 1, 22, "file_main_py"],
        ["main.py#function:format_date", "function", "main.py#file", 4, 5, "func_format_date"],
        ["main.py#class:User", "class", "main.py#file", 8, 18, "class_user"],
        ["main.py#method:User.__init__", "method", "main.py#class:User", 11, 12, "method_user_init"],
        ["main.py#method:User.display", "method", "main.py#class:User", 14, 18, "method_user_display"],
        ["main.py#function:User.display.shout", "function", "main.py#method:User.display", 16, 17, "func_user_display_shout"],
        ["main.py#function:fetch_user", "function", "main.py#file", 21, 22, "func_fetch_user"]
      ])
      // Own text: the class's hash covers its docstring and header, not its methods.
      const user = nodes.find((n) => n.id === "main.py#class:User")!
      expect(user.hash).toBe(sha256(`class User:\n    """A user."""`))
    }))

  it.scoped("TypeScript: which constructs count", () =>
    Effect.gen(function*() {
      const root = yield* tmpDir("swarm-")
      write(root, "src/app.ts", appTs)
      write(root, "src/view.tsx", "export const View = () => <div>{1}</div>\n")
      write(root, "lib/old.js", "function legacy() {}\nclass K { m() {} field = function () {} }\nmodule.exports = { legacy }\n")
      write(root, "README.md", "# not code\n")
      const nodes = yield* (yield* Discovery).discover(root)
      expect(ids(nodes)).toEqual([
        ".#dir",
        "lib#dir",
        "src#dir",
        "lib/old.js#file",
        "lib/old.js#function:legacy",
        "lib/old.js#class:K",
        "lib/old.js#method:K.m",
        "lib/old.js#method:K.field",
        "src/app.ts#file",
        "src/app.ts#function:formatDate",
        "src/app.ts#function:parse",
        "src/app.ts#class:User",
        "src/app.ts#method:User.constructor",
        "src/app.ts#method:User.format",
        "src/app.ts#function:User.format.inner",
        "src/app.ts#method:User.upper",
        "src/app.ts#method:User.upper~2",
        "src/app.ts#method:User.handler",
        "src/app.ts#function:over",
        "src/app.ts#class:Shape",
        "src/app.ts#method:Shape.describe",
        "src/app.ts#class:Named",
        "src/app.ts#method:Named.run",
        "src/view.tsx#file",
        "src/view.tsx#function:View"
      ])
      const byId = new Map(nodes.map((n) => [n.id as string, n]))
      expect(byId.get("src/app.ts#function:parse")?.lines).toEqual({ start: 7, end: 7 })
      expect(byId.get("src/view.tsx#file")?.language).toBe("tsx")
      expect(byId.get("lib/old.js#file")?.language).toBe("javascript")
      // Every parent is a node of the set.
      for (const n of nodes) if (n.parent !== null) expect(byId.has(n.parent)).toBe(true)
    }))

  it.scoped("skips node_modules, .git, dist and simple .gitignore patterns", () =>
    Effect.gen(function*() {
      const root = yield* tmpDir("swarm-")
      write(root, "a.ts", "export function a() {}\n")
      write(root, "node_modules/dep/index.js", "function dep() {}\n")
      write(root, "dist/a.js", "function built() {}\n")
      write(root, ".git/hooks/x.py", "def hook(): pass\n")
      write(root, "gen/out.ts", "function g() {}\n")
      write(root, "src/keep.ts", "function k() {}\n")
      write(root, "src/skip.gen.ts", "function s() {}\n")
      write(root, ".gitignore", "# generated\ngen/\n*.gen.ts\n")
      const files = yield* (yield* Discovery).listFiles(root)
      expect(files).toEqual(["a.ts", "src/keep.ts"])
    }))

  it.scoped("a snapshot round-trips through its JSON Schema", () =>
    Effect.gen(function*() {
      const root = yield* tmpDir("swarm-")
      write(root, "main.py", mainPy)
      const nodes = yield* (yield* Discovery).discover(root)
      const json = Schema.encodeSync(SwarmSnapshotJson)({ version: 1, root, nodes })
      const back = Schema.decodeUnknownSync(SwarmSnapshotJson)(json)
      expect(back.nodes).toEqual(nodes)
      expect(() => Schema.decodeUnknownSync(SwarmSnapshotJson)(json.replace(`"kind":"class"`, `"kind":"klass"`))).toThrow()
    }))
})

layer(TestLayer)("swarm reconcile diff", (it) => {
  const discoverTwice = (files: Record<string, string>, edit: (root: string) => void) =>
    Effect.gen(function*() {
      const root = yield* tmpDir("swarm-")
      for (const [rel, text] of Object.entries(files)) write(root, rel, text)
      const discovery = yield* Discovery
      const saved = yield* discovery.discover(root)
      edit(root)
      // `previous` lets unchanged files skip the parse; the diff must be the same either way.
      const warm = yield* discovery.discover(root, { previous: saved })
      const cold = yield* discovery.discover(root)
      expect(warm).toEqual(cold)
      const d = diffNodes(saved, cold)
      return {
        saved,
        added: ids(d.added),
        orphaned: ids(d.orphaned),
        changed: d.changed.map((c) => c.after.id as string),
        unchanged: d.unchanged.length
      }
    })

  const tree = { "main.py": mainPy, "src/app.ts": appTs, "src/util.ts": "export const id = <A>(a: A) => a\n" }

  it.scoped("no edit: everything unchanged", () =>
    Effect.gen(function*() {
      const r = yield* discoverTwice(tree, () => {})
      expect([r.added, r.orphaned, r.changed]).toEqual([[], [], []])
      expect(r.unchanged).toBe(r.saved.length)
    }))

  it.scoped("editing a function body: exactly that function changed (Python and TypeScript)", () =>
    Effect.gen(function*() {
      const py = yield* discoverTwice(tree, (root) =>
        write(root, "main.py", mainPy.replace(`return s.upper()`, `return s.upper() + "!"`)))
      expect([py.added, py.orphaned, py.changed]).toEqual([[], [], ["main.py#function:User.display.shout"]])
      const ts = yield* discoverTwice(tree, (root) =>
        write(root, "src/app.ts", appTs.replace("return d.toISOString()", "return d.toUTCString()")))
      expect([ts.added, ts.orphaned, ts.changed]).toEqual([[], [], ["src/app.ts#function:formatDate"]])
    }))

  it.scoped("lines moving without a text change is no change", () =>
    Effect.gen(function*() {
      const r = yield* discoverTwice(tree, (root) => write(root, "main.py", mainPy.replace("import datetime\n", "import datetime\nimport os\n\n\n")))
      // Only the file's own text (its imports) changed; every def kept its hash.
      expect([r.added, r.orphaned, r.changed]).toEqual([[], [], ["main.py#file"]])
    }))

  it.scoped("renaming a function: one orphaned + one new", () =>
    Effect.gen(function*() {
      const r = yield* discoverTwice(tree, (root) =>
        write(root, "main.py", mainPy.replace("def format_date(d):", "def format_day(d):")))
      expect([r.added, r.orphaned, r.changed]).toEqual([["main.py#function:format_day"], ["main.py#function:format_date"], []])
    }))

  it.scoped("deleting a file: its subtree orphaned", () =>
    Effect.gen(function*() {
      const r = yield* discoverTwice(tree, (root) => fs.rmSync(join(root, "src/app.ts")))
      expect(r.added).toEqual([])
      expect(r.changed).toEqual([])
      expect(r.orphaned).toEqual(ids(r.saved.filter((n) => n.path === "src/app.ts")))
      expect(r.orphaned).toHaveLength(15)
    }))

  it.scoped("deleting a directory's last file orphans the directory too", () =>
    Effect.gen(function*() {
      const r = yield* discoverTwice({ "a/b/x.py": "def f(): pass\n", "y.py": "" }, (root) => fs.rmSync(join(root, "a"), { recursive: true }))
      expect([r.added, r.changed]).toEqual([[], []])
      expect(r.orphaned).toEqual(["a#dir", "a/b#dir", "a/b/x.py#file", "a/b/x.py#function:f"])
    }))

  it.scoped("adding a class: the class and its methods are new", () =>
    Effect.gen(function*() {
      const r = yield* discoverTwice(tree, (root) =>
        write(root, "main.py", mainPy + "\n\nclass Admin(User):\n    def grant(self):\n        pass\n\n    def revoke(self):\n        pass\n"))
      expect([r.added, r.orphaned, r.changed]).toEqual([
        ["main.py#class:Admin", "main.py#method:Admin.grant", "main.py#method:Admin.revoke"],
        [],
        []
      ])
      const ts = yield* discoverTwice(tree, (root) =>
        write(root, "src/new/model.ts", "export class Order {\n  total() { return 0 }\n}\n"))
      expect([ts.added, ts.orphaned, ts.changed]).toEqual([
        ["src/new#dir", "src/new/model.ts#file", "src/new/model.ts#class:Order", "src/new/model.ts#method:Order.total"],
        [],
        []
      ])
    }))

  it("the diff is by id and hash alone", () => {
    const node = (name: string, hash: string): SwarmNode => ({
      id: makeNodeId("f.py", "function", name),
      kind: "function",
      path: "f.py",
      name,
      parent: makeNodeId("f.py", "file"),
      language: "python",
      lines: { start: 1, end: 2 },
      hash,
      fileHash: null,
      syntaxError: false,
      agentName: `func_${name}`
    })
    const d = diffNodes([node("a", "1"), node("b", "2"), node("c", "3")], [node("c", "3"), node("b", "9"), node("d", "4")])
    expect(ids(d.added)).toEqual(["f.py#function:d"])
    expect(ids(d.orphaned)).toEqual(["f.py#function:a"])
    expect(d.changed.map((c) => [c.before.hash, c.after.hash])).toEqual([["2", "9"]])
    expect(ids(d.unchanged)).toEqual(["f.py#function:c"])
  })
})
