// The read pass of crash recovery (docs/recovery.md): ONE listing of `agents/` and, per session
// directory, everything recovery reads from it back to back — the record (`session.json`,
// decoded by SessionStore.parseRecord with the Session Schema), a stat of the WAL file
// (`events.pending`) and one read of the log (`events.jsonl`), folded entry by entry (Fold.ts).
// Nothing is written here; Recovery flips records and repairs logs afterwards (through the
// SessionStore and the EventLog, i.e. through Durable, like every write).
//
// Shaped for 10k–100k sessions (the numbers are in docs/recovery.md): one walk over the
// directories (a second walk pays the directory and inode lookups again), files read into one
// reused buffer (open, read to EOF, close), a WAL stat that does not throw on ENOENT,
// and sessions in synchronous batches (one Effect per batch). These reads use `node:fs` rather than the Durable
// port: they change nothing on disk (not crash points) and run before recovery's first write,
// where the crash-injecting layer would pass them through anyway. Logs larger than the buffer
// are streamed through Durable (bounded memory).
//
// Over 300 lines because the read pass is one tuned loop (one walk, a reused buffer, batches, big
// logs streamed), kept whole so its costs can be read in one place.
import { Effect, Either, Option, Schema, Stream } from "effect"
import * as fs from "node:fs"
import type { BigIntStats } from "node:fs"
import { StringDecoder } from "node:string_decoder"
import type { Paths } from "../config/Paths.js"
import { DurableError, SessionStoreError, storageFault, withFault } from "../domain/errors.js"
import { SessionId } from "../domain/ids.js"
import type { Session } from "../domain/session.js"
import type { DurableService } from "../storage/Durable.js"
import type { EventLogError } from "../domain/errors.js"
import { encodeEntryLine, type EventLogService } from "../storage/EventLog.js"
import { ioError, parseRecord, type SessionStoreService } from "../storage/SessionStore.js"
import { type CheckpointEntry, CHECKPOINT_LINES, hashLine, identityOf, type RecordCopy, sameFile, textOf } from "./Checkpoint.js"
import { SessionFold, type SessionLog } from "./Fold.js"

/** One session directory as the read pass found it. */
export interface SessionRead {
  readonly id: SessionId
  /** The record; null when the directory has none (an orphan: its log is not read). */
  readonly record: Session | null
  /** The folded log (null without a record). */
  readonly log: SessionLog | null
  /** A pending WAL file holds an entry or the log ends in a torn line: repair, then read the log again. */
  readonly needsRepair: boolean
  /** Lines a checkpoint covered (not read again); 0 when the log was read from its start. */
  readonly skipped: number
  /** The checkpoint to keep for this log (the one used, or a newer one), or null. */
  readonly checkpoint: CheckpointEntry | null
  /**
   * The log was not opened: its checkpoint covered all of it and `stat` showed the same file
   * (Checkpoint.ts), so the fold is the checkpoint's state.
   */
  readonly unchanged: boolean
}

export interface LogRead {
  readonly log: SessionLog
  /** The file ends without a newline (a torn tail the EventLog must repair first). */
  readonly tornTail: boolean
}

/** Whole-file reads up to this size (one syscall pair); larger logs stream in chunks. */
export const WHOLE_FILE = 4 * 1024 * 1024
const CHUNK = 1024 * 1024
/** Sessions read per synchronous batch (the event loop turns between batches). */
const BATCH = 256

/** Feed one line (without its newline) to the fold. */
const foldLine = (fold: SessionFold, line: string): void => {
  if (line.length === 0) return fold.badLine("empty line")
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch (e) {
    return fold.badLine(e instanceof Error ? e.message : String(e))
  }
  fold.entry(json)
}

/** Feed the complete lines of `text` to the fold; returns the unterminated remainder. */
const foldText = (fold: SessionFold, text: string): string => {
  let from = 0
  for (let nl = text.indexOf("\n"); nl >= 0 && !fold.failed; nl = text.indexOf("\n", from)) {
    foldLine(fold, text.slice(from, nl))
    from = nl + 1
  }
  // After a bad line the rest is not read; the remainder is still what follows the last newline.
  return fold.failed ? text.slice(text.lastIndexOf("\n") + 1) : text.slice(from)
}


const asBuffer = (bytes: Uint8Array): Buffer =>
  Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/**
 * The checkpoint to keep after a fold (without a torn tail) that continued `prev` (null: from
 * the start): a new one when the fold went `CHECKPOINT_LINES` past it, `prev` with the file's
 * identity refreshed when no line was added but `stat` differs, else `prev`. `buf` holds the
 * file's bytes from offset `base` to its end; `stat`, the file as it was before they were read
 * (its identity is kept only if the bytes read were the whole file).
 */
