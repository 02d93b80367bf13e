// Per-message sync-request timeouts (seed 000 §7: `timeout` metadata, seconds): send_message's
// `timeout_seconds`, `message.timed_out` in the sender's log, the notice that wakes the sender,
// late replies, invalid arguments, and re-arming after a restart. In-process orchestrator over
// the scripted provider and the file EventLog, on the TestClock.
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Clock, Effect, Layer, TestClock } from "effect"
import * as Orchestration from "../../src/agent/Orchestrator.js"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { Recovery } from "../../src/recovery/Recovery.js"
import { ToolHandler } from "../../src/agent/ToolHandler.js"
import type { SessionId } from "../../src/domain/ids.js"
import { Durable } from "../../src/storage/Durable.js"
import type { ScriptInput, Scripts } from "../../src/provider/scripted/Script.js"
import * as ScriptedProvider from "../../src/provider/scripted/ScriptedProvider.js"
import { MultiplexerConfig } from "../../src/session/Multiplexer.js"
import { tmpDir } from "../support/tmpDir.js"
import { dataOf, eventsOf, stack } from "./orchestration.support.js"
import { storageOver } from "./recovery.support.js"

const HOUR = 3_600_000
/**
 * w's turn in the first test: well past the 10 s timeout, and short, because TestClock.adjust
 * wakes every periodic timer of the daemon's services (log idle close, feed keep-alive) on the way.
 */
const MINUTE = 60_000

/** boss spawns w on its first turn and otherwise says "ok"; w takes `wDelayMs` (TestClock) per turn. */
const scriptsWith = (wDelayMs: number): Scripts => ({
  boss: (i: ScriptInput) =>
    i.turn === 0 ? { tools: [{ tool: "spawn_agent", args: { name: "w", instructions: "work" } }], text: "spawned" } : { text: "ok" },
  w: () => wDelayMs > 0 ? { delay_ms: wDelayMs, text: "slow answer" } : { text: "fast answer" }
})

/** Poll (real time) until `check` holds: work in flight (fibers, file I/O) is not driven by the TestClock. */
const eventually = <R>(what: string, check: Effect.Effect<boolean, never, R>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 4000; i++) {
      if (yield* check) return
      yield* Effect.promise(() => new Promise<void>((r) => setTimeout(r, 5)))
    }
    return yield* Effect.dieMessage(`never: ${what}`)
  })

const sleeps = Effect.map(TestClock.sleeps(), Chunk.toReadonlyArray)

/**
 * Until the TestClock has sleeps registered at every one of `at`: a fiber forked just before may
 * not have reached its `sleep` yet, and an adjust before that would not wake it.
 */
const sleepsRegistered = (at: ReadonlyArray<number>) =>
  eventually(`sleeps at ${at.join(", ")}`, Effect.map(sleeps, (ss) => at.every((t) => ss.includes(t))))

/** Until `session` has logged `n` ended turns. */
const turnsEnded = (session: SessionId, n: number) =>
  eventually(`${n} turns ended`, Effect.map(eventsOf(session).pipe(Effect.orDie), (l) => dataOf(l, "turn.complete").length >= n))

const promptsOf = (session: SessionId) => Effect.map(eventsOf(session), (log) => dataOf(log, "turn.start").map((t) => t.prompt))

/** boss (root) with child w, both idle. */
const setup = Effect.gen(function*() {
  const o = yield* Orchestrator
  const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "scripted" })
  yield* o.send({ agent: boss.id, text: "go", sync: false })
  yield* o.awaitIdle
  const w = yield* o.findByName("w", boss.id)
  const tools = (yield* ToolHandler).forAgent(boss.id)
  return { o, boss, w, tools }
})

const messageIdOf = (r: { readonly is_error: boolean; readonly result: unknown }) => {
  expect(r.is_error).toBe(false)
  return (r.result as { message_id: string }).message_id
}

