// A src/ file over 300 lines says why in a header line (`// Over 300 lines because …`): the
// project's rule (RULES.md, STYLE.md), checked here so a file that grows past it is seen.
import { readdirSync, readFileSync } from "node:fs"
import { join, relative } from "node:path"
import { describe, expect, it } from "vitest"

const src = join(import.meta.dirname, "..", "..", "src")

const files = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []
  )

describe("source file size", () => {
  it("every src/ file over 300 lines has a header line saying why", () => {
    const missing = files(src).filter((f) => {
      const text = readFileSync(f, "utf8")
      return text.split("\n").length - 1 > 300 && !/^\/\/ Over 300 lines because /m.test(text)
    }).map((f) => relative(src, f))
    expect(missing).toEqual([])
  })
})
