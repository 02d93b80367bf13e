// Build the library for embedders (docs/embedding.md) into dist/, next to the CLI bundles of
// scripts/build.ts:
//   dist/index.js     ESM, one file, every dependency left external (resolved from the
//                     embedder's node_modules, so their Effect is ours: one copy of each)
//   dist/types/       .d.ts of src/ (tsc -p tsconfig.lib.json), entry dist/types/index.d.ts
// Run by `npm pack`/`npm publish` (prepack), `npm run build:lib`, and by `npm test` beside the
// type check (the packing test then finds dist/types current and does not run tsc again).
// dist/types is rebuilt only when a source it is made from (src/**/*.ts, the tsconfigs,
// package.json) changed since the last complete build: `dist/types.inputs-mtime` holds the
// newest source mtime the last successful tsc started from.
import * as esbuild from "esbuild"
import { spawnSync } from "node:child_process"
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const dist = join(root, "dist")

export const buildLibrary = async (): Promise<void> => {
  const out = join(dist, "index.js")
  const tmp = join(dist, `index.${process.pid}.tmp.js`)
  await esbuild.build({
    entryPoints: [join(root, "src", "index.ts")],
    outfile: tmp,
    bundle: true,
    packages: "external",
    platform: "node",
    format: "esm",
    target: "node20",
    sourcemap: "linked",
    legalComments: "none",
    logLevel: "warning"
  })
  renameSync(`${tmp}.map`, `${out}.map`)
  renameSync(tmp, out)
  const types = join(dist, "types")
  const stamp = join(dist, "types.inputs-mtime")
  const newest = newestInput()
  if (builtFrom(stamp) >= newest && existsSync(join(types, "index.d.ts"))) return
  rmSync(stamp, { force: true })
  rmSync(types, { recursive: true, force: true })
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
  const r = spawnSync(process.execPath, [tsc, "-p", join(root, "tsconfig.lib.json")], { stdio: "inherit" })
  if (r.status !== 0) throw new Error(`tsc -p tsconfig.lib.json failed (exit ${r.status})`)
  writeFileSync(stamp, `${newest}\n`)
}

/** The newest mtime among the files dist/types is made from. */
const newestInput = (): number => {
  let newest = 0
  const visit = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name)
      if (e.isDirectory()) visit(p)
      else if (e.name.endsWith(".ts")) newest = Math.max(newest, statSync(p).mtimeMs)
    }
  }
  visit(join(root, "src"))
  for (const f of ["tsconfig.json", "tsconfig.lib.json", "package.json"]) newest = Math.max(newest, statSync(join(root, f)).mtimeMs)
  return newest
}

/** The newest source mtime of the last complete dist/types build, or -1. */
const builtFrom = (stamp: string): number => {
  try {
    const n = Number(readFileSync(stamp, "utf8").trim())
    return Number.isFinite(n) ? n : -1
  } catch {
    return -1
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const t = performance.now()
  await buildLibrary()
  console.log(`built dist/index.js and dist/types/ in ${Math.round(performance.now() - t)} ms`)
}
