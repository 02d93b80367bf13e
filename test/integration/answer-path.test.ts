// The answer path of a USER request to an echo root (send → turn → answer), crashed at every I/O
// sub-step: the log steps that belong together are one durable step, so no crash leaves one on
// disk without the other — the request's `message.delivered` with the turn's `turn.start`, the
// answer's `message.enqueued` with its `message.delivered` and, as USER waits for it, its
// `user.read`. The log is read back through the
// real file layer (its repair applies or discards the step in flight), never through recovery,
// which would append more. A turn that fails before it starts still marks its message delivered.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Fiber, ManagedRuntime } from "effect"
import { ProviderError } from "../../src/domain/errors.js"
import { ProviderRegistry } from "../../src/provider/ProviderRegistry.js"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import type { LogEntry } from "../../src/domain/events.js"
import { newMessageId, type SessionId } from "../../src/domain/ids.js"
import type { Scripts } from "../../src/provider/scripted/Script.js"
import { makeCrashing } from "../../src/storage/DurableCrash.js"
import { fileLayers, readAll } from "../support/logs.js"
import { withTmp } from "../support/tmp.js"
import { lifeLayer, recoverLife, syncPrimitives, trackedScripted } from "./recovery.support.js"

const scripts: Scripts = { echo: { steps: [], after: "echo" } }

/**
 * Create the echo root and send it one request, its answer awaited (as `agent send --wait` does);
 * wait until its turn is done. Stops at the first failure (the crash).
 */
const run = async (home: string, crashAt: number | undefined) => {
  const crashing = makeCrashing({ crashAt }, syncPrimitives)
  const life = ManagedRuntime.make(lifeLayer(home, crashing.layer, trackedScripted(scripts, { messages: [] }, () => true)))
  let session: SessionId | null = null
  try {
    // (A crash while the layers are built, e.g. making `agents/`, fails this: nothing was run.)
    const o = await life.runPromise(Orchestrator).catch(() => null)
    if (o === null) return { session, steps: crashing.control.stepCount(), crashed: crashing.control.crashed() }
    await life.runPromise(Effect.either(Effect.gen(function*() {
      const root = yield* o.createRoot({ name: "echo", instructions: "echo", provider: "scripted" })
      session = root.session_id
      // The waiter is there before the request is sent (it knows the request's id).
      const id = newMessageId()
      const waiter = yield* Effect.fork(o.awaitAnswer(id))
      yield* Effect.yieldNow()
      yield* o.send({ agent: root.id, text: "ping", id })
      // The turn and its answer (or their failure after the crash) are done.
      yield* o.awaitIdle
      yield* Fiber.interrupt(waiter)
    })).pipe(Effect.map(Either.isRight)))
  } finally {
    await life.dispose()
  }
  return { session, steps: crashing.control.stepCount(), crashed: crashing.control.crashed() }
}

const logOf = (home: string, session: SessionId): Promise<Array<LogEntry>> =>
  Effect.runPromise(readAll(session).pipe(Effect.provide(fileLayers(home, makeCrashing({}, syncPrimitives).layer))))

/** Pairs of entries that must be on disk together (each a description of what is missing). */
const unpaired = (entries: ReadonlyArray<LogEntry>): Array<string> => {
  const bad: Array<string> = []
  const delivered = new Set(entries.flatMap((e) => e.event === "message.delivered" ? [e.data.message_id] : []))
  const requests = entries.flatMap((e) => e.event === "message.enqueued" && e.data.kind === "request" ? [e.data.id] : [])
  const started = entries.filter((e) => e.event === "turn.start").length
  const taken = requests.filter((id) => delivered.has(id)).length
  if (taken !== started) bad.push(`${taken} request(s) marked delivered, ${started} turn.start(s)`)
  const read = new Set(entries.flatMap((e) => e.event === "user.read" ? e.data.message_ids : []))
  for (const e of entries) {
    if (e.event !== "message.enqueued" || e.data.recipient !== "USER") continue
    if (!delivered.has(e.data.id)) bad.push(`the answer ${e.data.id} is logged without its message.delivered`)
    if (!read.has(e.data.id)) bad.push(`the answer ${e.data.id} USER waited for is logged without its user.read`)
  }
  for (const id of read) if (!entries.some((e) => e.event === "message.enqueued" && e.data.id === id)) bad.push(`user.read of ${id} without it`)
  return bad
}

