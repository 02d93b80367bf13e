// The file EventLog's shared group-commit journal (docs/recovery.md, "Event log: the journal"):
// one file for the daemon's home, `events.journal`. An append hands its bytes and the offset where
// they go in its session's log to `commit`; everything handed in while a journal write + fsync is
// in flight goes into the next single write + fsync (one fsync per batch across sessions). Once
// that fsync returns, each record's bytes are written to its log (no fsync) and its append is
// acknowledged. A checkpoint (journal past `checkpointBytes`, layer close, a removed log)
// fsyncs the logs written since the last one, then empties the journal (ftruncate + fsync).
// `replay` (at the layer's start) applies the journal to the logs, fsyncs them and empties it.
//
// A record: u32le length of the body · u32le CRC-32 of the body · body = `<session id> <offset>\n`
// then the bytes (whole log lines). A record that does not check (short, zero length, wrong CRC)
// ends the journal: it and everything after it are the torn tail of a write never acknowledged.
//
// Over 300 lines because the record format, the replay and the committer are one on-disk contract
// (docs/recovery.md): what a cycle writes and in which order is what the replay relies on.
import { Cause, Effect, ExecutionStrategy, Exit, FiberSet, Option, Schema, Scope } from "effect"
import { crc32 } from "node:zlib"
import { DurableError } from "../../domain/errors.js"
import { SessionId } from "../../domain/ids.js"
import type { AppendHandle, DurableService } from "../Durable.js"

/** One append's bytes for one log: where they go and the open log they are written to. */
export interface JournalEntry {
  readonly session: SessionId
  /** The log's path (a checkpoint fsyncs it by path: its fd may be closed by then). */
  readonly log: string
  readonly offset: number
  readonly bytes: Uint8Array
  readonly handle: AppendHandle
}

/** Why a commit failed: `durable` when the journal holds the record and only the log write failed. */
export interface CommitFailure {
  readonly error: DurableError
  readonly durable: boolean
}

export interface Journal {
  /** Durable in the journal and written to its log: then it succeeds. */
  readonly commit: (entry: JournalEntry) => Effect.Effect<void, CommitFailure>
  /** Fsync every log written since the last checkpoint and empty the journal (waits for a cycle in flight). */
  readonly checkpoint: Effect.Effect<void, DurableError>
  /** Whether `log` was written since the last checkpoint (its records may still be in the journal). */
  readonly dirty: (log: string) => boolean
  /** Close the journal's fd once nothing has been committed for `idleMs` (the idle sweep). */
  readonly idle: (idleMs: number) => Effect.Effect<void>
}

const HEADER = 8
/** How many logs a checkpoint fsyncs at once (each holds a descriptor meanwhile). */
const checkpointConcurrency = 16
const utf8 = new TextEncoder()
const latin1 = new TextDecoder("latin1")
const isSessionId = Schema.is(SessionId)

/** The journal record of `entry`'s bytes. */
export const encodeRecord = (session: string, offset: number, bytes: Uint8Array): Uint8Array => {
  const head = utf8.encode(`${session} ${offset}\n`)
  const out = Buffer.allocUnsafe(HEADER + head.length + bytes.length)
  out.set(head, HEADER)
  out.set(bytes, HEADER + head.length)
  const body = out.subarray(HEADER)
  out.writeUInt32LE(body.length, 0)
  out.writeUInt32LE(crc32(body), 4)
  return out
}

export interface JournalRecord {
  readonly session: SessionId
  readonly offset: number
  readonly bytes: Uint8Array
}

/** The journal's whole records, in order, up to the first one that does not check (a torn tail). */
export const decodeRecords = (journal: Uint8Array): { readonly records: ReadonlyArray<JournalRecord>; readonly validBytes: number } => {
  const buf = Buffer.from(journal.buffer, journal.byteOffset, journal.length)
  const records: Array<JournalRecord> = []
  let at = 0
  while (at + HEADER <= buf.length) {
    const len = buf.readUInt32LE(at)
    if (len === 0 || at + HEADER + len > buf.length) break
    const body = buf.subarray(at + HEADER, at + HEADER + len)
    if (crc32(body) !== buf.readUInt32LE(at + 4)) break
    const nl = body.indexOf(0x0a)
    const head = nl < 0 ? [] : latin1.decode(body.subarray(0, nl)).split(" ")
    const offset = Number(head[1])
    if (head.length !== 2 || !isSessionId(head[0]) || !Number.isSafeInteger(offset) || offset < 0) break
    records.push({ session: head[0], offset, bytes: body.subarray(nl + 1) })
    at += HEADER + len
  }
  return { records, validBytes: at }
}

