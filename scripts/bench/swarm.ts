// Swarm benchmark: discovery and the reconcile diff.
//   effect/src    node_modules/effect/src (363 files, ~4.5k nodes): cold = a fresh Discovery
//                 (grammar .wasm load) + a full parse; parse = the same service again, every file
//                 parsed; warm = discovery with the previous nodes (unchanged bytes reuse their
//                 nodes unparsed) + the diff.
//   synthetic     a generated tree of ~10k nodes (500 TS files): the same three, plus warm with
//                 1% of the files edited, plus "start-up": decode the saved snapshot JSON (Schema)
//                 + warm discovery + diff, and the pure diff of 10k nodes alone.
// Baseline (same run): raw = read every file and sha256 it (the least a content-hash reconcile
// must do). ratio raw/warm (goal: warm reconcile of 10k nodes < 2 s).
import { NodeContext } from "@effect/platform-node"
import { Effect, Layer, ManagedRuntime, Schema } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import { loadavg, tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { diffNodes } from "../../src/swarm/Diff.js"
import { Discovery } from "../../src/swarm/Discovery.js"
import { type SwarmNode, SwarmSnapshotJson } from "../../src/swarm/SwarmNode.js"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "swarm"

const effectSrc = join(dirname(createRequire(import.meta.url).resolve("effect/package.json")), "src")

/** 500 files × (1 class with 5 methods + 14 functions) ≈ 10k code nodes, in 20 directories. */
const generate = (root: string, files = 500): Array<string> => {
  const rels: Array<string> = []
  for (let f = 0; f < files; f++) {
    const rel = `pkg${f % 20}/mod${f}.ts`
    const lines: Array<string> = [`import { x } from "./x.js"`, ""]
    lines.push(`export class Model${f} {`)
    for (let m = 0; m < 5; m++) lines.push(`  method${m}(a: number): number {`, `    return a * ${m} + ${f}`, `  }`)
    lines.push("}", "")
    for (let g = 0; g < 14; g++) {
      if (g % 2 === 0) lines.push(`export function fn${g}(a: number): number {`, `  return a + ${g}`, `}`, "")
      else lines.push(`export const arrow${g} = (a: number): number => a - ${g}`, "")
    }
    fs.mkdirSync(dirname(join(root, rel)), { recursive: true })
    fs.writeFileSync(join(root, rel), lines.join("\n"))
    rels.push(rel)
  }
  return rels
}

const listAll = (root: string): Array<string> =>
  (fs.readdirSync(root, { recursive: true }) as Array<string>).filter((f) => f.endsWith(".ts"))

const rawHashAll = (root: string, files: ReadonlyArray<string>): number => {
  let n = 0
  for (const f of files) n += createHash("sha256").update(fs.readFileSync(join(root, f), "utf8")).digest("hex").length
  return n
}

const time = async <A>(f: () => Promise<A>): Promise<[number, A]> => {
  const t = performance.now()
  const a = await f()
  return [performance.now() - t, a]
}

const best = async <A>(reps: number, f: () => Promise<A>): Promise<[number, A]> => {
  let out: [number, A] | undefined
  for (let i = 0; i < reps; i++) {
    const r = await time(f)
    if (out === undefined || r[0] < out[0]) out = r
  }
  return out!
}

const DiscoveryLive = Discovery.Default.pipe(Layer.provide(NodeContext.layer))
/** A fresh Discovery (grammars loaded anew) for this one effect: the cold path. */
const runCold = <A>(eff: Effect.Effect<A, unknown, Discovery>): Promise<A> =>
  Effect.runPromise(eff.pipe(Effect.provide(DiscoveryLive), Effect.scoped))

const discover = (root: string, previous?: ReadonlyArray<SwarmNode>) =>
  Effect.flatMap(Discovery, (d) => d.discover(root, previous === undefined ? {} : { previous }))

export const run_ = async (opts: BenchOptions): Promise<BenchResult> => {
  // The warm paths run on one long-lived Discovery, as a daemon would.
  const runtime = ManagedRuntime.make(DiscoveryLive)
  const run = <A>(eff: Effect.Effect<A, unknown, Discovery>): Promise<A> => runtime.runPromise(eff)
  await run(Effect.void.pipe(Effect.zipRight(Discovery)))
  try {
    return await measure(opts, run)
  } finally {
    await runtime.dispose()
  }
}

const measure = async (
  opts: BenchOptions,
  run: <A>(eff: Effect.Effect<A, unknown, Discovery>) => Promise<A>
): Promise<BenchResult> => {
  const reps = opts.quick ? 1 : 3
  const rows: Array<Record<string, string | number>> = []
  const summary: Record<string, number | string> = { load1: Number(loadavg()[0]!.toFixed(1)) }
  const row = (tree: string, step: string, ms: number, nodes: number) => {
    rows.push({ tree, step, ms: Math.round(ms), nodes, "nodes/s": Math.round(nodes / (ms / 1000)) })
  }

  // node_modules/effect/src
  {
    const files = listAll(effectSrc)
    const [coldMs, nodes] = await time(() => runCold(discover(effectSrc)))
    row("effect/src", "cold (grammars + parse)", coldMs, nodes.length)
    const [parseMs] = await best(reps, () => run(Effect.flatMap(Discovery, (d) => d.discoverFiles(effectSrc, files))))
    row("effect/src", "parse every file", parseMs, nodes.length)
    const [rawMs] = await best(reps, async () => rawHashAll(effectSrc, files))
    row("effect/src", "raw read + sha256", rawMs, nodes.length)
    const [warmMs, diff] = await best(reps, () =>
      run(Effect.map(discover(effectSrc, nodes), (now) => diffNodes(nodes, now))))
    if (diff.added.length + diff.orphaned.length + diff.changed.length !== 0) throw new Error("effect/src: warm diff not empty")
    row("effect/src", "warm discover + diff", warmMs, nodes.length)
    summary.effect_nodes = nodes.length
    summary.effect_cold_ms = Math.round(coldMs)
    summary.effect_cold_nodes_per_s = Math.round(nodes.length / (coldMs / 1000))
    summary.effect_warm_ms = Math.round(warmMs)
    summary.effect_warm_nodes_per_s = Math.round(nodes.length / (warmMs / 1000))
    summary.effect_raw_over_warm = Number((rawMs / warmMs).toFixed(3))
  }

  // A generated tree of ~10k nodes.
  const root = fs.mkdtempSync(join(tmpdir(), "substrat-bench-swarm-"))
  try {
    const files = generate(root)
    const [coldMs, nodes] = await time(() => runCold(discover(root)))
    row("synthetic", "cold (grammars + parse)", coldMs, nodes.length)
    const [rawMs] = await best(reps, async () => rawHashAll(root, files))
    row("synthetic", "raw read + sha256", rawMs, nodes.length)
    const [warmMs] = await best(reps, () => run(Effect.map(discover(root, nodes), (now) => diffNodes(nodes, now))))
    row("synthetic", "warm discover + diff", warmMs, nodes.length)
    const json = Schema.encodeSync(SwarmSnapshotJson)({ version: 1, root, nodes })
    const [startMs] = await best(reps, () =>
      run(Effect.gen(function*() {
        const saved = Schema.decodeUnknownSync(SwarmSnapshotJson)(json).nodes
        const now = yield* discover(root, saved)
        return diffNodes(saved, now)
      })))
    row("synthetic", "start-up: decode snapshot + warm + diff", startMs, nodes.length)
    // 1% of the files edited: one method body each.
    for (let f = 0; f < files.length; f += 100) {
      const p = join(root, files[f]!)
      fs.writeFileSync(p, fs.readFileSync(p, "utf8").replace("return a * 2", "return a * 2 + 1"))
    }
    const [editMs, editDiff] = await time(() => run(Effect.map(discover(root, nodes), (now) => diffNodes(nodes, now))))
    if (editDiff.changed.length !== files.length / 100) throw new Error(`synthetic: ${editDiff.changed.length} changed`)
    row("synthetic", "warm, 1% of files edited", editMs, nodes.length)
    const shuffled = [...nodes].reverse()
    const [diffMs] = await best(reps * 3, async () => diffNodes(nodes, shuffled))
    row("synthetic", "diff alone", diffMs, nodes.length)
    summary.synthetic_nodes = nodes.length
    summary.synthetic_cold_ms = Math.round(coldMs)
    summary.synthetic_warm_ms = Math.round(warmMs)
    summary.synthetic_startup_ms = Math.round(startMs)
    summary.synthetic_edit1pct_ms = Math.round(editMs)
    summary.synthetic_diff_ms = Number(diffMs.toFixed(1))
    summary.synthetic_raw_over_warm = Number((rawMs / warmMs).toFixed(3))
    summary.goal_warm_10k_under_2s = startMs < 2000 ? "yes" : "no"
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
  return { rows, summary }
}

export { run_ as run }
