// Dependencies point down (docs/architecture.md, "Dependencies point down"): every relative import
// under src/ goes from a folder to one lower in ORDER (or within the folder). `src/version.ts` is a
// leaf anyone may import; `src/bin.ts` and `src/index.ts` are the top. KNOWN lists the upward
// imports not yet moved away, each by file: a new one fails, and so does a listed one that is gone
// (so the list only shrinks).
import { readdirSync, readFileSync } from "node:fs"
import { dirname, join, normalize, relative } from "node:path"
import { describe, expect, it } from "vitest"

const ORDER = [
  "domain",
  "config",
  "storage",
  "telemetry",
  "sandbox",
  "egress",
  "provider",
  "testing",
  "session",
  "agent",
  "meter",
  "swarm",
  "recovery",
  "protocol",
  "feed",
  "mcp",
  "http",
  "daemon",
  "cli"
] as const

const KNOWN: ReadonlyArray<string> = []

const src = join(__dirname, "../../src")
const files = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []
  )

const rank = (file: string): number => {
  const rel = relative(src, file)
  if (rel === "version.ts") return -1
  if (!rel.includes("/")) return ORDER.length
  const r = ORDER.indexOf(rel.split("/")[0] as (typeof ORDER)[number])
  if (r === -1) throw new Error(`${rel}: its folder has no place in ORDER (add it, and to docs/architecture.md)`)
  return r
}

const folder = (file: string) => relative(src, file).split("/")[0]
const importRe = /(?:from|import)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g

const upward = (): Array<string> => {
  const found: Array<string> = []
  for (const file of files(src)) {
    for (const m of readFileSync(file, "utf8").matchAll(importRe)) {
      const target = normalize(join(dirname(file), m[1]!.replace(/\.js$/, ".ts")))
      if (relative(src, target).startsWith("..") || folder(target) === folder(file)) continue
      if (rank(target) >= rank(file)) found.push(`src/${relative(src, file)} -> src/${relative(src, target)}`)
    }
  }
  return [...new Set(found)].sort()
}

describe("dependencies point down", () => {
  it("no import goes from a folder to a higher one, except the listed ones", () => {
    expect(upward()).toEqual([...KNOWN].sort())
  })
})