/**
 * The edits that apply `records` (one log's, in journal order) to the log's bytes from `base` on
 * (`view`, the log's length `base + view.length`): a record goes at its offset when every byte the
 * log has there is the record's own or zero (the log is shorter, or a power loss lost some of its
 * pages); bytes of anything else mean the record is not this log's, and so does a log shorter than
 * the record's offset: skipped, never overwritten.
 */
export const replayEdits = (
  base: number,
  view: Uint8Array,
  records: ReadonlyArray<{ readonly offset: number; readonly bytes: Uint8Array }>
): ReadonlyArray<{ readonly offset: number; readonly bytes: Uint8Array }> => {
  let cur = view
  const edits: Array<{ offset: number; bytes: Uint8Array }> = []
  for (const r of records) {
    const end = base + cur.length
    if (r.offset < base || r.offset > end) continue
    const from = r.offset - base
    const have = Math.min(cur.length - from, r.bytes.length)
    let same = have === r.bytes.length
    let fits = true
    for (let i = 0; i < have; i++) {
      const b = cur[from + i]!
      if (b === r.bytes[i]) continue
      same = false
      if (b !== 0) {
        fits = false
        break
      }
    }
    if (same || !fits) continue
    edits.push({ offset: r.offset, bytes: r.bytes })
    const next = new Uint8Array(Math.max(cur.length, from + r.bytes.length))
    next.set(cur, 0)
    next.set(r.bytes, from)
    cur = next
  }
  return edits
}

/** What `replay` did: records read, logs patched, records skipped (not their log's). */
export interface ReplayReport {
  readonly records: number
  readonly logsPatched: number
  readonly torn: boolean
}

/**
 * Apply the journal at `path` to the logs (`logOf` a session's log path), fsync every log it names,
 * then empty it (truncate + fsync). A log that no longer exists is skipped. Idempotent: a crash
 * anywhere in it is replayed again by the next start.
 */
export const replay = (
  durable: DurableService,
  path: string,
  logOf: (session: SessionId) => string
): Effect.Effect<ReplayReport, DurableError> =>
  Effect.gen(function*() {
    const file = yield* durable.readFile(path)
    if (Option.isNone(file) || file.value.length === 0) return { records: 0, logsPatched: 0, torn: false }
    const { records, validBytes } = decodeRecords(file.value)
    const byLog = new Map<string, Array<JournalRecord>>()
    for (const r of records) {
      const log = logOf(r.session)
      const list = byLog.get(log)
      if (list === undefined) byLog.set(log, [r])
      else list.push(r)
    }
    let logsPatched = 0
    for (const [log, list] of byLog) {
      const size = yield* durable.size(log)
      if (Option.isNone(size)) continue
      let base = size.value
      let top = 0
      for (const r of list) {
        base = Math.min(base, r.offset)
        top = Math.max(top, r.offset + r.bytes.length)
      }
      const view = yield* durable.readRange(log, base, Math.max(top, size.value))
      const edits = replayEdits(base, view, list)
      // Fsync'd even when nothing is patched: the bytes may be there only in the page cache.
      yield* durable.patch(log, edits)
      if (edits.length > 0) logsPatched++
    }
    yield* durable.truncate(path, 0)
    return { records: records.length, logsPatched, torn: validBytes < file.value.length }
  })

interface Item {
  readonly entry: JournalEntry
  readonly record: Uint8Array
  readonly resume: (effect: Effect.Effect<void, CommitFailure>) => void
  /** Answered already (an item is answered once: by its cycle, or by a stopped committer). */
  answered: boolean
}

const answer = (it: Item, effect: Effect.Effect<void, CommitFailure>) => {
  if (it.answered) return
  it.answered = true
  it.resume(effect)
}

const concat = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  if (parts.length === 1) return parts[0]!
  return Buffer.concat(parts)
}

/**
 * The group committer over the journal at `path`. Its cycles run one at a time in a fiber of
 * their own (started when a commit finds none running); the journal's fd is opened by the first
 * cycle and closed when idle, and by the finalizer (added to the caller's scope) after a last
 * checkpoint.
 */
