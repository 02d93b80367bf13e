// EventLog (file layer): a session's log file is closed once the session has been idle for
// `idleCloseMs`, so idle sessions hold no file descriptor; the next append reopens it and the log
// reads back whole, in order, with no repair needed (nothing torn, no pending file left).
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Context, Effect, Layer, Stream, TestClock } from "effect"
import * as fs from "node:fs"
import { SubstratPaths } from "../../src/config/Paths.js"
import { makeEvent } from "../../src/domain/events.js"
import { MessageId, SessionId } from "../../src/domain/ids.js"
import { Durable } from "../../src/storage/Durable.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { tmpDir } from "../support/tmpDir.js"

/** This process's open fds whose target lies under `dir`. */
const fdsUnder = (dir: string): number => {
  let n = 0
  for (const fd of fs.readdirSync("/proc/self/fd")) {
    try {
      if (fs.readlinkSync(`/proc/self/fd/${fd}`).startsWith(dir)) n++
    } catch {} // the fd of the readdir itself, closed meanwhile
  }
  return n
}

/** `fdsUnder(dir)` once it equals `want` (closes run on the libuv pool: polled, bounded), else its last value. */
const fdsSettled = (dir: string, want: number) =>
  Effect.promise(async () => {
    let n = fdsUnder(dir)
    for (let i = 0; i < 500 && n !== want; i++) {
      await new Promise((r) => setTimeout(r, 10))
      n = fdsUnder(dir)
    }
    return n
  })

const session = (n: number) => SessionId.make(`00000000-0000-4000-8000-${String(n).padStart(12, "0")}`)
const read = (n: number) => makeEvent("user.read", { message_ids: [MessageId.make(`20000000-0000-4000-8000-${String(n).padStart(12, "0")}`)] })

describe("EventLog idle close", () => {
  it.scoped("idle sessions hold no fd; an append reopens the log and every line reads back in order", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      const layer = EventLog.layerFileWith({ idleCloseMs: 1000 }).pipe(
        Layer.provide(Layer.mergeAll(Durable.layer, SubstratPaths.layer(home)))
      )
      const log = yield* Layer.build(layer).pipe(Effect.map(Context.get(EventLog)))
      const ids = [1, 2, 3].map(session)
      for (const id of ids) yield* log.append(id, read(1))
      // Three logs and the home's journal.
      expect(fdsUnder(home)).toBe(4)

      // Half the delay: still open. The sweep after the whole delay closes them all, the journal's too.
      yield* TestClock.adjust("600 millis")
      expect(fdsUnder(home)).toBe(4)
      yield* TestClock.adjust("1500 millis")
      expect(yield* fdsSettled(home, 0)).toBe(0)

      // One session is busy again: only it holds a fd, until it is idle too.
      yield* log.append(ids[0]!, read(2))
      yield* log.append(ids[0]!, read(3))
      expect(fdsUnder(home)).toBe(2)
      yield* TestClock.adjust("2 seconds")
      expect(yield* fdsSettled(home, 0)).toBe(0)
      yield* log.append(ids[1]!, read(2))

      const lines = (id: SessionId) =>
        Effect.map(Stream.runCollect(log.read(id)), (c) => Chunk.toReadonlyArray(c).map((e) => e.event === "user.read" ? Number(e.data.message_ids[0]!.slice(-12)) : e.event))
      expect(yield* lines(ids[0]!)).toEqual([1, 2, 3])
      expect(yield* lines(ids[1]!)).toEqual([1, 2])
      expect(yield* lines(ids[2]!)).toEqual([1])
      // Nothing to repair: no torn tail, no pending file (appends go through the journal).
      for (const id of ids) expect(yield* log.repair(id)).toEqual({ session_id: id, truncatedBytes: 0, pendingReplayed: false, pendingDiscarded: false })
      expect(fs.readdirSync(`${home}/agents/${ids[0]}`).sort()).toEqual(["events.jsonl"])
      yield* TestClock.adjust("2 seconds")
      expect(yield* fdsSettled(home, 0)).toBe(0)
    }))
})
