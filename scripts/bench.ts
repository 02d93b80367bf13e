// Benchmark runner: `npm run bench [-- [--quick] [--json <file>] [module...]]`.
// Runs every module in scripts/bench/*.ts (except types.ts), or only the named ones, prints a
// table per module and a final JSON object `{ <module>: summary, ... }` (also written to
// `--json <file>` when given). Benchmarks are the only place speed is measured — never tests.
import { readdirSync } from "node:fs"
import { writeFile } from "node:fs/promises"
import { basename, dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import type { BenchModule, BenchResult } from "./bench/types.js"

const benchDir = join(dirname(fileURLToPath(import.meta.url)), "bench")

const formatCell = (v: string | number | undefined): string =>
  v === undefined ? "" : typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toFixed(3)) : v

export const formatTable = (rows: ReadonlyArray<Record<string, string | number>>): string => {
  const cols: Array<string> = []
  for (const r of rows) for (const k of Object.keys(r)) if (!cols.includes(k)) cols.push(k)
  const cells = rows.map((r) => cols.map((c) => formatCell(r[c])))
  const widths = cols.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i]!.length)))
  const line = (vals: ReadonlyArray<string>) => vals.map((v, i) => v.padEnd(widths[i]!)).join("  ")
  return [line(cols), line(widths.map((w) => "-".repeat(w))), ...cells.map(line)].join("\n")
}

const isModule = (m: unknown): m is BenchModule =>
  typeof m === "object" && m !== null && typeof (m as { name?: unknown }).name === "string" &&
  typeof (m as { run?: unknown }).run === "function"

const main = async () => {
  const argv = process.argv.slice(2)
  const quick = argv.includes("--quick")
  const jsonIdx = argv.indexOf("--json")
  const jsonOut = jsonIdx >= 0 ? argv[jsonIdx + 1] : undefined
  const wanted = argv.filter((a, i) => !a.startsWith("--") && !(jsonIdx >= 0 && i === jsonIdx + 1))
  const files = readdirSync(benchDir)
    .filter((f) => f.endsWith(".ts") && f !== "types.ts" && !f.endsWith(".d.ts"))
    .sort()
    .filter((f) => wanted.length === 0 || wanted.includes(basename(f, ".ts")))
  if (files.length === 0) {
    console.error(`no bench modules matched ${wanted.join(", ")}`)
    process.exitCode = 1
    return
  }
  const all: Record<string, BenchResult["summary"] | { error: string }> = {}
  for (const file of files) {
    const mod: unknown = await import(pathToFileURL(join(benchDir, file)).href)
    if (!isModule(mod)) {
      console.error(`${file}: not a bench module (needs \`name\` and \`run\`)`)
      process.exitCode = 1
      continue
    }
    console.log(`\n== ${mod.name}${quick ? " (quick)" : ""} ==`)
    const started = performance.now()
    try {
      const result = await mod.run({ quick })
      console.log(formatTable(result.rows))
      console.log(`summary: ${JSON.stringify(result.summary)}`)
      all[mod.name] = result.summary
    } catch (e) {
      console.error(`${mod.name} failed:`, e)
      all[mod.name] = { error: String(e) }
      process.exitCode = 1
    }
    console.log(`(${((performance.now() - started) / 1000).toFixed(1)} s)`)
  }
  const json = JSON.stringify(all, null, 2)
  console.log(`\n${json}`)
  if (jsonOut !== undefined) await writeFile(jsonOut, json + "\n")
}

await main()
