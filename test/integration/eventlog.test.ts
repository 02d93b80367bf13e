// EventLog file layer on real temp dirs (real fsync): its format, repair and lock. The contract
// shared with the Postgres layer (order, 64 concurrent sessions, restart) is storage-contract.test.ts.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Exit, Fiber, Layer, Schema, Scheduler, Stream } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { makePaths } from "../../src/config/Paths.js"
import { LogLine } from "../../src/domain/events.js"
import { Durable } from "../../src/storage/Durable.js"
import { makeDurable, nodePrimitives } from "../../src/storage/Durable.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { ev, fileLayers, promptOf, readAll, sid } from "../support/logs.js"
import { tmpDir } from "../support/tmpDir.js"

const S = sid(1)

/** Write a raw log line for `S` as the layer would. */
const line = (tag: string, ts = "2026-01-01T00:00:00.000Z") =>
  JSON.stringify({ ts, event: "turn.start", data: ev(tag).data, session_id: S }) + "\n"

/** A real Durable whose fsyncs wait for `gate`: an append holds its session lock while the gate is closed. */
const gatedDurable = Effect.map(Effect.makeLatch(true), (gate) => ({
  gate,
  gated: Layer.succeed(
    Durable,
    makeDurable({ ...nodePrimitives, fsync: (fd, path) => Effect.zipRight(gate.await, nodePrimitives.fsync(fd, path)) })
  )
}))

/** Let forked fibers run up to their next suspension. */
const settle = Effect.repeatN(Effect.yieldNow(), 20)

