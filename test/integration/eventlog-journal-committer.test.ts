// EventLog journal, the group committer (src/storage/internal/eventJournal.ts):
// - a journal write that failed half-way leaves a torn record in the journal; the committer cuts
//   the journal back to its last whole record before its next write. The journal's fd may be
//   closed (the idle sweep) between the failure and that next write: the reopened journal must
//   still be cut back, not continued after the torn bytes — a replay stops at the first record
//   that does not check, so everything written after them would be lost to a power loss;
// - a checkpoint someone waits for (`remove`) is answered once it has run, also while other
//   sessions keep the committer busy (its queue never empties under a steady load);
// - a checkpoint fsyncs the logs written since the last one a few at a time: it opens each by
//   path, and thousands of sessions may have written since (a descriptor each, at once, before);
// - a defect in a cycle (a Durable call that dies) answers what waited and leaves the committer
//   able to run again: before, `running` stayed set and every later append waited for ever.
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, TestClock } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { makePaths, SubstratPaths } from "../../src/config/Paths.js"
import { DurableError } from "../../src/domain/errors.js"
import { Durable, makeDurable, nodePrimitives } from "../../src/storage/Durable.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { decodeRecords } from "../../src/storage/internal/eventJournal.js"
import { ev, fileLayers, logFsyncUnless, promptOf, readAll, sid } from "../support/logs.js"
import { tmpDir } from "../support/tmpDir.js"

const S1 = sid(1)

/** Whether this process holds an fd on `path`. */
const holds = (path: string): boolean =>
  fs.readdirSync("/proc/self/fd").some((fd) => {
    try {
      return fs.readlinkSync(`/proc/self/fd/${fd}`) === path
    } catch {
      return false
    }
  })