const checkpointOf = (
  fold: SessionFold,
  prev: CheckpointEntry | null,
  buf: Buffer,
  base: number,
  stat: BigIntStats | undefined
): CheckpointEntry | null => {
  if (fold.failed) return null
  const whole = stat !== undefined && Number(stat.size) === base + buf.length && (buf.length === 0 || buf[buf.length - 1] === 0x0a)
  if (prev !== null && fold.folded === prev.lines) {
    if (!whole || (prev.log !== null && sameFile(prev.log, stat))) return prev
    return { ...prev, log: identityOf(stat) }
  }
  if (fold.folded - (prev?.lines ?? 0) < CHECKPOINT_LINES) return prev
  const end = buf.lastIndexOf(0x0a)
  if (end <= 0) return prev
  const start = buf.lastIndexOf(0x0a, end - 1) + 1
  const last = buf.subarray(start, end)
  return {
    session_id: fold.session_id,
    offset: base + end + 1,
    lines: fold.folded,
    lastLength: last.byteLength,
    lastHash: hashLine(last),
    log: whole ? identityOf(stat) : null,
    state: fold.state(),
    recent: fold.recent()
  }
}

/** Fold a log read whole, and checkpoint it. */
const foldWhole = (
  session_id: SessionId,
  file: string,
  bytes: Buffer,
  stat: BigIntStats | undefined
): LogRead & { readonly checkpoint: CheckpointEntry | null } => {
  const fold = new SessionFold(session_id, file)
  const rest = foldText(fold, textOf(bytes))
  const tornTail = rest.length > 0
  return { log: fold.finish(), tornTail, checkpoint: tornTail ? null : checkpointOf(fold, null, bytes, 0, stat) }
}

/**
 * Read one log and fold it (an absent file folds as empty): up to WHOLE_FILE bytes in one read,
 * larger logs streamed through Durable in CHUNK pieces, each chunk's complete lines folded.
 */
export const readLog = (
  durable: DurableService,
  session_id: SessionId,
  file: string
): Effect.Effect<LogRead & { readonly checkpoint: CheckpointEntry | null }, DurableError> =>
  Effect.flatMap(durable.size(file), (found) => {
    const size = Option.getOrElse(found, () => 0)
    if (size <= WHOLE_FILE) {
      return size === 0
        ? Effect.succeed(foldWhole(session_id, file, Buffer.alloc(0), undefined))
        : Effect.map(durable.readFile(file), (bytes) =>
          foldWhole(session_id, file, asBuffer(Option.getOrElse(bytes, () => new Uint8Array(0))), undefined))
    }
    return streamLog(durable, session_id, file, undefined)
  })

/**
 * Fold a log streamed through Durable in CHUNK pieces (bounded memory), and checkpoint it like a
 * log read whole: the last complete line is kept aside as the chunks pass. `stat`: the file as
 * it was before the stream opened it (its identity is kept only if the stream read all of it).
 */
const streamLog = (
  durable: DurableService,
  session_id: SessionId,
  file: string,
  stat: BigIntStats | undefined
): Effect.Effect<LogRead & { readonly checkpoint: CheckpointEntry | null }, DurableError> =>
  Effect.suspend(() => {
    const fold = new SessionFold(session_id, file)
    const decoder = new StringDecoder("utf8")
    let carry = ""
    let total = 0
    /** The bytes after the last newline so far, and the last complete line with its newline. */
    let partial: Array<Buffer> = []
    let last: Buffer | null = null
    return Stream.runForEach(
      durable.stream(file, { chunkSize: CHUNK }),
      (chunk) =>
        Effect.sync(() => {
          const buf = asBuffer(chunk)
          total += buf.length
          const nl = buf.lastIndexOf(0x0a)
          if (nl < 0) partial.push(Buffer.from(buf))
          else {
            const prev = nl === 0 ? -1 : buf.lastIndexOf(0x0a, nl - 1)
            last = prev >= 0 ? Buffer.from(buf.subarray(prev + 1, nl + 1)) : Buffer.concat([...partial, buf.subarray(0, nl + 1)])
            partial = nl + 1 < buf.length ? [Buffer.from(buf.subarray(nl + 1))] : []
          }
          carry = foldText(fold, carry + decoder.write(buf))
        })
    ).pipe(Effect.map(() => {
      carry += decoder.end()
      const tornTail = carry.length > 0
      const log = fold.finish()
      const end: Buffer | null = last
      const checkpoint = tornTail || end === null ? null : checkpointOf(fold, null, end, total - end.length, stat)
      return { log, tornTail, checkpoint }
    }))
  })

