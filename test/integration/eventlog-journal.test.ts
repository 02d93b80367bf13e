// EventLog file layer: the home's group-commit journal (`events.journal`) and its replay at the
// layer's start. Each case puts a state a crash or a power loss can leave on disk and reopens:
// a torn journal tail (every cut of it), a crash between the journal's fsync and the log write,
// a power loss that took every log write not yet checkpointed (and one that zeroed a page in the
// middle), foreign bytes at a record's offset, a removed log, and a log write that failed in the
// process while its journal record was durable.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { makePaths, SubstratPaths } from "../../src/config/Paths.js"
import { DurableError } from "../../src/domain/errors.js"
import { Durable, makeDurable, nodePrimitives, nodePrimitivesOrdered } from "../../src/storage/Durable.js"
import { makeCrashing } from "../../src/storage/DurableCrash.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { ev, fileLayers, logFsyncUnless, promptOf, readAll, sid } from "../support/logs.js"
import { tmpDir } from "../support/tmpDir.js"

const S1 = sid(1)
const S2 = sid(2)

/**
 * The real Durable, except that (once `frozen`) every fsync of a session log fails: the layer's
 * checkpoints (at close) cannot run, so the journal keeps every record and the logs are not
 * fsync'd — what a power loss would take back is what the log writes since wrote. `failWrite`
 * fails one log write (ENOSPC) whose bytes contain it, once.
 */
const noCheckpointWith = (failWrite?: string) => {
  let armed = failWrite
  let frozen = false
  const layer = Layer.succeed(
    Durable,
    makeDurable({
      ...nodePrimitives,
      fsync: logFsyncUnless(() => frozen),
      write: (fd, path, bytes) => {
        if (armed !== undefined && path.endsWith("events.jsonl") && Buffer.from(bytes).toString("utf8").includes(armed)) {
          armed = undefined
          return Effect.fail(new DurableError({ op: "write", path, fault: "disk_full", message: "ENOSPC (test)" }))
        }
        return nodePrimitives.write(fd, path, bytes)
      }
    })
  )
  return { layer, freeze: Effect.sync(() => (frozen = true)) }
}
const noCheckpoint = () => {
  const n = noCheckpointWith()
  return Layer.effectDiscard(n.freeze).pipe(Layer.provideMerge(n.layer))
}

/** a (S1), b (S2), the batch c1 c2 (S1), d (S2): four journal records. */
const writeFour = Effect.gen(function*() {
  const log = yield* EventLog
  yield* log.append(S1, ev("a"))
  yield* log.append(S2, ev("b"))
  yield* log.appendAll(S1, [ev("c1"), ev("c2")])
  yield* log.append(S2, ev("d"))
})
const records: ReadonlyArray<readonly [1 | 2, ReadonlyArray<string>]> = [[1, ["a"]], [2, ["b"]], [1, ["c1", "c2"]], [2, ["d"]]]

/** Where each record of a journal ends (read by hand: u32le body length, then CRC, then the body). */
const recordEnds = (journal: Buffer): Array<number> => {
  const ends: Array<number> = []
  for (let at = 0; at + 8 <= journal.length;) {
    at += 8 + journal.readUInt32LE(at)
    ends.push(at)
  }
  return ends
}

/** Reopen `home` with the real layer: each session's prompts, and the journal's size after. */
const reopen = (home: string) =>
  Effect.gen(function*() {
    const s1 = (yield* readAll(S1)).map(promptOf)
    const s2 = (yield* readAll(S2)).map(promptOf)
    return { s1, s2 }
  }).pipe(
    Effect.provide(fileLayers(home)),
    Effect.map((r) => ({ ...r, journal: fs.statSync(makePaths(home).eventJournal).size }))
  )

/** A home after `writeFour` with no checkpoint: the journal holding the four records, the logs whole. */
const written = (dir: string) =>
  Effect.gen(function*() {
    const home = join(dir, "w")
    yield* writeFour.pipe(Effect.provide(fileLayers(home, noCheckpoint())))
    const paths = makePaths(home)
    return {
      home,
      journal: fs.readFileSync(paths.eventJournal),
      log1: fs.readFileSync(paths.eventsFile(S1)),
      log2: fs.readFileSync(paths.eventsFile(S2))
    }
  })

/** A copy of `from` with its journal replaced by `journal` and the logs by `logs` (a power loss's leftovers). */
const variant = (from: string, to: string, journal: Uint8Array, logs: readonly [Uint8Array, Uint8Array]) => {
  fs.cpSync(from, to, { recursive: true })
  const paths = makePaths(to)
  fs.writeFileSync(paths.eventJournal, journal)
  fs.writeFileSync(paths.eventsFile(S1), logs[0])
  fs.writeFileSync(paths.eventsFile(S2), logs[1])
  return to
}

const empty = new Uint8Array(0)

