// requires: postgres
// Postgres lost under the Postgres storage layers: the server is SIGKILLed (by pid) while sessions
// append and records are saved concurrently. Every call ends in an acknowledgement or a typed
// storage error (reason "io"); after the server restarts, every acknowledged entry is in its log
// exactly once and in order (only the one in-flight entry per session may also be there), every
// acknowledged record is there, and the same layers — not restarted — take new writes again.
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Either, Ref } from "effect"
import type { EventLogError, SessionStoreError } from "../../src/domain/errors.js"
import type { Session } from "../../src/domain/session.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { SessionStore } from "../../src/storage/SessionStore.js"
import { ev, promptOf, readAll, session, sid } from "../support/logs.js"
import { postgresPerFile } from "../support/postgres.js"

const pg = postgresPerFile()

/** Retry `eff` (bounded, 200 × 50 ms) until it succeeds: the pool reconnects once the server is back. */
const retrying = <A, E, R>(eff: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  const go = (left: number): Effect.Effect<A, E, R> =>
    Effect.catchAll(eff, (e) => left <= 0 ? Effect.fail(e) : Effect.zipRight(Effect.sleep("50 millis"), go(left - 1)))
  return go(200)
}

describe("Postgres storage layers: the server killed mid-load", () => {
  it.scoped("EventLog: 16 sessions appending (every third a batch of 3); kill -9 of Postgres; nothing acknowledged lost, a batch all or nothing, refused appends typed, the layer recovers", () =>
    Effect.gen(function*() {
      const layer = (yield* pg.sqlStorage()).log
      const sessions = Array.from({ length: 16 }, (_, i) => sid(200 + i))
      const acked = new Map(sessions.map((s) => [s, [] as Array<string>]))
      const inflight = new Map<string, ReadonlyArray<string>>()
      const failures: Array<EventLogError> = []
      const enough = yield* Deferred.make<void>()
      const count = yield* Ref.make(0)
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        // Each session appends until its first refusal (as a daemon would stop the turn).
        const writer = (s: (typeof sessions)[number]) =>
          Effect.gen(function*() {
            for (let i = 0; i < 400; i++) {
              const tags = i % 3 === 2 ? [`${s}:${i}.1`, `${s}:${i}.2`, `${s}:${i}.3`] : [`${s}:${i}`]
              inflight.set(s, tags)
              const r = yield* Effect.either(
                tags.length === 1 ? Effect.asVoid(log.append(s, ev(tags[0]!))) : Effect.asVoid(log.appendAll(s, tags.map(ev)))
              )
              if (Either.isLeft(r)) {
                failures.push(r.left)
                return
              }
              inflight.delete(s)
              acked.get(s)!.push(...tags)
              if ((yield* Ref.updateAndGet(count, (n) => n + 1)) === 300) yield* Deferred.succeed(enough, undefined)
            }
          })
        const load = yield* Effect.fork(Effect.forEach(sessions, writer, { concurrency: "unbounded", discard: true }))
        yield* Deferred.await(enough)
        yield* Effect.promise(() => pg.server().kill())
        yield* load.await
        expect(failures.length).toBeGreaterThan(0)
        for (const f of failures) expect([f._tag, f.reason, f.fault]).toEqual(["EventLogError", "io", "io"])
        yield* Effect.promise(() => pg.server().start())
        // The same layer (a daemon that kept running) appends again once Postgres is back.
        yield* retrying(log.append(sessions[0]!, ev("after")))
      }).pipe(Effect.provide(layer))
      // A new layer (a restarted daemon) reads everything back.
      const logs = yield* Effect.forEach(sessions, (s) => readAll(s)).pipe(Effect.provide(layer))
      let total = 0
      sessions.forEach((s, i) => {
        const tags = logs[i]!.map(promptOf)
        const mine = acked.get(s)!
        total += mine.length
        expect(tags.slice(0, mine.length), `${s}: acknowledged prefix`).toEqual(mine)
        const rest = tags.slice(mine.length).filter((t) => t !== "after")
        // The in-flight append or batch: all of its entries or none.
        expect([[], inflight.get(s) ?? []], `${s}: beyond acknowledged: ${rest}`).toContainEqual(rest)
        expect(new Set(tags).size).toBe(tags.length)
      })
      expect(total).toBeGreaterThanOrEqual(300)
      expect(logs[0]!.map(promptOf).filter((t) => t === "after")).toEqual(["after"])
    }), 180_000)

  it.scoped("EventLog: with Postgres down an append fails typed and nothing is written; it works again when Postgres is back", () =>
    Effect.gen(function*() {
      const layer = (yield* pg.sqlStorage({ connectTimeout: "2 seconds" })).log
      const S = sid(1)
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append(S, ev("a"))
        yield* Effect.promise(() => pg.server().stop())
        const r = yield* Effect.either(log.append(S, ev("refused")))
        expect(Either.isLeft(r) && [r.left.reason, r.left.fault]).toEqual(["io", "io"])
        const read = yield* Effect.either(readAll(S))
        expect(Either.isLeft(read)).toBe(true)
        yield* Effect.promise(() => pg.server().start())
        yield* retrying(log.append(S, ev("b")))
        expect((yield* readAll(S)).map(promptOf)).toEqual(["a", "b"])
      }).pipe(Effect.provide(layer))
    }), 120_000)

  it.scoped("SessionStore: saves under load, kill -9 of Postgres; every acknowledged record present (or the in-flight newer one)", () =>
    Effect.gen(function*() {
      const layer = (yield* pg.sqlStorage()).store
      const ids = Array.from({ length: 8 }, (_, i) => 300 + i)
      // The last acknowledged and the in-flight version of each record (its provider_state byte).
      const ackedVersion = new Map<number, number>()
      const inflightVersion = new Map<number, number>()
      const failures: Array<SessionStoreError> = []
      const enough = yield* Deferred.make<void>()
      const count = yield* Ref.make(0)
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        const writer = (n: number) =>
          Effect.gen(function*() {
            for (let v = 1; v < 250; v++) {
              inflightVersion.set(n, v)
              const r = yield* Effect.either(store.save(session(n, "active", [v])))
              if (Either.isLeft(r)) {
                failures.push(r.left)
                return
              }
              ackedVersion.set(n, v)
              if ((yield* Ref.updateAndGet(count, (k) => k + 1)) === 200) yield* Deferred.succeed(enough, undefined)
            }
          })
        const load = yield* Effect.fork(Effect.forEach(ids, writer, { concurrency: "unbounded", discard: true }))
        yield* Deferred.await(enough)
        yield* Effect.promise(() => pg.server().kill())
        yield* load.await
        expect(failures.length).toBeGreaterThan(0)
        for (const f of failures) expect([f._tag, f.reason, f.fault]).toEqual(["SessionStoreError", "io", "io"])
        yield* Effect.promise(() => pg.server().start())
        yield* retrying(store.save(session(999)))
      }).pipe(Effect.provide(layer))
      const all: ReadonlyArray<Session> = yield* Effect.flatMap(SessionStore, (st) => st.scan).pipe(Effect.provide(layer))
      for (const n of ids) {
        const rec = all.find((s) => s.id === sid(n))
        const acked = ackedVersion.get(n)
        if (acked === undefined) continue
        expect(rec, `record ${n}`).toBeDefined()
        const v = rec!.provider_state[0]
        expect(v === acked || v === inflightVersion.get(n), `record ${n}: version ${v}, acknowledged ${acked}`).toBe(true)
      }
      expect(all.some((s) => s.id === sid(999))).toBe(true)
    }), 180_000)
})
