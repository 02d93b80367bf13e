// Bundle the CLI with esbuild into dist/ (gitignored), twice:
//   dist/cli.cjs     the lean client: @effect/cli + the @effect/rpc client, nothing of the daemon
//   dist/daemon.cjs  the whole program, daemon included (scripts/substrat.js picks it for `daemon run`)
// Both are complete programs (entry src/bin.ts) so one process never holds two copies of Effect.
// One file per side means one read + one compile per process instead of resolving hundreds of
// modules, which is most of a one-shot command's start-up time. scripts/substrat.js runs the
// bundle (with a V8 code cache) when it is fresh, and rebuilds or falls back to tsx otherwise.
// Usage: `tsx scripts/build.ts` (npm run build; also the pretest/predemo/prebench hook).
import * as esbuild from "esbuild"
import { spawnSync } from "node:child_process"
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const dist = join(root, "dist")

/** Stand-ins (`{}`) for modules a bundle never calls. */
const stub = (modules: RegExp): esbuild.Plugin => ({
  name: "stub-unused",
  setup(build) {
    build.onResolve({ filter: modules }, (args) => ({ path: args.path, namespace: "stub" }))
    build.onLoad({ filter: /.*/, namespace: "stub" }, () => ({ contents: "module.exports = {}", loader: "js" }))
  }
})
/** Msgpack serialization, config-file parsers, fast-check arbitraries: never called by the CLI or the MCP server. */
const neverCalled = ["msgpackr", "yaml", "toml", "ini", "fast-check"]
const stubPlugin = stub(new RegExp(`^(${neverCalled.join("|")})$`))
/** The client also never opens a WebSocket (@effect/platform-node's NodeSocket imports `ws` for one). */
const stubClient = stub(new RegExp(`^(${[...neverCalled, "ws"].join("|")})$`))

/** The lean bundle leaves the daemon out (the launcher runs `daemon run` from dist/daemon.cjs). */
const withoutDaemon: esbuild.Plugin = {
  name: "without-daemon",
  setup(build) {
    build.onResolve({ filter: /daemon\/Daemon\.js$/ }, (args) =>
      args.kind === "dynamic-import" ? { path: args.path, namespace: "no-daemon" } : undefined)
    build.onLoad({ filter: /.*/, namespace: "no-daemon" }, () => ({
      contents: "throw new Error('dist/cli.cjs has no daemon: run `substrat daemon run` through scripts/substrat.js')",
      loader: "js"
    }))
  }
}

/** The packages whose index only re-exports modules (`export * as Effect from "./Effect.js"`). */
const barrels = ["effect", "@effect/cli", "@effect/platform", "@effect/platform-node"]
const barrelImport = new RegExp(`import\\s*\\{([^}]*)\\}\\s*from\\s*"(${barrels.join("|")})"`, "g")

/** A barrel's namespaces: name → module specifier (`Effect` → `effect/Effect`). */
const namespacesOf = (pkg: string): ReadonlyMap<string, string> => {
  const index = createRequire(join(root, "package.json")).resolve(pkg).replace(/[/\\]dist[/\\]cjs[/\\]index\.js$/, "/dist/esm/index.js")
  const names = new Map<string, string>()
  for (const m of readFileSync(index, "utf8").matchAll(/export \* as (\w+) from "\.\/(\w+)\.js"/g)) names.set(m[1]!, `${pkg}/${m[2]}`)
  return names
}

/**
 * `import { Effect, Schema } from "effect"` in our sources becomes `import * as Effect from
 * "effect/Effect"` (the same module the index re-exports). In a bundle whose modules are loaded
 * on demand (main.ts imports each command when it runs), esbuild keeps a barrel whole and
 * evaluates every module it re-exports at the first import; deep imports evaluate only what is used.
 */
