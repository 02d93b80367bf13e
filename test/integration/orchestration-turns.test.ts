// Turn-ordering guarantees, checked in the event logs: a session mid-turn is never evicted by the
// Multiplexer (its turn ends before its suspension), and two turns of one agent never overlap.
// Each test fails when the guarantee is removed (the `!busy` check in Multiplexer.decide, the
// per-session serialisation in TurnScheduler, the hooks inside TurnScheduler.stoppable, the wait
// for a suspension under way in Multiplexer.decide). And a
// `stopTurn` returns only once the stopped turn's hooks (the workspace diff's git) are done:
// `workspace delete --force` removes the directory right after.
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Option, Ref } from "effect"
import * as Orchestration from "../../src/agent/Orchestrator.js"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { Session as SessionClass, type Session } from "../../src/domain/session.js"
import * as ScriptedProvider from "../../src/provider/scripted/ScriptedProvider.js"
import { MultiplexerConfig } from "../../src/session/Multiplexer.js"
import { SessionStore } from "../../src/storage/SessionStore.js"
import { TurnHooks } from "../../src/agent/TurnHooks.js"
import type { Scripts } from "../../src/provider/scripted/Script.js"
import { tmpDir } from "../support/tmpDir.js"
import { eventsOf, names, stack, storage } from "./orchestration.support.js"

