// Crash injection for EventLog appends: crash at every I/O sub-step of a sequence of appends
// (and at random steps of random sequences), then reopen the same directory with the real
// layer and check the oracle: every acknowledged entry present exactly once and in order, the
// log a valid JSONL prefix (only the one in-flight entry may follow), `.tmp` leftovers ignored.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import fc from "fast-check"
import * as fs from "node:fs"
import { join } from "node:path"
import { makePaths, SubstratPaths } from "../../src/config/Paths.js"
import type { SessionId } from "../../src/domain/ids.js"
import type { Durable } from "../../src/storage/Durable.js"
import { makeCrashing } from "../../src/storage/DurableCrash.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { fuzzParams, fuzzProfile } from "../support/fuzz.js"
import { ev, fileLayers, promptOf, readAll, sid } from "../support/logs.js"
import { withTmp } from "../support/tmp.js"

type Op =
  | { readonly _tag: "append"; readonly session: number; readonly tag: string }
  | { readonly _tag: "batch"; readonly session: number; readonly tags: ReadonlyArray<string> }
  | { readonly _tag: "close"; readonly session: number }

interface Outcome {
  readonly acked: Map<number, Array<string>>
  /** The append or batch in flight at the crash: after recovery all of its entries or none follow the acknowledged ones. */
  readonly inflight: { readonly session: number; readonly tags: ReadonlyArray<string> } | undefined
  readonly crashed: boolean
  readonly steps: number
}

/** The file layer over `durable`, its journal checkpointed every `checkpoint` bytes (undefined: the default). */
const layers = (home: string, durable: Layer.Layer<Durable>, checkpoint: number | undefined) =>
  checkpoint === undefined
    ? fileLayers(home, durable)
    : EventLog.layerFileWith({ idleCloseMs: 2000, journalCheckpointBytes: checkpoint }).pipe(
      Layer.provideMerge(Layer.merge(durable, SubstratPaths.layer(home)))
    )

/** Run `ops` against the file layer over a crashing Durable; stop at the first failure. */
const runWithCrash = async (
  home: string,
  ops: ReadonlyArray<Op>,
  crashAt: number | undefined,
  torn: number,
  powerLoss = false,
  checkpoint?: number
) => {
  const crashing = makeCrashing({ crashAt, tornFraction: torn, powerLoss })
  const acked = new Map<number, Array<string>>()
  let inflight: Outcome["inflight"]
  await Effect.runPromise(
    Effect.gen(function*() {
      const log = yield* EventLog
      for (const op of ops) {
        if (op._tag === "close") {
          yield* log.close(sid(op.session))
          continue
        }
        const tags = op._tag === "append" ? [op.tag] : op.tags
        inflight = { session: op.session, tags }
        const r = yield* Effect.either(
          op._tag === "append" ? Effect.asVoid(log.append(sid(op.session), ev(op.tag))) : Effect.asVoid(log.appendAll(sid(op.session), tags.map(ev)))
        )
        if (r._tag === "Left") return
        inflight = undefined
        acked.set(op.session, [...(acked.get(op.session) ?? []), ...tags])
      }
    }).pipe(Effect.provide(layers(home, crashing.layer, checkpoint)))
  )
  return { acked, inflight, crashed: crashing.control.crashed(), steps: crashing.control.stepCount() } satisfies Outcome
}

/** Reopen with the real layer and check the oracle for every session touched. */
const checkRecovered = async (home: string, sessions: ReadonlyArray<number>, out: Outcome) => {
  const paths = makePaths(home)
  // A stray .tmp in a session dir must not matter.
  for (const s of sessions) {
    if (fs.existsSync(paths.sessionDir(sid(s)))) fs.writeFileSync(`${paths.eventsFile(sid(s))}.tmp`, "{{torn")
  }
  const got = await Effect.runPromise(
    Effect.forEach(sessions, (s) => readAll(sid(s)).pipe(Effect.map((es) => [s, es] as const))).pipe(
      Effect.provide(fileLayers(home))
    )
  )
  for (const [s, entries] of got) {
    const tags = entries.map(promptOf)
    const acked = out.acked.get(s) ?? []
    expect(tags.slice(0, acked.length), `session ${s}: acknowledged prefix`).toEqual(acked)
    const extra = tags.slice(acked.length)
    if (out.inflight?.session === s) {
      // All or nothing: the in-flight append's (or batch's) entries, every one of them, or none.
      expect([[], out.inflight.tags], `session ${s}: ${extra}`).toContainEqual(extra)
    } else {
      expect(extra, `session ${s}: nothing beyond the acknowledged entries`).toEqual([])
    }
    for (const e of entries) expect(e.session_id).toBe(sid(s) as SessionId)
    // After repair, the file itself is a valid JSONL: every line complete.
    const file = paths.eventsFile(sid(s))
    if (fs.existsSync(file)) {
      const text = fs.readFileSync(file, "utf8")
      expect(text === "" || text.endsWith("\n")).toBe(true)
      expect(text.split("\n").filter((l) => l.length > 0).length).toBe(entries.length)
      // No pending file (appends go through the journal), and the journal was applied and emptied.
      expect(fs.existsSync(paths.pendingFile(sid(s)))).toBe(false)
      expect(fs.existsSync(paths.eventJournal) ? fs.statSync(paths.eventJournal).size : 0).toBe(0)
    }
  }
  // The repaired log takes new appends.
  const s0 = sessions[0]!
  const after = await Effect.runPromise(
    Effect.gen(function*() {
      const log = yield* EventLog
      yield* log.append(sid(s0), ev("after-recovery"))
      return (yield* readAll(sid(s0))).map(promptOf)
    }).pipe(Effect.provide(fileLayers(home)))
  )
  expect(after[after.length - 1]).toBe("after-recovery")
  expect(after.filter((t) => t === "after-recovery").length).toBe(1)
}

