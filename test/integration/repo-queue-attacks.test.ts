// requires: bwrap, git
// The branch-children attacks of the `security` chaos experiment (scripts/chaos-security/repo-queue.ts):
// the merge queue's check checkout, a branch child's clone made from a parent whose clone's .git
// is planted, and `workspace revert` racing a directory swapped for a link (the agent's swapper is a
// perl loop: perl comes with git). Each must hold.
import { describe, expect, it } from "vitest"
import { attacks } from "../../scripts/chaos-security/repo-queue.js"

describe("branch-children attacks", () => {
  for (const a of attacks) {
    it(a.name, async () => {
      const r = await a.run()
      expect(r.breached, r.detail).toBe(false)
    }, 180_000)
  }
})