describe("the answer path: what belongs together is one durable step", () => {
  it("the uncrashed run answers, and its log has the answer enqueued and delivered", async () => {
    await withTmp(async (home) => {
      const r = await run(home, undefined)
      expect(r.crashed).toBe(false)
      const entries = await logOf(home, r.session!)
      const events = entries.map((e) => e.event)
      expect(events.filter((e) => e === "turn.complete")).toHaveLength(1)
      // The turn itself, on the monotonic clock: from turn.start's append to turn.complete's.
      const end = entries.find((e) => e.event === "turn.complete")
      const ms = end?.event === "turn.complete" ? end.data.duration_ms : undefined
      expect(typeof ms === "number" && Number.isFinite(ms) && ms >= 0, `duration_ms ${ms}`).toBe(true)
      const answer = entries.find((e) => e.event === "message.enqueued" && e.data.recipient === "USER")
      expect(answer?.event === "message.enqueued" && answer.data.payload).toBe("echo: USER: ping")
      expect(unpaired(entries)).toEqual([])
    })
  })

  it("a crash at any step leaves the turn's start and its message's delivery, the answer's enqueued, delivered and read, all on disk or none", { timeout: 120_000 }, async () => {
    const total = await withTmp(async (home) => (await run(home, undefined)).steps)
    const failures: Array<string> = []
    let answered = 0
    for (let n = 1; n <= total; n++) {
      await withTmp(async (home) => {
        const r = await run(home, n)
        if (!r.crashed) failures.push(`step ${n}: no crash happened`)
        if (r.session === null) return
        const entries = await logOf(home, r.session)
        if (entries.some((e) => e.event === "message.enqueued" && e.data.recipient === "USER")) answered++
        for (const b of unpaired(entries)) failures.push(`step ${n}: ${b}`)
      })
    }
    expect(failures).toEqual([])
    // Some crashes came after the answer was durable: the check above saw an answer on disk.
    expect(answered).toBeGreaterThan(0)
  })

  it("a turn whose provider does not start marks its message delivered with its error; a restart does not run it again", async () => {
    await withTmp(async (home) => {
      const broken = ProviderRegistry.layer({
        name: "broken",
        make: () => Effect.fail(new ProviderError({ provider: "broken", reason: "start", message: "cannot start" }))
      })
      const durable = makeCrashing({}, syncPrimitives).layer
      const life = ManagedRuntime.make(lifeLayer(home, durable, broken))
      const { request, session } = await life.runPromise(Effect.gen(function*() {
        const o = yield* Orchestrator
        const root = yield* o.createRoot({ name: "b", instructions: "b", provider: "broken" })
        const sent = yield* o.send({ agent: root.id, text: "ping" })
        yield* o.awaitIdle
        return { request: sent.message_id, session: root.session_id }
      })).finally(() => life.dispose())
      const names = (es: ReadonlyArray<LogEntry>) => es.map((e) => e.event === "message.delivered" ? `delivered ${e.data.message_id === request}` : e.event)
      const before = names(await logOf(home, session))
      expect(before).not.toContain("turn.start")
      // Its error follows the message's delivery (then USER's error answer, enqueued and delivered).
      expect(before.slice(before.indexOf("delivered true"), before.indexOf("delivered true") + 2)).toEqual(["delivered true", "provider.error"])
      // Consumed by a turn that ended (failed): recovery does not deliver it again.
      const again = await recoverLife(home, broken, { resume: false }, durable)
      await again.life.runPromise(Effect.flatMap(Orchestrator, (o) => o.awaitIdle))
      await again.life.dispose()
      const after = names(await logOf(home, session))
      expect(after.filter((e) => e === "provider.error")).toHaveLength(1)
    })
  })
})
