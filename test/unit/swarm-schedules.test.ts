// Cron triggers (docs/swarm.md, "Schedules"): the tick loop on the TestClock — missed ticks fire
// once, then every tick on time, never one twice — the cron parser's errors in words, and
// `swarm log`'s reading of a node agent's per-turn history.
import { describe, expect, it } from "@effect/vitest"
import { Cron, Effect, Either, Fiber, TestClock } from "effect"
import { parseCron, runTicks } from "../../src/swarm/Schedules.js"
import { turnsOf } from "../../src/swarm/SwarmLog.js"
import type { LogEntry } from "../../src/domain/events.js"
import { SessionId, TurnId, WorkspaceId } from "../../src/domain/ids.js"

const at = (iso: string) => new Date(iso).getTime()

describe("swarm schedules: the tick loop (TestClock)", () => {
  it.effect("ticks missed while down fire once at start; then each tick on time, none twice", () =>
    Effect.gen(function*() {
      const cron = Either.getOrThrow(Cron.parse("*/10 * * * *", "UTC"))
      yield* TestClock.setTime(at("2026-01-01T00:35:00.000Z"))
      const fired: Array<string> = []
      // Last fired at 00:00: 00:10, 00:20 and 00:30 were missed.
      const fiber = yield* Effect.fork(runTicks(cron, at("2026-01-01T00:00:00.000Z"), (t) => Effect.sync(() => fired.push(t.toISOString()))))
      yield* TestClock.adjust("1 millis")
      expect(fired).toEqual(["2026-01-01T00:10:00.000Z"])
      yield* TestClock.adjust("4 minutes")
      expect(fired).toHaveLength(1)
      yield* TestClock.adjust("1 minutes")
      expect(fired).toEqual(["2026-01-01T00:10:00.000Z", "2026-01-01T00:40:00.000Z"])
      yield* TestClock.adjust("20 minutes")
      expect(fired).toEqual(["2026-01-01T00:10:00.000Z", "2026-01-01T00:40:00.000Z", "2026-01-01T00:50:00.000Z", "2026-01-01T01:00:00.000Z"])
      yield* Fiber.interrupt(fiber)
    }))

  it.effect("nothing missed: the first tick is the next one after `last`", () =>
    Effect.gen(function*() {
      const cron = Either.getOrThrow(Cron.parse("0 * * * * *", "UTC")) // every minute, seconds field given
      yield* TestClock.setTime(at("2026-01-01T00:00:30.000Z"))
      const fired: Array<string> = []
      const fiber = yield* Effect.fork(runTicks(cron, at("2026-01-01T00:00:20.000Z"), (t) => Effect.sync(() => fired.push(t.toISOString()))))
      yield* TestClock.adjust("29 seconds")
      expect(fired).toEqual([])
      yield* TestClock.adjust("1 seconds")
      expect(fired).toEqual(["2026-01-01T00:01:00.000Z"])
      yield* Fiber.interrupt(fiber)
    }))

  it("a bad expression is refused in words", () => {
    const bad = parseCron("every five minutes")
    expect(Either.isLeft(bad)).toBe(true)
    if (Either.isLeft(bad)) {
      expect(bad.left._tag).toBe("InvalidInputError")
      expect(bad.left.message).toContain(`"every five minutes" is not a cron expression`)
      expect(bad.left.message).toContain("*/5 * * * *")
    }
    expect(Either.isRight(parseCron("*/5 * * * *"))).toBe(true)
    expect(Either.isRight(parseCron("*/2 * * * * *"))).toBe(true)
    expect(Either.isLeft(parseCron("61 * * * *"))).toBe(true)
  })
})

describe("swarm log: a node agent's turns from its log", () => {
  it("turns in order with their end and the workspace.diff each recorded", () => {
    const session = SessionId.make("10000000-0000-4000-8000-000000000001")
    const t1 = TurnId.make("20000000-0000-4000-8000-000000000001")
    const t2 = TurnId.make("20000000-0000-4000-8000-000000000002")
    const t3 = TurnId.make("20000000-0000-4000-8000-000000000003")
    const ws = WorkspaceId.make("30000000-0000-4000-8000-000000000001")
    const entries = [
      { event: "turn.start", data: { turn_id: t1, prompt: "SYSTEM: your code changed" }, ts: "2026-01-01T00:00:01Z", session_id: session },
      { event: "workspace.diff", data: { workspace_id: ws, turn_id: t1, commit: "abc123", paths: [{ path: "src/a.ts", change: "modified" }] }, ts: "2026-01-01T00:00:02Z", session_id: session },
      { event: "turn.complete", data: { turn_id: t1, response: "fixed" }, ts: "2026-01-01T00:00:03Z", session_id: session },
      { event: "turn.start", data: { turn_id: t2, prompt: "Message from USER (message 40000000-0000-4000-8000-000000000001, reply expected):\nhi" }, ts: "2026-01-01T00:01:00Z", session_id: session },
      { event: "provider.error", data: { turn_id: t2, reason: "exit", message: "boom" }, ts: "2026-01-01T00:01:01Z", session_id: session },
      { event: "turn.start", data: { turn_id: t3, prompt: "SYSTEM: tick" }, ts: "2026-01-01T00:02:00Z", session_id: session }
    ] as unknown as ReadonlyArray<LogEntry>
    const turns = turnsOf(entries)
    expect(turns.map((t) => [t.turn_id, t.outcome, t.commit, t.changes.map((c) => `${c.change} ${c.path}`), t.ended])).toEqual([
      [t1, "complete", "abc123", ["modified src/a.ts"], "2026-01-01T00:00:03Z"],
      [t2, "failed", null, [], "2026-01-01T00:01:01Z"],
      [t3, "running", null, [], null]
    ])
    expect(turns[0]!.response).toBe("fixed")
    expect(turns[1]!.response).toBe("[error] exit: boom")
    // swarm log shows who said what; --raw the prompt as the agent read it.
    expect(turns[1]!.prompt).toBe("USER: hi")
    expect(turns[1]!.raw_prompt).toBe("Message from USER (message 40000000-0000-4000-8000-000000000001, reply expected): hi")
  })
})
