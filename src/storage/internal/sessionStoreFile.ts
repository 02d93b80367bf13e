// File implementation of the SessionStore port (`SessionStore.layerFile`, ../SessionStore.ts): `agents/<session-id>/session.json` under $SUBSTRAT_HOME,
// each save an atomic replace (tmp → fsync → rename → fsync dir) through Durable, so a record
// on disk is always a whole old or a whole new version. `provider_state` is base64 (the
// Session schema encodes it). `scan` ignores `*.tmp` and directories without a record; a
// record that does not decode fails the scan with a typed error naming it (docs/recovery.md).
import { Clock, Effect, Either, Option, Schema } from "effect"
import { isAscii } from "node:buffer"
import { TextDecoder } from "node:util"
import { SubstratPaths } from "../../config/Paths.js"
import { type DurableError, SessionStoreError } from "../../domain/errors.js"
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

/** Schema.UUID's pattern (effect/Schema), which SessionId refines. */
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/i
const isState = (u: unknown): u is Session["state"] =>
  u === "active" || u === "suspended" || u === "terminated" || u === "created"
const nullOrString = (u: unknown): u is string | null => u === null || typeof u === "string"
const noBlob = new Uint8Array(0)

/**
 * The common record — the expected id, an empty provider blob, every other field of the right
 * type — checked by hand and built without the Schema decoder (≈10× cheaper; recovery reads
 * every record). It accepts only records the Schema decode accepts, and builds the same Session
 * (unknown keys dropped); anything else (a blob to base64-decode, a wrong field) returns
 * undefined and takes the full decode, which also words the errors.
 */
const fastRecord = (id: string, json: unknown): Session | undefined => {
  if (typeof json !== "object" || json === null) return undefined
  const o = json as Record<string, unknown>
  const { state, provider_name, model, created_at, suspended_at } = o
  if (
    o["id"] !== id || o["provider_state"] !== "" || !isState(state) || typeof provider_name !== "string" ||
    !nullOrString(model) || typeof created_at !== "string" || !nullOrString(suspended_at) || !UUID.test(id)
  ) return undefined
  return new Session({
    id: id as SessionId,
    state,
    provider_name,
    model,
    created_at,
    suspended_at,
    provider_state: noBlob
  }, true)
}

/** One record's bytes → the Session, or a decode error naming the file. Pure, synchronous. */
export const parseRecord = (id: string, file: string, bytes: Uint8Array): Either.Either<Session, SessionStoreError> => {
  let text: string
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (isAscii(buf)) {
    // ASCII (the usual record: ids, dates, base64) is valid UTF-8: a straight copy.
    text = buf.toString("latin1")
  } else {
    try {
      text = utf8Strict.decode(bytes)
    } catch {
      return Either.left(decodeError(id, `${file}: not UTF-8`))
    }
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return Either.left(decodeError(id, `${file}: ${e instanceof Error ? e.message : String(e)}`))
  }
  const fast = fastRecord(id, json)
  if (fast !== undefined) return Either.right(fast)
  const decoded = decodeSession(json)
  if (Either.isLeft(decoded)) return Either.left(decodeError(id, `${file}: ${decoded.left.message}`))
  if (decoded.right.id !== id) return Either.left(decodeError(id, `${file}: record is for session ${decoded.right.id}`))
  return Either.right(decoded.right)
}

/** A Durable failure on session `session_id`'s record, as the store reports it. */
export const ioError = (session_id: string) => (e: DurableError) =>
  new SessionStoreError({ reason: "io", session_id, message: `${e.op} ${e.path}: ${e.message}` })

/**
 * The record `file` of session `id`, None when there is none. No generator: run once per record
 * by `scan` and by the recovery pass (src/agent/RecoveryRead.ts).
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

  const save = Effect.fn("SessionStore.save")(function*(session: Session) {
    const json = yield* encodeRecord(session).pipe(
      Effect.mapError((e) => new SessionStoreError({ reason: "decode", session_id: session.id, message: e.message }))
    )
    yield* durable.mkdir(paths.sessionDir(session.id), 0o700).pipe(Effect.mapError(ioError(session.id)))
    yield* durable.replaceAtomic(paths.sessionFile(session.id), utf8.encode(json + "\n")).pipe(
      Effect.mapError(ioError(session.id))
    )
  })

  const read = (id: string) => readRecord(durable, paths.sessionFile(id), id)

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
    yield* Effect.forEach(ids, (id) =>
      Effect.map(read(id), (s) => {
        if (Option.isSome(s)) out.push(s.value)
      }), { discard: true })
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

  const service: SessionStoreService = { save, load, scan, delete: del, recover }
  return service
})

