// The read pass of crash recovery (docs/recovery.md): ONE listing of `agents/` and, per session
// directory, everything recovery reads from it back to back — the record (`session.json`), a
// stat of the WAL file (`events.pending`) and one read of the log (`events.jsonl`, LogScan).
// Nothing is written here; Recovery flips records and repairs logs afterwards (through the
// SessionStore and the EventLog, i.e. through Durable, like every write).
//
// Measured at 100k sessions (scripts/bench/recovery.ts --full), against the previous shape
// (SessionStore.scan over every record, then per log: Durable.size of the WAL file, Durable.size
// and Durable.readFile of the log, each its own Effect):
//  - one walk over the directories instead of two: at 100k the directory/inode caches no longer
//    hold them between two walks;
//  - files are read straight into one reused buffer (open, read to EOF, close; no Buffer per
//    file), and the WAL stat does not throw on ENOENT (`throwIfNoEntry: false`: no exception
//    object per session);
//  - sessions are read in synchronous batches, one Effect per batch rather than four per session.
// These reads bypass the Durable port on purpose. They change nothing on disk (not crash points)
// and run before recovery's first write, so the crash-injecting layer — which only refuses reads
// after an injected crash — would pass them through unchanged. Logs larger than the buffer are
// still streamed through Durable (bounded memory), and every write goes through Durable.
import { Effect, Either, Option, Schema } from "effect"
import * as fs from "node:fs"
import type { Paths } from "../config/Paths.js"
import { DurableError, SessionStoreError } from "../domain/errors.js"
import { SessionId } from "../domain/ids.js"
import type { Session } from "../domain/session.js"
import type { DurableService } from "../storage/Durable.js"
import { ioError, parseRecord } from "../storage/SessionStore.js"
import { foldBytes, scanLog, type SessionScan, WHOLE_FILE } from "./LogScan.js"

/** One session directory as the read pass found it. */
export interface SessionRead {
  readonly id: SessionId
  /** The record; null when the directory has none (an orphan: its log is not read). */
  readonly record: Session | null
  /** The log's scan (null without a record). */
  readonly scan: SessionScan | null
  /** A pending WAL file exists or the log ends in a torn line: repair, then read the log again. */
  readonly needsRepair: boolean
}

const isSessionId = Schema.is(SessionId)
/** Sessions read per synchronous batch (the event loop turns between batches). */
const BATCH = 256

const errno = (e: unknown): string | undefined =>
  typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? e.code : undefined

const readError = (op: "open" | "read", path: string, e: unknown) =>
  new DurableError({ op, path, message: e instanceof Error ? e.message : String(e) })

/** A file too big for the shared buffer (read by other means). */
const LARGE = Symbol("large")

/**
 * Reads whole files into one reused buffer. `read` returns a view valid until the next call,
 * null when the file does not exist, LARGE when it is bigger than the buffer. Throws DurableError.
 */
class FileReader {
  /** One byte more than a whole-file read takes: filling it means "larger". */
  private readonly buf = Buffer.allocUnsafe(WHOLE_FILE + 1)

  read(path: string): Buffer | null | typeof LARGE {
    let fd: number
    try {
      fd = fs.openSync(path, "r")
    } catch (e) {
      if (errno(e) === "ENOENT") return null
      throw readError("open", path, e)
    }
    try {
      // Read to EOF (a read returning 0) or until the buffer is full; no fstat (measured: the
      // extra read at EOF is cheaper than fstat and its Stats object).
      let n = 0
      for (;;) {
        const got = fs.readSync(fd, this.buf, n, this.buf.length - n, n)
        n += got
        if (got === 0) return this.buf.subarray(0, n)
        if (n === this.buf.length) return LARGE
      }
    } catch (e) {
      throw readError("read", path, e)
    } finally {
      fs.closeSync(fd)
    }
  }

  /** Whether `path` exists (an error other than ENOENT throws). */
  exists(path: string): boolean {
    try {
      return fs.statSync(path, { throwIfNoEntry: false }) !== undefined
    } catch (e) {
      throw readError("read", path, e)
    }
  }
}

type Read = SessionRead | { readonly id: SessionId; readonly record: Session; readonly large: true }

/**
 * The three files of a session directory, by string concatenation: `Paths` joins (and
 * normalises) twice per file, measurable at 100k sessions. The names come from `Paths` itself
 * (the suffix after the session directory), so the two cannot drift apart.
 */
