import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { newAgentId } from "../../src/domain/ids.js"
import { build } from "./tree.support.js"

// r ─┬─ a ─┬─ x          s (another root)
//    │     └─ y
//    └─ b ─── z
const { t, id } = build([
  ["r", null],
  ["r/a", "r"],
  ["r/b", "r"],
  ["r/a/x", "r/a"],
  ["r/a/y", "r/a"],
  ["r/b/z", "r/b"],
  ["s", null]
])

const route = (from: string, to: string) => t.resolve(id(from), to)
const ok = (from: string, to: string) => {
  const r = route(from, to)
  expect(Either.isRight(r)).toBe(true)
  return Either.getOrThrow(r).id
}
const reason = (from: string, to: string) => {
  const r = route(from, to)
  expect(Either.isLeft(r)).toBe(true)
  return Either.isLeft(r) ? r.left.reason : null
}

describe("one-hop routing", () => {
  it("parent", () => expect(ok("r/a/x", "a")).toBe(id("r/a")))
  it("child", () => expect(ok("r/a", "x")).toBe(id("r/a/x")))
  it("sibling", () => expect(ok("r/a/x", "y")).toBe(id("r/a/y")))
  it("self is rejected", () => expect(reason("r/a", "a")).toBe("self"))
  it("grandparent is not one hop", () => expect(reason("r/a/x", "r")).toBe("not-one-hop"))
  it("grandchild is not one hop", () => expect(reason("r", "x")).toBe("not-one-hop"))
  it("cousin is not one hop", () => expect(reason("r/a/x", "z")).toBe("not-one-hop"))
  it("uncle is not one hop", () => expect(reason("r/a/x", "b")).toBe("not-one-hop"))
  it("another root is not one hop", () => expect(reason("r", "s")).toBe("not-one-hop"))
  it("unknown name", () => expect(reason("r/a", "nobody")).toBe("unknown-recipient"))
  it("unknown sender", () => {
    const r = t.resolve(newAgentId(), "a")
    expect(Either.isLeft(r) && r.left.reason).toBe("unknown-sender")
  })
  it("a name shared by parent and child is ambiguous", () => {
    const { t: t2, id: id2 } = build([["p", null], ["p/m", "p"], ["p/m/p", "p/m"]])
    const r = t2.resolve(id2("p/m"), "p")
    expect(Either.isLeft(r) && r.left.reason).toBe("ambiguous")
  })
  it("errors say who and why", () => {
    const r = route("r/a/x", "z")
    expect(Either.isLeft(r) && { from: r.left.from, to: r.left.to }).toEqual({ from: "x", to: "z" })
    expect(Either.isLeft(r) && r.left.message).toMatch(/one hop/)
  })
})
