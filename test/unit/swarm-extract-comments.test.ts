// Python comment runs in swarm extraction: tree-sitter-python's scanner is quadratic in a run of
// comment lines after an indented block, so the parsed text thins such runs (same offsets) and a
// parse has a CPU budget. Thinning must not change a declaration or a span; a file of 200,000
// comment lines still yields its function; a pathological file the budget stops is a file node.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { extractFile, thinCommentRuns } from "../../src/swarm/Extract.js"
import { type Grammar, loadGrammars } from "../../src/swarm/Grammars.js"

const spans = (g: Grammar, text: string) => {
  const tree = g.parser.parse(text)!
  try {
    return g.query.matches(tree.rootNode).flatMap((m) =>
      m.captures.map((c) => `${c.name} ${c.node.type} ${c.node.startIndex}-${c.node.endIndex} ${c.node.hasError}`)
    )
  } finally {
    tree.delete()
  }
}

const samples = [
  "def a():\n    x = 1\n    # t1\n    # t2\n    # t3\n# top\n# top2\n# top3\ndef b():\n    pass\n",
  "class K:\n    def m(self):\n        return 1\n        # deep\n        # deep\n        # deep\n    # mid\n    # mid\n    # mid\n    def n(self):\n        pass\n# out\n# out\n# out\n",
  "def f():\n    s = '''\n# not a comment\n# not a comment\n# not a comment\n'''\n    return s\n",
  "def g():\n    if x:\n        y()\n    # a\n        # b\n        # b\n        # b\n    # a\n    # a\n    # a\n    z()\n",
  "@deco\n# c\n# c\n# c\ndef h():\n\t# tab\n\t# tab\n\t# tab\n\treturn 0\n  # bad indent\n  # bad indent\n  # bad indent\n"
]

describe("swarm extraction: Python comment runs", () => {
  it.scoped("thinning keeps every declaration and span", () =>
    Effect.gen(function*() {
      const g = (yield* loadGrammars).python
      for (const text of samples) {
        const thin = thinCommentRuns(text)
        expect(thin.length).toBe(text.length)
        expect(thin.split("\n").length).toBe(text.split("\n").length)
        expect(spans(g, thin), text).toEqual(spans(g, text))
        expect(extractFile(g, "s.py", text).length).toBeGreaterThan(1)
      }
    }))

  it.scoped("a def followed by 200,000 comment lines is found (no quadratic parse)", () =>
    Effect.gen(function*() {
      const g = (yield* loadGrammars).python
      const nodes = extractFile(g, "big.py", "def big():\n    return 0\n" + "# pad\n".repeat(200_000))
      expect(nodes.map((n) => [n.id, n.lines?.start, n.lines?.end, n.syntaxError])).toEqual([
        ["big.py#file", 1, 200_002, false],
        ["big.py#function:big", 1, 2, false]
      ])
    }), 60_000)

  it.scoped("a parse over its CPU budget ends: the file node only, marked syntaxError", () =>
    Effect.gen(function*() {
      const g = (yield* loadGrammars).python
      // Alternating indentation defeats thinning; the budget stops the parse.
      const nodes = extractFile(g, "alt.py", "def big():\n    return 0\n" + "  # a\n# b\n".repeat(20_000))
      expect(nodes.map((n) => [n.id, n.syntaxError])).toEqual([["alt.py#file", true]])
    }), 60_000)
})