const fileNames = (paths: Paths) => {
  const probe = "00000000-0000-4000-8000-000000000000"
  const dir = paths.sessionDir(probe)
  const suffix = (file: string) => file.slice(dir.length)
  const record = suffix(paths.sessionFile(probe))
  const pending = suffix(paths.pendingFile(probe))
  const log = suffix(paths.eventsFile(probe))
  const prefix = dir.slice(0, dir.length - probe.length)
  const layout = [paths.sessionFile(probe), paths.pendingFile(probe), paths.eventsFile(probe)]
  if (!dir.endsWith(probe) || !layout.every((file) => file.startsWith(dir))) {
    // Not `<agents>/<id>/<file>` any more: ask Paths every time.
    return (id: SessionId) => ({ record: paths.sessionFile(id), pending: paths.pendingFile(id), log: paths.eventsFile(id) })
  }
  return (id: SessionId) => {
    const d = prefix + id
    return { record: d + record, pending: d + pending, log: d + log }
  }
}

/** One session directory: the record, then (with a record) the WAL stat and the log. Throws. */
const readOne = (
  reader: FileReader,
  files: ReturnType<typeof fileNames>,
  id: SessionId
): Read | SessionStoreError => {
  const f = files(id)
  const recordFile = f.record
  let bytes: Buffer | null | typeof LARGE
  try {
    bytes = reader.read(recordFile)
    // A record bigger than the buffer (a large provider blob): read it on its own.
    if (bytes === LARGE) bytes = fs.readFileSync(recordFile)
  } catch (e) {
    return ioError(id)(e instanceof DurableError ? e : readError("read", recordFile, e))
  }
  if (bytes === null) return { id, record: null, scan: null, needsRepair: false }
  const record = parseRecord(id, recordFile, bytes)
  if (Either.isLeft(record)) return record.left
  const pending = reader.exists(f.pending)
  const logFile = f.log
  const log = reader.read(logFile)
  if (log === LARGE) return { id, record: record.right, large: true }
  // An absent log scans as empty.
  const r = foldBytes(id, logFile, log ?? new Uint8Array(0))
  return { id, record: record.right, scan: r.scan, needsRepair: pending || r.tornTail }
}

/**
 * Every session directory under `agents/` (sorted by id, like `SessionStore.scan`), each read
 * once. Fails like `SessionStore.scan` on a record that does not decode (the first by id).
 */
export const readSessions = (
  durable: DurableService,
  paths: Paths
): Effect.Effect<ReadonlyArray<SessionRead>, SessionStoreError | DurableError> =>
  Effect.flatMap(durable.readDir(paths.agentsDir), (entries) => {
    const ids: Array<SessionId> = []
    for (const e of entries) if (e.isDirectory && isSessionId(e.name)) ids.push(e.name)
    ids.sort()
    const reader = new FileReader()
    const files = fileNames(paths)
    const out: Array<SessionRead> = []
    const large: Array<{ readonly at: number; readonly id: SessionId; readonly record: Session }> = []
    const batches: Array<number> = []
    for (let i = 0; i < ids.length; i += BATCH) batches.push(i)
    const batch = (from: number): Effect.Effect<void, SessionStoreError | DurableError> =>
      Effect.suspend((): Effect.Effect<void, SessionStoreError | DurableError> => {
        const to = Math.min(ids.length, from + BATCH)
        for (let i = from; i < to; i++) {
          let r: Read | SessionStoreError
          try {
            r = readOne(reader, files, ids[i]!)
          } catch (e) {
            return Effect.fail(e instanceof DurableError ? e : readError("read", paths.sessionDir(ids[i]!), e))
          }
          if (r instanceof SessionStoreError) return Effect.fail(r)
          if ("large" in r) {
            large.push({ at: out.length, id: r.id, record: r.record })
            out.push({ id: r.id, record: r.record, scan: null, needsRepair: false })
          } else {
            out.push(r)
          }
        }
        return Effect.void
      })
    // Logs bigger than the buffer: streamed in chunks through Durable (bounded memory).
    const streamed = Effect.forEach(large, (l) =>
      Effect.flatMap(durable.size(paths.pendingFile(l.id)), (pending) =>
        Effect.map(scanLog(durable, l.id, paths.eventsFile(l.id)), (r) => {
          out[l.at] = { id: l.id, record: l.record, scan: r.scan, needsRepair: Option.isSome(pending) || r.tornTail }
        })), { discard: true })
    return Effect.forEach(batches, batch, { discard: true }).pipe(Effect.zipRight(streamed), Effect.as(out))
  })
