// The frame guard's per-read fast-lane budget (src/daemon/FrameGuard.ts): one read's fast-lane
// answers stop at `fastLaneBytesPerRead`; the read's remaining requests are forwarded to
// @effect/rpc unchanged, and a fast lane that throws leaves its request to @effect/rpc too.
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { fastLaneBytesPerRead, type GuardOptions, makeFramer } from "../../src/daemon/FrameGuard.js"
import type { FastLane } from "../../src/daemon/FastLane.js"

const options = (fastLane: FastLane): GuardOptions => ({
  maxLineBytes: 1024 * 1024,
  methods: new Map([["agent.list", (u: unknown) => Either.right(u)]]),
  openEnded: () => false,
  fastLane
})

const request = (id: number) => JSON.stringify({ jsonrpc: "2.0", id, method: "agent.list" })
const answeredIds = (replies: string) =>
  replies.split("\n").filter((l) => l.length > 0).map((l) => (JSON.parse(l) as { id: number }).id)
const forwardedIds = (forward: string) => answeredIds(forward)

describe("frame guard fast lane budget", () => {
  it("answers until one read's budget is spent, forwards the rest of that read, and starts afresh on the next read", () => {
    const big = JSON.stringify({ agents: [{ name: "x".repeat(100 * 1024) }] })
    const framer = makeFramer(options(() => big))
    const chunk = Array.from({ length: 10 }, (_, i) => request(i) + "\n").join("")
    const first = framer(chunk)
    // Each answer is ~100 KiB: the budget admits answers while some of it is left.
    const admitted = Math.ceil(fastLaneBytesPerRead / big.length)
    expect(answeredIds(first.replies)).toEqual(Array.from({ length: admitted }, (_, i) => i))
    expect(forwardedIds(first.forward)).toEqual(Array.from({ length: 10 - admitted }, (_, i) => admitted + i))
    // Forwarded lines are the request lines as sent.
    expect(first.forward.split("\n")[0]).toBe(request(admitted))
    const second = framer(request(42) + "\n")
    expect(answeredIds(second.replies)).toEqual([42])
    expect(second.forward).toBe("")
  })

  it("a fast lane that throws does not take the connection down: the request goes to @effect/rpc", () => {
    const framer = makeFramer(options(() => {
      throw new RangeError("Invalid string length")
    }))
    const out = framer(request(1) + "\n" + request(2) + "\n")
    expect(out.replies).toBe("")
    expect(forwardedIds(out.forward)).toEqual([1, 2])
  })
})