describe("turn ordering (scripted provider, file EventLog)", () => {
  it.scopedLive("a session mid-turn is not evicted: with one slot, b waits; a's turn.complete precedes its suspend.result", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      const scripts: Scripts = {
        a: { steps: [{ text: "a-warm" }, { text: "a-slow", delay_ms: 600 }] },
        b: { steps: [{ text: "b-1" }] }
      }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const a = yield* o.createRoot({ name: "a", instructions: "A", provider: "scripted" })
        const b = yield* o.createRoot({ name: "b", instructions: "B", provider: "scripted" })
        yield* o.runTurn(a.id, "warm up")
        // a's second turn is running (busy in the only slot) when b asks for a slot.
        const slow = yield* Effect.fork(o.runTurn(a.id, "slow one"))
        yield* Effect.gen(function*() {
          while (names(yield* eventsOf(a.session_id)).filter((n) => n === "turn.start").length < 2) yield* Effect.sleep(Duration.millis(10))
        })
        const bTurn = yield* o.runTurn(b.id, "quick")
        expect(Option.getOrThrow(bTurn).response).toBe("b-1")
        expect(Option.getOrThrow(yield* Fiber.join(slow))).toMatchObject({ response: "a-slow", error: null })

        const alog = names(yield* eventsOf(a.session_id))
        const secondStart = alog.lastIndexOf("turn.start")
        const complete = alog.lastIndexOf("turn.complete")
        const suspended = alog.indexOf("suspend.result")
        expect(suspended).toBeGreaterThan(-1)
        expect(alog).not.toContain("provider.error")
        expect(secondStart).toBeLessThan(complete)
        expect(complete).toBeLessThan(suspended)
        // b's turn started only once a was evicted, i.e. after a's turn ended.
        const aSuspendedAt = (yield* eventsOf(a.session_id)).find((e) => e.event === "suspend.result")!.ts
        const bStartedAt = (yield* eventsOf(b.session_id)).find((e) => e.event === "turn.start")!.ts
        expect(bStartedAt >= aSuspendedAt).toBe(true)
      }).pipe(Effect.provide(stack({ home, scripts, slots: 1 })))
    }))

  it.scopedLive("two waking sends to one agent: its turns run one after the other, never interleaved", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      const scripts: Scripts = { solo: { steps: [{ text: "first", delay_ms: 400 }, { text: "second", delay_ms: 50 }], after: "echo" } }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const solo = yield* o.createRoot({ name: "solo", instructions: "S", provider: "scripted" })
        const [t1, t2] = yield* Effect.all([o.runTurn(solo.id, "one"), o.runTurn(solo.id, "two")], { concurrency: "unbounded" })
        yield* o.send({ agent: solo.id, text: "three", sync: false })
        yield* o.send({ agent: solo.id, text: "four", sync: false })
        yield* o.awaitIdle

        const log = (yield* eventsOf(solo.session_id)).filter((e) => e.event === "turn.start" || e.event === "turn.complete" || e.event === "provider.error")
        expect(log.filter((e) => e.event === "turn.start").length).toBeGreaterThanOrEqual(3)
        // Strict alternation start, end, start, end … and each end closes the turn just started.
        let open: string | null = null
        for (const e of log) {
          const turn = (e.data as { turn_id: string }).turn_id
          if (e.event === "turn.start") {
            expect(open, `turn ${turn} started while ${open} was running`).toBeNull()
            open = turn
          } else {
            expect(turn).toBe(open)
            open = null
          }
        }
        expect(open).toBeNull()
        expect([Option.getOrThrow(t1).error, Option.getOrThrow(t2).error]).toEqual([null, null])
      }).pipe(Effect.provide(stack({ home, scripts })))
    }))
  it.scopedLive("an agent asking for a slot while another's acquire suspends it resumes from its saved blob", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      // Each agent answers with its script step: a resume from a record whose blob was not saved
      // yet would start the script again (a repeated step).
      const scripts: Scripts = { "*": (i) => ({ text: `${i.agent}-${i.turn}` }) }
      // The first suspension's record is slow to save (a busy disk): the agent it suspends asks
      // for a slot again meanwhile, and another slot can be freed for it at once.
      let slowed = false
      const base = storage(home)
      const slowStore = Layer.effect(
        SessionStore,
        Effect.map(SessionStore, (store) => ({
          ...store,
          save: (rec: Session) => {
            if (rec.state !== "suspended" || slowed) return store.save(rec)
            slowed = true
            return Effect.zipRight(Effect.sleep(Duration.millis(300)), store.save(rec))
          }
        }))
      ).pipe(Layer.provide(base))
      const layer = Orchestration.layer.pipe(
        Layer.provideMerge(Layer.mergeAll(ScriptedProvider.layer({ scripts }), MultiplexerConfig.layer(2), base, slowStore))
      )
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const [a, b, c] = yield* Effect.forEach(["a", "b", "c"], (name) => o.createRoot({ name, instructions: name, provider: "scripted" }))
        const reply = (x: Option.Option<{ readonly response: string }>) => Option.getOrThrow(x).response
        // Both slots live and idle, a the least recently used.
        expect(reply(yield* o.runTurn(a!.id, "one"))).toBe("a-0")
        expect(reply(yield* o.runTurn(b!.id, "one"))).toBe("b-0")
        // c's acquire suspends a; a asks for a slot while that suspension is under way (b is idle).
        const [cTurn, aTurn] = yield* Effect.all([o.runTurn(c!.id, "one"), o.runTurn(a!.id, "two")], { concurrency: "unbounded" })
        expect([reply(cTurn), reply(aTurn)]).toEqual(["c-0", "a-1"])
        const log = names(yield* eventsOf(a!.session_id))
        expect(log).not.toContain("provider.error")
        expect(log.indexOf("suspend.result")).toBeGreaterThan(-1)
        expect(log.indexOf("suspend.result")).toBeLessThan(log.indexOf("session.restored"))
      }).pipe(Effect.provide(layer))
    }))

  it.scopedLive("a record still `created` with a blob (recovery wrote it after a crash) is resumed from it, not started afresh", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      const scripts: Scripts = { "*": (i) => ({ text: `${i.agent}-${i.turn}` }) }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const store = yield* SessionStore
        const a = yield* o.createRoot({ name: "a", instructions: "A", provider: "scripted" })
        // What recovery leaves when a crash came before the open's background `active` save
        // landed: the record still `created`, with the blob recoverState computed from the log.
        const rec = yield* store.load(a.session_id)
        expect(rec.state).toBe("created")
        const blob = new TextEncoder().encode(JSON.stringify({ v: 1, agent: "a", key: "(recovered)", turn: 1 }))
        yield* store.save(new SessionClass({ ...rec, provider_state: blob }))
        expect(Option.getOrThrow(yield* o.runTurn(a.id, "again")).response).toBe("a-1")
        expect(names(yield* eventsOf(a.session_id))).toContain("session.restored")
      }).pipe(Effect.provide(stack({ home, scripts })))
    }))

  it.scopedLive("stopTurn returns once the stopped turn's hooks are done (a workspace delete follows it at once)", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      const scripts: Scripts = { w: { steps: [{ text: "never", delay_ms: 600_000 }] } }
      const recorded = yield* Ref.make<ReadonlyArray<string>>([])
      // A slow hook, like the workspace diff's git add/commit on a big tree.
      const hooks = Layer.succeed(TurnHooks, {
        afterTurn: (_agent, o) => Effect.sleep(Duration.millis(400)).pipe(Effect.zipRight(Ref.update(recorded, (r) => [...r, o.error?.message ?? "ok"])))
      })
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const w = yield* o.createRoot({ name: "w", instructions: "W", provider: "scripted" })
        yield* o.send({ agent: w.id, text: "hang", sync: false })
        yield* Effect.gen(function*() {
          while (!names(yield* eventsOf(w.session_id)).includes("turn.start")) yield* Effect.sleep(Duration.millis(10))
        })
        yield* o.stopTurn(w.id, "its workspace is being deleted")
        expect(yield* Ref.get(recorded)).toEqual(["its workspace is being deleted"])
        expect(names(yield* eventsOf(w.session_id))).toContain("provider.error")
      }).pipe(Effect.provide(stack({ home, scripts }).pipe(Layer.provide(hooks))))
    }))
})
