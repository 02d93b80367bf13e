// EventLog file layer: the pending file of a batch as homes written before the journal have it (a
// header line, then the batch's lines) and its repair, all or nothing — such homes must still
// recover exactly as before. A real batch is written (through the journal) and its pending file
// built as the pending-file WAL wrote it; then every cut of the pending write and every cut of the
// log write is put on disk by hand and the log reopened: the log holds the whole batch once (the
// pending write was whole) or none of it (the pending write was torn, even at a line boundary),
// and `repairedView` (the read-only repair transcript regeneration uses) predicts the same bytes.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { makePaths } from "../../src/config/Paths.js"
import { EventLog, repairedView } from "../../src/storage/EventLog.js"
import { ev, fileLayers, promptOf, readAll, sid } from "../support/logs.js"
import { tmpDir } from "../support/tmpDir.js"

const S = sid(1)

/** The pending file the pending-file WAL wrote for a batch of `lines` lines (`body`) at `offset`. */
const legacyPending = (offset: number, lines: number, body: Uint8Array): Buffer =>
  Buffer.concat([Buffer.from(`${JSON.stringify({ batch: { offset, lines, bytes: body.length } })}\n`), body])

/** The log bytes of `a` then the batch `b1 b2 b3`, as the layer writes them, and the batch's legacy pending file. */
const writeBatch = (home: string) =>
  Effect.gen(function*() {
    const paths = makePaths(home)
    yield* Effect.gen(function*() {
      const log = yield* EventLog
      yield* log.append(S, ev("a"))
      yield* log.appendAll(S, [ev("b1"), ev("b2-é"), ev("b3")])
    }).pipe(Effect.provide(fileLayers(home)))
    const log = fs.readFileSync(paths.eventsFile(S))
    const before = log.subarray(0, log.indexOf(0x0a) + 1)
    const body = log.subarray(before.length)
    return { before, body, pending: legacyPending(before.length, 3, body) }
  })

/** Cuts worth trying of `n` bytes: every byte near a line end, the ends, and every 5th. */
const cuts = (bytes: Uint8Array): Array<number> => {
  const out = new Set<number>([0, bytes.length])
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] === 0x0a) for (const d of [-1, 0, 1, 2]) out.add(Math.min(Math.max(i + d, 0), bytes.length))
    if (i % 5 === 0) out.add(i)
  }
  return [...out].sort((x, y) => x - y)
}

/**
 * Put `log` and `pending` (undefined: none) on disk for S under a fresh home; reopen; what it reads
 * and reports. `repairedView` (transcript regeneration's read-only repair) must predict the bytes.
 */
const reopen = (dir: string, n: number, log: Uint8Array, pending: Uint8Array | undefined) =>
  Effect.gen(function*() {
    const home = join(dir, `h${n}`)
    const paths = makePaths(home)
    fs.mkdirSync(paths.sessionDir(S), { recursive: true })
    fs.writeFileSync(paths.eventsFile(S), log)
    if (pending !== undefined) fs.writeFileSync(paths.pendingFile(S), pending)
    const report = yield* Effect.flatMap(EventLog, (l) => l.repair(S)).pipe(Effect.provide(fileLayers(home)))
    const tags = (yield* readAll(S).pipe(Effect.provide(fileLayers(home)))).map(promptOf)
    expect(fs.existsSync(paths.pendingFile(S)) ? fs.statSync(paths.pendingFile(S)).size : 0).toBe(0)
    const file = fs.readFileSync(paths.eventsFile(S))
    expect(Buffer.compare(Buffer.from(repairedView(log, pending)), file), "repairedView = repair").toBe(0)
    return { report, tags, file }
  })

const whole = ["a", "b1", "b2-é", "b3"]

