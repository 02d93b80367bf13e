// File implementation of the SessionStore port (`SessionStore.layerFile`, ../SessionStore.ts):
// `agents/<session-id>/session.json` under $SUBSTRAT_HOME, each save an atomic replace (tmp → fsync → rename → fsync dir) through Durable, so a record
// on disk is always a whole old or a whole new version. `provider_state` is base64 (the
// Session schema encodes it). `scan` ignores `*.tmp` and directories without a record; a
// record that does not decode fails the scan with a typed error naming it (docs/recovery.md).
// The store is the records' one writer: after the first successful scan it keeps every record in
// memory (updated by its own save and delete), so `scan`, `load` and `count` read no file — a
// request that lists or counts sessions costs what it returns, not a read of every record.
import { Clock, Effect, Either, Option, Schema } from "effect"
import { TextDecoder } from "node:util"
import { SubstratPaths } from "../../config/Paths.js"
import { type DurableError, SessionStoreError, withFault } from "../../domain/errors.js"
import { SessionId } from "../../domain/ids.js"
import { Session, transition } from "../../domain/session.js"
import { Durable, type DurableService } from "../Durable.js"
import type { SessionStoreService } from "../SessionStore.js"

const SessionJson = Schema.parseJson(Session)
const encodeRecord = Schema.encode(SessionJson)
// Built once: the record is JSON.parse'd, then the whole Session schema is checked (id, state,
// base64 blob, …) — nothing is skipped; only the per-call setup is.
const decodeSession = Schema.decodeUnknownEither(Session)
const utf8Strict = new TextDecoder("utf-8", { fatal: true })
const isSessionId = Schema.is(SessionId)

const decodeError = (session_id: string, message: string) =>
  new SessionStoreError({ reason: "decode", session_id, message })

/** One record's bytes → the Session, or a decode error naming the file. Pure, synchronous. */
export const parseRecord = (id: string, file: string, bytes: Uint8Array): Either.Either<Session, SessionStoreError> => {
  let text: string
  try {
    text = utf8Strict.decode(bytes)
  } catch {
    return Either.left(decodeError(id, `${file}: not UTF-8`))
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return Either.left(decodeError(id, `${file}: ${e instanceof Error ? e.message : String(e)}`))
  }
  const decoded = decodeSession(json)
  if (Either.isLeft(decoded)) return Either.left(decodeError(id, `${file}: ${decoded.left.message}`))
  if (decoded.right.id !== id) return Either.left(decodeError(id, `${file}: record is for session ${decoded.right.id}`))
  return Either.right(decoded.right)
}

/** A Durable failure on session `session_id`'s record, as the store reports it. */
export const ioError = (session_id: string) => (e: DurableError) =>
  new SessionStoreError({ reason: "io", session_id, ...withFault(e.fault), message: `${e.op} ${e.path}: ${e.message}` })

/**
 * The record `file` of session `id`, None when there is none. No generator: run once per record
 * by `scan` and by the recovery pass (src/recovery/Read.ts).
 */
export const readRecord = (
  durable: DurableService,
  file: string,
  id: string
): Effect.Effect<Option.Option<Session>, SessionStoreError> =>
  Effect.flatMap(
    Effect.mapError(durable.readFile(file), ioError(id)),
    (bytes) => Option.isNone(bytes) ? Effect.succeedNone : Effect.map(parseRecord(id, file, bytes.value), Option.some)
  )

export const make = Effect.gen(function*() {
  const durable = yield* Durable
  const paths = yield* SubstratPaths
  yield* durable.mkdir(paths.agentsDir, 0o700).pipe(Effect.mapError(ioError("")))
  const utf8 = new TextEncoder()
  // Every record by id, once a scan has read them all (undefined before, or after a failed scan).
  let index: Map<SessionId, Session> | undefined
  // The records sorted by id, as `scan` returns them; undefined when changed since.
  let sorted: ReadonlyArray<Session> | undefined

  const save = Effect.fn("SessionStore.save")(function*(session: Session) {
    const json = yield* encodeRecord(session).pipe(
      Effect.mapError((e) => new SessionStoreError({ reason: "decode", session_id: session.id, message: e.message }))
    )
    yield* durable.mkdir(paths.sessionDir(session.id), 0o700).pipe(Effect.mapError(ioError(session.id)))
    yield* durable.replaceAtomic(paths.sessionFile(session.id), utf8.encode(json + "\n")).pipe(
      // A failed replace leaves the old or the new record: the disk is read again next time.
      Effect.tapError(() => Effect.sync(forget)),
      Effect.mapError(ioError(session.id))
    )
    if (index !== undefined) {
      index.set(session.id, session)
      sorted = undefined
    }
  })
  const forget = () => {
    index = undefined
    sorted = undefined
  }

  const read = (id: string) => readRecord(durable, paths.sessionFile(id), id)

  const load = Effect.fn("SessionStore.load")(function*(id: SessionId) {
    const known = index?.get(id)
    if (known !== undefined) return known
    const found = yield* read(id)
    if (Option.isNone(found)) {
      return yield* new SessionStoreError({ reason: "not-found", session_id: id, message: `no session ${id}` })
    }
    return found.value
  })

  const loadMany = (ids: ReadonlyArray<SessionId>) =>
    Effect.map(
      Effect.forEach(ids, (id) => Effect.catchIf(Effect.map(load(id), (s) => [s]), (e) => e.reason === "not-found", () => Effect.succeed([])), { concurrency: 8 }),
      (found) => found.flat()
    )

  const scanDisk = Effect.gen(function*() {
    const entries = yield* durable.readDir(paths.agentsDir).pipe(Effect.mapError(ioError("")))
    const ids = entries
      .filter((e) => e.isDirectory && !e.name.endsWith(".tmp") && isSessionId(e.name))
      .map((e) => e.name)
      .sort()
    const out: Array<Session> = []
    yield* Effect.forEach(ids, (id) =>
      Effect.map(read(id), (s) => {
        if (Option.isSome(s)) out.push(s.value)
      }), { discard: true })
    index = new Map(out.map((s) => [s.id, s]))
    sorted = out
    return out as ReadonlyArray<Session>
  }).pipe(Effect.withSpan("SessionStore.scan"))

  const scan: Effect.Effect<ReadonlyArray<Session>, SessionStoreError> = Effect.suspend(() => {
    if (index === undefined) return scanDisk
    if (sorted === undefined) sorted = [...index.values()].sort((a, b) => a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
    return Effect.succeed(sorted)
  })

  const count: Effect.Effect<number, SessionStoreError> = Effect.suspend(() =>
    index === undefined ? Effect.map(scan, (all) => all.length) : Effect.succeed(index.size)
  )

  const del = Effect.fn("SessionStore.delete")(function*(id: SessionId) {
    if (index?.delete(id) === true) sorted = undefined
    yield* Effect.gen(function*() {
      yield* durable.unlink(paths.sessionFile(id))
      yield* durable.unlink(`${paths.sessionFile(id)}.tmp`)
      // The directory goes too once nothing else (event log, sockets) lives in it.
      yield* durable.removeEmptyDir(paths.sessionDir(id))
    }).pipe(Effect.tapError(() => Effect.sync(forget)), Effect.mapError(ioError(id)))
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

  const service: SessionStoreService = { save, load, loadMany, scan, count, delete: del, recover }
  return service
})

