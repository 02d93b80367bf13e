// requires: bwrap
// The package's bin (scripts/substrat.cjs) as an installed package run by someone who cannot
// write to it: the package directory is bound read-only (bwrap), so the V8 code cache cannot be
// kept next to dist/cli.cjs and goes to the user's cache directory instead — and the next run
// uses it (an accepted cache is not written again).
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const repo = join(import.meta.dirname, "..", "..")
const dir = makeTmpDir("substrat-launcher-cache-")
afterAll(() => removeDir(dir))

const pkg = join(dir, "pkg")
const cacheHome = join(dir, "cache")

const run = (...args: ReadonlyArray<string>) =>
  spawnSync(
    "bwrap",
    ["--dev-bind", "/", "/", "--ro-bind", pkg, pkg, process.execPath, join(pkg, "scripts", "substrat.cjs"), ...args],
    { encoding: "utf8", env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, XDG_CACHE_HOME: cacheHome } }
  )

const userCaches = (): Array<string> => {
  try {
    return fs.readdirSync(join(cacheHome, "substrat")).filter((f) => f.endsWith(".cache"))
  } catch {
    return []
  }
}

describe("launcher code cache in a read-only install", () => {
  it("keeps the cache under the user's cache directory and reuses it", () => {
    // An installed package's layout: the bin, the client bundle, package.json; no src/, no tsx.
    fs.mkdirSync(join(pkg, "dist"), { recursive: true })
    fs.mkdirSync(join(pkg, "scripts"), { recursive: true })
    fs.copyFileSync(join(repo, "dist", "cli.cjs"), join(pkg, "dist", "cli.cjs"))
    fs.copyFileSync(join(repo, "scripts", "substrat.cjs"), join(pkg, "scripts", "substrat.cjs"))
    fs.writeFileSync(join(pkg, "package.json"), JSON.stringify({ name: "substrat", version: "0.1.0" }))

    const first = run("--version")
    expect(first.stderr).toBe("")
    expect(first.stdout).toBe("substrat 0.1.0\n")
    expect(fs.readdirSync(join(pkg, "dist"))).toEqual(["cli.cjs"])
    const caches = userCaches()
    expect(caches).toHaveLength(1)
    const size = fs.statSync(join(pkg, "dist", "cli.cjs")).size
    expect(caches[0]).toMatch(new RegExp(`^cli\\.cjs-${size}-\\d+-${process.version.replace(/\./g, "\\.")}\\.cache$`))
    const at = join(cacheHome, "substrat", caches[0]!)
    const written = fs.statSync(at)
    expect(written.size).toBeGreaterThan(100_000)

    const second = run("--version")
    expect(second.stdout).toBe("substrat 0.1.0\n")
    // Accepted by V8: not rewritten (a rejected or missing cache is replaced at exit).
    const after = fs.statSync(at)
    expect(after.ino).toBe(written.ino)
    expect(after.mtimeMs).toBe(written.mtimeMs)
    expect(userCaches()).toEqual(caches)

    // A help run, through the cached bundle, still prints the whole tree.
    const help = run("--help")
    expect(help.status).toBe(0)
    expect(help.stdout).toContain("agent")
  })
})
