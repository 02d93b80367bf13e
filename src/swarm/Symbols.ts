// What a person may type for a swarm node beside its id (pure): a symbol, as `find:` routes it
// (a code node's qualified name or its last part, a file's or directory's path or base name),
// optionally after the file's path (`src/uri.py:host_from_uri`); and, on a miss, the nearest
// names by edit distance for a "did you mean".
import { basename } from "node:path"
import type { SwarmNode } from "./SwarmNode.js"

/** The names `find:` knows a node by (Swarm.ts's index). */
export const symbolNames = (n: SwarmNode): ReadonlyArray<string> => {
  const code = n.kind !== "dir" && n.kind !== "file"
  return code ? [n.name, n.name.slice(n.name.lastIndexOf(".") + 1)] : [n.path, basename(n.path)]
}

/** Does `ref` name `n`: a symbol, or `<path>:<symbol>` of a code node in the file `path`. */
export const namesNode = (ref: string, n: SwarmNode): boolean => {
  if (symbolNames(n).includes(ref)) return true
  const colon = ref.lastIndexOf(":")
  if (colon <= 0 || n.kind === "dir" || n.kind === "file") return false
  return n.path === ref.slice(0, colon) && symbolNames(n).includes(ref.slice(colon + 1))
}

/** Levenshtein distance (two rows). */
export const editDistance = (a: string, b: string): number => {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const cur = [i]
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    prev = cur
  }
  return prev[b.length]!
}

/** Up to `max` names nearest to `ref` (within a third of its length, at least 2 edits), nearest first. */
export const nearest = (ref: string, names: Iterable<string>, max = 3): ReadonlyArray<string> => {
  const limit = Math.max(2, Math.floor(ref.length / 3))
  const scored = new Map<string, number>()
  for (const name of names) {
    if (scored.has(name)) continue
    const d = editDistance(ref.toLowerCase(), name.toLowerCase())
    if (d <= limit) scored.set(name, d)
  }
  return [...scored].sort((x, y) => x[1] - y[1] || x[0].localeCompare(y[0])).slice(0, max).map(([name]) => name)
}
