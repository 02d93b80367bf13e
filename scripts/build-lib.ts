// Build the library for embedders (docs/embedding.md) into dist/, next to the CLI bundles of
// scripts/build.ts:
//   dist/index.js     ESM, one file, every dependency left external (resolved from the
//                     embedder's node_modules, so their Effect is ours: one copy of each)
//   dist/types/       .d.ts of src/ (tsc -p tsconfig.lib.json), entry dist/types/index.d.ts
// Run by `npm pack`/`npm publish` (prepack), or `npm run build:lib`.
import * as esbuild from "esbuild"
import { spawnSync } from "node:child_process"
import { renameSync, rmSync } from "node:fs"
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
  rmSync(join(dist, "types"), { recursive: true, force: true })
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
  const r = spawnSync(process.execPath, [tsc, "-p", join(root, "tsconfig.lib.json")], { stdio: "inherit" })
  if (r.status !== 0) throw new Error(`tsc -p tsconfig.lib.json failed (exit ${r.status})`)
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const t = performance.now()
  await buildLibrary()
  console.log(`built dist/index.js and dist/types/ in ${Math.round(performance.now() - t)} ms`)
}