export const makeJournal = (
  durable: DurableService,
  path: string,
  checkpointBytes: number
): Effect.Effect<Journal, never, Scope.Scope> =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    // The pump's fibers belong to the layer's scope (interrupted when it closes, after the
    // finalizer below has had its last checkpoint: finalizers run last-added first).
    const runFork = yield* FiberSet.makeRuntime<never>()
    let queue: Array<Item> = []
    let running = false
    /** Bytes of whole, fsync'd records in the journal. */
    let size = 0
    /** The journal must be cut back to `size` before the next write (a write or fsync failed). */
    let cutBack = false
    let wantCheckpoint = false
    let wantClose = false
    let lastCommit = 0
    let open: { readonly handle: AppendHandle; readonly scope: Scope.CloseableScope } | undefined
    /** Logs written since the last checkpoint. */
    const dirtyLogs = new Set<string>()
    /** Waiting for the running cycles to end (idle, close). */
    let drained: Array<(exit: Exit.Exit<void, DurableError>) => void> = []
    /**
     * Waiting for the next checkpoint (a removed log): answered when it has run, not when the
     * pump runs dry — under a steady load from other sessions the queue never empties.
     */
    let checkpointed: Array<(exit: Exit.Exit<void, DurableError>) => void> = []
    const settle = (waiting: ReadonlyArray<(exit: Exit.Exit<void, DurableError>) => void>, exit: Exit.Exit<void, DurableError>) => {
      for (const w of waiting) w(exit)
    }
    let lastError: DurableError | undefined
    /** The cycle under way, and whether its journal write + fsync has returned. */
    let inFlight: ReadonlyArray<Item> = []
    let inFlightDurable = false

    const handle: Effect.Effect<AppendHandle, DurableError> = Effect.suspend(() => {
      if (open !== undefined) return Effect.succeed(open.handle)
      // A scope of its own, closed by `closeHandle` (idle, and the layer's finalizer after its
      // checkpoint): one forked from the layer's would be closed before that finalizer runs.
      return Effect.flatMap(Scope.make(ExecutionStrategy.sequential), (scope) =>
        Scope.extend(durable.openAppend(path), scope).pipe(
          Effect.tap((h) =>
            Effect.sync(() => {
              open = { handle: h, scope }
              // A cut-back still owed (a write or fsync failed, then the fd was closed as idle):
              // `size` stays the last good length, so the torn bytes after it are cut, not kept.
              if (!cutBack) size = h.sizeAtOpen
            })
          ),
          Effect.onError(() => Scope.close(scope, Exit.void))
        ))
    })

    const closeHandle: Effect.Effect<void> = Effect.suspend(() => {
      const o = open
      open = undefined
      return o === undefined ? Effect.void : Scope.close(o.scope, Exit.void)
    })

    const failAll = (items: ReadonlyArray<Item>, error: DurableError) => {
      const failure = Effect.fail({ error, durable: false })
      for (const it of items) answer(it, failure)
    }

    // One cycle: the items' records in one journal write + fsync, then each item's log write
    // (concurrently, on the pool); an item is resumed as soon as its own log write returns.
    const cycle = (items: ReadonlyArray<Item>): Effect.Effect<void> =>
      Effect.suspend(() => {
        inFlight = items
        inFlightDurable = false
        // Left set when the cycle dies: `stopped` answers what it held.
        return Effect.zipLeft(cycleOf(items), Effect.sync(() => {
          inFlight = []
          inFlightDurable = false
        }))
      })

    const cycleOf = (items: ReadonlyArray<Item>): Effect.Effect<void> =>
      Effect.flatMap(
        Effect.exit(Effect.flatMap(handle, (h) => h.append(concat(items.map((it) => it.record))))),
        (exit) => {
          if (Exit.isFailure(exit)) {
            // Nothing of these records counts: cut the journal back before the next write.
            cutBack = true
            failAll(items, firstError(exit.cause) ?? syntheticError(path))
            return Effect.void
          }
          inFlightDurable = true
          for (const it of items) {
            size += it.record.length
            dirtyLogs.add(it.entry.log)
          }
          if (size >= checkpointBytes) wantCheckpoint = true
          lastCommit = clock.unsafeCurrentTimeMillis()
          const write = (it: Item) =>
            Effect.map(Effect.exit(it.entry.handle.write(it.entry.bytes)), (w) =>
              answer(it, Exit.isSuccess(w) ? Effect.void : Effect.fail({ error: firstError(w.cause) ?? syntheticError(it.entry.log), durable: true })))
          return items.length === 1 ? write(items[0]!) : Effect.forEach(items, write, { concurrency: "unbounded", discard: true })
        }
      )

    const doCheckpoint: Effect.Effect<void, DurableError> = Effect.suspend(() => {
      wantCheckpoint = false
      if (size === 0 && !cutBack) return Effect.void
      const logs = [...dirtyLogs]
      return Effect.zipRight(
        // A few at a time: each is opened by path, and thousands of logs may have been written since.
        Effect.forEach(logs, (log) => durable.patch(log, []), { concurrency: checkpointConcurrency, discard: true }),
        // The logs hold every record now: the journal may be emptied, whatever happens next.
        Effect.suspend(() => {
          for (const l of logs) dirtyLogs.delete(l)
          size = 0
          cutBack = true
          return Effect.flatMap(handle, (h) => Effect.tap(h.truncateTo(0), () => Effect.sync(() => (cutBack = false))))
        })
      )
    })

    const pump: Effect.Effect<void> = Effect.suspend(() => {
      if (cutBack && (queue.length > 0 || wantCheckpoint)) {
        return Effect.flatMap(Effect.exit(Effect.flatMap(handle, (h) => h.truncateTo(size))), (exit) => {
          if (Exit.isSuccess(exit)) {
            cutBack = false
            return pump
          }
          // The journal cannot be put right: fail what waits, try again on the next commit.
          const items = queue
          queue = []
          lastError = firstError(exit.cause) ?? syntheticError(path)
          failAll(items, lastError)
          wantCheckpoint = false
          const waiting = checkpointed
          checkpointed = []
          settle(waiting, Exit.fail(lastError))
          return pump
        })
      }
      // A checkpoint goes before the next cycle: under a steady load the queue is never empty.
      if (wantCheckpoint) {
        const waiting = checkpointed
        checkpointed = []
        return Effect.flatMap(Effect.exit(doCheckpoint), (exit) => {
          const error = Exit.isFailure(exit) ? firstError(exit.cause) ?? syntheticError(path) : undefined
          if (error !== undefined) lastError = error
          settle(waiting, error === undefined ? Exit.void : Exit.fail(error))
          return pump
        })
      }
      if (queue.length > 0) {
        const items = queue
        queue = []
        return Effect.zipRight(cycle(items), pump)
      }
      if (wantClose) {
        wantClose = false
        return Effect.zipRight(closeHandle, pump)
      }
      running = false
      const waiting = drained
      drained = []
      const exit = lastError === undefined ? Exit.void : Exit.fail(lastError)
      lastError = undefined
      for (const w of waiting) w(exit)
      return Effect.void
    })

    // The pump ended other than by running dry (a defect in a Durable call, or interrupted): answer
    // everything that waits instead of leaving `running` set — every later commit would wait for
    // ever — and cut the journal back to its last whole record before the next write.
    const stopped = (cause: Cause.Cause<never>): Effect.Effect<void> =>
      Effect.sync(() => {
        running = false
        cutBack = true
        const error = new DurableError({ op: "write", path, message: `the journal's committer stopped: ${Cause.pretty(cause)}` })
        const durable = inFlightDurable
        for (const it of inFlight) answer(it, Effect.fail({ error, durable }))
        inFlight = []
        inFlightDurable = false
        const items = queue
        queue = []
        failAll(items, error)
        wantCheckpoint = false
        wantClose = false
        const waiting = [...checkpointed, ...drained]
        checkpointed = []
        drained = []
        lastError = undefined
        settle(waiting, Exit.fail(error))
      })

    const start = () => {
      if (running) return
      running = true
      runFork(Effect.onExit(pump, (exit) => Exit.isFailure(exit) ? stopped(exit.cause) : Effect.void))
    }

    const commit = (entry: JournalEntry): Effect.Effect<void, CommitFailure> =>
      Effect.async<void, CommitFailure>((resume) => {
        queue.push({ entry, record: encodeRecord(entry.session, entry.offset, entry.bytes), resume, answered: false })
        start()
      })

    /** Run the pump with `flags` set and wait until it has nothing left to do. */
    const request = (flags: { readonly checkpoint: boolean; readonly close: boolean }): Effect.Effect<void, DurableError> =>
      Effect.async<void, DurableError>((resume) => {
        if (flags.checkpoint) wantCheckpoint = true
        if (flags.close) wantClose = true
        // A checkpoint alone is answered once it has run; a close once the pump is idle.
        const waiters = flags.checkpoint && !flags.close ? checkpointed : drained
        waiters.push((exit) => resume(exit))
        if (!running) lastError = undefined
        start()
      })

    const checkpoint = request({ checkpoint: true, close: false })

    // Only the fd is given back: the records stay (reopened, the journal continues after them) until
    // a checkpoint by size, a removed log or the layer's close — an idle sweep that wrote would make
    // the steps of a run depend on timing.
    const idle = (idleMs: number): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (running || open === undefined || clock.unsafeCurrentTimeMillis() - lastCommit < idleMs) return Effect.void
        return Effect.ignore(request({ checkpoint: false, close: true }))
      })

    yield* Effect.addFinalizer(() => Effect.ensuring(Effect.ignore(request({ checkpoint: true, close: true })), closeHandle))

    return { commit, checkpoint, dirty: (log) => dirtyLogs.has(log), idle }
  })

const firstError = (cause: Cause.Cause<DurableError>): DurableError | undefined => Option.getOrUndefined(Cause.failureOption(cause))

const syntheticError = (path: string): DurableError =>
  new DurableError({ op: "write", path, message: "the journal write did not complete" })
