// requires: postgres
// The EventLog and SessionStore contracts, run against both durable layers: the file layers
// (agents/<sid>/ under a temp $SUBSTRAT_HOME) and the Postgres layers of cluster mode (a fresh
// database per test on a server started by test/support/postgres.ts). A "restart" is a new
// layer over the same home / database. The file layers' own format, torn-tail and lock tests stay
// in eventlog.test.ts / sessionstore.test.ts; Postgres crashes are in storage-sql-crash.test.ts.
import { describe, expect, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Either, Exit, Fiber, Layer, Stream } from "effect"
import { join } from "node:path"
import { makeEvent } from "../../src/domain/events.js"
import { EventLog } from "../../src/storage/EventLog.js"
import type { PostgresUnreachable } from "../../src/storage/Postgres.js"
import type { EventLogError, SessionStoreError } from "../../src/domain/errors.js"
import { SessionStore } from "../../src/storage/SessionStore.js"
import { ev, fileLayers, promptOf, readAll, session, sid, storeLayer } from "../support/logs.js"
import { postgresPerFile } from "../support/postgres.js"
import { tmpDir } from "../support/tmpDir.js"

const pg = postgresPerFile()

interface Backend {
  readonly log: Layer.Layer<EventLog, EventLogError | PostgresUnreachable>
  readonly store: Layer.Layer<SessionStore, SessionStoreError | PostgresUnreachable>
  /** Postgres only: the client, for writing rows by hand. */
  readonly sql?: Layer.Layer<SqlClient.SqlClient, PostgresUnreachable>
}

const backends: ReadonlyArray<readonly [string, Effect.Effect<Backend, never, import("effect").Scope.Scope>]> = [
  [
    "file",
    Effect.map(tmpDir(), (dir) => ({ log: fileLayers(join(dir, "home")), store: storeLayer(join(dir, "home")) }))
  ],
  [
    "postgres",
    Effect.map(pg.sqlStorage(), (s) => ({ log: s.log, store: s.store, sql: s.client }))
  ]
]

const S = sid(1)

