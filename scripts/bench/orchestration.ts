// Orchestration throughput over the real file EventLog + SessionStore, 100 agents, a
// zero-latency scripted provider; next to the raw durable append rate measured in the same run
// (EventLog.append, 100 sessions concurrently).
//   turns/s      : explicit turns on all 100 agents concurrently (slots = 100, then the default 4
//                  so every turn also pays for an eviction and a resume)
//   messages/s   : Router notifications between siblings (one durable append each:
//                  `message.enqueued` in the recipient's log)
// A turn logs turn.start, usage, turn.complete (3 entries; the issue budgets 2 without usage),
// so "ceiling" = append rate / 3, and ratio = measured / ceiling: a ratio above 1/3 per durable
// step saved means the turn's entries share durable writes (usage and turn.complete go in one).
// SUBSTRAT_BENCH_BEFORE=<another checkout> runs that checkout's src/ too, in the same run, each
// measurement alternating between the two (raw appends, slots=100, slots=4), so both sides see
// the same disk and load; each side's ratio is against its own append rate.
import { Effect, Layer, ManagedRuntime } from "effect"
import * as fs from "node:fs"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "orchestration"

const AGENTS = 100
const here = join(import.meta.dirname, "..", "..")

interface Modules {
  readonly Orchestration: typeof import("../../src/agent/Orchestrator.js")
  readonly Router: typeof import("../../src/agent/Router.js")
  readonly Paths: typeof import("../../src/config/Paths.js")
  readonly Events: typeof import("../../src/domain/events.js")
  readonly Ids: typeof import("../../src/domain/ids.js")
  readonly Durable: typeof import("../../src/storage/Durable.js")
  readonly Log: typeof import("../../src/storage/EventLog.js")
  readonly Store: typeof import("../../src/storage/SessionStore.js")
  readonly Scripted: typeof import("../../src/provider/scripted/ScriptedProvider.js")
  readonly Mux: typeof import("../../src/session/Multiplexer.js")
}

const load = async (root: string): Promise<Modules> => {
  const m = (p: string) => import(pathToFileURL(join(root, "src", p)).href)
  return {
    Orchestration: await m("agent/Orchestrator.ts"),
    Router: await m("agent/Router.ts"),
    Paths: await m("config/Paths.ts"),
    Events: await m("domain/events.ts"),
    Ids: await m("domain/ids.ts"),
    Durable: await m("storage/Durable.ts"),
    Log: await m("storage/EventLog.ts"),
    Store: await m("storage/SessionStore.ts"),
    Scripted: await m("provider/scripted/ScriptedProvider.ts"),
    Mux: await m("session/Multiplexer.ts")
  }
}

const storage = (M: Modules, home: string) =>
  Layer.mergeAll(M.Log.EventLog.layerFile, M.Store.SessionStore.layerFile).pipe(
    Layer.provide(Layer.mergeAll(M.Durable.Durable.layer, M.Paths.SubstratPaths.layer(home))),
    Layer.orDie
  )

const stack = (M: Modules, home: string, slots: number) =>
  M.Orchestration.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(
      M.Scripted.layer({ scripts: { "*": { steps: [], after: "silent" } } }),
      M.Mux.MultiplexerConfig.layer(slots),
      storage(M, home)
    ))
  )

const rawAppends = (M: Modules, home: string, n: number) => {
  // Disposed at the end: the file log's idle-close fiber would keep the process alive.
  const rt = ManagedRuntime.make(storage(M, home))
  return rt.runPromise(Effect.gen(function*() {
    const log = yield* M.Log.EventLog
    const sessions = Array.from({ length: AGENTS }, () => M.Ids.newSessionId())
    const per = Math.ceil(n / AGENTS)
    const t0 = performance.now()
    yield* Effect.forEach(sessions, (s) =>
      Effect.forEach(
        Array.from({ length: per }),
        () => log.append(s, M.Events.makeEvent("turn.start", { turn_id: M.Ids.newTurnId(), prompt: "x".repeat(60) })),
        { discard: true }
      ), { concurrency: "unbounded", discard: true })
    return (per * AGENTS) / ((performance.now() - t0) / 1000)
  })).finally(() => rt.dispose())
}

