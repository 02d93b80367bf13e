// File layer of the SessionStore port: `agents/<session-id>/session.json` under $SUBSTRAT_HOME,
// each save an atomic replace (tmp → fsync → rename → fsync dir) through Durable, so a record
// on disk is always a whole old or a whole new version. `provider_state` is base64 (the
// Session schema encodes it). `scan` ignores `*.tmp` and directories without a record; a
// record that does not decode fails the scan with a typed error naming it (docs/recovery.md).
import { Clock, Effect, Layer, Option, Schema } from "effect"
import { TextDecoder } from "node:util"
import { SubstratPaths } from "../config/Paths.js"
import { type DurableError, SessionStoreError } from "../domain/errors.js"
import { SessionId } from "../domain/ids.js"
import { Session, transition } from "../domain/session.js"
import { Durable } from "../durable/Durable.js"
import { SessionStore } from "./SessionStore.js"

const SessionJson = Schema.parseJson(Session)
const encodeRecord = Schema.encode(SessionJson)
const decodeRecord = Schema.decodeUnknownEither(SessionJson)
const isSessionId = Schema.is(SessionId)

const ioError = (session_id: string) => (e: DurableError) =>
  new SessionStoreError({ reason: "io", session_id, message: `${e.op} ${e.path}: ${e.message}` })

export const make = Effect.gen(function*() {
  const durable = yield* Durable
  const paths = yield* SubstratPaths
  yield* durable.mkdir(paths.agentsDir, 0o700).pipe(Effect.mapError(ioError("")))
  const utf8 = new TextEncoder()

  const save = Effect.fn("SessionStore.save")(function*(session: Session) {
    const json = yield* encodeRecord(session).pipe(
      Effect.mapError((e) => new SessionStoreError({ reason: "decode", session_id: session.id, message: e.message }))
    )
    yield* durable.mkdir(paths.sessionDir(session.id), 0o700).pipe(Effect.mapError(ioError(session.id)))
    yield* durable.replaceAtomic(paths.sessionFile(session.id), utf8.encode(json + "\n")).pipe(
      Effect.mapError(ioError(session.id))
    )
  })

  /** The record of `id`, None when there is none. */
  const read = (id: string) =>
    Effect.gen(function*() {
      const file = paths.sessionFile(id)
      const bytes = yield* durable.readFile(file).pipe(Effect.mapError(ioError(id)))
      if (Option.isNone(bytes)) return Option.none<Session>()
      let text: string
      try {
        text = new TextDecoder("utf-8", { fatal: true }).decode(bytes.value)
      } catch {
        return yield* new SessionStoreError({ reason: "decode", session_id: id, message: `${file}: not UTF-8` })
      }
      const decoded = decodeRecord(text)
      if (decoded._tag === "Left") {
        return yield* new SessionStoreError({ reason: "decode", session_id: id, message: `${file}: ${decoded.left.message}` })
      }
      if (decoded.right.id !== id) {
        return yield* new SessionStoreError({
          reason: "decode",
          session_id: id,
          message: `${file}: record is for session ${decoded.right.id}`
        })
      }
      return Option.some(decoded.right)
    })

  const load = Effect.fn("SessionStore.load")(function*(id: SessionId) {
    const found = yield* read(id)
    if (Option.isNone(found)) {
      return yield* new SessionStoreError({ reason: "not-found", session_id: id, message: `no session ${id}` })
    }
    return found.value
  })

  const scan = Effect.gen(function*() {
    const entries = yield* durable.readDir(paths.agentsDir).pipe(Effect.mapError(ioError("")))
    const ids = entries
      .filter((e) => e.isDirectory && !e.name.endsWith(".tmp") && isSessionId(e.name))
      .map((e) => e.name)
      .sort()
    const out: Array<Session> = []
    for (const id of ids) {
      const s = yield* read(id)
      if (Option.isSome(s)) out.push(s.value)
    }
    return out as ReadonlyArray<Session>
  }).pipe(Effect.withSpan("SessionStore.scan"))

  const del = Effect.fn("SessionStore.delete")(function*(id: SessionId) {
    yield* Effect.gen(function*() {
      yield* durable.unlink(paths.sessionFile(id))
      yield* durable.unlink(`${paths.sessionFile(id)}.tmp`)
      // The directory goes too once nothing else (event log, sockets) lives in it.
      yield* durable.removeEmptyDir(paths.sessionDir(id))
    }).pipe(Effect.mapError(ioError(id)))
  })

  const recover = Effect.gen(function*() {
    const now = new Date(yield* Clock.currentTimeMillis).toISOString()
    const all = yield* scan
    const out: Array<Session> = []
    for (const s of all) {
      if (s.state === "active") {
        const suspended = yield* transition(s, "suspended", now).pipe(
          Effect.mapError((e) => new SessionStoreError({ reason: "decode", session_id: s.id, message: e.message }))
        )
        yield* save(suspended)
        out.push(suspended)
      } else {
        out.push(s)
      }
    }
    return out as ReadonlyArray<Session>
  }).pipe(Effect.withSpan("SessionStore.recover"))

  return SessionStore.of({ save, load, scan, delete: del, recover })
})

/** File-backed SessionStore; creates `$SUBSTRAT_HOME/agents` (0700) when it starts. */
export const layer: Layer.Layer<SessionStore, SessionStoreError, Durable | SubstratPaths> = Layer.effect(
  SessionStore,
  make
)
