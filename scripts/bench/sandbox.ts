// Sandbox bench: spawn-to-exit of /bin/true through the Sandbox layer vs bare bwrap vs a bare spawn,
// measured in the same run, in an empty workspace and in one of 50k files; and the per-turn diff
// cost (WorkspaceHistory.commitTurn) on a 10k-file workspace.
//
// Like with like: the layer runs with the daemon's default limits (rlimits through `prlimit`, a
// cgroup sub-group where one is writable, the workspace-growth budget), and bare bwrap gets exactly
// the layer's host command line for those limits (`sandboxCommandLine` with the layer's own probe,
// the same cgroup sub-group made and removed around it) and the same spawn env and stdio (stdin
// /dev/null, stdout/stderr piped and drained) — what it does not do is the layer's own work (path
// checks, the growth baseline and watcher, exit attribution). The cases are interleaved call by
// call, in several rounds; each round's layer/bwrap ratio is reported too, with the load average.
// SUBSTRAT_BENCH_BEFORE=<another checkout> also runs that checkout's Sandbox layer, interleaved
// with the others (before/after figures from one run).
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import { NodeContext } from "@effect/platform-node"
import { Effect, Either, Layer, ManagedRuntime, Option } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import { SubstratPaths } from "../../src/config/Paths.js"
import { newTurnId } from "../../src/domain/ids.js"
import { noLimits } from "../../src/domain/workspace.js"
import { Durable } from "../../src/storage/Durable.js"
import { Sandbox } from "../../src/sandbox/Sandbox.js"
import { createCgroupRun, detectCgroup } from "../../src/sandbox/Cgroup.js"
import { withDefaults } from "../../src/sandbox/Limits.js"
import { layerBwrap, probeBwrap, sandboxCommandLine } from "../../src/sandbox/SandboxBwrap.js"
import { WorkspaceHistory } from "../../src/sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../../src/sandbox/WorkspaceStore.js"
import { WorkspaceUsage } from "../../src/sandbox/WorkspaceUsage.js"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "sandbox"

// The layer's spawn env (SandboxBwrap: PATH only; bwrap then --clearenv's it anyway).
const spawnEnv = { PATH: process.env["PATH"] ?? "/usr/bin:/bin" }

