// `import { … } from "substrat"` from a plain Node project that installed the package: build the
// library (scripts/build-lib.ts), `npm pack` it, install the tarball into a temporary project
// and run docs/examples/embed.mjs (the example of docs/embedding.md) with plain `node`.
// Offline and fast: the package's dependencies are installed as links to this repository's
// node_modules (`file:` specs, `npm install --offline`), so no registry is needed.
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { buildLibrary } from "../../scripts/build-lib.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const repo = join(import.meta.dirname, "..", "..")
const dir = makeTmpDir("substrat-pack-")
const project = join(dir, "project")

const run = (command: string, args: ReadonlyArray<string>, cwd: string) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile(command, args, { cwd, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, npm_config_update_notifier: "false" } }, (err, stdout, stderr) =>
      resolve({ code: err === null ? 0 : typeof err.code === "number" ? err.code : 1, stdout, stderr })))

const npm = (args: ReadonlyArray<string>, cwd: string) => run("npm", args, cwd)

let tarball = ""

beforeAll(async () => {
  // dist/*.cjs come from the pretest build (scripts/build.ts); the library is built here.
  await buildLibrary()
  const packed = await npm(["pack", "--ignore-scripts", "--json", "--pack-destination", dir], repo)
  expect(packed.code, packed.stderr).toBe(0)
  const info = JSON.parse(packed.stdout) as ReadonlyArray<{ filename: string; files: ReadonlyArray<{ path: string }> }>
  tarball = join(dir, info[0]!.filename)
  const files = info[0]!.files.map((f) => f.path)
  expect(files).toEqual(expect.arrayContaining(["dist/index.js", "dist/types/index.d.ts", "dist/cli.cjs", "scripts/substrat.cjs", "src/http/static/index.html"]))
  expect(files.filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))).toEqual([])
  const deps = (JSON.parse(fs.readFileSync(join(repo, "package.json"), "utf8")) as { dependencies: Record<string, string> }).dependencies
  fs.mkdirSync(project)
  fs.writeFileSync(join(project, "package.json"), JSON.stringify({
    name: "embed-example",
    private: true,
    type: "module",
    dependencies: {
      substrat: `file:${tarball}`,
      ...Object.fromEntries(Object.keys(deps).map((d) => [d, `file:${join(repo, "node_modules", d)}`]))
    }
  }, null, 2))
  const installed = await npm(["install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts"], project)
  expect(installed.code, installed.stderr).toBe(0)
  fs.copyFileSync(join(repo, "docs", "examples", "embed.mjs"), join(project, "embed.mjs"))
}, 300_000)

afterAll(() => removeDir(dir))

describe("the packed package, installed in a plain Node project", () => {
  it("runs the embedding example with plain node", async () => {
    const r = await run(process.execPath, ["embed.mjs"], project)
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    expect(r.stdout.split("\n")).toEqual([
      "agent lead (manager): idle",
      "agent helper (worker): idle",
      "lead → you: I asked a helper to count the files.",
      expect.stringMatching(/^lead's event log: session\.created, agent\.created, .*tool_call\.invoked, tool_call\.result, .*turn\.complete/),
      ""
    ])
    // It ran from the installed copy, not from this repository.
    expect(fs.realpathSync(join(project, "node_modules", "substrat"))).not.toBe(fs.realpathSync(repo))
    expect(fs.existsSync(join(project, "node_modules", "substrat", "src", "index.ts"))).toBe(false)
  })

  it("exports the embedder's pieces, and the installed CLI runs", async () => {
    const probe = [
      "const m = await import('substrat')",
      "const want = ['Orchestration', 'Orchestrator', 'ScriptedProvider', 'Providers', 'ClaudeProvider', 'CodexProvider',",
      "  'OpenAiProvider', 'SandboxBwrap', 'SandboxUnsafe', 'WorkspaceStore', 'ScriptedLlm', 'EventLog', 'SessionStore', 'Daemon', 'AdminClient',",
      "  'AdminRpcs', 'HttpApi', 'AgentRpcs', 'SwarmRpcs']",
      "console.log(want.filter((k) => m[k] === undefined).join(',') || 'all there')"
    ].join("\n")
    const r = await run(process.execPath, ["--input-type=module", "-e", probe], project)
    expect(r.stdout.trim(), r.stderr).toBe("all there")
    const version = await run(join(project, "node_modules", ".bin", "substrat"), ["--version"], project)
    expect(version.stdout).toMatch(/^substrat \d+\.\d+\.\d+\n$/)
  })
})