const orchestration = (M: Modules, home: string, slots: number, rounds: number) => {
  const rt = ManagedRuntime.make(stack(M, home, slots))
  return rt.runPromise(Effect.gen(function*() {
    const o = yield* M.Orchestration.Orchestrator
    const router = yield* M.Router.Router
    const root = yield* o.createRoot({ name: "root", instructions: "bench", provider: "scripted" })
    const kids = yield* Effect.forEach(
      Array.from({ length: AGENTS - 1 }, (_, i) => i),
      (i) => o.spawn(root.id, { name: `w${i}`, instructions: "worker" })
    )
    const all = [root, ...kids]
    const t0 = performance.now()
    for (let r = 0; r < rounds; r++) {
      yield* Effect.forEach(all, (a) => o.runTurn(a.id, "go"), { concurrency: "unbounded", discard: true })
    }
    const turnsPerSec = (rounds * all.length) / ((performance.now() - t0) / 1000)
    const t1 = performance.now()
    for (let r = 0; r < rounds; r++) {
      yield* Effect.forEach(kids, (k, i) =>
        router.sendFrom(k.id, { recipient: `w${(i + 1) % kids.length}`, text: "fyi", sync: false }), {
        concurrency: "unbounded",
        discard: true
      })
    }
    const msgsPerSec = (rounds * kids.length) / ((performance.now() - t1) / 1000)
    yield* o.awaitIdle
    return { turnsPerSec, msgsPerSec }
  })).finally(() => rt.dispose())
}

interface Side {
  readonly label: string
  readonly M: Modules
  appendRate: number
  wide: { turnsPerSec: number; msgsPerSec: number }
  narrow: { turnsPerSec: number; msgsPerSec: number }
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const rounds = opts.quick ? 1 : 3
  const dir = fs.mkdtempSync(join(tmpdir(), "substrat-bench-orch-"))
  const beforeRoot = process.env["SUBSTRAT_BENCH_BEFORE"]
  const roots: Array<readonly [string, string]> = [["after", here]]
  if (beforeRoot !== undefined && beforeRoot !== "") roots.unshift(["before", beforeRoot])
  const zero = { turnsPerSec: 0, msgsPerSec: 0 }
  const sides: Array<Side> = []
  for (const [label, root] of roots) sides.push({ label, M: await load(root), appendRate: 0, wide: zero, narrow: zero })
  try {
    const load1 = loadavg()[0]!
    // Each measurement for every side before the next one, the order alternating.
    const order = (k: number) => (k % 2 === 0 ? sides : [...sides].reverse())
    // A first, discarded round of appends per side: the process's first durable writes (the
    // thread pool starting, code not yet compiled) would otherwise count against whichever side
    // measures first.
    for (const s of sides) await rawAppends(s.M, join(dir, `warm-${s.label}`), AGENTS)
    for (const s of order(0)) s.appendRate = await rawAppends(s.M, join(dir, `raw-${s.label}`), AGENTS * rounds * 3)
    for (const s of order(1)) s.wide = await orchestration(s.M, join(dir, `wide-${s.label}`), AGENTS, rounds)
    for (const s of order(2)) s.narrow = await orchestration(s.M, join(dir, `narrow-${s.label}`), 4, rounds)
    const load2 = loadavg()[0]!
    const perTurn = 3
    const rows: Array<Record<string, string | number>> = []
    const summary: Record<string, number | string> = { loadavg_1m_before: Number(load1.toFixed(2)), loadavg_1m_after: Number(load2.toFixed(2)) }
    for (const s of sides) {
      const ceiling = s.appendRate / perTurn
      const tag = sides.length > 1 ? `${s.label}: ` : ""
      rows.push(
        { measure: `${tag}raw EventLog.append (100 sessions)`, per_sec: s.appendRate, ratio: 1 },
        { measure: `${tag}turns/s, slots=100`, per_sec: s.wide.turnsPerSec, ratio: s.wide.turnsPerSec / ceiling },
        { measure: `${tag}turns/s, slots=4 (evict+resume)`, per_sec: s.narrow.turnsPerSec, ratio: s.narrow.turnsPerSec / ceiling },
        { measure: `${tag}messages routed/s (slots=100)`, per_sec: s.wide.msgsPerSec, ratio: s.wide.msgsPerSec / s.appendRate }
      )
      const key = (k: string) => (s.label === "after" ? k : `${s.label}_${k}`)
      summary[key("append_per_sec")] = Math.round(s.appendRate)
      summary[key("turns_per_sec_slots100")] = Math.round(s.wide.turnsPerSec)
      summary[key("turns_per_sec_slots4")] = Math.round(s.narrow.turnsPerSec)
      summary[key("messages_per_sec")] = Math.round(s.wide.msgsPerSec)
      summary[key("turn_ratio_vs_append_ceiling")] = Number((s.wide.turnsPerSec / ceiling).toFixed(3))
      summary[key("message_ratio_vs_append")] = Number((s.wide.msgsPerSec / s.appendRate).toFixed(3))
    }
    return { rows, summary }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