const deepImports: esbuild.Plugin = {
  name: "deep-imports",
  setup(build) {
    const known = new Map(barrels.map((b) => [b, namespacesOf(b)]))
    build.onLoad({ filter: /[/\\]src[/\\].*\.ts$/ }, (args) => {
      const source = readFileSync(args.path, "utf8")
      const contents = source.replace(barrelImport, (_import, names: string, pkg: string) => {
        const modules = known.get(pkg)!
        const rest: Array<string> = []
        const deep: Array<string> = []
        for (const spec of names.split(",").map((n) => n.trim()).filter((n) => n.length > 0)) {
          const m = /^(type\s+)?(\w+)(?:\s+as\s+(\w+))?$/.exec(spec)
          const target = m === null ? undefined : modules.get(m[2]!)
          if (m === null || target === undefined) rest.push(spec)
          else deep.push(`import ${m[1] ?? ""}* as ${m[3] ?? m[2]} from "${target}"`)
        }
        return [...deep, ...(rest.length > 0 ? [`import { ${rest.join(", ")} } from "${pkg}"`] : [])].join("; ")
      })
      return { contents, loader: "ts" }
    })
  }
}

const common: esbuild.BuildOptions = {
  bundle: true,
  // Paths in the metafile (the `.inputs` lists) relative to the repository, whatever the cwd.
  absWorkingDir: root,
  platform: "node",
  format: "cjs",
  target: "node20",
  minify: true,
  sourcemap: "linked",
  legalComments: "none",
  logLevel: "warning",
  // src/http/Static.ts reads import.meta.url only when __dirname is missing (ESM), never in the bundle.
  logOverride: { "empty-import-meta": "silent" },
  // web-tree-sitter finds its own tree-sitter.wasm next to its module: loaded from node_modules.
  external: ["msgpackr-extract", "web-tree-sitter"]
}

/**
 * Bundle `entry` (relative to the repository root) into `out` the way the shipped programs are
 * bundled. Also used by `npm run bench -- daemon` for its stock-stack floor server, so the floor
 * runs as the same kind of code as the daemon it is compared with.
 */
export const buildOne = async (entry: string, out: string, plugins: Array<esbuild.Plugin> = []) => {
  const tmp = `${out}.${process.pid}.tmp`
  const result = await esbuild.build({ ...common, entryPoints: [join(root, entry)], outfile: tmp, plugins, metafile: true })
  // The sources the bundle was built from: scripts/substrat.cjs compares only these with the
  // bundle to decide whether it is stale (instead of every file under src/).
  const sources = Object.keys(result.metafile.inputs).filter((f) => f.startsWith("src/"))
  writeFileSync(`${out}.inputs`, JSON.stringify([...sources, "package.json", "scripts/build.ts"]))
  // Atomic: a concurrently starting CLI never sees half a bundle (its inputs list is written first).
  renameSync(`${tmp}.map`, `${out}.map`)
  renameSync(tmp, out)
}

export const build = async (): Promise<void> => {
  mkdirSync(dist, { recursive: true })
  await Promise.all([
    buildOne("src/bin.ts", join(dist, "cli.cjs"), [stubClient, withoutDaemon, deepImports]),
    buildOne("src/bin.ts", join(dist, "daemon.cjs"), []),
    // The per-agent MCP stdio server: spawned by the provider CLIs once per turn, so it is a
    // bundle of its own with only src/mcp in it (see src/mcp/main.ts, docs/tools.md).
    buildOne("src/mcp/main.ts", join(dist, "mcp-server.cjs"), [stubPlugin])
  ])
  // Leftovers of the former Effect-free fast path.
  for (const f of ["cli-fast.cjs", "cli-fast.cjs.map", "cli-fast.inputs.json"]) rmSync(join(dist, f), { force: true })
  // V8 checks a code cache against the source's length only: an old one must not meet a new bundle.
  for (const f of ["cli.cjs", "daemon.cjs", "mcp-server.cjs"]) rmSync(join(dist, `${f}.cache`), { force: true })
  // Warm the V8 code caches: the client's with a typical one-shot command (it fails: no daemon
  // there), the daemon's with a start and a stop in a home of its own (written as it exits).
  const home = join(tmpdir(), `substrat-build-${process.pid}`)
  const cli = (...args: Array<string>) =>
    spawnSync(process.execPath, [join(root, "scripts", "substrat.js"), ...args], {
      env: { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("SUBSTRAT_"))), SUBSTRAT_HOME: home },
      stdio: "ignore",
      timeout: 60_000
    })
  cli("agent", "list")
  if (cli("daemon", "start").status === 0) cli("daemon", "stop")
  rmSync(home, { recursive: true, force: true })
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const t = performance.now()
  await build()
  console.log(`built dist/cli.cjs, dist/daemon.cjs and dist/mcp-server.cjs in ${Math.round(performance.now() - t)} ms`)
}