describe("sync request timeouts (scripted provider, file EventLog, TestClock)", () => {
  it.scoped("no reply in time: message.timed_out in the sender's log, a notice wakes it, it no longer waits; the late reply still arrives", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      yield* Effect.gen(function*() {
        const { o, boss, w, tools } = yield* setup
        const t0 = yield* Clock.currentTimeMillis
        const sent = yield* tools.invoke("send_message", { recipient: "w", text: "q?", sync: true, timeout_seconds: 10 })
        expect(sent.result).toMatchObject({ status: "sent", waiting_for_reply: true })
        const id = messageIdOf(sent)
        // The request carries its timeout (seconds) in the envelope's typed field.
        const enq = dataOf(yield* eventsOf(w.session_id), "message.enqueued").find((m) => m.id === id)!
        expect(enq.timeout_s).toBe(10)
        expect((yield* o.inspect(boss.id)).waiting_for_replies).toBe(1)
        // w's turn (a minute long) and the 10 s timer are both waiting on the clock.
        yield* sleepsRegistered([t0 + 10_000, t0 + MINUTE])

        const ended = dataOf(yield* eventsOf(boss.session_id), "turn.complete").length
        yield* TestClock.adjust("10 seconds")
        yield* turnsEnded(boss.session_id, ended + 1)
        const blog = yield* eventsOf(boss.session_id)
        expect(dataOf(blog, "message.timed_out")).toEqual([{ message_id: id, recipient: w.id, recipient_name: "w", timeout_s: 10 }])
        const notice = dataOf(blog, "message.enqueued").find((m) => m.reply_to === id)!
        expect(notice).toMatchObject({ sender: "SYSTEM", kind: "response", recipient: boss.id })
        expect(notice.timed_out).toBe(true)
        // Durable first: the event precedes the notice in the log.
        const iTimedOut = blog.findIndex((e) => e.event === "message.timed_out")
        const iNotice = blog.findIndex((e) => e.event === "message.enqueued" && e.data.id === notice.id)
        expect(iTimedOut).toBeGreaterThanOrEqual(0)
        expect(iNotice).toBeGreaterThan(iTimedOut)
        const prompts = yield* promptsOf(boss.session_id)
        expect(prompts.at(-1)).toBe(
          `Notice: no reply from w to message ${id} within 10 s. You are no longer waiting for it; a late reply would still arrive as a message.`
        )
        const inspected = yield* o.inspect(boss.id)
        expect(inspected.waiting_for_replies).toBe(0)
        expect(inspected.state).not.toBe("waiting")
        // w is still on it: no reply yet.
        expect(dataOf(yield* eventsOf(w.session_id), "turn.complete")).toHaveLength(0)

        // w's turn ends: its final text is the (late) reply, delivered as an ordinary message.
        yield* TestClock.adjust("1 minute")
        yield* turnsEnded(boss.session_id, ended + 2)
        yield* o.awaitIdle
        const blog2 = yield* eventsOf(boss.session_id)
        const replies = dataOf(blog2, "message.enqueued").filter((m) => m.reply_to === id)
        expect(replies).toHaveLength(2)
        expect(replies[1]).toMatchObject({ sender: w.id, kind: "response", payload: "slow answer" })
        expect(replies[1]!.late).toBe(true)
        expect((yield* promptsOf(boss.session_id)).at(-1)).toBe(
          `Late reply from w (to message ${id}, after it timed out): slow answer`
        )
        expect(dataOf(blog2, "message.timed_out")).toHaveLength(1)
      }).pipe(Effect.provide(stack({ home, scripts: scriptsWith(MINUTE) })))
    }))

  it.scoped("a reply before the deadline: no timeout, the timer is cancelled, nothing happens past the deadline", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      yield* Effect.gen(function*() {
        const { o, boss, tools } = yield* setup
        const t0 = yield* Clock.currentTimeMillis
        const id = messageIdOf(yield* tools.invoke("send_message", { recipient: "w", text: "q?", timeout_seconds: 10 }))
        yield* o.awaitIdle
        const prompts = yield* promptsOf(boss.session_id)
        expect(prompts.at(-1)).toBe(`Reply from w (to message ${id}): fast answer`)
        // Past the deadline: nothing happens (the TestClock keeps an interrupted sleep listed, so
        // the cancelled timer is seen by its effect, not by the clock's list).
        yield* sleepsRegistered([t0 + 10_000])
        yield* TestClock.adjust("1 minute")
        yield* Effect.promise(() => new Promise<void>((r) => setTimeout(r, 50)))
        yield* o.awaitIdle
        const blog = yield* eventsOf(boss.session_id)
        expect(dataOf(blog, "message.timed_out")).toHaveLength(0)
        expect(dataOf(blog, "message.enqueued").filter((m) => m.reply_to === id)).toHaveLength(1)
        expect(yield* promptsOf(boss.session_id)).toEqual(prompts)
        expect((yield* o.inspect(boss.id)).state).toBe("idle")
      }).pipe(Effect.provide(stack({ home, scripts: scriptsWith(0) })))
    }))

  it.scoped("invalid timeout_seconds: a JSON tool error, nothing enqueued", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      yield* Effect.gen(function*() {
        const { o, boss, w, tools } = yield* setup
        const before = (yield* eventsOf(w.session_id)).length
        const cases: ReadonlyArray<[Record<string, unknown>, string | null]> = [
          [{ timeout_seconds: 0 }, "positive"],
          [{ timeout_seconds: -3 }, "positive"],
          [{ timeout_seconds: Number.POSITIVE_INFINITY }, "positive"],
          [{ timeout_seconds: 5, sync: false }, "sync=true"],
          [{ timeout_seconds: 5, reply_to: "00000000-0000-4000-8000-000000000000" }, "reply_to"],
          [{ timeout_seconds: "5" }, null]
        ]
        for (const [extra, words] of cases) {
          const r = yield* tools.invoke("send_message", { recipient: "w", text: "q?", ...extra })
          expect(r.is_error).toBe(true)
          const err = (r.result as { error: { type: string; field?: string; message: string } }).error
          expect(err.type).toBe("invalid_arguments")
          if (words !== null) {
            expect(err.field).toBe("timeout_seconds")
            expect(err.message).toContain(words)
          } else {
            expect(err.message).toContain("timeout_seconds")
          }
        }
        // To USER (root only): never a request, so no timeout either.
        const toUser = yield* tools.invoke("send_message", { recipient: "USER", text: "hi", timeout_seconds: 5 })
        expect(toUser.result).toMatchObject({ error: { type: "invalid_arguments", field: "timeout_seconds" } })
        yield* o.awaitIdle
        const wlog = yield* eventsOf(w.session_id)
        expect(wlog.length).toBe(before)
        expect(dataOf(yield* eventsOf(boss.session_id), "message.enqueued").filter((m) => m.recipient === "USER")).toHaveLength(0)
        expect((yield* o.inspect(boss.id)).waiting_for_replies).toBe(0)
      }).pipe(Effect.provide(stack({ home, scripts: scriptsWith(0) })))
    }))

  it.scoped("after a restart: a pending timed request is re-armed with its remaining time; an expired one times out at start", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      // Envelope timestamps are wall-clock: start the TestClock there so deadlines line up.
      yield* TestClock.setTime(Date.now())
      const scripts = scriptsWith(HOUR)
      const life = Recovery.Default.pipe(
        Layer.provideMerge(Orchestration.layer),
        Layer.provideMerge(Layer.mergeAll(
          ScriptedProvider.layer({ scripts }),
          MultiplexerConfig.layer(4),
          storageOver(home, Durable.layer)
        ))
      )
      // Life 1: two requests to w (busy for an hour): 30 s and 5 s. Then the daemon stops.
      const { long, short } = yield* Effect.gen(function*() {
        const { tools } = yield* setup
        const long = messageIdOf(yield* tools.invoke("send_message", { recipient: "w", text: "long", timeout_seconds: 30 }))
        const short = messageIdOf(yield* tools.invoke("send_message", { recipient: "w", text: "short", timeout_seconds: 5 }))
        return { long, short }
      }).pipe(Effect.provide(life))
      // 10 s pass while it is down: the 5 s request is past its deadline, the 30 s one is not.
      yield* TestClock.adjust("10 seconds")

      // Life 2: recovery.
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const recovery = yield* Recovery
        yield* recovery.run()
        const boss = yield* o.findByName("boss")
        const timedOut = () => Effect.map(eventsOf(boss.session_id), (l) => dataOf(l, "message.timed_out").map((d) => d.message_id))
        const ended = dataOf(yield* eventsOf(boss.session_id), "turn.complete").length
        // The expired one times out at start; its notice wakes boss.
        yield* eventually("the expired request timed out", Effect.map(timedOut().pipe(Effect.orDie), (ids) => ids.length > 0))
        yield* turnsEnded(boss.session_id, ended + 1)
        expect(yield* timedOut()).toEqual([short])
        expect((yield* promptsOf(boss.session_id)).at(-1)).toContain(`no reply from w to message ${short} within 5 s`)
        const inspected = yield* o.inspect(boss.id)
        expect(inspected.waiting_for_replies).toBe(1)
        // The other one still waits, with its remaining time (≈20 s), not a fresh 30 s.
        const now = yield* Clock.currentTimeMillis
        yield* eventually("the 30 s request re-armed", Effect.map(sleeps, (ss) => ss.some((t) => t > now + 15_000 && t < now + 25_000)))
        expect(yield* timedOut()).toEqual([short])
        yield* TestClock.adjust("25 seconds")
        yield* turnsEnded(boss.session_id, ended + 2)
        expect(yield* timedOut()).toEqual([short, long])
        expect((yield* o.inspect(boss.id)).waiting_for_replies).toBe(0)
      }).pipe(Effect.provide(life))

      // Life 3: both are answered (timed out) in the logs: not pending, nothing times out again.
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        yield* (yield* Recovery).run()
        const boss = yield* o.findByName("boss")
        expect((yield* o.inspect(boss.id)).waiting_for_replies).toBe(0)
        yield* TestClock.adjust("1 minute")
        yield* Effect.promise(() => new Promise<void>((r) => setTimeout(r, 50)))
        const log = yield* eventsOf(boss.session_id)
        expect(dataOf(log, "message.timed_out").map((d) => d.message_id)).toEqual([short, long])
      }).pipe(Effect.provide(life))
    }))
})
