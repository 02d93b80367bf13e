// `find:<symbol>` routing, the pure part (docs/swarm.md, "find:"): which way a search goes from
// the agent holding it, and which in-transit searches start-up recovery resumes. The search
// walks the agent tree one hop at a time — up to the lowest common ancestor of the holder and
// the nearest agent matching the symbol, then down into that subtree — so every hop is a
// message between parent and child (the one-hop rule holds). The next hop is recomputed at each
// hop from the tree as it is then: each hop moves one step along a shortest path to the nearest
// match, so the distance to a match strictly decreases and a search cannot loop while the tree
// stands still; the hop count and the path carried in the envelope stop it if the tree changes
// under it.
import type { AgentId, MessageId } from "../domain/ids.js"
import type { MessageEnvelope } from "../domain/message.js"
import type { AgentTree } from "./AgentTree.js"

/** A search going further than this is stopped (a code tree's depth is far below it). */
export const MAX_FIND_HOPS = 256

export const FIND_PREFIX = "find:"

export type NextHop =
  /** `target` is the holder itself or one hop away: give it the found copy. */
  | { readonly _tag: "found"; readonly target: AgentId }
  /** Pass the search to `next` (the holder's parent or one of its children). */
  | { readonly _tag: "hop"; readonly next: AgentId; readonly target: AgentId }
  | { readonly _tag: "not-found" }

/**
 * From `at`, toward the nearest of `candidates` (tree distance; ties: the earlier candidate).
 * Candidates not in the tree are skipped.
 */
export const nextHop = (tree: AgentTree, at: AgentId, candidates: ReadonlyArray<AgentId>): NextHop => {
  if (!tree.has(at)) return { _tag: "not-found" }
  // The holder's ancestors, with their distance from it.
  const up = new Map<AgentId, number>()
  for (let n: AgentId | null = at, d = 0; n !== null; d++) {
    up.set(n, d)
    n = tree.get(n)?.parent_id ?? null
  }
  let best: { target: AgentId; dist: number; below: AgentId | null; lcaIsAt: boolean } | null = null
  for (const c of candidates) {
    if (!tree.has(c)) continue
    // Walk up from the candidate to the first ancestor of the holder (their lowest common ancestor).
    let n: AgentId | null = c
    let prev: AgentId | null = null
    let d = 0
    while (n !== null && !up.has(n)) {
      prev = n
      n = tree.get(n)?.parent_id ?? null
      d++
    }
    if (n === null) continue // another root's tree: no path
    const dist = d + up.get(n)!
    if (best === null || dist < best.dist) best = { target: c, dist, below: prev, lcaIsAt: n === at }
  }
  if (best === null) return { _tag: "not-found" }
  if (best.dist <= 1) return { _tag: "found", target: best.target }
  // Down when the match is below the holder (the child on the path), else up to the parent.
  const next = best.lcaIsAt ? best.below! : tree.get(at)!.parent_id!
  return { _tag: "hop", next, target: best.target }
}

/** A hop recovery found logged and not forwarded, with the agent whose log holds it. */
export interface HeldHop {
  readonly agent: AgentId
  readonly envelope: MessageEnvelope
}

export interface RecoveredFinds {
  /** One hop per search to pass on (the furthest one). */
  readonly resume: ReadonlyArray<HeldHop>
  /** Hops whose search went further before the crash: logged forwarded to `to` without passing them on again. */
  readonly superseded: ReadonlyArray<HeldHop & { readonly to: AgentId; readonly next: MessageId }>
}

/**
 * The searches to resume after a crash. A hop is logged in the next agent's log before the
 * holder logs it forwarded, so a crash in between leaves two hops of one search pending, or a
 * hop and the found copy: only the furthest hop is passed on, and none once the found copy is
 * logged (`found`: search id → the agent holding the found copy) — each search completes once.
 */
export const resumableFinds = (hops: ReadonlyArray<HeldHop>, found: ReadonlyMap<MessageId, AgentId>): RecoveredFinds => {
  const bySearch = new Map<MessageId, Array<HeldHop>>()
  for (const h of hops) {
    const f = h.envelope.find
    if (f === undefined || f.state !== "hop") continue
    const list = bySearch.get(f.origin)
    if (list === undefined) bySearch.set(f.origin, [h])
    else list.push(h)
  }
  const resume: Array<HeldHop> = []
  const superseded: Array<HeldHop & { readonly to: AgentId; readonly next: MessageId }> = []
  for (const [origin, list] of bySearch) {
    list.sort((a, b) => a.envelope.find!.hops - b.envelope.find!.hops)
    const at = found.get(origin)
    if (at !== undefined) {
      for (const h of list) superseded.push({ ...h, to: at, next: origin })
      continue
    }
    const last = list[list.length - 1]!
    resume.push(last)
    for (const h of list.slice(0, -1)) superseded.push({ ...h, to: last.agent, next: last.envelope.id })
  }
  return { resume, superseded }
}