describe("EventLog file layer", () => {
  it.scoped("append then read: entries in order, ts and session_id injected, one JSON line each", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const paths = makePaths(home)
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        for (const t of ["a", "b", "c"]) {
          const e = yield* log.append(S, ev(t))
          expect(e.session_id).toBe(S)
          expect(new Date(e.ts).toISOString()).toBe(e.ts)
        }
        expect((yield* readAll(S)).map(promptOf)).toEqual(["a", "b", "c"])
      }).pipe(Effect.provide(fileLayers(home)))
      const text = fs.readFileSync(paths.eventsFile(S), "utf8")
      const lines = text.split("\n")
      expect(lines.pop()).toBe("")
      expect(lines.map((l) => Either.isRight(Schema.decodeEither(LogLine)(l)))).toEqual([true, true, true])
      for (const l of lines) {
        const o = JSON.parse(l)
        expect(Object.keys(o).sort()).toEqual(["data", "event", "session_id", "ts"])
        expect(o.session_id).toBe(S)
      }
      // Appends go through the home's journal: no pending file; the layer's close checkpointed the
      // journal (the log fsync'd), so it is empty.
      expect(fs.existsSync(paths.pendingFile(S))).toBe(false)
      expect(fs.readFileSync(paths.eventJournal, "utf8")).toBe("")
      expect(fs.statSync(paths.sessionDir(S)).mode & 0o777).toBe(0o700)
      expect(fs.statSync(home).mode & 0o777).toBe(0o700)
    }))

  it.scoped("reopen: a torn trailing line is cut, and reported", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const paths = makePaths(home)
      fs.mkdirSync(paths.sessionDir(S), { recursive: true })
      const torn = line("torn").slice(0, 40)
      fs.writeFileSync(paths.eventsFile(S), line("a") + line("b") + torn)
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        const report = yield* log.repair(S)
        expect(report).toEqual({ session_id: S, truncatedBytes: 40, pendingReplayed: false, pendingDiscarded: false })
        expect((yield* readAll(S)).map(promptOf)).toEqual(["a", "b"])
        yield* log.append(S, ev("c"))
        expect((yield* readAll(S)).map(promptOf)).toEqual(["a", "b", "c"])
      }).pipe(Effect.provide(fileLayers(home)))
    }))

  it.scoped("reopen: a pending entry is replayed after the torn tail is cut", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const paths = makePaths(home)
      fs.mkdirSync(paths.sessionDir(S), { recursive: true })
      fs.writeFileSync(paths.eventsFile(S), line("a") + line("b").slice(0, 17))
      fs.writeFileSync(paths.pendingFile(S), line("b"))
      yield* Effect.gen(function*() {
        const report = yield* Effect.flatMap(EventLog, (log) => log.repair(S))
        expect(report.pendingReplayed).toBe(true)
        expect(report.truncatedBytes).toBe(17)
        expect((yield* readAll(S)).map(promptOf)).toEqual(["a", "b"])
      }).pipe(Effect.provide(fileLayers(home)))
      expect(fs.existsSync(paths.pendingFile(S))).toBe(false)
      expect(fs.readFileSync(paths.eventsFile(S), "utf8")).toBe(line("a") + line("b"))
    }))

  it.scoped("reopen: tail dedup — a pending entry the log already ends with is not appended twice", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const paths = makePaths(home)
      fs.mkdirSync(paths.sessionDir(S), { recursive: true })
      fs.writeFileSync(paths.eventsFile(S), line("a") + line("b"))
      fs.writeFileSync(paths.pendingFile(S), line("b"))
      yield* Effect.gen(function*() {
        // read() repairs first, too
        expect((yield* readAll(S)).map(promptOf)).toEqual(["a", "b"])
      }).pipe(Effect.provide(fileLayers(home)))
      expect(fs.existsSync(paths.pendingFile(S))).toBe(false)
    }))

  it.scoped("reopen: a torn or undecodable pending file is discarded, never replayed", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const paths = makePaths(home)
      fs.mkdirSync(paths.sessionDir(S), { recursive: true })
      for (const bad of [line("x").slice(0, 30), "{\"not\":\"an entry\"}\n", line("x") + line("y"), "{\"batch\":{\"offset\":0"]) {
        fs.writeFileSync(paths.eventsFile(S), line("a"))
        fs.writeFileSync(paths.pendingFile(S), bad)
        const report = yield* Effect.flatMap(EventLog, (log) => log.repair(S)).pipe(Effect.provide(fileLayers(home)))
        expect(report.pendingDiscarded).toBe(true)
        expect(fs.readFileSync(paths.eventsFile(S), "utf8")).toBe(line("a"))
        expect(fs.existsSync(paths.pendingFile(S))).toBe(false)
      }
      // An empty pending file is the WAL's resting state: nothing discarded, nothing replayed.
      fs.writeFileSync(paths.pendingFile(S), "")
      const idle = yield* Effect.flatMap(EventLog, (log) => log.repair(S)).pipe(Effect.provide(fileLayers(home)))
      expect([idle.pendingDiscarded, idle.pendingReplayed]).toEqual([false, false])
      expect(fs.readFileSync(paths.eventsFile(S), "utf8")).toBe(line("a"))
    }))

  it.scoped("an undecodable line in the middle fails the read with file and line", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const paths = makePaths(home)
      fs.mkdirSync(paths.sessionDir(S), { recursive: true })
      fs.writeFileSync(paths.eventsFile(S), line("a") + "{\"ts\":1,\"garbage\":true}\n" + line("c"))
      const exit = yield* Effect.exit(readAll(S).pipe(Effect.provide(fileLayers(home))))
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit) && exit.cause._tag === "Fail" && exit.cause.error._tag === "EventLogError") {
        expect(exit.cause.error.reason).toBe("decode")
        expect(exit.cause.error.line).toBe(2)
        expect(exit.cause.error.file).toBe(paths.eventsFile(S))
      } else {
        expect.fail(`expected a typed failure, got ${String(exit)}`)
      }
      // not JSON at all, also in the middle
      fs.writeFileSync(paths.eventsFile(S), line("a") + line("b") + "}}}\n" + line("d"))
      const exit2 = yield* Effect.either(readAll(S).pipe(Effect.provide(fileLayers(home))))
      expect(Either.isLeft(exit2) && exit2.left._tag === "EventLogError" && exit2.left.line).toBe(3)
    }))

  it.scoped("*.tmp files in the session dir are ignored", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const paths = makePaths(home)
      fs.mkdirSync(paths.sessionDir(S), { recursive: true })
      fs.writeFileSync(`${paths.eventsFile(S)}.tmp`, "garbage{{{")
      fs.writeFileSync(`${paths.pendingFile(S)}.tmp`, line("zzz"))
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append(S, ev("a"))
        expect((yield* readAll(S)).map(promptOf)).toEqual(["a"])
      }).pipe(Effect.provide(fileLayers(home)))
    }))

  it.scoped("reads a log much larger than one read chunk (lines span chunk boundaries)", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const paths = makePaths(home)
      fs.mkdirSync(paths.sessionDir(S), { recursive: true })
      const n = 4000
      const lines: Array<string> = []
      for (let i = 0; i < n; i++) lines.push(line(`entry-${i}-${"é".repeat(i % 50)}`))
      fs.writeFileSync(paths.eventsFile(S), lines.join(""))
      expect(fs.statSync(paths.eventsFile(S)).size).toBeGreaterThan(2 * 256 * 1024)
      const got = yield* readAll(S).pipe(Effect.provide(fileLayers(home)))
      expect(got.length).toBe(n)
      got.forEach((e, i) => expect(promptOf(e)).toBe(`entry-${i}-${"é".repeat(i % 50)}`))
    }))

  it.scoped("close releases the handle; the next append reopens; remove deletes the log", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const paths = makePaths(home)
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append(S, ev("a"))
        yield* log.close(S)
        // Simulate an external torn tail while closed: the reopen repairs it.
        fs.appendFileSync(paths.eventsFile(S), "{\"partial")
        yield* log.append(S, ev("b"))
        expect((yield* readAll(S)).map(promptOf)).toEqual(["a", "b"])
        yield* log.remove(S)
        expect(fs.existsSync(paths.eventsFile(S))).toBe(false)
        expect(yield* readAll(S)).toEqual([])
        yield* log.append(S, ev("c"))
        expect((yield* readAll(S)).map(promptOf)).toEqual(["c"])
      }).pipe(Effect.provide(fileLayers(home)))
    }))

  it.scoped("the session lock: waiters queue in order, an interrupted waiter writes nothing and blocks nobody, the holder finishes", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const { gate, gated } = yield* gatedDurable
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append(S, ev("first")) // opens and repairs with the gate open
        yield* gate.close
        const holder = yield* Effect.fork(log.append(S, ev("holder")))
        yield* settle
        const waiters = yield* Effect.forEach(["w1", "w2", "w3", "w4", "w5"], (t) =>
          Effect.fork(log.append(S, ev(t))).pipe(Effect.tap(() => settle)))
        // Interrupt two waiters while they wait, and the holder in the middle of its WAL steps:
        // the holder's append is uninterruptible, so interrupting it waits for it to finish.
        yield* Fiber.interrupt(waiters[0]!)
        yield* Fiber.interrupt(waiters[3]!)
        const holderInterrupt = yield* Effect.fork(Fiber.interrupt(holder))
        yield* settle
        yield* gate.open
        yield* Fiber.join(holderInterrupt)
        for (const i of [1, 2, 4]) yield* Fiber.join(waiters[i]!)
        expect((yield* readAll(S)).map(promptOf)).toEqual(["first", "holder", "w2", "w3", "w5"])
        // Nothing is left holding the lock.
        yield* log.append(S, ev("after"))
        yield* log.close(S)
        expect((yield* readAll(S)).map(promptOf)).toEqual(["first", "holder", "w2", "w3", "w5", "after"])
      }).pipe(Effect.provide(fileLayers(home, gated)))
    }))

  it.scoped("the session lock: a waiter interrupted after it was woken passes the wake-up on", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const { gate, gated } = yield* gatedDurable
      // w1 resumes through a timer, so the test can interrupt it between its wake-up and its retry.
      const late = Scheduler.timer(0)
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append(S, ev("first"))
        yield* gate.close
        const holder = yield* Effect.fork(log.append(S, ev("holder")))
        yield* settle
        const w1 = yield* Effect.fork(Effect.withScheduler(log.append(S, ev("w1")), late))
        yield* settle
        const w2 = yield* Effect.fork(log.append(S, ev("w2")))
        yield* settle
        yield* gate.open
        yield* Fiber.join(holder) // its release woke w1, whose retry waits for the timer
        yield* Fiber.interrupt(w1)
        yield* Fiber.join(w2) // hangs if w1's wake-up was lost
        expect((yield* readAll(S)).map(promptOf)).toEqual(["first", "holder", "w2"])
      }).pipe(Effect.provide(fileLayers(home, gated)))
    }))

  it.scoped("the stream is lazy: reading after appends sees a consistent snapshot", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        for (let i = 0; i < 10; i++) yield* log.append(S, ev(`${i}`))
        const first3 = yield* Stream.runCollect(Stream.take(log.read(S), 3))
        expect([...first3].map(promptOf)).toEqual(["0", "1", "2"])
      }).pipe(Effect.provide(fileLayers(home)))
    }))
})
