// EventIndex (port): the daemon's order of appends across all sessions, `$SUBSTRAT_HOME/events.index`
// — record n (1-based) says which session's which line was the n-th entry the daemon published.
// That n is an event's global *position* (the SSE `id:`, src/feed/EventFeed.ts): one number, however
// many sessions there are. Records are fixed width (`<session id> <line, 10 digits>\n`, 48 bytes),
// so a torn tail is cut on open. The file is not fsync'd: it survives a killed daemon (page cache);
// after a machine crash its lost tail is rebuilt from the logs (lines it lacks are indexed again,
// EventTap.ts). Layers: `EventIndex.layerFile`, `EventIndex.layerMemory`.
import { FileSystem } from "@effect/platform"
import { Context, Effect, Layer } from "effect"
import { SubstratPaths } from "../config/Paths.js"
import { EventLogError } from "../domain/errors.js"
import type { SessionId } from "../domain/ids.js"

export interface IndexRecord {
  readonly session: SessionId
  readonly line: number
}

export interface EventIndexService {
  /** Every record so far, in order (record i is position i + 1). */
  readonly load: Effect.Effect<ReadonlyArray<IndexRecord>, EventLogError>
  /** Append records (written before the caller publishes them). */
  readonly append: (records: ReadonlyArray<IndexRecord>) => Effect.Effect<void, EventLogError>
}

const RECORD = 48
const utf8 = new TextEncoder()

const encode = (records: ReadonlyArray<IndexRecord>): Uint8Array =>
  utf8.encode(records.map((r) => `${r.session} ${String(r.line).padStart(10, "0")}\n`).join(""))

const decode = (text: string): Array<IndexRecord> => {
  const out: Array<IndexRecord> = []
  for (let at = 0; at + RECORD <= text.length; at += RECORD) {
    out.push({ session: text.slice(at, at + 36) as SessionId, line: Number(text.slice(at + 37, at + 47)) })
  }
  return out
}

const makeFile = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = (yield* SubstratPaths).eventIndex
  const fail = (message: string) => new EventLogError({ reason: "io", file: path, message })
  const file = yield* fs.open(path, { flag: "a+", mode: 0o600 }).pipe(Effect.mapError((e) => fail(e.message)))
  return EventIndex.of({
    load: Effect.gen(function*() {
      const exists = yield* fs.exists(path)
      if (!exists) return []
      const bytes = yield* fs.readFile(path)
      const whole = bytes.length - (bytes.length % RECORD)
      // A torn record (the daemon died mid-write) is cut: its line is indexed again.
      if (whole !== bytes.length) yield* fs.truncate(path, whole)
      return decode(new TextDecoder().decode(bytes.subarray(0, whole)))
    }).pipe(Effect.mapError((e) => fail(e.message))),
    append: (records) => Effect.mapError(file.writeAll(encode(records)), (e) => fail(e.message))
  })
})

const makeMemory = Effect.sync(() => {
  const all: Array<IndexRecord> = []
  return EventIndex.of({
    load: Effect.sync(() => [...all]),
    append: (records) => Effect.sync(() => void all.push(...records))
  })
})

export class EventIndex extends Context.Tag("substrat/EventIndex")<EventIndex, EventIndexService>() {
  /** `$SUBSTRAT_HOME/events.index` (0600), kept open with the layer's scope. */
  static readonly layerFile: Layer.Layer<EventIndex, EventLogError, FileSystem.FileSystem | SubstratPaths> = Layer.scoped(
    EventIndex,
    makeFile
  )
  /** In memory (tests, embedders). */
  static readonly layerMemory: Layer.Layer<EventIndex> = Layer.effect(EventIndex, makeMemory)
}