const isSessionId = Schema.is(SessionId)

const errno = (e: unknown): string | undefined =>
  typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? e.code : undefined

const readError = (op: "open" | "read", path: string, e: unknown) =>
  new DurableError({ op, path, ...withFault(storageFault(e)), message: e instanceof Error ? e.message : String(e) })

/** A file too big for the shared buffer (read by other means). */
const LARGE = Symbol("large")

/**
 * Reads whole files into one reused buffer. `read` returns a view valid until the next call,
 * null when the file does not exist, LARGE when it is bigger than the buffer. Throws DurableError.
 */
class FileReader {
  /** One byte more than a whole-file read takes: filling it means "larger". */
  private readonly buf = Buffer.allocUnsafe(WHOLE_FILE + 1)
  /** With `withStat`: the file's `fstat`, taken after opening and before reading. */
  stat: BigIntStats | undefined

  read(path: string, withStat = false): Buffer | null | typeof LARGE {
    return this.readFrom(path, 0, withStat)
  }

  /**
   * The bytes of `path` from `position` to its end, like `read` (null when absent, LARGE when
   * more than the buffer holds).
   */
  readFrom(path: string, position: number, withStat = false): Buffer | null | typeof LARGE {
    this.stat = undefined
    let fd: number
    try {
      fd = fs.openSync(path, "r")
    } catch (e) {
      if (errno(e) === "ENOENT") return null
      throw readError("open", path, e)
    }
    try {
      // Before the read: a change after it shows in the times, so the identity can only be stale.
      if (withStat) this.stat = fs.fstatSync(fd, { bigint: true })
      // Read to EOF (a read returning 0) or until the buffer is full; no fstat (the extra read
      // at EOF is cheaper than fstat and its Stats object).
      let n = 0
      for (;;) {
        const got = fs.readSync(fd, this.buf, n, this.buf.length - n, position + n)
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

  /** `stat` of `path` (undefined when it does not exist; another error throws). */
  statOf(path: string): BigIntStats | undefined {
    try {
      return fs.statSync(path, { bigint: true, throwIfNoEntry: false })
    } catch (e) {
      throw readError("read", path, e)
    }
  }

  /** Whether `path` exists and is not empty (an error other than ENOENT throws). */
  nonEmpty(path: string): boolean {
    try {
      return (fs.statSync(path, { throwIfNoEntry: false })?.size ?? 0) > 0
    } catch (e) {
      throw readError("read", path, e)
    }
  }
}

type Read = SessionRead | {
  readonly id: SessionId
  readonly record: Session
  readonly copy: RecordCopy | null
  readonly large: true
}

/**
 * Continue a checkpoint's fold: the file from the start of the checkpoint's last line on. Null
 * when the log no longer holds that line at that offset (or the tail is larger than the buffer):
 * the caller folds the whole log.
 */
const foldFromCheckpoint = (reader: FileReader, file: string, cp: CheckpointEntry) => {
  const from = cp.offset - 1 - cp.lastLength
  if (from < 0) return null
  const bytes = reader.readFrom(file, from, true)
  if (bytes === null || bytes === LARGE || bytes.length <= cp.lastLength || bytes[cp.lastLength] !== 0x0a) return null
  if (hashLine(bytes.subarray(0, cp.lastLength)) !== cp.lastHash) return null
  const stat = reader.stat
  const fold = new SessionFold(cp.session_id, file, cp)
  const tail = bytes.subarray(cp.lastLength + 1)
  const rest = foldText(fold, textOf(tail))
  const tornTail = rest.length > 0
  const checkpoint = tornTail || fold.failed ? null : checkpointOf(fold, cp, tail, cp.offset, stat)
  return { log: fold.finish(), tornTail, checkpoint, skipped: cp.lines }
}

/**
 * A checkpoint that covered the whole log, and `stat` shows the same file: its state is the
 * fold, the log is not opened. Null when in any doubt (no identity, another file, a size or a
 * time that differs).
 */
const unchangedSince = (reader: FileReader, file: string, cp: CheckpointEntry) => {
  if (cp.log === null || cp.log.size !== cp.offset) return null
  const stat = reader.statOf(file)
  if (stat === undefined || !sameFile(cp.log, stat)) return null
  const fold = new SessionFold(cp.session_id, file, cp)
  return { log: fold.finish(), tornTail: false, checkpoint: cp, skipped: cp.lines }
}

/**
 * The three files of a session directory, by string concatenation (`Paths` joins and
 * normalises per call, measurable at 100k sessions). The names come from `Paths` itself, so
 * the two cannot drift apart.
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

/**
 * Fold a log from its checkpoint after the EventLog repaired it (a repair only cuts a torn tail
 * after the last newline or appends the pending line, so the checkpoint's last line stays put).
 * Null when the checkpoint no longer matches: read the whole log.
 */
export const refoldFrom = (file: string, cp: CheckpointEntry) => foldFromCheckpoint(new FileReader(), file, cp)

/**
 * The record: the checkpoint's copy when `stat` shows the same file as when it was copied, else
 * read and decoded (null: no record), with the file's identity when the bytes read were all of it.
 */
const readRecordOf = (
  reader: FileReader,
  file: string,
  id: SessionId,
  checkpoint: CheckpointEntry | undefined
): { readonly record: Session; readonly copy: RecordCopy | null } | null | SessionStoreError => {
  const copy = checkpoint?.record
  if (copy !== undefined && copy.session.id === id) {
    const stat = reader.statOf(file)
    if (stat !== undefined && sameFile(copy.file, stat)) return { record: copy.session, copy }
  }
  let bytes: Buffer | null | typeof LARGE
  try {
    bytes = reader.read(file, true)
    // A record bigger than the buffer (a large provider blob): read it on its own.
    if (bytes === LARGE) bytes = fs.readFileSync(file)
  } catch (e) {
    return ioError(id)(e instanceof DurableError ? e : readError("read", file, e))
  }
  if (bytes === null) return null
  const record = parseRecord(id, file, bytes)
  if (Either.isLeft(record)) return record.left
  const stat = reader.stat
  const whole = stat !== undefined && Number(stat.size) === bytes.length
  return { record: record.right, copy: whole ? { file: identityOf(stat), session: record.right } : null }
}

/** The checkpoint to keep, carrying the record's copy (a new entry only when something changed). */
const withRecord = (cp: CheckpointEntry | null, copy: RecordCopy | null): CheckpointEntry | null => {
  if (cp === null || cp.record === (copy ?? undefined)) return cp
  if (copy === null) {
    const { record: _, ...rest } = cp
    return rest
  }
  return { ...cp, record: copy }
}

/** One session directory: the record, then (with a record) the WAL stat and the log. Throws. */
const readOne = (
  reader: FileReader,
  files: ReturnType<typeof fileNames>,
  id: SessionId,
  checkpoint: CheckpointEntry | undefined
): Read | SessionStoreError => {
  const f = files(id)
  const rec = readRecordOf(reader, f.record, id, checkpoint)
  if (rec === null) return { id, record: null, log: null, needsRepair: false, skipped: 0, checkpoint: null, unchanged: false }
  if (rec instanceof SessionStoreError) return rec
  const { record, copy } = rec
  const pending = reader.nonEmpty(f.pending)
  if (checkpoint !== undefined) {
    const same = unchangedSince(reader, f.log, checkpoint)
    if (same !== null) {
      return { id, record, ...same, checkpoint: withRecord(same.checkpoint, copy), needsRepair: pending, unchanged: true }
    }
    const resumed = foldFromCheckpoint(reader, f.log, checkpoint)
    if (resumed !== null) {
      return {
        id,
        record,
        ...resumed,
        checkpoint: withRecord(resumed.checkpoint, copy),
        needsRepair: pending || resumed.tornTail,
        unchanged: false
      }
    }
  }
  const log = reader.read(f.log, true)
  if (log === LARGE) return { id, record, copy, large: true }
  // An absent log folds as empty.
  const r = foldWhole(id, f.log, log ?? Buffer.alloc(0), reader.stat)
  return {
    id,
    record,
    log: r.log,
    needsRepair: pending || r.tornTail,
    skipped: 0,
    checkpoint: withRecord(r.checkpoint, copy),
    unchanged: false
  }
}

/**
 * Every session directory under `agents/` (sorted by id, like `SessionStore.scan`), each read
 * once. Fails like `SessionStore.scan` on a record that does not decode (the first by id).
 */
export const readSessions = (
  durable: DurableService,
  paths: Paths,
  checkpoints: ReadonlyMap<SessionId, CheckpointEntry> = new Map()
): Effect.Effect<ReadonlyArray<SessionRead>, SessionStoreError | DurableError> =>
  Effect.flatMap(durable.readDir(paths.agentsDir), (entries) => {
    const ids: Array<SessionId> = []
    for (const e of entries) if (e.isDirectory && isSessionId(e.name)) ids.push(e.name)
    ids.sort()
    const reader = new FileReader()
    const files = fileNames(paths)
    const out: Array<SessionRead> = []
    const large: Array<{ readonly at: number; readonly id: SessionId; readonly record: Session; readonly copy: RecordCopy | null }> = []
    const batches: Array<number> = []
    for (let i = 0; i < ids.length; i += BATCH) batches.push(i)
    const batch = (from: number): Effect.Effect<void, SessionStoreError | DurableError> =>
      Effect.suspend((): Effect.Effect<void, SessionStoreError | DurableError> => {
        const to = Math.min(ids.length, from + BATCH)
        for (let i = from; i < to; i++) {
          let r: Read | SessionStoreError
          try {
            r = readOne(reader, files, ids[i]!, checkpoints.get(ids[i]!))
          } catch (e) {
            return Effect.fail(e instanceof DurableError ? e : readError("read", paths.sessionDir(ids[i]!), e))
          }
          if (r instanceof SessionStoreError) return Effect.fail(r)
          if ("large" in r) {
            large.push({ at: out.length, id: r.id, record: r.record, copy: r.copy })
            out.push({ id: r.id, record: r.record, log: null, needsRepair: false, skipped: 0, checkpoint: null, unchanged: false })
          } else {
            out.push(r)
          }
        }
        return Effect.void
      })
    // Logs bigger than the buffer: streamed in chunks through Durable (bounded memory).
    const streamed = Effect.forEach(large, (l) => {
      const file = paths.eventsFile(l.id)
      return Effect.flatMap(durable.size(paths.pendingFile(l.id)), (pending) =>
        Effect.flatMap(Effect.try({ try: () => reader.statOf(file), catch: (e) => e instanceof DurableError ? e : readError("read", file, e) }), (stat) =>
          Effect.map(streamLog(durable, l.id, file, stat), (r) => {
            out[l.at] = {
              id: l.id,
              record: l.record,
              log: r.log,
              needsRepair: Option.getOrElse(pending, () => 0) > 0 || r.tornTail,
              skipped: 0,
              checkpoint: withRecord(r.checkpoint, l.copy),
              unchanged: false
            }
          })))
    }, { discard: true })
    return Effect.forEach(batches, batch, { discard: true }).pipe(Effect.zipRight(streamed), Effect.as(out))
  })

/**
 * Cluster mode: the sessions of the trees whose roots are `roots`, read through the ports
 * (SessionStore, EventLog: Postgres) rather than from a home's files. Every record is scanned —
 * or, given `sessions` (a superset of the trees' sessions, the caller's index), only those are
 * loaded — and every live-looking log folded (each entry re-encoded as its JSON line, so the fold
 * is the one of the file read); a session belongs to a tree when its `agent.created` chain of parent
 * sessions ends at the root. Sessions without a record or an `agent.created` are left out (they
 * may be another runner's creation in flight), so recovery removes nothing of theirs.
 */
export const readStoreSessions = (
  store: SessionStoreService,
  log: EventLogService,
  roots: ReadonlySet<string>,
  sessions?: ReadonlySet<string>
): Effect.Effect<ReadonlyArray<SessionRead>, SessionStoreError | EventLogError> =>
  Effect.gen(function*() {
    const records = (sessions === undefined ? yield* store.scan : yield* store.loadMany([...sessions].sort().map((id) => SessionId.make(id))))
      .filter((r) => r.state !== "terminated")
    // The logs in a few queries (readMany), each entry folded into its session's fold.
    const folds = new Map(records.map((r) => [r.id, new SessionFold(r.id, `postgres:substrat_events/${r.id}`)]))
    yield* log.readMany(records.map((r) => r.id)).pipe(Stream.runForEach((e) =>
      Effect.sync(() => {
        const fold = folds.get(e.session_id)
        if (fold === undefined) return
        const line = encodeEntryLine(e, e.ts, e.session_id)
        if (Either.isLeft(line)) fold.badLine(line.left)
        else fold.entry(JSON.parse(line.right))
      })
    ))
    const reads = new Map<SessionId, SessionRead>(records.map((record) => [
      record.id,
      { id: record.id, record, log: folds.get(record.id)!.finish(), needsRepair: false, skipped: 0, checkpoint: null, unchanged: false }
    ]))
    const rootOf = (r: SessionRead): string | undefined => {
      let at: SessionRead | undefined = r
      for (let i = 0; at !== undefined && i < 10_000; i++) {
        const created = at.log?.created
        if (created == null) return undefined
        if (created.parent_session_id === null) return created.agent_id
        at = reads.get(created.parent_session_id)
      }
      return undefined
    }
    return [...reads.values()].filter((r) => {
      const root = rootOf(r)
      return root !== undefined && roots.has(root)
    })
  })
