// Sandbox bench: spawn-to-exit of /bin/true through the Sandbox layer vs bare bwrap vs a bare spawn,
// measured in the same run; and the per-turn diff cost (WorkspaceHistory.commitTurn) on a 10k-file
// workspace.
//
// Like with like: bare bwrap gets exactly the layer's host command line (`sandboxCommandLine` with the
// layer's own probe: the resolved bwrap path, the same bwrap arguments) and the same spawn env and
// stdio (stdin /dev/null, stdout/stderr piped and drained). No limits are configured (`noLimits`), so
// neither side has a `prlimit` wrapper or a wall-clock timer. The three cases are interleaved call by
// call, in several rounds; each round's layer/bwrap ratio is reported too, with the load average.
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import { NodeContext } from "@effect/platform-node"
import { Effect, Either, Layer, ManagedRuntime } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { SubstratPaths } from "../../src/config/Paths.js"
import { newTurnId } from "../../src/domain/ids.js"
import { noLimits } from "../../src/domain/workspace.js"
import { Durable } from "../../src/storage/Durable.js"
import { Sandbox } from "../../src/sandbox/Sandbox.js"
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

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const T = fs.mkdtempSync(join(tmpdir(), "substrat-bench-sbx-"))
  const home = join(T, "home")
  const base = Layer.mergeAll(Durable.layer, SubstratPaths.layer(home), NodeContext.layer, WorkspaceUsage.layerNone)
  const store = WorkspaceStore.Default.pipe(Layer.provide(base))
  const history = WorkspaceHistory.Default.pipe(Layer.provide(store), Layer.provide(base))
  const rt = ManagedRuntime.make(Layer.mergeAll(store, history, layerBwrap().pipe(Layer.provide(NodeContext.layer))))
  const rows: Array<Record<string, string | number>> = []
  try {
    const ws = await rt.runPromise(Effect.flatMap(WorkspaceStore, (s) => s.create({ name: "bench" })))
    const probe = await Effect.runPromise(
      Effect.provide(
        Effect.flatMap(FileSystem.FileSystem, (f) => Effect.flatMap(CommandExecutor.CommandExecutor, (ex) => probeBwrap(f, ex))),
        NodeContext.layer
      )
    )
    const request = { workspace: ws, command: ["/bin/true"], limits: noLimits }
    const cmdline = sandboxCommandLine(probe, request, noLimits)
    if (Either.isLeft(cmdline)) throw new Error(cmdline.left.message)
    const [bwrap, ...bwrapArgs] = cmdline.right
    if (bwrap !== probe.bwrap) throw new Error(`unexpected wrapper before bwrap: ${cmdline.right.join(" ")}`)
    const viaLayer = () => rt.runPromise(Effect.flatMap(Sandbox, (s) => s.run(request)))
    const rounds = 5
    const perRound = opts.quick ? 6 : 16
    const load0 = loadavg()
    // Warm up every path, then interleave call by call (rotating the order) so drift and load hit all three alike.
    for (let i = 0; i < 3; i++) {
      await spawnWait("/bin/true", [])
      await spawnWait(bwrap, bwrapArgs)
      await viaLayer()
    }
    const bare: Array<number> = []
    const bw: Array<number> = []
    const layer: Array<number> = []
    const roundRatios: Array<number> = []
    for (let round = 0; round < rounds; round++) {
      const rb: Array<number> = []
      const rl: Array<number> = []
      for (let i = 0; i < perRound; i++) {
        // Rotate the order: a bwrap run leaves namespace teardown work (netns cleanup) to the kernel,
        // which lands on whatever runs next — a fixed order would always bill it to the same case.
        for (let k = 0; k < 3; k++) {
          const which = (i + k) % 3
          if (which === 0) bare.push(...(await time(1, () => spawnWait("/bin/true", []))))
          else if (which === 1) rb.push(...(await time(1, () => spawnWait(bwrap, bwrapArgs))))
          else rl.push(...(await time(1, viaLayer)))
        }
      }
      roundRatios.push(stats(rl).median / stats(rb).median)
      bw.push(...rb)
      layer.push(...rl)
    }
    const load1 = loadavg()
    const sb = stats(bare)
    const sw = stats(bw)
    const sl = stats(layer)
    rows.push({ case: "bare spawn /bin/true", n: bare.length, median_ms: sb.median, p90_ms: sb.p90 })
    rows.push({ case: "bare bwrap /bin/true", n: bw.length, median_ms: sw.median, p90_ms: sw.p90 })
    rows.push({ case: "Sandbox layer /bin/true", n: layer.length, median_ms: sl.median, p90_ms: sl.p90 })
    const fmt = (xs: ReadonlyArray<number>) => xs.map((x) => x.toFixed(2)).join(" ")
    rows.push({ case: `layer/bwrap per round: ${fmt(roundRatios)}`, n: rounds, median_ms: sl.median / sw.median })
    rows.push({ case: `load average before: ${fmt(load0)}, after: ${fmt(load1)}`, n: 0 })

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
    return {
      rows,
      summary: {
        bare_spawn_median_ms: sb.median,
        bare_bwrap_median_ms: sw.median,
        layer_median_ms: sl.median,
        layer_vs_bare_bwrap: sl.median / sw.median,
        layer_vs_bare_bwrap_rounds: fmt(roundRatios),
        loadavg_1m_before: load0[0]!,
        loadavg_1m_after: load1[0]!,
        goal_layer_vs_bare_bwrap: 1.3,
        files,
        commit_turn_4_changes_median_ms: ss.median,
        commit_turn_no_change_median_ms: sn.median,
        initial_import_ms: initial
      }
    }
  } finally {
    await rt.dispose()
    fs.rmSync(T, { recursive: true, force: true })
  }
}
