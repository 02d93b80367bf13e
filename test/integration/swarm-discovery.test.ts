// Swarm discovery on code nobody here wrote (node_modules/effect/src), checked against an
// independent count: the TypeScript compiler's own parser, walked with the same rules as
// src/swarm/Grammars.ts. And a Python tree checked against Python's own `ast` module.
import { NodeContext } from "@effect/platform-node"
import { expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import ts from "typescript"
import { Discovery } from "../../src/swarm/Discovery.js"
import type { SwarmNode } from "../../src/swarm/SwarmNode.js"
import { tmpDir } from "../support/tmpDir.js"

const effectSrc = join(dirname(createRequire(import.meta.url).resolve("effect/package.json")), "src")

const isFunctionValue = (e: ts.Expression | undefined): boolean =>
  e !== undefined && (ts.isArrowFunction(e) || ts.isFunctionExpression(e))

/** The code-node ids of one file by the TypeScript compiler (same rules, independent parser). */
const tscIds = (rel: string, text: string): Array<string> => {
  const sf = ts.createSourceFile(rel, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const out: Array<string> = []
  const taken = new Map<string, number>()
  const emit = (kind: string, qualified: string): void => {
    const base = `${rel}#${kind}:${qualified}`
    const n = (taken.get(base) ?? 0) + 1
    taken.set(base, n)
    out.push(n === 1 ? base : `${base}~${n}`)
  }
  const visit = (node: ts.Node, prefix: string): void => {
    let counted: { kind: string; name: string } | undefined
    if (ts.isClassDeclaration(node) && node.name !== undefined) counted = { kind: "class", name: node.name.text }
    else if (ts.isFunctionDeclaration(node) && node.name !== undefined && node.body !== undefined) {
      counted = { kind: "function", name: node.name.text }
    } else if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name)) {
      if (node.initializer !== undefined && ts.isClassExpression(node.initializer)) counted = { kind: "class", name: node.name.text }
      else if (isFunctionValue(node.initializer)) counted = { kind: "function", name: node.name.text }
    } else if (
      (ts.isMethodDeclaration(node) || ts.isConstructorDeclaration(node) || ts.isGetAccessorDeclaration(node) ||
        ts.isSetAccessorDeclaration(node)) && node.body !== undefined && ts.isClassLike(node.parent)
    ) {
      counted = { kind: "method", name: ts.isConstructorDeclaration(node) ? "constructor" : node.name.getText(sf) }
    } else if (ts.isPropertyDeclaration(node) && isFunctionValue(node.initializer)) {
      counted = { kind: "method", name: node.name.getText(sf) }
    }
    if (counted === undefined) {
      ts.forEachChild(node, (c) => visit(c, prefix))
      return
    }
    const qualified = prefix === "" ? counted.name : `${prefix}.${counted.name}`
    emit(counted.kind, qualified)
    ts.forEachChild(node, (c) => visit(c, qualified))
  }
  visit(sf, "")
  return out
}

const codeIds = (nodes: ReadonlyArray<SwarmNode>) =>
  nodes.filter((n) => n.kind !== "dir" && n.kind !== "file").map((n) => n.id as string)

const countKinds = (nodes: ReadonlyArray<SwarmNode>) => {
  const counts: Record<string, number> = {}
  for (const n of nodes) counts[n.kind] = (counts[n.kind] ?? 0) + 1
  return counts
}