describe("EventLog journal: replay at the layer's start", () => {
  it.scoped("the journal holds every record until a checkpoint; a power loss of every log write is replayed whole", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const w = yield* written(dir)
      expect(recordEnds(w.journal)).toHaveLength(4)
      expect(recordEnds(w.journal).at(-1)).toBe(w.journal.length)
      const home = variant(w.home, join(dir, "lost"), w.journal, [empty, empty])
      const got = yield* reopen(home)
      expect(got).toEqual({ s1: ["a", "c1", "c2"], s2: ["b", "d"], journal: 0 })
      // The logs are byte for byte what the appends wrote.
      expect(Buffer.compare(fs.readFileSync(makePaths(home).eventsFile(S1)), w.log1)).toBe(0)
      expect(Buffer.compare(fs.readFileSync(makePaths(home).eventsFile(S2)), w.log2)).toBe(0)
      // A new append continues each log where it ends.
      yield* Effect.flatMap(EventLog, (l) => l.append(S1, ev("e"))).pipe(Effect.provide(fileLayers(home)))
      expect((yield* reopen(home)).s1).toEqual(["a", "c1", "c2", "e"])
    }))

  it.scoped("every cut of the journal (a torn tail), the logs lost: exactly the whole records are replayed", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const w = yield* written(dir)
      const ends = recordEnds(w.journal)
      const cutsOf = new Set<number>([0, w.journal.length])
      for (const e of [0, ...ends]) for (const d of [-1, 0, 1, 4, 8, 9]) cutsOf.add(Math.min(Math.max(e + d, 0), w.journal.length))
      for (let i = 0; i < w.journal.length; i += 7) cutsOf.add(i)
      let n = 0
      for (const k of [...cutsOf].sort((x, y) => x - y)) {
        const home = variant(w.home, join(dir, `k${n++}`), w.journal.subarray(0, k), [empty, empty])
        const whole = ends.filter((e) => e <= k).length
        const want = { s1: [] as Array<string>, s2: [] as Array<string> }
        for (const [s, tags] of records.slice(0, whole)) (s === 1 ? want.s1 : want.s2).push(...tags)
        expect(yield* reopen(home), `cut ${k} of ${w.journal.length}`).toEqual({ ...want, journal: 0 })
      }
    }), 120_000)

  it.scoped("a record that fails its CRC ends the journal; a zero-filled tail is no record", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const w = yield* written(dir)
      const ends = recordEnds(w.journal)
      const flipped = Buffer.from(w.journal)
      flipped[ends[0]! + 30] = flipped[ends[0]! + 30]! ^ 0x01 // inside record 2's body
      expect(yield* reopen(variant(w.home, join(dir, "crc"), flipped, [empty, empty]))).toEqual({ s1: ["a"], s2: [], journal: 0 })
      const zeros = Buffer.concat([w.journal, Buffer.alloc(4096)])
      expect(yield* reopen(variant(w.home, join(dir, "zeros"), zeros, [empty, empty]))).toEqual({
        s1: ["a", "c1", "c2"],
        s2: ["b", "d"],
        journal: 0
      })
    }))

  it.scoped("a log page zeroed by a power loss (a later one kept) is written again; the other log's bytes untouched", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const w = yield* written(dir)
      const damaged = Buffer.from(w.log1)
      damaged.fill(0, 10, damaged.length - 20)
      const home = variant(w.home, join(dir, "z"), w.journal, [damaged, w.log2])
      expect(yield* reopen(home)).toEqual({ s1: ["a", "c1", "c2"], s2: ["b", "d"], journal: 0 })
      expect(Buffer.compare(fs.readFileSync(makePaths(home).eventsFile(S1)), w.log1)).toBe(0)
    }))

  it.scoped("foreign bytes at a record's offset are never overwritten; a removed log is not created again", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const w = yield* written(dir)
      const firstLine = w.log1.indexOf(0x0a) + 1
      const batch = w.log1.subarray(firstLine)
      // The same length as the batch c1 c2, other lines: not this journal's.
      const other = Buffer.from(batch.toString("utf8").replaceAll("\"c1\"", "\"x1\"").replaceAll("\"c2\"", "\"x2\""))
      expect(other.length).toBe(batch.length)
      const log1 = Buffer.concat([w.log1.subarray(0, firstLine), other])
      const home = variant(w.home, join(dir, "f"), w.journal, [log1, w.log2])
      fs.rmSync(makePaths(home).sessionDir(S2), { recursive: true })
      const got = yield* reopen(home)
      expect(got.s1).toEqual(["a", "x1", "x2"])
      expect(Buffer.compare(fs.readFileSync(makePaths(home).eventsFile(S1)), log1)).toBe(0)
      // Reading S2 created nothing on disk: the journal's records for it were not applied.
      expect(got.s2).toEqual([])
      expect(fs.existsSync(makePaths(home).eventsFile(S2))).toBe(false)
    }))

  it.scoped("a crash between the journal's fsync and the log write: the log lacks the entry, the replay adds it", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const run = (home: string, crashAt: number | undefined) => {
        const c = makeCrashing({ crashAt, tornFraction: 0 }, nodePrimitivesOrdered)
        return Effect.map(Effect.either(writeFour.pipe(Effect.provide(fileLayers(home, c.layer)))), (r) => ({ r, c }))
      }
      const probe = yield* run(join(dir, "probe"), undefined)
      const steps = probe.c.control.steps()
      // The log write of `d`: the last write to S2's log before the layer's close.
      const dWrite = [...steps].reverse().find((s) => s.kind === "write" && s.path === makePaths(join(dir, "probe")).eventsFile(S2))!
      expect(steps[dWrite.n - 2]).toMatchObject({ kind: "fsync", path: makePaths(join(dir, "probe")).eventJournal })
      const home = join(dir, "crash")
      const crashed = yield* run(home, dWrite.n)
      expect(crashed.r._tag).toBe("Left")
      expect(fs.readFileSync(makePaths(home).eventsFile(S2), "utf8")).not.toContain("\"d\"")
      expect(fs.readFileSync(makePaths(home).eventJournal, "utf8")).toContain("\"d\"")
      expect(yield* reopen(home)).toEqual({ s1: ["a", "c1", "c2"], s2: ["b", "d"], journal: 0 })
    }))

  it.scoped("a power loss (crash layer) before the checkpoint takes every log write back; the replay restores them", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      for (const torn of [0, 0.5]) {
        // The close-time checkpoint's first step: everything before it ran, no log was fsync'd.
        const probe = makeCrashing({}, nodePrimitivesOrdered)
        const probeHome = join(dir, `p${torn}`)
        let before = 0
        yield* Effect.zipRight(writeFour, Effect.sync(() => (before = probe.control.stepCount()))).pipe(
          Effect.provide(fileLayers(probeHome, probe.layer))
        )
        const home = join(dir, `pl${torn}`)
        const c = makeCrashing({ crashAt: before + 1, powerLoss: true, tornFraction: torn }, nodePrimitivesOrdered)
        yield* writeFour.pipe(Effect.provide(fileLayers(home, c.layer)))
        expect(c.control.crashed()).toBe(true)
        const paths = makePaths(home)
        // What the power loss left: the logs' names (their directory was fsync'd), not all their lines.
        const lost = fs.readFileSync(paths.eventsFile(S1), "utf8")
        expect(lost.includes("\"c2\"") && lost.endsWith("\n")).toBe(false)
        expect(fs.statSync(paths.eventJournal).size).toBeGreaterThan(0)
        expect(yield* reopen(home), `torn ${torn}`).toEqual({ s1: ["a", "c1", "c2"], s2: ["b", "d"], journal: 0 })
      }
    }))

  it.scoped("a log write that failed in the process (its journal record durable) is applied by the next use, so a power loss after cannot drop a later entry", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const home = join(dir, "w")
      const paths = makePaths(home)
      const faulty = noCheckpointWith("\"x\"")
      let durableSize = 0
      const inProcess = yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append(S1, ev("a"))
        const failed = yield* Effect.either(log.append(S1, ev("x")))
        expect(failed._tag).toBe("Left")
        // The next use repairs the log first: x goes where a replay would put it (and is fsync'd).
        yield* log.append(S1, ev("b"))
        const lines = fs.readFileSync(paths.eventsFile(S1), "utf8").split("\n")
        durableSize = Buffer.byteLength(lines[0]! + "\n" + lines[1]! + "\n")
        yield* faulty.freeze
        return (yield* readAll(S1)).map(promptOf)
      }).pipe(Effect.provide(fileLayers(home, faulty.layer)))
      // The failed append's bytes are durable in the journal: the log takes them as a replay would,
      // so what the process reads is what a restart after any crash reads.
      expect(inProcess).toEqual(["a", "x", "b"])
      // A power loss: `b`'s log write (never fsync'd) is lost. The replay gives the same log back.
      fs.truncateSync(paths.eventsFile(S1), durableSize)
      expect((yield* reopen(home)).s1).toEqual(["a", "x", "b"])
    }))

  it.scopedLive("a session holding a failed log write's record is not dropped by the idle sweep: its next use still applies it", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir()
      const home = join(dir, "w")
      const faulty = noCheckpointWith("\"x\"")
      const layers = EventLog.layerFileWith({ idleCloseMs: 20 }).pipe(
        Layer.provideMerge(Layer.merge(faulty.layer, SubstratPaths.layer(home)))
      )
      const got = yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append(S1, ev("a"))
        expect((yield* Effect.either(log.append(S1, ev("x"))))._tag).toBe("Left")
        // Several idle sweeps go by before the session is used again.
        yield* Effect.sleep("150 millis")
        yield* log.append(S1, ev("b"))
        return (yield* readAll(S1)).map(promptOf)
      }).pipe(Effect.provide(layers))
      expect(got).toEqual(["a", "x", "b"])
    }))
})
