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

// docs/architecture.md, "`node:fs` or platform `FileSystem`", names every file under src/ that
// imports node:fs (its path from src/, a file name after a named path of the same folder, or a
// folder as `dir/` or `dir/*`), and every path it names still imports it.
describe("node:fs is used where docs/architecture.md says", () => {
  const doc = readFileSync(join(__dirname, "../../docs/architecture.md"), "utf8")
  const section = doc.slice(doc.indexOf("## `node:fs` or platform `FileSystem`"), doc.indexOf("\n## ", doc.indexOf("## `node:fs`") + 1))
  const named = [...section.matchAll(/`([A-Za-z0-9_./*-]+)`/g)].map((m) => m[1]!)
  const usesFs = files(src).filter((f) => /from "node:fs(\/promises)?"/.test(readFileSync(f, "utf8"))).map((f) => relative(src, f))
  const covered = (rel: string) =>
    named.some((n) => n === rel || (n.endsWith("/") || n.endsWith("/*") ? rel.startsWith(n.replace(/\*$/, "")) : false)) ||
    // a bare file name, listed after a path of its folder (`cli/commands/daemon.ts`, `doctor.ts`)
    named.includes(rel.split("/").pop()!) && named.some((n) => n.includes("/") && n.startsWith(dirname(rel) + "/"))

  it("every file that imports node:fs is named there", () => {
    expect(usesFs.filter((f) => !covered(f))).toEqual([])
  })

  it("every .ts path named there still imports node:fs", () => {
    const paths = named.filter((n) => n.includes("/") && n.endsWith(".ts") && !n.startsWith("test/"))
    expect(paths.filter((p) => !usesFs.includes(p))).toEqual([])
  })
})
