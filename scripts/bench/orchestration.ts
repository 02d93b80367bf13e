// Orchestration throughput over the real file EventLog + SessionStore, 100 agents, a
// zero-latency scripted provider; next to the raw durable append rate measured in the same run
// (EventLog.append, 100 sessions concurrently).
//   turns/s      : explicit turns on all 100 agents concurrently (slots = 100, then the default 4
//                  so every turn also pays for an eviction and a resume)
//   messages/s   : Router notifications between siblings (one durable append each:
//                  `message.enqueued` in the recipient's log)
// A turn writes turn.start, usage, turn.complete (3 appends; the issue budgets 2 without usage),
// so "ceiling" = append rate / appends per turn, and ratio = measured / ceiling.
import { Effect, Layer, ManagedRuntime } from "effect"
import * as fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Orchestration from "../../src/agent/Orchestrator.js"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { Router } from "../../src/agent/Router.js"
import { SubstratPaths } from "../../src/config/Paths.js"
import { makeEvent } from "../../src/domain/events.js"
import { newSessionId, newTurnId } from "../../src/domain/ids.js"
import { Durable } from "../../src/storage/Durable.js"
import { EventLog } from "../../src/storage/EventLog.js"
import * as ScriptedProvider from "../../src/provider/scripted/ScriptedProvider.js"
import { MultiplexerConfig } from "../../src/session/Multiplexer.js"
import type { BenchOptions, BenchResult } from "./types.js"
import { SessionStore } from "../../src/storage/SessionStore.js"

export const name = "orchestration"

const AGENTS = 100

const storage = (home: string) =>
  Layer.mergeAll(EventLog.layerFile, SessionStore.layerFile).pipe(
    Layer.provide(Layer.mergeAll(Durable.layer, SubstratPaths.layer(home))),
    Layer.orDie
  )

const stack = (home: string, slots: number) =>
  Orchestration.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(
      ScriptedProvider.layer({ scripts: { "*": { steps: [], after: "silent" } } }),
      MultiplexerConfig.layer(slots),
      storage(home)
    ))
  )

const rawAppends = (home: string, n: number) => {
  // Disposed at the end: the file log's idle-close fiber would keep the process alive.
  const rt = ManagedRuntime.make(storage(home))
  return rt.runPromise(Effect.gen(function*() {
    const log = yield* EventLog
    const sessions = Array.from({ length: AGENTS }, () => newSessionId())
    const per = Math.ceil(n / AGENTS)
    const t0 = performance.now()
    yield* Effect.forEach(sessions, (s) =>
      Effect.forEach(
        Array.from({ length: per }),
        () => log.append(s, makeEvent("turn.start", { turn_id: newTurnId(), prompt: "x".repeat(60) })),
        { discard: true }
      ), { concurrency: "unbounded", discard: true })
    return (per * AGENTS) / ((performance.now() - t0) / 1000)
  })).finally(() => rt.dispose())
}

const orchestration = (home: string, slots: number, rounds: number) => {
  const rt = ManagedRuntime.make(stack(home, slots))
  return rt.runPromise(Effect.gen(function*() {
    const o = yield* Orchestrator
    const router = yield* Router
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

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const rounds = opts.quick ? 1 : 3
  const dir = fs.mkdtempSync(join(tmpdir(), "substrat-bench-orch-"))
  try {
    const appendRate = await rawAppends(join(dir, "raw"), AGENTS * rounds * 3)
    const wide = await orchestration(join(dir, "wide"), AGENTS, rounds)
    const narrow = await orchestration(join(dir, "narrow"), 4, rounds)
    const perTurn = 3
    const ceiling = appendRate / perTurn
    const rows = [
      { measure: "raw EventLog.append (100 sessions)", per_sec: appendRate, ratio: 1 },
      { measure: "turns/s, slots=100", per_sec: wide.turnsPerSec, ratio: wide.turnsPerSec / ceiling },
      { measure: "turns/s, slots=4 (evict+resume)", per_sec: narrow.turnsPerSec, ratio: narrow.turnsPerSec / ceiling },
      { measure: "messages routed/s (slots=100)", per_sec: wide.msgsPerSec, ratio: wide.msgsPerSec / appendRate }
    ]
    return {
      rows,
      summary: {
        append_per_sec: Math.round(appendRate),
        turns_per_sec_slots100: Math.round(wide.turnsPerSec),
        turns_per_sec_slots4: Math.round(narrow.turnsPerSec),
        messages_per_sec: Math.round(wide.msgsPerSec),
        turn_ratio_vs_append_ceiling: Number((wide.turnsPerSec / ceiling).toFixed(3)),
        message_ratio_vs_append: Number((wide.msgsPerSec / appendRate).toFixed(3))
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