describe("EventLog journal: the group committer", () => {
  it.scoped("is cut back before the next write, also when the journal's fd was closed as idle in between", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const home = join(dir, "h")
      const paths = makePaths(home)
      // The journal write of the record holding "boom" writes half of it, then fails (ENOSPC);
      // once `frozen`, log fsyncs fail, so the close-time checkpoint leaves the journal as it is.
      let frozen = false
      const durable = Layer.succeed(
        Durable,
        makeDurable({
          ...nodePrimitives,
          fsync: logFsyncUnless(() => frozen),
          write: (fd, path, bytes) =>
            path === paths.eventJournal && Buffer.from(bytes).includes("\"boom\"")
              ? Effect.zipRight(
                nodePrimitives.write(fd, path, bytes.subarray(0, bytes.length >> 1)),
                Effect.fail(new DurableError({ op: "write", path, fault: "disk_full", message: "ENOSPC (test)" }))
              )
              : nodePrimitives.write(fd, path, bytes)
        })
      )
      const layer = EventLog.layerFileWith({ idleCloseMs: 1000 }).pipe(
        Layer.provideMerge(Layer.merge(durable, SubstratPaths.layer(home)))
      )
      let logBefore = 0
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append(S1, ev("a"))
        expect((yield* Effect.either(log.append(S1, ev("boom"))))._tag).toBe("Left")
        // The idle sweep closes the journal's fd (nothing committed for idleCloseMs).
        yield* TestClock.adjust(Duration.seconds(5))
        while (holds(paths.eventJournal)) yield* Effect.promise(() => new Promise((r) => setTimeout(r, 5)))
        logBefore = fs.statSync(paths.eventsFile(S1)).size
        yield* log.append(S1, ev("b")) // acknowledged: durable in the journal
        frozen = true
      }).pipe(Effect.provide(layer))
      // The acknowledged `b` is a whole record of the journal (a replay reads it).
      const journal = fs.readFileSync(paths.eventJournal)
      const tags = decodeRecords(journal).records.map((r) => Buffer.from(r.bytes).toString("utf8"))
      expect(tags.some((t) => t.includes("\"b\""))).toBe(true)
      // A power loss takes back `b`'s log write (never fsync'd); the replay restores it.
      fs.truncateSync(paths.eventsFile(S1), logBefore)
      const after = yield* Effect.map(readAll(S1), (es) => es.map(promptOf)).pipe(Effect.provide(fileLayers(home)))
      expect(after).toEqual(["a", "b"])
    }))

  it.scopedLive("a removed log's checkpoint is answered while other sessions keep appending", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const home = join(dir, "h")
      let appends = 0
      let removedAfter = -1
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append(S1, ev("a"))
        // Four sessions appending without pause: some append is always queued behind the cycle in flight.
        const busy = yield* Effect.forEach([2, 3, 4, 5], (n) =>
          Effect.fork(Effect.forever(Effect.zipRight(log.append(sid(n), ev("x")), Effect.sync(() => appends++)))))
        while (appends < 20) yield* Effect.promise(() => new Promise((r) => setTimeout(r, 1)))
        const from = appends
        const remove = yield* Effect.fork(log.remove(S1))
        // Answered within a few cycles when it works; on the old committer never while the load lasts.
        while (remove.unsafePoll() === null && appends - from < 2000) yield* Effect.promise(() => new Promise((r) => setTimeout(r, 1)))
        if (remove.unsafePoll() !== null) removedAfter = appends - from
        yield* Effect.forEach(busy, Fiber.interrupt, { discard: true })
        yield* Fiber.join(remove)
      }).pipe(Effect.provide(fileLayers(home)))
      expect(removedAfter).toBeGreaterThanOrEqual(0)
      expect(fs.existsSync(makePaths(home).eventsFile(S1))).toBe(false)
    }), 120_000)

  it.scoped("a checkpoint holds a bounded number of logs open at once, however many were written", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const home = join(dir, "h")
      let open = 0
      let peak = 0
      const counting = Layer.succeed(
        Durable,
        makeDurable({
          ...nodePrimitives,
          open: (path, mode) =>
            mode === "readwrite" && path.endsWith("events.jsonl")
              ? Effect.tap(nodePrimitives.open(path, mode), () => Effect.sync(() => (peak = Math.max(peak, ++open))))
              : nodePrimitives.open(path, mode),
          close: (fd, path) => Effect.ensuring(nodePrimitives.close(fd, path), Effect.sync(() => (open = Math.max(0, open - 1))))
        })
      )
      const sessions = Array.from({ length: 300 }, (_, i) => sid(100 + i))
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* Effect.forEach(sessions, (s) => log.append(s, ev("a")), { concurrency: 50, discard: true })
        // Only the close-time checkpoint below opens logs read-write.
        expect(peak).toBe(0)
      }).pipe(Effect.provide(fileLayers(home, counting)))
      expect(fs.statSync(makePaths(home).eventJournal).size).toBe(0)
      expect(peak).toBeGreaterThan(0)
      expect(peak).toBeLessThanOrEqual(16)
    }), 120_000)

  it.scoped("a pump that dies (here: closing the idle journal's fd) leaves the committer able to run again", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const home = join(dir, "h")
      const paths = makePaths(home)
      // The first close of the journal's fd closes it, then dies: a defect outside the cycle's own
      // error handling. On the old committer `running` stayed set, so every later append waited for ever.
      let died = false
      const dying = Layer.succeed(
        Durable,
        makeDurable({
          ...nodePrimitives,
          close: (fd, path) =>
            !died && path === paths.eventJournal
              ? Effect.zipRight(nodePrimitives.close(fd, path), Effect.suspend(() => {
                died = true
                return Effect.die(new Error("test: close dies"))
              }))
              : nodePrimitives.close(fd, path)
        })
      )
      const layer = EventLog.layerFileWith({ idleCloseMs: 1000 }).pipe(
        Layer.provideMerge(Layer.merge(dying, SubstratPaths.layer(home)))
      )
      let answered = false
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append(S1, ev("a"))
        yield* TestClock.adjust(Duration.seconds(5))
        while (!died) yield* Effect.promise(() => new Promise((r) => setTimeout(r, 5)))
        const next = yield* Effect.fork(log.append(S1, ev("b")))
        // A hang detector, not a timing: a working committer answers in a few ms.
        for (let i = 0; i < 2000 && next.unsafePoll() === null; i++) yield* Effect.promise(() => new Promise((r) => setTimeout(r, 5)))
        answered = next.unsafePoll() !== null
        if (!answered) yield* Fiber.interrupt(next)
        else yield* Fiber.join(next)
      }).pipe(Effect.provide(layer))
      expect(answered).toBe(true)
      const after = yield* Effect.map(readAll(S1), (es) => es.map(promptOf)).pipe(Effect.provide(fileLayers(home)))
      expect(after).toEqual(["a", "b"])
    }), 60_000)
})
