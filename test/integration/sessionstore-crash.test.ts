// Crash injection for SessionStore saves/deletes: crash at every I/O sub-step, then recover
// with the real layer on the same directory: every record is a whole acknowledged version (or,
// for the one in-flight operation, the whole new version) — never torn; `.tmp` leftovers ignored.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import * as fs from "node:fs"
import { join } from "node:path"
import { makePaths } from "../../src/config/Paths.js"
import { makeSession, Session } from "../../src/domain/session.js"
import { makeCrashing } from "../../src/storage/DurableCrash.js"
import { SessionStore } from "../../src/storage/SessionStore.js"
import { fuzzParams, fuzzProfile } from "../support/fuzz.js"
import { sid, storeLayer } from "../support/logs.js"
import { withTmp } from "../support/tmp.js"

type Op =
  | { readonly _tag: "save"; readonly session: number; readonly version: number; readonly active: boolean }
  | { readonly _tag: "delete"; readonly session: number }

const record = (n: number, version: number, active: boolean) =>
  new Session({
    ...makeSession({ id: sid(n), provider_name: `p-v${version}`, now: "2026-01-01T00:00:00.000Z" }),
    state: active ? "active" : "suspended",
    suspended_at: active ? null : "2026-01-01T00:00:01.000Z",
    provider_state: new Uint8Array(Array.from({ length: 50 + version * 7 }, (_, i) => (i * version) & 0xff))
  })

/** The model: session → version saved (undefined = absent). */
type Model = Map<number, { version: number; active: boolean } | undefined>

const runWithCrash = async (home: string, ops: ReadonlyArray<Op>, crashAt: number | undefined, torn: number, powerLoss = false) => {
  const crashing = makeCrashing({ crashAt, tornFraction: torn, powerLoss })
  const acked: Model = new Map()
  let inflight: Op | undefined
  await Effect.runPromise(
    Effect.gen(function*() {
      const store = yield* SessionStore
      for (const op of ops) {
        inflight = op
        const r = yield* Effect.either(
          op._tag === "save" ? store.save(record(op.session, op.version, op.active)) : store.delete(sid(op.session))
        )
        if (r._tag === "Left") return
        inflight = undefined
        acked.set(op.session, op._tag === "save" ? { version: op.version, active: op.active } : undefined)
      }
    }).pipe(
      Effect.provide(storeLayer(home, crashing.layer)),
      Effect.catchAll(() => Effect.void) // the layer itself (mkdir) may be what crashed
    )
  )
  return { acked, inflight, crashed: crashing.control.crashed(), steps: crashing.control.stepCount() }
}

const sameRecord = (a: Session, b: Session) => JSON.stringify(a) === JSON.stringify(b) && a.provider_state.join() === b.provider_state.join()

const checkRecovered = async (home: string, out: Awaited<ReturnType<typeof runWithCrash>>) => {
  const paths = makePaths(home)
  // Stray temp files anywhere must be ignored.
  if (fs.existsSync(paths.agentsDir)) fs.writeFileSync(join(paths.agentsDir, `${sid(99)}.tmp`), "{")
  const recovered = await Effect.runPromise(Effect.flatMap(SessionStore, (s) => s.recover).pipe(Effect.provide(storeLayer(home))))
  const byId = new Map(recovered.map((s) => [s.id, s]))
  const sessions = new Set([...out.acked.keys(), ...(out.inflight ? [out.inflight.session] : [])])
  for (const n of sessions) {
    const got = byId.get(sid(n))
    const allowed: Array<Session | undefined> = []
    const acked = out.acked.get(n)
    allowed.push(acked ? record(n, acked.version, acked.active) : undefined)
    if (out.inflight?.session === n) {
      allowed.push(out.inflight._tag === "save" ? record(n, out.inflight.version, out.inflight.active) : undefined)
    }
    // recover() suspends ACTIVE ones: compare with that applied.
    const expectRecovered = (s: Session | undefined) =>
      s === undefined ? undefined : s.state === "active" ? { ...s, state: "suspended" as const } : s
    const ok = allowed.some((a) => {
      const e = expectRecovered(a)
      if (e === undefined || got === undefined) return e === got
      return got.state === e.state && got.provider_name === e.provider_name &&
        got.provider_state.join() === e.provider_state.join() && (a!.state !== "active" || got.suspended_at !== null)
    })
    expect(ok, `session ${n}: got ${got?.provider_name ?? "absent"}`).toBe(true)
  }
  expect(recovered.every((s) => s.state !== "active")).toBe(true)
  // Recovery persisted: a second scan reads the same records.
  const again = await Effect.runPromise(Effect.flatMap(SessionStore, (s) => s.scan).pipe(Effect.provide(storeLayer(home))))
  expect(again.length).toBe(recovered.length)
  again.forEach((s, i) => expect(sameRecord(s, recovered[i]!)).toBe(true))
}

const scenario: ReadonlyArray<Op> = [
  { _tag: "save", session: 1, version: 1, active: false },
  { _tag: "save", session: 1, version: 2, active: true },
  { _tag: "save", session: 2, version: 1, active: true },
  { _tag: "save", session: 1, version: 3, active: false },
  { _tag: "delete", session: 2 },
  { _tag: "save", session: 2, version: 4, active: true }
]

describe("SessionStore crash injection", () => {
  it("crashes at every sub-step of 5 saves and a delete (torn and clean writes, process crash and power loss)", async () => {
    const probe = await withTmp((dir) => runWithCrash(join(dir, "home"), scenario, undefined, 0.5))
    expect(probe.crashed).toBe(false)
    const n = probe.steps
    expect(n).toBeGreaterThan(5 * 5)
    let exercised = 0
    for (const [powerLoss, torn] of [[false, 0.5], [false, 0], [true, 0.5], [true, 0]] as const) {
      for (let k = 1; k <= n; k++) {
        await withTmp(async (dir) => {
          const home = join(dir, "home")
          const out = await runWithCrash(home, scenario, k, torn, powerLoss)
          expect(out.crashed).toBe(true)
          await checkRecovered(home, out)
          exercised++
        })
      }
    }
    console.log(`SessionStore crash points exercised: ${exercised} (${n} sub-steps x torn/clean writes x process crash/power loss)`)
    expect(exercised).toBe(4 * n)
  }, 300_000) // every crash point four times over; slow on a loaded machine

  it(`property: random save/delete sequences crashed at a random step (${fuzzProfile.name} profile)`, async () => {
    const opArb: fc.Arbitrary<Op> = fc.oneof(
      { weight: 4, arbitrary: fc.record({ _tag: fc.constant("save" as const), session: fc.integer({ min: 1, max: 3 }), version: fc.integer({ min: 1, max: 30 }), active: fc.boolean() }) },
      { weight: 1, arbitrary: fc.record({ _tag: fc.constant("delete" as const), session: fc.integer({ min: 1, max: 3 }) }) }
    )
    let runs = 0
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb, { minLength: 1, maxLength: 10 }),
        fc.integer({ min: 1, max: 60 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.boolean(),
        async (ops, crashAt, torn, powerLoss) => {
          runs++
          await withTmp(async (dir) => {
            const home = join(dir, "home")
            const out = await runWithCrash(home, ops, crashAt, torn, powerLoss)
            await checkRecovered(home, out)
          })
        }
      ),
      fuzzParams(40)
    )
    console.log(`SessionStore crash property: ${runs} runs (${fuzzProfile.name})`)
  }, 300_000)
})