const spawnWait = (cmd: string, args: ReadonlyArray<string>) =>
  new Promise<void>((resolve, reject) => {
    const c = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], detached: true, env: spawnEnv })
    c.stdout.resume()
    c.stderr.resume()
    c.on("error", reject)
    c.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} exited ${code}`))))
  })

const stats = (xs: Array<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!
  return { median: q(0.5), p90: q(0.9), mean: s.reduce((a, b) => a + b, 0) / s.length }
}

const time = async (n: number, f: () => Promise<unknown>) => {
  const out: Array<number> = []
  for (let i = 0; i < n; i++) {
    const t = performance.now()
    await f()
    out.push(performance.now() - t)
  }
  return out
}

/** A Sandbox runner from another checkout (its own modules, its own Effect), for before/after rows. */
const beforeLayer = async (root: string) => {
  const imp = (m: string) => import(pathToFileURL(join(root, m)).href)
  const E = await imp("node_modules/effect/dist/esm/index.js")
  const NC = await imp("node_modules/@effect/platform-node/dist/esm/NodeContext.js")
  const SB = await imp("src/sandbox/SandboxBwrap.ts")
  const S = await imp("src/sandbox/Sandbox.ts")
  const rt = E.ManagedRuntime.make(SB.layerBwrap().pipe(E.Layer.provide(NC.layer)))
  return {
    run: (request: unknown) => rt.runPromise(E.Effect.flatMap(S.Sandbox, (s: { run: (r: unknown) => unknown }) => s.run(request))) as Promise<unknown>,
    dispose: () => rt.dispose() as Promise<void>
  }
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const T = fs.mkdtempSync(join(tmpdir(), "substrat-bench-sbx-"))
  const home = join(T, "home")
  const base = Layer.mergeAll(Durable.layer, SubstratPaths.layer(home), NodeContext.layer, WorkspaceUsage.layerNone)
  const store = WorkspaceStore.Default.pipe(Layer.provide(base))
  const history = WorkspaceHistory.Default.pipe(Layer.provide(store), Layer.provide(base))
  const rt = ManagedRuntime.make(Layer.mergeAll(store, history, layerBwrap().pipe(Layer.provide(NodeContext.layer)), NodeContext.layer))
  const beforeRoot = process.env["SUBSTRAT_BENCH_BEFORE"]
  const before = beforeRoot === undefined || beforeRoot === "" ? undefined : await beforeLayer(beforeRoot)
  const rows: Array<Record<string, string | number>> = []
  const summary: Record<string, number | string> = {}
  const fmt = (xs: ReadonlyArray<number>) => xs.map((x) => x.toFixed(2)).join(" ")
  try {
    const probe = await rt.runPromise(
      Effect.flatMap(FileSystem.FileSystem, (f) => Effect.flatMap(CommandExecutor.CommandExecutor, (ex) => probeBwrap(f, ex)))
    )
    const cg = await rt.runPromise(Effect.flatMap(FileSystem.FileSystem, (f) => detectCgroup(f)))
    const limits = withDefaults(noLimits)
    /** The cgroup sub-group the layer would make for these limits (undefined: none is writable). */
    const cgroup = () =>
      rt.runPromise(Effect.flatMap(FileSystem.FileSystem, (f) =>
        cg.mode === "v2-writable"
          ? Effect.option(createCgroupRun(f, "/sys/fs/cgroup/substrat", limits))
          : cg.pidsV1 !== undefined
          ? Effect.option(createCgroupRun(f, `${cg.pidsV1}/substrat`, limits, "v1-pids"))
          : Effect.succeed(Option.none())
      ))
    const cases = [{ label: "empty", files: 0 }, { label: "50k files", files: opts.quick ? 5_000 : 50_000 }]
    for (const c of cases) {
      const ws = await rt.runPromise(Effect.flatMap(WorkspaceStore, (s) => s.create({ name: `bench-${c.files}` })))
      for (let d = 0; d < c.files / 100; d++) {
        const dir = join(ws.root_path, `d${d}`)
        fs.mkdirSync(dir)
        for (let f = 0; f < 100; f++) fs.writeFileSync(join(dir, `f${f}.txt`), `file ${d}/${f}\n`)
      }
      const request = { workspace: ws, command: ["/bin/true"], limits: noLimits }
      const cmdline = sandboxCommandLine(probe, request, limits)
      if (Either.isLeft(cmdline)) throw new Error(cmdline.left.message)
      const [bwrap, ...bwrapArgs] = cmdline.right
      if (bwrap !== probe.bwrap) throw new Error(`unexpected wrapper before bwrap: ${cmdline.right.join(" ")}`)
      const bareLimited = async () => {
        const made = await cgroup()
        const argv = [...(Option.isSome(made) ? made.value.prefix : []), bwrap!, ...bwrapArgs]
        try {
          await spawnWait(argv[0]!, argv.slice(1))
        } finally {
          if (Option.isSome(made)) await rt.runPromise(made.value.remove)
        }
      }
      const viaLayer = () => rt.runPromise(Effect.flatMap(Sandbox, (s) => s.run(request)))
      const subjects: Array<{ label: string; f: () => Promise<unknown>; xs: Array<number>; round: Array<number> }> = [
        { label: "bare spawn /bin/true", f: () => spawnWait("/bin/true", []), xs: [], round: [] },
        { label: "bare bwrap /bin/true, same limits", f: bareLimited, xs: [], round: [] },
        { label: "Sandbox layer /bin/true (after)", f: viaLayer, xs: [], round: [] },
        ...(before === undefined ? [] : [{ label: "Sandbox layer /bin/true (before)", f: () => before.run(request), xs: [], round: [] }])
      ]
      const rounds = 5
      const perRound = opts.quick ? 4 : 12
      const load0 = loadavg()
      // Warm up every path, then interleave call by call (rotating the order) so drift and load hit all alike.
      for (let i = 0; i < 2; i++) for (const sub of subjects) await sub.f()
      const ratios = new Map<string, Array<number>>()
      for (let round = 0; round < rounds; round++) {
        for (const sub of subjects) sub.round = []
        for (let i = 0; i < perRound; i++) {
          // Rotate the order: a bwrap run leaves namespace teardown work (netns cleanup) to the kernel,
          // which lands on whatever runs next — a fixed order would always bill it to the same case.
          for (let k = 0; k < subjects.length; k++) {
            const sub = subjects[(i + k) % subjects.length]!
            const t = performance.now()
            await sub.f()
            sub.round.push(performance.now() - t)
          }
        }
        const bw = stats(subjects[1]!.round).median
        for (const sub of subjects.slice(2)) ratios.set(sub.label, [...(ratios.get(sub.label) ?? []), stats(sub.round).median / bw])
        for (const sub of subjects) sub.xs.push(...sub.round)
      }
      const load1 = loadavg()
      for (const sub of subjects) {
        const st = stats(sub.xs)
        rows.push({ workspace: c.label, case: sub.label, n: sub.xs.length, median_ms: st.median, p90_ms: st.p90 })
      }
      const key = c.files === 0 ? "empty" : "files50k"
      for (const sub of subjects.slice(2)) {
        const r = ratios.get(sub.label)!
        const which = sub.label.endsWith("(before)") ? "before" : "after"
        rows.push({ workspace: c.label, case: `${which}: layer/bwrap per round: ${fmt(r)}`, n: rounds, median_ms: stats(r).median })
        summary[`${key}_layer_vs_bwrap_${which}`] = Number(stats(r).median.toFixed(2))
        summary[`${key}_layer_median_ms_${which}`] = Number(stats(sub.xs).median.toFixed(1))
      }
      summary[`${key}_bare_bwrap_median_ms`] = Number(stats(subjects[1]!.xs).median.toFixed(1))
      rows.push({ workspace: c.label, case: `load average before: ${fmt(load0)}, after: ${fmt(load1)}`, n: 0 })
      summary[`${key}_loadavg_1m`] = Number(load0[0]!.toFixed(2))
    }
    for (const which of before === undefined ? ["after"] : ["after", "before"]) {
      const e = summary[`empty_layer_median_ms_${which}`] as number
      const b = summary[`files50k_layer_median_ms_${which}`] as number
      summary[`layer_50k_vs_empty_${which}`] = Number((b / e).toFixed(2))
    }
    summary["goal_layer_vs_bare_bwrap"] = 1.3

    const ws = await rt.runPromise(Effect.flatMap(WorkspaceStore, (s) => s.create({ name: "bench" })))
    // Per-turn diff on 10k files.
    const files = opts.quick ? 2_000 : 10_000
    for (let d = 0; d < files / 100; d++) {
      const dir = join(ws.root_path, `d${d}`)
      fs.mkdirSync(dir)
      for (let f = 0; f < 100; f++) fs.writeFileSync(join(dir, `f${f}.txt`), `file ${d}/${f}\n`.repeat(8))
    }
    const commit = () => rt.runPromise(Effect.flatMap(WorkspaceHistory, (h) => h.commitTurn(ws.id, { agent: "bench", turnId: newTurnId() })))
    const t0 = performance.now()
    const first = await commit()
    const initial = performance.now() - t0
    if (first.paths.length !== files) throw new Error(`initial commit saw ${first.paths.length} paths`)
    rows.push({ case: `commitTurn: initial import of ${files} files`, n: 1, median_ms: initial, p90_ms: initial })
    const turns = opts.quick ? 5 : 20
    const small: Array<number> = []
    for (let i = 0; i < turns; i++) {
      fs.appendFileSync(join(ws.root_path, "d1", `f${i}.txt`), `edit ${i}\n`)
      fs.appendFileSync(join(ws.root_path, "d2", `f${i}.txt`), `edit ${i}\n`)
      fs.writeFileSync(join(ws.root_path, `new-${i}.txt`), `new ${i}\n`)
      fs.rmSync(join(ws.root_path, "d3", `f${i}.txt`))
      const t = performance.now()
      const c = await commit()
      small.push(performance.now() - t)
      if (c.paths.length !== 4) throw new Error(`expected 4 changed paths, got ${c.paths.length}`)
    }
    const none = await time(turns, commit)
    const ss = stats(small)
    const sn = stats(none)
    rows.push({ case: `commitTurn: 4 changes in ${files} files`, n: small.length, median_ms: ss.median, p90_ms: ss.p90 })
    rows.push({ case: `commitTurn: no change in ${files} files`, n: none.length, median_ms: sn.median, p90_ms: sn.p90 })
    Object.assign(summary, {
      files,
      commit_turn_4_changes_median_ms: ss.median,
      commit_turn_no_change_median_ms: sn.median,
      initial_import_ms: initial
    })
    return { rows, summary }
  } finally {
    await rt.dispose()
    await before?.dispose()
    fs.rmSync(T, { recursive: true, force: true })
  }
}