describe.each(backends)("EventLog contract: %s layer", (name, backend) => {
  it.scoped("append then read: entries in order, ts and session_id injected; a restarted layer reads the same", () =>
    Effect.gen(function*() {
      const b = yield* backend
      const appended = yield* Effect.gen(function*() {
        const log = yield* EventLog
        const out = []
        for (const t of ["a", "b", "c"]) {
          const e = yield* log.append(S, ev(t))
          expect(e.session_id).toBe(S)
          expect(new Date(e.ts).toISOString()).toBe(e.ts)
          out.push(e)
        }
        expect((yield* readAll(S)).map(promptOf)).toEqual(["a", "b", "c"])
        return out
      }).pipe(Effect.provide(b.log))
      const again = yield* readAll(S).pipe(Effect.provide(b.log))
      expect(again).toEqual(appended)
      expect(yield* readAll(sid(2)).pipe(Effect.provide(b.log))).toEqual([])
    }))

  it.scoped("readMany: each log whole and in order, the logs in the order given (over Postgres' pages and groups); an unknown session is empty", () =>
    Effect.gen(function*() {
      const b = yield* backend
      // 105 one-entry logs (more than one group of sessions) and one of 600 entries (more than one page).
      const small = Array.from({ length: 105 }, (_, i) => sid(0x100 + i))
      const long = sid(0x50)
      const unknown = sid(0x99)
      const order = [unknown, ...small.slice(50).reverse(), long, ...small.slice(0, 50)]
      const entriesOf = (s: typeof S): Array<string> =>
        s === long ? Array.from({ length: 600 }, (_, i) => `${long} l${i}`) : s === unknown ? [] : [`${s} s${small.indexOf(s)}`]
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* Effect.forEach(small, (s, i) => log.append(s, ev(`s${i}`)), { concurrency: 8, discard: true })
        yield* log.appendAll(long, Array.from({ length: 600 }, (_, i) => ev(`l${i}`)))
      }).pipe(Effect.provide(b.log))
      const got = yield* Effect.flatMap(EventLog, (log) => Stream.runCollect(log.readMany(order))).pipe(Effect.provide(b.log))
      expect([...got].map((e) => `${e.session_id} ${promptOf(e)}`)).toEqual(order.flatMap(entriesOf))
    }), 120_000)

  it.scoped("close: the next append continues the log; remove empties it and a new log starts", () =>
    Effect.gen(function*() {
      const b = yield* backend
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append(S, ev("a"))
        yield* log.close(S)
        yield* log.append(S, ev("b"))
        expect((yield* readAll(S)).map(promptOf)).toEqual(["a", "b"])
        const report = yield* log.repair(S)
        expect(report).toEqual({ session_id: S, truncatedBytes: 0, pendingReplayed: false, pendingDiscarded: false })
        yield* log.append(sid(2), ev("other"))
        yield* log.remove(S)
        expect(yield* readAll(S)).toEqual([])
        yield* log.append(S, ev("c"))
        expect((yield* readAll(S)).map(promptOf)).toEqual(["c"])
        expect((yield* readAll(sid(2))).map(promptOf)).toEqual(["other"])
      }).pipe(Effect.provide(b.log))
    }))

  it.scoped("64 sessions appending concurrently: every entry present, in order, per session; a same-session burst lands once each", () =>
    Effect.gen(function*() {
      const b = yield* backend
      const sessions = Array.from({ length: 64 }, (_, i) => sid(100 + i))
      const perSession = 12
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* Effect.forEach(
          sessions,
          (s) => Effect.forEach(Array.from({ length: perSession }, (_, i) => i), (i) => log.append(s, ev(`${s}:${i}`))),
          { concurrency: "unbounded", discard: true }
        )
        const burst = yield* Effect.forEach(
          Array.from({ length: 20 }, (_, i) => i),
          (i) => log.append(sessions[0]!, ev(`burst:${i}`)),
          { concurrency: "unbounded" }
        )
        expect(burst.length).toBe(20)
        for (const s of sessions) {
          const got = (yield* readAll(s)).map(promptOf)
          const expected = Array.from({ length: perSession }, (_, i) => `${s}:${i}`)
          if (s === sessions[0]) {
            expect(got.slice(0, perSession)).toEqual(expected)
            expect(got.slice(perSession).sort()).toEqual(Array.from({ length: 20 }, (_, i) => `burst:${i}`).sort())
          } else {
            expect(got).toEqual(expected)
          }
        }
      }).pipe(Effect.provide(b.log))
    }))

  it.scoped("interrupted appends: each lands at most once, nothing is left holding the session", () =>
    Effect.gen(function*() {
      const b = yield* backend
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append(S, ev("first"))
        const fibers = yield* Effect.forEach(Array.from({ length: 10 }, (_, i) => i), (i) => Effect.fork(log.append(S, ev(`w${i}`))))
        for (const i of [1, 4, 7]) yield* Fiber.interrupt(fibers[i]!)
        const exits = yield* Effect.forEach(fibers, Fiber.await)
        yield* log.append(S, ev("after"))
        const got = (yield* readAll(S)).map(promptOf)
        expect(got[0]).toBe("first")
        expect(got[got.length - 1]).toBe("after")
        exits.forEach((exit, i) => {
          const n = got.filter((t) => t === `w${i}`).length
          if (Exit.isSuccess(exit)) expect(n, `w${i} acknowledged`).toBe(1)
          else expect(n, `w${i} interrupted`).toBeLessThanOrEqual(1)
        })
        expect(new Set(got).size).toBe(got.length)
      }).pipe(Effect.provide(b.log))
    }))

  it.scoped("a value JSON cannot carry fails the append with reason encode; nothing is written", () =>
    Effect.gen(function*() {
      const b = yield* backend
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append(S, ev("a"))
        const bad = yield* Effect.either(
          log.append(S, makeEvent("usage", { turn_id: null, input_tokens: 1, output_tokens: 2, cost_usd: Number.NaN }))
        )
        expect(Either.isLeft(bad) && bad.left.reason).toBe("encode")
        const bad2 = yield* Effect.either(
          log.append(S, makeEvent("tool_call.result", { call_id: "c", tool: "t", result: [undefined], is_error: false }))
        )
        expect(Either.isLeft(bad2) && bad2.left.reason).toBe("encode")
        yield* log.append(S, ev("b"))
        expect((yield* readAll(S)).map(promptOf)).toEqual(["a", "b"])
      }).pipe(Effect.provide(b.log))
    }))

  it.scoped("appendAll: one ts, in order, contiguous among concurrent appends; after runs once with all; encode or empty writes nothing", () =>
    Effect.gen(function*() {
      const b = yield* backend
      const batches = yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append(S, ev("a"))
        const seen: Array<ReadonlyArray<string>> = []
        const batch = yield* log.appendAll(S, [ev("b1"), ev("b2"), ev("b3")], (es) => Effect.sync(() => void seen.push(es.map(promptOf))))
        expect(batch.map(promptOf)).toEqual(["b1", "b2", "b3"])
        expect(new Set(batch.map((e) => e.ts)).size).toBe(1)
        for (const e of batch) expect(e.session_id).toBe(S)
        expect(seen).toEqual([["b1", "b2", "b3"]])
        expect(yield* log.appendAll(S, [])).toEqual([])
        // One event that does not encode fails the whole batch before anything is written.
        const bad = yield* Effect.either(log.appendAll(S, [
          ev("x1"),
          makeEvent("usage", { turn_id: null, input_tokens: 1, output_tokens: 2, cost_usd: Number.NaN })
        ]))
        expect(Either.isLeft(bad) && bad.left.reason).toBe("encode")
        expect((yield* log.appendAll(S, [ev("single")])).map(promptOf)).toEqual(["single"])
        // Batches and single appends of many fibers at once: each batch's lines stay together.
        yield* Effect.forEach(Array.from({ length: 12 }, (_, i) => i), (i) =>
          i % 3 === 0
            ? Effect.asVoid(log.append(S, ev(`s${i}`)))
            : Effect.asVoid(log.appendAll(S, [ev(`p${i}.1`), ev(`p${i}.2`), ev(`p${i}.3`)])), { concurrency: "unbounded", discard: true })
        return (yield* readAll(S)).map(promptOf)
      }).pipe(Effect.provide(b.log))
      expect(batches.slice(0, 5)).toEqual(["a", "b1", "b2", "b3", "single"])
      const rest = batches.slice(5)
      expect(rest.length).toBe(4 + 8 * 3)
      for (let i = 0; i < 12; i++) {
        if (i % 3 === 0) continue
        const at = rest.indexOf(`p${i}.1`)
        expect(rest.slice(at, at + 3)).toEqual([`p${i}.1`, `p${i}.2`, `p${i}.3`])
      }
      // A restarted layer reads the same, and appends after the batches.
      const again = yield* Effect.gen(function*() {
        const log = yield* EventLog
        yield* log.append(S, ev("z"))
        return (yield* readAll(S)).map(promptOf)
      }).pipe(Effect.provide(b.log))
      expect(again).toEqual([...batches, "z"])
    }))

  it.scoped("a long log reads whole and in order; the stream is lazy", () =>
    Effect.gen(function*() {
      const b = yield* backend
      yield* Effect.gen(function*() {
        const log = yield* EventLog
        const n = 1234
        yield* Effect.forEach(Array.from({ length: n }, (_, i) => i), (i) => log.append(S, ev(`e${i}-${"é".repeat(i % 7)}`)), {
          discard: true
        })
        const got = yield* readAll(S)
        expect(got.map(promptOf)).toEqual(Array.from({ length: n }, (_, i) => `e${i}-${"é".repeat(i % 7)}`))
        const first3 = yield* Stream.runCollect(Stream.take(log.read(S), 3))
        expect([...first3].map(promptOf)).toEqual(["e0-", "e1-é", "e2-éé"])
      }).pipe(Effect.provide(b.log))
    }))

  if (name === "postgres") {
    it.scoped("an undecodable row fails the read with a typed decode error naming its position", () =>
      Effect.gen(function*() {
        const b = yield* backend
        yield* Effect.flatMap(EventLog, (log) => Effect.zipRight(log.append(S, ev("a")), log.append(S, ev("b")))).pipe(
          Effect.provide(b.log)
        )
        yield* Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql`INSERT INTO substrat_events (session_id, seq, line) VALUES (${S}, 3, ${"{\"garbage\":true}"})`).pipe(
          Effect.provide(b.sql!)
        )
        const r = yield* Effect.either(readAll(S).pipe(Effect.provide(b.log)))
        expect(Either.isLeft(r) && r.left._tag === "EventLogError" && [r.left.reason, r.left.line]).toEqual(["decode", 3])
      }))
  }
})