describe("EventLog appendAll: a legacy batch pending file and its repair", () => {
  it.scoped("a batch reaches the log as its lines, in order, after the entry before it; no pending file is written", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const { before, body } = yield* writeBatch(join(dir, "w"))
      expect(JSON.parse(before.toString("utf8")).data.prompt).toBe("a")
      expect(body.toString("utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l).data.prompt)).toEqual(["b1", "b2-é", "b3"])
      expect(fs.existsSync(makePaths(join(dir, "w")).pendingFile(S))).toBe(false)
    }))

  it.scoped("every cut of the pending write (the log write not begun): the whole batch replayed only when the pending file is whole", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const { before, body, pending } = yield* writeBatch(join(dir, "w"))
      let n = 0
      for (const k of cuts(pending)) {
        const got = yield* reopen(dir, n++, before, pending.subarray(0, k))
        if (k === pending.length) {
          expect(got.tags, `cut ${k}`).toEqual(whole)
          expect(got.report.pendingReplayed).toBe(true)
          expect(Buffer.compare(got.file, Buffer.concat([before, body]))).toBe(0)
        } else {
          expect(got.tags, `cut ${k} of ${pending.length}`).toEqual(["a"])
          expect(got.report.pendingReplayed).toBe(false)
          expect(Buffer.compare(got.file, before)).toBe(0)
        }
      }
    }), 120_000)

  it.scoped("every cut of the log write (the pending file whole): the log ends with the whole batch, once", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const { before, body, pending } = yield* writeBatch(join(dir, "w"))
      let n = 0
      for (const j of cuts(body)) {
        const got = yield* reopen(dir, n++, Buffer.concat([before, body.subarray(0, j)]), pending)
        expect(got.tags, `cut ${j} of ${body.length}`).toEqual(whole)
        expect(Buffer.compare(got.file, Buffer.concat([before, body])), `cut ${j}`).toBe(0)
        expect(got.report.pendingReplayed, `cut ${j}`).toBe(j < body.length)
      }
    }), 120_000)

  it.scoped("a power loss that kept a later page of the batch's log write and zeroed an earlier one: the batch is written again whole", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const { before, body, pending } = yield* writeBatch(join(dir, "w"))
      let n = 0
      for (const [from, to] of [[0, 20], [10, body.length - 1], [body.indexOf(0x0a) + 1, body.length - 5]] as const) {
        const damaged = Buffer.from(body)
        damaged.fill(0, from, to)
        const got = yield* reopen(dir, n++, Buffer.concat([before, damaged]), pending)
        expect(got.tags, `zeros ${from}..${to}`).toEqual(whole)
        expect(Buffer.compare(got.file, Buffer.concat([before, body])), `zeros ${from}..${to}`).toBe(0)
      }
    }))

  it.scoped("a batch pending file whose offset does not hold its lines is discarded; the log is left as it is", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const { before, pending } = yield* writeBatch(join(dir, "w"))
      const other = Buffer.from(before.toString("utf8").replace("\"a\"", "\"x\""))
      const got = yield* reopen(dir, 0, Buffer.concat([other, other]), pending)
      expect(got.report.pendingDiscarded).toBe(true)
      expect(got.tags).toEqual(["x", "x"])
      // A log shorter than the batch's offset: the batch is not this log's either.
      const got2 = yield* reopen(dir, 1, new Uint8Array(0), pending)
      expect(got2.report.pendingDiscarded).toBe(true)
      expect(got2.tags).toEqual([])
    }))

  it.scoped("after a repaired batch, appends and batches continue the log (the next batch's offset is right)", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const { before, body, pending } = yield* writeBatch(join(dir, "w"))
      const home = join(dir, "h")
      const paths = makePaths(home)
      fs.mkdirSync(paths.sessionDir(S), { recursive: true })
      fs.writeFileSync(paths.eventsFile(S), Buffer.concat([before, body.subarray(0, 10)]))
      fs.writeFileSync(paths.pendingFile(S), pending)
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.appendAll(S, [ev("c1"), ev("c2")])
        yield* log.append(S, ev("d"))
      }).pipe(Effect.provide(fileLayers(home)))
      const log = fs.readFileSync(paths.eventsFile(S))
      const text = log.toString("utf8")
      expect(text.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l).data.prompt)).toEqual([...whole, "c1", "c2", "d"])
      expect(fs.existsSync(paths.pendingFile(S))).toBe(false)
      yield* Effect.gen(function*() {
        const l = yield* EventLog
        yield* l.close(S)
        yield* l.appendAll(S, [ev("e1"), ev("e2")])
      }).pipe(Effect.provide(fileLayers(home)))
      // After a close and reopen, e's batch starts where the log ended.
      const after = fs.readFileSync(paths.eventsFile(S))
      expect(Buffer.compare(after.subarray(0, log.length), log)).toBe(0)
      expect((yield* readAll(S).pipe(Effect.provide(fileLayers(home)))).map(promptOf)).toEqual([...whole, "c1", "c2", "d", "e1", "e2"])
    }))
})