const pythonAvailable = (() => {
  try {
    execFileSync("python3", ["-c", "import ast"], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
})()

// Python's `ast`, walked with the swarm's rules: a def whose nearest enclosing class/def is a
// class is a method; qualified names join the enclosing classes/defs with dots.
const astScript = `
import ast, json, sys
root = sys.argv[1]
out = []
for rel in json.loads(sys.argv[2]):
    tree = ast.parse(open(root + "/" + rel).read())
    taken = {}
    def emit(kind, q):
        base = rel + "#" + kind + ":" + q
        n = taken.get(base, 0) + 1
        taken[base] = n
        out.append(base if n == 1 else base + "~" + str(n))
    def visit(node, prefix, in_class):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                q = child.name if prefix == "" else prefix + "." + child.name
                is_class = isinstance(child, ast.ClassDef)
                emit("class" if is_class else ("method" if in_class else "function"), q)
                visit(child, q, is_class)
            else:
                visit(child, prefix, in_class)
    visit(tree, "", False)
print(json.dumps(out))
`

const pyTree: Record<string, string> = {
  "app/__init__.py": "",
  "app/models.py": `from dataclasses import dataclass


@dataclass
class User:
    name: str

    def format(self):
        return self.name.title()

    @staticmethod
    def parse(s):
        return User(s)

    class Meta:
        table = "users"

        def describe(cls):
            return cls.table


def format_date(d):
    def pad(n):
        return str(n).zfill(2)
    return f"{d.year}-{pad(d.month)}"


if True:
    def conditional():
        pass
`,
  "app/services/api.py": `import asyncio


class Client:
    async def get(self, url):
        await asyncio.sleep(0)

    def _retry(self):
        def once():
            class Attempt:
                def run(self):
                    return 1
            return Attempt().run()
        return once()


handler = lambda req: req
`,
  "scripts/run.py": "def main():\n    pass\n\n\ndef main():\n    pass\n"
}

const TestLayer = Discovery.Default.pipe(Layer.provideMerge(NodeContext.layer))

layer(TestLayer)("swarm discovery on foreign code", (it) => {
  it.scoped("node_modules/effect/src: the TypeScript compiler finds the same classes, functions and methods (files the grammar parses whole)", () =>
    Effect.gen(function*() {
      const nodes = yield* (yield* Discovery).discover(effectSrc)
      const files = nodes.filter((n) => n.kind === "file").map((n) => n.path)
      const onDisk = (fs.readdirSync(effectSrc, { recursive: true }) as Array<string>).filter((f) => f.endsWith(".ts")).sort()
      expect(files).toEqual(onDisk)
      const ours = new Map<string, Array<string>>()
      for (const n of nodes) if (n.kind !== "dir" && n.kind !== "file") ours.set(n.path, [...(ours.get(n.path) ?? []), n.id])
      let clean = 0, broken = 0, tscInBroken = 0, oursInBroken = 0, sharedInBroken = 0
      for (const file of nodes) {
        if (file.kind !== "file") continue
        const expected = tscIds(file.path, fs.readFileSync(join(effectSrc, file.path), "utf8"))
        const got = ours.get(file.path) ?? []
        if (!file.syntaxError) {
          // Every file the grammar parses whole: exactly the compiler's nodes, ids and order.
          clean++
          expect(got, file.path).toEqual(expected)
        } else {
          // tree-sitter-typescript 0.23.2 has no variance annotations (`in`/`out` on type
          // parameters); its error recovery can lose the declarations that follow one.
          broken++
          tscInBroken += expected.length
          oursInBroken += got.length
          const e = new Set(expected)
          sharedInBroken += got.filter((id) => e.has(id)).length
        }
      }
      console.log({ clean, broken, tscInBroken, oursInBroken, sharedInBroken })
      expect(clean).toBeGreaterThan(150)
      // In the files with parse errors: at least 85% of the compiler's nodes found, and almost
      // nothing the compiler does not have.
      expect(sharedInBroken / tscInBroken).toBeGreaterThan(0.85)
      expect(oursInBroken - sharedInBroken).toBeLessThan(10)
      const counts = countKinds(nodes)
      // A floor so an empty walk on both sides cannot pass.
      expect(counts.class).toBeGreaterThan(100)
      expect(counts.function).toBeGreaterThan(1000)
      expect(counts.method).toBeGreaterThan(500)
      expect(new Set(nodes.map((n) => n.id)).size).toBe(nodes.length)
    }), 240_000)

  it.scoped("a Python tree: hand-counted", () =>
    Effect.gen(function*() {
      const root = yield* tmpDir("swarm-py-")
      for (const [rel, text] of Object.entries(pyTree)) {
        fs.mkdirSync(dirname(join(root, rel)), { recursive: true })
        fs.writeFileSync(join(root, rel), text)
      }
      const nodes = yield* (yield* Discovery).discover(root)
      expect(countKinds(nodes)).toEqual({ dir: 4, file: 4, class: 4, function: 6, method: 6 })
      expect(codeIds(nodes).filter((id) => id.startsWith("app/models.py"))).toEqual([
        "app/models.py#class:User",
        "app/models.py#method:User.format",
        "app/models.py#method:User.parse",
        "app/models.py#class:User.Meta",
        "app/models.py#method:User.Meta.describe",
        "app/models.py#function:format_date",
        "app/models.py#function:format_date.pad",
        "app/models.py#function:conditional"
      ])
      expect(codeIds(nodes).filter((id) => id.startsWith("scripts/"))).toEqual([
        "scripts/run.py#function:main",
        "scripts/run.py#function:main~2"
      ])
    }))

  it.scoped.runIf(pythonAvailable)("a Python tree: the same nodes as Python's ast module", () =>
    Effect.gen(function*() {
      const root = yield* tmpDir("swarm-py-")
      for (const [rel, text] of Object.entries(pyTree)) {
        fs.mkdirSync(dirname(join(root, rel)), { recursive: true })
        fs.writeFileSync(join(root, rel), text)
      }
      const nodes = yield* (yield* Discovery).discover(root)
      const files = nodes.filter((n) => n.kind === "file").map((n) => n.path)
      const expected: Array<string> = JSON.parse(
        execFileSync("python3", ["-c", astScript, root, JSON.stringify(files)], { encoding: "utf8" })
      )
      expect(codeIds(nodes)).toEqual(expected)
      expect(expected.length).toBe(16)
    }))
})
