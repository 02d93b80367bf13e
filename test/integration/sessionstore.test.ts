// SessionStore file layer on real temp dirs: its files. The contract shared with the Postgres
// layer (round trip, scan order, recover) is storage-contract.test.ts.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { makePaths } from "../../src/config/Paths.js"
import { SessionStore } from "../../src/storage/SessionStore.js"
import { session, sid, storeLayer } from "../support/logs.js"
import { tmpDir } from "../support/tmpDir.js"


describe("SessionStore file layer", () => {
  it.scoped("save/load round-trips; provider_state is base64 in the JSON; home is 0700", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const paths = makePaths(home)
      const s = session(1, "active", [0, 1, 2, 250, 255])
      const loaded = yield* Effect.gen(function*() {
        const store = yield* SessionStore
        yield* store.save(s)
        return yield* store.load(s.id)
      }).pipe(Effect.provide(storeLayer(home)))
      expect(loaded).toEqual(s)
      const json = JSON.parse(fs.readFileSync(paths.sessionFile(s.id), "utf8"))
      expect(json.provider_state).toBe(Buffer.from([0, 1, 2, 250, 255]).toString("base64"))
      expect(json.state).toBe("active")
      expect(fs.statSync(home).mode & 0o777).toBe(0o700)
      expect(fs.statSync(paths.agentsDir).mode & 0o777).toBe(0o700)
      expect(fs.readdirSync(paths.sessionDir(s.id))).toEqual(["session.json"])
    }))

  it.scoped("load of an unknown session fails not-found", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const r = yield* Effect.either(Effect.flatMap(SessionStore, (st) => st.load(sid(9))).pipe(Effect.provide(storeLayer(home))))
      expect(Either.isLeft(r) && r.left._tag === "SessionStoreError" && r.left.reason).toBe("not-found")
    }))

  it.scoped("scan ignores .tmp leftovers and directories without a record; delete removes the record", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const paths = makePaths(home)
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        yield* store.save(session(1))
        yield* store.save(session(2, "suspended"))
        fs.writeFileSync(`${paths.sessionFile(sid(1))}.tmp`, "{torn")
        fs.mkdirSync(paths.sessionDir(sid(3)))
        fs.writeFileSync(join(paths.sessionDir(sid(3)), "session.json.tmp"), "{torn")
        fs.mkdirSync(join(paths.agentsDir, "something.tmp"))
        fs.writeFileSync(join(paths.agentsDir, "stray-file"), "x")
        expect((yield* store.scan).map((s) => s.id)).toEqual([sid(1), sid(2)])
        yield* store.delete(sid(2))
        expect((yield* store.scan).map((s) => s.id)).toEqual([sid(1)])
        expect(fs.existsSync(paths.sessionDir(sid(2)))).toBe(false)
        // A directory that still holds an event log keeps it; only the record goes.
        fs.writeFileSync(paths.eventsFile(sid(1)), "")
        yield* store.delete(sid(1))
        expect(fs.readdirSync(paths.sessionDir(sid(1)))).toEqual(["events.jsonl"])
        expect(yield* store.scan).toEqual([])
      }).pipe(Effect.provide(storeLayer(home)))
    }))

  it.scoped("a corrupt record fails scan and load with a typed decode error naming the session", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const paths = makePaths(home)
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        yield* store.save(session(1))
        yield* store.save(session(2))
        fs.writeFileSync(paths.sessionFile(sid(2)), "{\"id\": 42")
        const scan = yield* Effect.either(store.scan)
        expect(Either.isLeft(scan) && scan.left.reason).toBe("decode")
        expect(Either.isLeft(scan) && scan.left.session_id).toBe(sid(2))
        const load = yield* Effect.either(store.load(sid(2)))
        expect(Either.isLeft(load) && load.left.reason).toBe("decode")
        // A record filed under another session's directory is corrupt too.
        fs.writeFileSync(paths.sessionFile(sid(2)), fs.readFileSync(paths.sessionFile(sid(1))))
        const load2 = yield* Effect.either(store.load(sid(2)))
        expect(Either.isLeft(load2) && load2.left.reason).toBe("decode")
      }).pipe(Effect.provide(storeLayer(home)))
    }))
})
