import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { newAgentId } from "../../src/domain/ids.js"
import { build, node } from "./tree.support.js"

describe("AgentTree", () => {
  const { t, id } = build([
    ["r", null],
    ["r/a", "r"],
    ["r/b", "r"],
    ["r/c", "r"],
    ["r/a/x", "r/a"],
    ["r/a/y", "r/a"],
    ["s", null]
  ])

  it("roots, children, parent", () => {
    expect(t.roots().map((n) => n.name)).toEqual(["r", "s"])
    expect(t.children(id("r")).map((n) => n.name)).toEqual(["a", "b", "c"])
    expect(t.parent(id("r/a/x"))?.name).toBe("a")
    expect(t.parent(id("r"))).toBeUndefined()
  })

  it("team = siblings excluding self; roots have no team", () => {
    expect(t.team(id("r/b")).map((n) => n.name)).toEqual(["a", "c"])
    expect(t.team(id("r/a/x")).map((n) => n.name)).toEqual(["y"])
    expect(t.team(id("r"))).toEqual([])
  })

  it("page: pre-order pages whose cursors walk the whole tree once, depth-limited", () => {
    const names = (nodes: ReadonlyArray<{ readonly name: string }>) => nodes.map((n) => n.name)
    const all = Either.getOrThrow(t.page(undefined, 100, undefined))
    expect(names(all.nodes)).toEqual(["r", "a", "x", "y", "b", "c", "s"])
    expect(all.more).toBe(false)
    for (const size of [1, 2, 3, 6]) {
      const seen: Array<string> = []
      let after: ReturnType<typeof id> | undefined
      for (let i = 0; i < 10; i++) {
        const p = Either.getOrThrow(t.page(after, size, undefined))
        expect(p.nodes.length).toBeLessThanOrEqual(size)
        seen.push(...names(p.nodes))
        if (!p.more) break
        after = p.nodes[p.nodes.length - 1]!.id
      }
      expect(seen).toEqual(names(all.nodes))
    }
    expect(names(Either.getOrThrow(t.page(undefined, 100, 0)).nodes)).toEqual(["r", "s"])
    expect(names(Either.getOrThrow(t.page(undefined, 100, 1)).nodes)).toEqual(["r", "a", "b", "c", "s"])
    expect(names(Either.getOrThrow(t.page(id("r/a"), 2, 1)).nodes)).toEqual(["b", "c"])
    expect(Either.getOrThrow(t.page(id("r/a"), 2, 1)).more).toBe(true)
    expect(Either.isLeft(t.page(id("r/a/x"), 10, 1))).toBe(true)
    expect(Either.isLeft(t.page(newAgentId(), 10, undefined))).toBe(true)
  })

  it("subtree is pre-order and includes the node", () => {
    expect(t.subtree(id("r")).map((n) => n.name)).toEqual(["r", "a", "x", "y", "b", "c"])
    expect(t.subtree(id("r/c")).map((n) => n.name)).toEqual(["c"])
  })

  it("names are unique among siblings (and among roots); USER is reserved; parent must exist", () => {
    expect(Either.isLeft(t.add(node("b", id("r"))))).toBe(true)
    expect(Either.isRight(t.add(node("b", id("r/a"))))).toBe(true)
    expect(Either.isLeft(t.add(node("r")))).toBe(true)
    expect(Either.isLeft(t.add(node("USER", id("r"))))).toBe(true)
    expect(Either.isLeft(t.add(node("z", newAgentId())))).toBe(true)
  })

  it("remove takes leaves only and unlinks them from their parent", () => {
    expect(Either.isLeft(t.remove(id("r/a")))).toBe(true)
    const t2 = Either.getOrThrow(t.remove(id("r/a/x")))
    expect(t2.children(id("r/a")).map((n) => n.name)).toEqual(["y"])
    expect(t2.has(id("r/a/x"))).toBe(false)
    expect(t.has(id("r/a/x"))).toBe(true) // immutable
    const t3 = Either.getOrThrow(t.remove(id("s")))
    expect(t3.roots().map((n) => n.name)).toEqual(["r"])
  })
})