const scenario: ReadonlyArray<Op> = [
  { _tag: "append", session: 1, tag: "a1" },
  { _tag: "append", session: 1, tag: "a2" },
  { _tag: "append", session: 2, tag: "b1" },
  { _tag: "append", session: 1, tag: "a3" },
  { _tag: "batch", session: 2, tags: ["bb1", "bb2", "bb3"] },
  { _tag: "close", session: 1 },
  { _tag: "batch", session: 1, tags: ["ab1", "ab2"] },
  { _tag: "append", session: 1, tag: "a4" },
  { _tag: "append", session: 2, tag: "b2" },
  { _tag: "batch", session: 2, tags: ["bc1", "bc2"] }
]

describe("EventLog crash injection", () => {
  // Each scenario twice: with the default checkpoint size (no checkpoint before the layer's close)
  // and with a journal checkpointed every ~3 records (the checkpoint's log fsyncs and the journal's
  // truncate are crash points too).
  for (const checkpoint of [undefined, 700]) {
    it(`crashes at every sub-step of 6 appends and 3 batches (+ a close/reopen), torn and clean writes, process crash and power loss (checkpoint ${checkpoint ?? "default"})`, async () => {
      // Count the steps of the scenario once (no crash), then crash at each of them.
      const probe = await withTmp((dir) => runWithCrash(join(dir, "home"), scenario, undefined, 0.5, false, checkpoint))
      expect(probe.crashed).toBe(false)
      const n = probe.steps
      // Per append at least the journal write, its fsync and the log write.
      expect(n).toBeGreaterThan(9 * 3)
      let exercised = 0
      for (const [powerLoss, torn] of [[false, 0.5], [false, 0], [true, 0.5], [true, 0]] as const) {
        for (let k = 1; k <= n; k++) {
          await withTmp(async (dir) => {
            const home = join(dir, "home")
            const out = await runWithCrash(home, scenario, k, torn, powerLoss, checkpoint)
            expect(out.crashed).toBe(true)
            await checkRecovered(home, [1, 2], out)
            exercised++
          })
        }
      }
      console.log(`EventLog crash points exercised: ${exercised} (${n} sub-steps x torn/clean writes x process crash/power loss)`)
      expect(exercised).toBe(4 * n)
    }, 300_000) // every crash point four times over; slow on a loaded machine
  }

  it(`property: random append/close sequences crashed at a random step (${fuzzProfile.name} profile)`, async () => {
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      { weight: 5, arbitrary: fc.record({ _tag: fc.constant("append" as const), session: fc.integer({ min: 1, max: 3 }), tag: fc.string({ maxLength: 40 }) }) },
      {
        weight: 2,
        arbitrary: fc.record({
          _tag: fc.constant("batch" as const),
          session: fc.integer({ min: 1, max: 3 }),
          tags: fc.array(fc.string({ maxLength: 40 }), { minLength: 0, maxLength: 4 })
        })
      },
      { weight: 1, arbitrary: fc.record({ _tag: fc.constant("close" as const), session: fc.integer({ min: 1, max: 3 }) }) }
    )
    let runs = 0
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb, { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 1, max: 90 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.boolean(),
        fc.option(fc.integer({ min: 200, max: 2000 }), { nil: undefined }),
        async (ops, crashAt, torn, powerLoss, checkpoint) => {
          runs++
          await withTmp(async (dir) => {
            const home = join(dir, "home")
            const out = await runWithCrash(home, ops, crashAt, torn, powerLoss, checkpoint)
            await checkRecovered(home, [1, 2, 3], out)
          })
        }
      ),
      fuzzParams(40)
    )
    console.log(`EventLog crash property: ${runs} runs (${fuzzProfile.name})`)
  }, 300_000)
})
