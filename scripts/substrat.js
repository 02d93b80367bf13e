#!/usr/bin/env node
// `node scripts/substrat.js …` (tests, benchmarks, docs): the same launcher as the package's
// bin, scripts/substrat.cjs, behind an ESM entry (the package is "type": "module"), which costs
// Node a few ms more to start. Loaded with require (not `import`: no CJS-to-ESM translation).
const { createRequire } = process.getBuiltinModule?.("node:module") ?? (await import("node:module"))
createRequire(import.meta.url)("./substrat.cjs")
