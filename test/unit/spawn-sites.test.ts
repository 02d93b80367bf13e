// Every child the daemon starts while it runs is forked by the spawner process (src/sandbox/Spawner.ts,
// docs/sandbox.md "The spawner process"), never by the daemon: a fork of the daemon blocks its main
// thread for longer the larger its heap. So `node:child_process` is imported by the spawner module
// and by the files below only, each for a reason that is not the daemon at work.
import { readdirSync, readFileSync } from "node:fs"
import { join, relative } from "node:path"
import { describe, expect, it } from "vitest"

const ALLOWED: Readonly<Record<string, string>> = {
  "sandbox/Spawner.ts": "the spawner itself (and the direct path the benchmark compares it with)",
  "daemon/Lifecycle.ts": "`flock(1)` on the pid file's descriptor (a file descriptor cannot be handed to the spawner), once at boot and in the CLI's probe (docs/sandbox.md, \"The one fork the daemon keeps\")",
  "cli/Shell.ts": "the CLI's interactive shell (a CLI process, not the daemon)",
  "cli/commands/ui.ts": "the CLI opening a browser",
  "cli/commands/daemon.ts": "the CLI starting the daemon"
}

const src = join(__dirname, "../../src")
const files = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []
  )
const importsChildProcess = /(?:from\s*|import\s*\(\s*|require\s*\(\s*)["'](?:node:)?child_process["']/

describe("spawn sites", () => {
  it("only the spawner (and the listed boot-time and CLI files) import node:child_process", () => {
    const found = files(src).filter((f) => importsChildProcess.test(readFileSync(f, "utf8"))).map((f) => relative(src, f)).sort()
    expect(found.filter((f) => !(f in ALLOWED))).toEqual([])
    // The list only shrinks: an entry whose file no longer spawns is removed.
    expect(Object.keys(ALLOWED).filter((f) => !found.includes(f))).toEqual([])
  })

  it("daemon/Lifecycle.ts uses node:child_process for one spawnSync of flock(1) only", () => {
    const text = readFileSync(join(src, "daemon/Lifecycle.ts"), "utf8")
    expect(text.match(/^import .*["']node:child_process["'].*$/gm)).toEqual([`import { spawnSync } from "node:child_process"`])
    expect(text.match(/\bspawnSync\(/g)).toHaveLength(1)
    expect(text).toMatch(/\bspawnSync\(\s*"flock",/)
  })
})
