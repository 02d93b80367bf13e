// requires: bwrap, git
// The repository-surface attacks of the `security` chaos experiment (scripts/chaos-security/repo.ts)
// that need no daemon: links inside the clone's `.git` reaching another repository's objects, a
// crafted tree with a `.git` entry, a nested repository linked to the user's. Each runs the
// daemon's own code paths (record, diff, log, revert, export, publish, merge) and must hold.
import { describe, expect, it } from "vitest"
import { attacks } from "../../scripts/chaos-security/repo.js"

const cheap = ["24.3", "24.4", "24.5"]

describe("repository-surface attacks", () => {
  for (const a of attacks.filter((x) => cheap.some((p) => x.name.startsWith(p)))) {
    it(a.name, async () => {
      const r = await a.run()
      expect(r.breached, r.detail).toBe(false)
    }, 180_000)
  }
})