describe.each(backends)("SessionStore contract: %s layer", (name, backend) => {
  it.scoped("save/load round-trips (provider_state bytes too); a second save replaces the record", () =>
    Effect.gen(function*() {
      const b = yield* backend
      const s = session(1, "active", [0, 1, 2, 250, 255])
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        yield* store.save(session(1))
        yield* store.save(s)
        expect(yield* store.load(s.id)).toEqual(s)
      }).pipe(Effect.provide(b.store))
      expect(yield* Effect.flatMap(SessionStore, (st) => st.load(s.id)).pipe(Effect.provide(b.store))).toEqual(s)
    }))

  it.scoped("loadMany: the records that exist, in the order asked", () =>
    Effect.gen(function*() {
      const b = yield* backend
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        for (const n of [1, 2, 3]) yield* store.save(session(n))
        expect((yield* store.loadMany([sid(3), sid(9), sid(1)])).map((s) => s.id)).toEqual([sid(3), sid(1)])
        expect(yield* store.loadMany([])).toEqual([])
      }).pipe(Effect.provide(b.store))
    }))

  it.scoped("load of an unknown session fails not-found", () =>
    Effect.gen(function*() {
      const b = yield* backend
      const r = yield* Effect.either(Effect.flatMap(SessionStore, (st) => st.load(sid(9))).pipe(Effect.provide(b.store)))
      expect(Either.isLeft(r) && r.left._tag === "SessionStoreError" && r.left.reason).toBe("not-found")
    }))

  it.scoped("scan is sorted by id, count agrees, delete removes the record", () =>
    Effect.gen(function*() {
      const b = yield* backend
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        for (const n of [3, 1, 2, 0xabc]) yield* store.save(session(n))
        expect((yield* store.scan).map((s) => s.id)).toEqual([sid(1), sid(2), sid(3), sid(0xabc)])
        expect(yield* store.count).toBe(4)
        yield* store.delete(sid(2))
        yield* store.delete(sid(77)) // unknown: nothing to do
        expect((yield* store.scan).map((s) => s.id)).toEqual([sid(1), sid(3), sid(0xabc)])
        expect(yield* store.count).toBe(3)
      }).pipe(Effect.provide(b.store))
      // A restarted store sees the same.
      expect(yield* Effect.flatMap(SessionStore, (st) => st.count).pipe(Effect.provide(b.store))).toBe(3)
    }))

  it.scoped("recover: ACTIVE becomes SUSPENDED durably; others untouched; returns all", () =>
    Effect.gen(function*() {
      const b = yield* backend
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        yield* store.save(session(1, "active", [7]))
        yield* store.save(session(2, "created"))
        yield* store.save(session(3, "suspended"))
        yield* store.save(session(4, "terminated"))
      }).pipe(Effect.provide(b.store))
      const [recovered, reread] = yield* Effect.gen(function*() {
        const store = yield* SessionStore
        const r = yield* store.recover
        return [r, yield* store.scan] as const
      }).pipe(Effect.provide(b.store))
      expect(recovered.map((s) => [s.id, s.state])).toEqual([
        [sid(1), "suspended"],
        [sid(2), "created"],
        [sid(3), "suspended"],
        [sid(4), "terminated"]
      ])
      expect(recovered[0]!.suspended_at).not.toBeNull()
      expect([...recovered[0]!.provider_state]).toEqual([7])
      expect(reread).toEqual(recovered)
      const later = yield* Effect.flatMap(SessionStore, (st) => st.scan).pipe(Effect.provide(b.store))
      expect(later).toEqual(recovered)
    }))

  if (name === "postgres") {
    it.scoped("a corrupt row fails scan and load with a typed decode error naming the session", () =>
      Effect.gen(function*() {
        const b = yield* backend
        yield* Effect.flatMap(SessionStore, (st) => st.save(session(1))).pipe(Effect.provide(b.store))
        yield* Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql`INSERT INTO substrat_sessions (id, record) VALUES (${sid(2)}, ${"{\"id\": 42"})`).pipe(Effect.provide(b.sql!))
        const [scan, load] = yield* Effect.flatMap(SessionStore, (st) => Effect.all([Effect.either(st.scan), Effect.either(st.load(sid(2)))])).pipe(
          Effect.provide(b.store)
        )
        expect(Either.isLeft(scan) && [scan.left.reason, scan.left.session_id]).toEqual(["decode", sid(2)])
        expect(Either.isLeft(load) && load.left.reason).toBe("decode")
      }))
  }
})
