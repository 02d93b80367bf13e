// The per-command workspace growth budget. rlimits cannot express it (RLIMIT_FSIZE bounds one
// file, not a tree), and the workspace is a plain host directory bound into the sandbox, so the
// budget is enforced from outside: growth is counted from a baseline size of the tree, which is
// re-measured while the command runs; when it has grown past the budget the sandbox is killed and
// the exit is attributed to the `workspace-growth` limit (spawn.ts). Enforcement lags by about one
// poll: a fast writer may overshoot by what it writes in that time (docs/sandbox.md).
//
// The baseline is not measured on the start path (a walk of a big tree before every command):
// `GrowthBaselines` keeps each root's size as measured in the background while no command ran in
// it (or in a tree overlapping it), and a command starts from that. Commands that follow each other
// before the tree was re-measured share one baseline, so together they may add no more than the
// budget: never more than a walk before each command would have allowed.
import { Effect, FiberMap, type Scope } from "effect"
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
  /** Where the baseline comes from; without, the tree is measured before the command starts. */
  readonly baselines?: GrowthBaselines
}

const blocksOf = (s: Stats) => (typeof s.blocks === "number" ? s.blocks * 512 : s.size)

/**
 * Disk bytes of every entry under `root` (st_blocks × 512, so sparse files count what they use),
 * symlinks not followed, hard links counted once. Entries that vanish or cannot be read count 0:
 * the tree changes under our feet while the command runs. Never fails.
 */
export const treeBytes = (root: string): Effect.Effect<number> =>
  Effect.promise(async (signal) => {
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
    // Interrupted (a cancelled re-measure): stop between two directories.
    while (pending.length > 0 && !signal.aborted) {
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

/** Each workspace root's size, measured while no command runs in it (see the header). */
export interface GrowthBaselines {
  /**
   * The size `root`'s growth is counted from, for a command that runs in it until the scope
   * closes. Walks the tree only the first time a root is seen.
   */
  readonly acquire: (root: string) => Effect.Effect<Lease, never, Scope.Scope>
}

export interface Lease {
  readonly bytes: number
  /** The command went past the budget: the next command in this tree measures it first. */
  readonly overBudget: () => void
}

/** One root is the other or holds it (a child workspace is a directory of its parent's tree). */
const overlaps = (a: string, b: string) => a === b || a.startsWith(b.endsWith("/") ? b : `${b}/`) || b.startsWith(a.endsWith("/") ? a : `${a}/`)

/**
 * Baselines kept for the scope's life. When the last command in (or overlapping) a root ends, the
 * root is re-measured after `idleMs` of quiet; a command starting in an overlapping tree before
 * that walk ended cancels it (the walk could have counted that command's own writes), and keeps
 * the size measured before.
 */
export const makeGrowthBaselines = (options: { readonly idleMs?: number } = {}): Effect.Effect<GrowthBaselines, never, Scope.Scope> =>
  Effect.gen(function*() {
    const idleMs = options.idleMs ?? 250
    const sizes = new Map<string, number>()
    const running = new Map<string, number>()
    const refreshes = yield* FiberMap.make<string>()
    const busy = (root: string) => {
      for (const [r, n] of running) if (n > 0 && overlaps(r, root)) return true
      return false
    }
    const refresh = (root: string) =>
      Effect.sleep(idleMs).pipe(
        Effect.zipRight(treeBytes(root)),
        Effect.flatMap((bytes) => Effect.sync(() => (busy(root) ? undefined : sizes.set(root, bytes))))
      )
    const release = (root: string, over: boolean) =>
      Effect.gen(function*() {
        const n = (running.get(root) ?? 1) - 1
        if (n <= 0) running.delete(root)
        else running.set(root, n)
        for (const r of [...sizes.keys()]) {
          if (!overlaps(r, root)) continue
          // Past the budget: no later command may start from a size that does not count it.
          if (over) sizes.delete(r)
          // This command's writes count in every overlapping tree: re-measure those now quiet.
          else if (!busy(r)) yield* FiberMap.run(refreshes, r, refresh(r))
        }
      })
    const acquire = (root: string) =>
      Effect.gen(function*() {
        let over = false
        const bytes = yield* Effect.acquireRelease(
          Effect.gen(function*() {
            running.set(root, (running.get(root) ?? 0) + 1)
            for (const r of [...sizes.keys()]) if (overlaps(r, root)) yield* FiberMap.remove(refreshes, r)
            const known = sizes.get(root)
            if (known !== undefined) return known
            const measured = yield* treeBytes(root)
            sizes.set(root, measured)
            return measured
          }),
          () => Effect.suspend(() => release(root, over))
        )
        const lease: Lease = {
          bytes,
          overBudget: () => {
            over = true
          }
        }
        return lease
      })
    return { acquire }
  })
