// The daemon's open-file limit (src/daemon/FileLimit.ts): when the soft limit is below the hard one
// at start, `raise` lifts it with `prlimit --pid <own pid>`, run by the spawner like every child.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import * as FileLimit from "../../src/daemon/FileLimit.js"
import { noLimits } from "../../src/domain/workspace.js"
import { runCollect, spawnScoped } from "../../src/sandbox/spawn.js"

const prlimit = (nofile: string) =>
  Effect.runPromise(runCollect(spawnScoped(undefined, {
    argv: ["prlimit", "--pid", String(process.pid), `--nofile=${nofile}`],
    env: { PATH: "/usr/bin:/bin" },
    limits: noLimits,
    graceMs: 500
  })))

describe("open-file limit", () => {
  it("raise lifts a soft limit below the hard one to it (prlimit through the spawner)", async () => {
    const before = FileLimit.read()!
    expect(before).toBeDefined()
    const hard = before.hard === Infinity ? "unlimited" : String(before.hard)
    const low = Math.min(before.hard, 512)
    try {
      expect((await prlimit(`${low}:${hard}`)).exit.code).toBe(0)
      expect(FileLimit.read()).toEqual({ soft: low, hard: before.hard })
      const after = await Effect.runPromise(FileLimit.raise)
      expect(after).toEqual({ soft: before.hard, hard: before.hard })
      expect(FileLimit.read()).toEqual({ soft: before.hard, hard: before.hard })
    } finally {
      await prlimit(`${before.soft === Infinity ? "unlimited" : before.soft}:${hard}`)
    }
  }, 60_000)
})
