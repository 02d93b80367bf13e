// The per-command workspace growth budget. rlimits cannot express it (RLIMIT_FSIZE bounds one
// file, not a tree), and the workspace is a plain host directory bound into the sandbox, so the
// budget is enforced from outside: the size of the tree is measured before the command starts,
// then re-measured while it runs; when it has grown past the budget the sandbox is killed and the
// exit is attributed to the `workspace-growth` limit (spawn.ts). Enforcement lags by about one
// poll: a fast writer may overshoot by what it writes in that time (docs/sandbox.md).
import { Effect } from "effect"
import type { Dirent, Stats } from "node:fs"
import { lstat, readdir } from "node:fs/promises"
import * as Path from "node:path"

/** What the watcher needs: the host directory bound at /workspace, and the budget. */
export interface GrowthBudget {
  readonly root: string
  /** Bytes the tree may grow by (disk blocks, st_blocks × 512). */
  readonly bytes: number
  /** Shortest pause between two measurements (ms; default 250). */
  readonly pollMs?: number
}

const blocksOf = (s: Stats) => (typeof s.blocks === "number" ? s.blocks * 512 : s.size)

/**
 * Disk bytes of every entry under `root` (st_blocks × 512, so sparse files count what they use),
 * symlinks not followed, hard links counted once. Entries that vanish or cannot be read count 0:
 * the tree changes under our feet while the command runs. Never fails.
 */
export const treeBytes = (root: string): Effect.Effect<number> =>
  Effect.promise(async () => {
    const seen = new Set<string>()
    let total = 0
    const count = (s: Stats) => {
      if (s.nlink > 1) {
        const key = `${s.dev}:${s.ino}`
        if (seen.has(key)) return
        seen.add(key)
      }
      total += blocksOf(s)
    }
    const top = await lstat(root).catch(() => undefined)
    if (top === undefined || !top.isDirectory()) return top === undefined ? 0 : blocksOf(top)
    count(top)
    const pending: Array<string> = [root]
    while (pending.length > 0) {
      const dir = pending.pop()!
      const entries: Array<Dirent> = await readdir(dir, { withFileTypes: true }).catch(() => [])
      const stats = await Promise.all(entries.map((e) => lstat(Path.join(dir, e.name)).catch(() => undefined)))
      for (const [i, s] of stats.entries()) {
        if (s === undefined) continue
        count(s)
        if (s.isDirectory()) pending.push(Path.join(dir, entries[i]!.name))
      }
    }
    return total
  })

/**
 * Measure, sleep, re-measure until `alive()` turns false or the tree has grown past the budget;
 * then call `exceeded(grownBy)` once. The pause adapts to the cost of a measurement (at least four
 * times the last walk), so a huge tree does not keep a core busy.
 */
export const watchGrowth = (
  budget: GrowthBudget,
  baseline: number,
  alive: () => boolean,
  exceeded: (grownBy: number) => void
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const minPause = budget.pollMs ?? 250
    let pause = minPause
    while (true) {
      yield* Effect.sleep(pause)
      if (!alive()) return
      const started = Date.now()
      const now = yield* treeBytes(budget.root)
      pause = Math.max(minPause, 4 * (Date.now() - started))
      if (!alive()) return
      if (now - baseline > budget.bytes) return exceeded(now - baseline)
    }
  })
