// The reconcile diff (seed 1.5): saved nodes against discovered nodes, by id. A node whose id
// is only in the discovery is new, only in the saved set is orphaned, in both with a different
// own-text hash is changed. A renamed function is one orphaned + one new (its id has its name).
import type { SwarmNode, SwarmNodeId } from "./SwarmNode.js"

export interface ChangedNode {
  readonly before: SwarmNode
  readonly after: SwarmNode
}

export interface SwarmDiff {
  /** Discovered, not saved: they get agents. In discovery order. */
  readonly added: ReadonlyArray<SwarmNode>
  /** Saved, not discovered: their agents are marked orphaned. In saved order. */
  readonly orphaned: ReadonlyArray<SwarmNode>
  /** In both, hash differs: their agents get an update notice. In discovery order. */
  readonly changed: ReadonlyArray<ChangedNode>
  /** In both, same hash (the discovered version: line ranges may have moved). */
  readonly unchanged: ReadonlyArray<SwarmNode>
}

export const diffNodes = (saved: Iterable<SwarmNode>, discovered: Iterable<SwarmNode>): SwarmDiff => {
  const before = new Map<SwarmNodeId, SwarmNode>()
  for (const n of saved) before.set(n.id, n)
  const added: Array<SwarmNode> = []
  const changed: Array<ChangedNode> = []
  const unchanged: Array<SwarmNode> = []
  const seen = new Set<SwarmNodeId>()
  for (const after of discovered) {
    seen.add(after.id)
    const prev = before.get(after.id)
    if (prev === undefined) added.push(after)
    else if (prev.hash !== after.hash) changed.push({ before: prev, after })
    else unchanged.push(after)
  }
  const orphaned: Array<SwarmNode> = []
  for (const [id, n] of before) if (!seen.has(id)) orphaned.push(n)
  return { added, orphaned, changed, unchanged }
}

/** True when nothing was added, orphaned or changed. */
export const isEmptyDiff = (d: SwarmDiff): boolean =>
  d.added.length === 0 && d.orphaned.length === 0 && d.changed.length === 0
