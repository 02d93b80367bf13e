// File implementation of the EventLog port (`EventLog.layerFile`, ../EventLog.ts): `agents/<sid>/events.jsonl`, one JSON entry per line.
// An append (or a batch, `appendAll`) goes through the home's group-commit journal (eventJournal.ts,
// docs/recovery.md): its bytes and their offset in the log are written to `events.journal` with
// whatever other sessions hand in meanwhile, one fsync for all; then the bytes are written to the
// log (no fsync: a checkpoint fsyncs the logs before it empties the journal) and the append is
// acknowledged. The layer's start replays the journal onto the logs.
// Open/repair of one log: cut a torn trailing line, apply the one record whose log write failed in
// this process, and for homes written by the pending-file WAL of before: replay a valid
// `events.pending` entry unless the log already ends with it (a batch: complete whatever part of it
// the log lacks after its offset), discard a torn pending file (it was never acknowledged). `*.tmp`
// is ignored. Each session has its own lock (appends ordered) and its own log fd.
// A session's in-memory state (its slot: lock, paths, open handle) lives only while it is used: a
// slot idle for `idleCloseMs` is closed and dropped, and whether its log is repaired is all that
// is kept of it, so an idle session costs one map entry here.
//
// Over 300 lines because the append path and the open/repair of a log are one protocol on the same
// files and locks, kept together so its crash points read in order.
import { Cause, Chunk, Effect, Either, ExecutionStrategy, Exit, Option, Schema, Scope, Stream } from "effect"
import { TextDecoder } from "node:util"
import { SubstratPaths } from "../../config/Paths.js"
import { type DurableError, EventLogError, withFault } from "../../domain/errors.js"
import { LogEntry, type LogEvent } from "../../domain/events.js"
import type { SessionId } from "../../domain/ids.js"
import { type AppendHandle, Durable } from "../Durable.js"
import type { EventLogService, RepairReport } from "../EventLog.js"
import { type CommitFailure, makeJournal, replay, replayEdits } from "./eventJournal.js"
import { encodeEntryLine } from "./eventLine.js"

/**
 * A session's lock. Free (the usual case): taken by setting a flag — no fiber suspension, no
 * Semaphore bookkeeping; the append hot path pays nothing else for it. Busy: the fiber waits in
 * FIFO order and retries when woken (a later arrival may take a lock freed in between; the
 * woken one then waits again). Waiting is interruptible; an interrupted waiter passes a wake-up
 * on (`passOn`), so a release is never lost. Used only through `locked` below.
 */
class Mutex {
  private held = false
  private readonly waiters: Array<() => void> = []
  tryTake(): boolean {
    if (this.held) return false
    this.held = true
    return true
  }
  release(): void {
    this.held = false
    this.waiters.shift()?.()
  }
  /** Release and wake every waiter: the lock's slot was dropped, each retries on the session's new one. */
  releaseAll(): void {
    this.held = false
    for (const wake of this.waiters.splice(0)) wake()
  }
  readonly releaseEffect: Effect.Effect<void> = Effect.sync(() => this.release())
  /** Wake the next waiter if the lock is free: the interrupted one may have been woken already. */
  readonly passOn: Effect.Effect<void> = Effect.sync(() => {
    if (!this.held) this.waiters.shift()?.()
  })
  /** Suspend until woken by a release (or passOn); the caller then retries `tryTake`. */
  readonly wait: Effect.Effect<void> = Effect.async<void>((resume) => {
    // Freed since the caller's failed `tryTake` (its fiber may have yielded in between): retry now.
    if (!this.held) return resume(Effect.void)
    const wake = () => resume(Effect.void)
    this.waiters.push(wake)
    return Effect.sync(() => {
      const i = this.waiters.indexOf(wake)
      if (i >= 0) this.waiters.splice(i, 1)
    })
  })
}

interface Slot {
  readonly mutex: Mutex
  readonly file: string
  readonly pending: string
  /** Repaired since this process first touched it (or created by us). */
  repaired: boolean
  /** The log's length in bytes while `open` is set (where the next append's bytes go). */
  size: number
  /** An append whose journal record is durable but whose log write failed: repair applies it. */
  unapplied: { readonly offset: number; readonly bytes: Uint8Array } | undefined
  open: { readonly handle: AppendHandle; readonly scope: Scope.CloseableScope } | undefined
  /** When the slot was last locked (clock millis): idle slots are closed and dropped (`idleCloseMs`). */
  lastUsed: number
}

/** Options of the file layer. */
export interface EventLogFileOptions {
  /**
   * A session's log file is closed after this long unused (checked every half of it), so an idle
   * session holds no file descriptor and no lock; the next use reopens it. 0: never.
   */
  readonly idleCloseMs: number
  /** The journal is checkpointed (logs fsync'd, journal emptied) once it holds this many bytes. */
  readonly journalCheckpointBytes?: number
}

export const defaultOptions: EventLogFileOptions = { idleCloseMs: 2000 }
const defaultCheckpointBytes = 1024 * 1024

const NL = 0x0a
const SCAN_CHUNK = 64 * 1024

const ioError = (e: DurableError): EventLogError =>
  new EventLogError({ reason: "io", file: e.path, ...withFault(e.fault), message: `${e.op}: ${e.message}` })

const bytesEqual = (a: Uint8Array, b: Uint8Array): boolean => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

const concatBytes = (a: Uint8Array, b: Uint8Array): Uint8Array => {
  const out = new Uint8Array(a.length + b.length)
  out.set(a, 0)
  out.set(b, a.length)
  return out
}

const decodeEntry = Schema.decodeUnknownEither(LogEntry)
const utf8 = new TextEncoder()

/** Parse one line (without its newline); Left(message) when it is not a valid entry. */
const parseLine = (decoder: TextDecoder, bytes: Uint8Array): Either.Either<LogEntry, string> => {
  let json: unknown
  try {
    json = JSON.parse(decoder.decode(bytes))
  } catch (e) {
    return Either.left(e instanceof Error ? e.message : String(e))
  }
  return Either.mapLeft(decodeEntry(json), (err) => err.message)
}

/** A pending file of one entry is replayable iff it is exactly one complete, decodable line. */
const validPending = (bytes: Uint8Array): boolean =>
  bytes.length > 1 && bytes.indexOf(NL) === bytes.length - 1 &&
  Either.isRight(parseLine(new TextDecoder("utf-8", { fatal: true }), bytes.subarray(0, bytes.length - 1)))

/**
 * The first line of a batch's pending file: the log's length when the batch was written (where
 * its first line starts), and how many lines and bytes follow the header. Never a log entry.
 */
const BatchHeader = Schema.Struct({
  batch: Schema.Struct({
    offset: Schema.NonNegativeInt,
    lines: Schema.Int.pipe(Schema.greaterThanOrEqualTo(2)),
    bytes: Schema.NonNegativeInt
  })
})
const decodeBatchHeader = Schema.decodeUnknownEither(Schema.parseJson(BatchHeader))
const BATCH_PREFIX = utf8.encode(`{"batch":`)

type Pending =
  | { readonly _tag: "line" }
  | { readonly _tag: "batch"; readonly offset: number; readonly body: Uint8Array }
  | { readonly _tag: "torn" }

/**
 * What a pending file holds: one entry (the single-append form), a whole batch (header, then
 * exactly the bytes and lines it announces, each decodable), or a torn write of either — never
 * acknowledged, discarded. A batch cut at a line boundary is torn too: replay is all or nothing.
 */
const classifyPending = (bytes: Uint8Array): Pending => {
  if (!bytesEqual(bytes.subarray(0, BATCH_PREFIX.length), BATCH_PREFIX)) {
    return validPending(bytes) ? { _tag: "line" } : { _tag: "torn" }
  }
  const nl = bytes.indexOf(NL)
  if (nl < 0) return { _tag: "torn" }
  const decoder = new TextDecoder("utf-8", { fatal: true })
  let header: Either.Either<typeof BatchHeader.Type, unknown>
  try {
    header = decodeBatchHeader(decoder.decode(bytes.subarray(0, nl)))
  } catch {
    return { _tag: "torn" }
  }
  if (Either.isLeft(header)) return { _tag: "torn" }
  const { bytes: size, lines, offset } = header.right.batch
  const body = bytes.subarray(nl + 1)
  if (body.length !== size || body[body.length - 1] !== NL) return { _tag: "torn" }
  let count = 0
  for (let from = 0; from < body.length; count++) {
    const end = body.indexOf(NL, from)
    if (Either.isLeft(parseLine(decoder, body.subarray(from, end)))) return { _tag: "torn" }
    from = end + 1
  }
  return count === lines ? { _tag: "batch", offset, body } : { _tag: "torn" }
}

/**
 * The log's bytes as repair would leave them — torn tail cut, the pending entry or batch applied
 * by the same rules — computed without touching the files: for readers that must not write
 * (transcript regeneration).
 */
/**
 * Whether `there` (the log from a batch's offset, no longer than the batch) is the batch's bytes
 * with some zeroed: the log write's later page reached the disk and an earlier one did not (a
 * power loss on a file system that does not order data pages).
 */
const zerosOrBatch = (there: Uint8Array, body: Uint8Array): boolean => {
  for (let i = 0; i < there.length; i++) if (there[i] !== 0 && there[i] !== body[i]) return false
  return true
}

export const repairedView = (log: Uint8Array, pending: Uint8Array | undefined): Uint8Array => {
  const end = log.lastIndexOf(NL) + 1
  const kept = log.subarray(0, end)
  if (pending === undefined) return kept
  const kind = classifyPending(pending)
  if (kind._tag === "torn") return kept
  if (kind._tag === "line") {
    const lastStart = end > 1 ? kept.lastIndexOf(NL, end - 2) + 1 : 0
    return bytesEqual(kept.subarray(lastStart), pending) ? kept : concatBytes(kept, pending)
  }
  const { body, offset } = kind
  if (end < offset) return kept
  const have = Math.min(end - offset, body.length)
  if (bytesEqual(kept.subarray(offset, offset + have), body.subarray(0, have))) return concatBytes(kept, body.subarray(have))
  return end - offset <= body.length && zerosOrBatch(kept.subarray(offset, end), body) ? concatBytes(kept.subarray(0, offset), body) : kept
}

export const make = (options: EventLogFileOptions = defaultOptions) => Effect.gen(function*() {
  const durable = yield* Durable
  const paths = yield* SubstratPaths
  const layerScope = yield* Effect.scope
  const clock = yield* Effect.clock
  /** The sessions in use (recently locked). Only `slotOf` adds one; only `closeIdle` drops one, under its lock. */
  const slots = new Map<SessionId, Slot>()
  /** Dropped slots whose log was repaired. Absent: repair on next use. */
  const resting = new Set<SessionId>()
  // A journal left by a crash goes into the logs before anything reads them (recovery's read pass
  // reads the log files directly). A home whose journal cannot be applied does not start.
  yield* replay(durable, paths.eventJournal, paths.eventsFile).pipe(Effect.orDie)
  const journal = yield* makeJournal(durable, paths.eventJournal, options.journalCheckpointBytes ?? defaultCheckpointBytes)

  const slotOf = (session: SessionId): Slot => {
    let slot = slots.get(session)
    if (slot === undefined) {
      const wasRepaired = resting.delete(session)
      slot = {
        mutex: new Mutex(),
        file: paths.eventsFile(session),
        pending: paths.pendingFile(session),
        repaired: wasRepaired,
        size: 0,
        unapplied: undefined,
        open: undefined,
        lastUsed: clock.unsafeCurrentTimeMillis()
      }
      slots.set(session, slot)
    }
    return slot
  }

  /** Index of the last '\n' in bytes [0, before) of `file`, or -1. Scans backwards in chunks. */
  const lastNewline = (file: string, before: number): Effect.Effect<number, DurableError> =>
    Effect.gen(function*() {
      let hi = before
      while (hi > 0) {
        const lo = Math.max(0, hi - SCAN_CHUNK)
        const buf = yield* durable.readRange(file, lo, hi)
        const i = buf.lastIndexOf(NL)
        if (i >= 0) return lo + i
        hi = lo
      }
      return -1
    })

  /** Repair the files of one session; caller holds its lock and has closed nothing. */
  const repairLocked = (session: SessionId, slot: Slot): Effect.Effect<RepairReport, DurableError> =>
    Effect.gen(function*() {
      const file = paths.eventsFile(session)
      const pending = paths.pendingFile(session)
      let end = Option.getOrElse(yield* durable.size(file), () => 0)
      let truncatedBytes = 0
      if (end > 0) {
        const keep = (yield* lastNewline(file, end)) + 1
        if (keep < end) {
          yield* durable.truncate(file, keep)
          truncatedBytes = end - keep
          end = keep
        }
      }
      let pendingReplayed = false
      let pendingDiscarded = false
      // A record of this process's whose log write failed (its journal record is durable): it goes
      // where a replay of the journal would put it.
      const u = slot.unapplied
      if (u !== undefined) {
        if (u.offset <= end) {
          const view = yield* durable.readRange(file, u.offset, Math.max(end, u.offset + u.bytes.length))
          const edits = replayEdits(u.offset, view, [u])
          if (edits.length > 0) {
            yield* durable.patch(file, edits)
            end = Math.max(end, u.offset + u.bytes.length)
            pendingReplayed = true
          }
        }
        slot.unapplied = undefined
      }
      const appendToLog = (bytes: Uint8Array) =>
        Effect.tap(
          slot.open ? slot.open.handle.append(bytes) : Effect.scoped(Effect.flatMap(durable.openAppend(file), (h) => h.append(bytes))),
          () => {
            end += bytes.length
            pendingReplayed = true
          }
        )
      // The pending file of a home written before the journal: an empty one is that WAL's resting state.
      const pend = yield* durable.readFile(pending)
      if (Option.isSome(pend) && pend.value.length > 0) {
        const bytes = pend.value
        const kind = classifyPending(bytes)
        if (kind._tag === "torn") {
          pendingDiscarded = true
        } else if (kind._tag === "line") {
          const lastStart = end > 0 ? (yield* lastNewline(file, end - 1)) + 1 : 0
          const last = end > 0 ? yield* durable.readRange(file, lastStart, end) : new Uint8Array(0)
          if (!bytesEqual(last, bytes)) yield* appendToLog(bytes)
        } else {
          // The batch starts at `offset`; the log may hold any whole-line prefix of it there (its
          // write was torn, the torn line cut above): append the rest. The batch's bytes with zeros
          // in places, no longer than it: a power loss kept a later page of the log write and lost an
          // earlier one: the log is cut back to `offset` and the batch written whole. Anything else
          // means the pending file is not this log's: discarded, the log untouched.
          const { body, offset } = kind
          const have = Math.min(Math.max(end - offset, 0), body.length)
          const there = end >= offset ? yield* durable.readRange(file, offset, offset + have) : undefined
          if (there !== undefined && bytesEqual(there, body.subarray(0, have))) {
            if (have < body.length) yield* appendToLog(body.subarray(have))
          } else if (there !== undefined && end - offset <= body.length && zerosOrBatch(there, body)) {
            yield* durable.truncate(file, offset)
            end = offset
            yield* appendToLog(body)
          } else pendingDiscarded = true
        }
        yield* durable.unlink(pending)
      }
      slot.size = end
      slot.repaired = true
      return { session_id: session, truncatedBytes, pendingReplayed, pendingDiscarded }
    })

  const closeLocked = (slot: Slot): Effect.Effect<void> =>
    Effect.suspend(() => {
      const open = slot.open
      slot.open = undefined
      // Once closed the file is not ours: repair again on the next use.
      slot.repaired = false
      return open ? Scope.close(open.scope, Exit.void) : Effect.void
    })

  const openLocked = (session: SessionId, slot: Slot): Effect.Effect<AppendHandle, DurableError> =>
    slot.open
      ? Effect.succeed(slot.open.handle)
      : Effect.gen(function*() {
        yield* durable.mkdir(paths.sessionDir(session), 0o700)
        if (!slot.repaired) yield* repairLocked(session, slot)
        const scope = yield* Scope.fork(layerScope, ExecutionStrategy.sequential)
        const handle = yield* Scope.extend(durable.openAppend(paths.eventsFile(session)), scope).pipe(
          Effect.onError(() => Scope.close(scope, Exit.void))
        )
        slot.open = { handle, scope }
        slot.size = handle.sizeAtOpen
        return handle
      })

  /**
   * Run `body` holding the session's lock. The lock is taken with a flag when free; otherwise the
   * fiber waits (interruptibly) and retries. `body` runs uninterruptibly — a WAL step is never
   * abandoned halfway — unless it uses `restore`, and must release the lock on every exit
   * (`withLock` does it for it). Each attempt takes the session's current slot: one dropped while
   * this fiber waited on its lock is replaced by a fresh one, so a session has one lock at a time.
   */
  const locked = <A, E>(
    session: SessionId,
    body: (slot: Slot, restore: <X, Y>(eff: Effect.Effect<X, Y>) => Effect.Effect<X, Y>) => Effect.Effect<A, E>
  ): Effect.Effect<A, E> =>
    Effect.uninterruptibleMask((restore) => {
      const attempt: Effect.Effect<A, E> = Effect.suspend(() => {
        const slot = slotOf(session)
        if (!slot.mutex.tryTake()) {
          return Effect.zipRight(Effect.onInterrupt(restore(slot.mutex.wait), () => slot.mutex.passOn), attempt)
        }
        try {
          return body(slot, restore)
        } catch (e) {
          slot.mutex.release()
          throw e
        }
      })
      return attempt
    })

  /** Run `use(slot)` holding the lock, interruptible as its caller is (reads, repair, close, remove). */
  const withLock = <A, E>(session: SessionId, use: (slot: Slot) => Effect.Effect<A, E>): Effect.Effect<A, E> =>
    locked(session, (slot, restore) => {
      slot.lastUsed = clock.unsafeCurrentTimeMillis()
      return Effect.ensuring(restore(use(slot)), slot.mutex.releaseEffect)
    })

  const encodeFailure = (slot: Slot, message: string) =>
    Effect.fail(new EventLogError({ reason: "encode", file: slot.file, message }))

  // The hot path (scripts/bench/eventlog.ts): untraced (a span + call-site capture per append
  // shows in the benchmark), no generator, the line encoded by its event's precompiled Schema
  // (eventLine.ts), the lock a flag, the WAL one uninterruptible Durable chain, no per-call named closures (see
  // durableNode's `attempt`). Everything here runs cache-cold after each fsync wait, so each
  // fiber step and each Schema layer shows.
  const append = (
    session: SessionId,
    event: LogEvent,
    after?: (entry: LogEntry) => Effect.Effect<void>
  ): Effect.Effect<LogEntry, EventLogError> =>
    Effect.suspend(() => {
      return locked(session, (slot) => {
        // The timestamp is taken under the lock: lines are in `ts` order within a log.
        const now = clock.unsafeCurrentTimeMillis()
        const ts = new Date(now).toISOString()
        const line = encodeEntryLine(event, ts, session)
        if (Either.isLeft(line)) {
          slot.mutex.release()
          return encodeFailure(slot, line.left)
        }
        slot.lastUsed = now
        return Effect.flatMap(commitLocked(session, slot, utf8.encode(line.right)), () => {
          const entry = { ts, event: event.event, data: event.data, session_id: session } as LogEntry
          if (after === undefined) {
            slot.mutex.release()
            return Effect.succeed(entry)
          }
          return Effect.as(Effect.ensuring(after(entry), slot.mutex.releaseEffect), entry)
        })
      })
    })

  /**
   * `bytes` (whole lines) through the journal under the held lock: durable in the journal, then
   * written to the log. On failure the handle is dropped (repair on next use) and the lock
   * released; on success the lock stays held.
   */
  const commitLocked = (session: SessionId, slot: Slot, bytes: Uint8Array): Effect.Effect<void, EventLogError> => {
    const write = (handle: AppendHandle) => journal.commit({ session, log: slot.file, offset: slot.size, bytes, handle })
    const steps = slot.open
      ? write(slot.open.handle)
      : Effect.flatMap(Effect.mapError(openLocked(session, slot), (error): CommitFailure => ({ error, durable: false })), write)
    return Effect.matchCauseEffect(steps, {
      // After a failed step the file state is unknown: drop the handle, repair on next use.
      onFailure: (cause) => {
        const failure = Cause.failureOption(cause)
        if (Option.isSome(failure) && failure.value.durable) slot.unapplied = { offset: slot.size, bytes }
        return Effect.zipRight(
          Effect.ensuring(closeLocked(slot), slot.mutex.releaseEffect),
          Effect.failCause(Cause.map(cause, (f) => ioError(f.error)))
        )
      },
      onSuccess: () => {
        slot.size += bytes.length
        return Effect.void
      }
    })
  }

  const appendAll = (
    session: SessionId,
    events: ReadonlyArray<LogEvent>,
    after?: (entries: ReadonlyArray<LogEntry>) => Effect.Effect<void>
  ): Effect.Effect<ReadonlyArray<LogEntry>, EventLogError> =>
    Effect.suspend(() => {
      if (events.length === 0) return Effect.succeed([])
      if (events.length === 1) {
        return Effect.map(append(session, events[0]!, after === undefined ? undefined : (e) => after([e])), (e) => [e])
      }
      return locked(session, (slot) => {
        const now = clock.unsafeCurrentTimeMillis()
        const ts = new Date(now).toISOString()
        let text = ""
        for (const event of events) {
          const line = encodeEntryLine(event, ts, session)
          if (Either.isLeft(line)) {
            slot.mutex.release()
            return encodeFailure(slot, line.left)
          }
          text += line.right
        }
        slot.lastUsed = now
        return Effect.flatMap(commitLocked(session, slot, utf8.encode(text)), () => {
          const entries = events.map((event) => ({ ts, event: event.event, data: event.data, session_id: session }) as LogEntry)
          return Effect.as(Effect.ensuring(after === undefined ? Effect.void : after(entries), slot.mutex.releaseEffect), entries)
        })
      })
    })

  const repair = Effect.fn("EventLog.repair")(function*(session: SessionId) {
    return yield* withLock(session, (slot) => repairLocked(session, slot)).pipe(Effect.mapError(ioError))
  })

  const decodeLines = (file: string, bytes: Stream.Stream<Uint8Array, EventLogError>) =>
    Stream.suspend(() => {
      const decoder = new TextDecoder("utf-8", { fatal: true })
      let carry: Array<Uint8Array> = []
      let lineNo = 0
      const fail = (message: string) =>
        new EventLogError({ reason: "decode", file, line: lineNo, message: `${file}:${lineNo}: ${message}` })
      const body = Stream.mapChunksEffect(bytes, (chunks) =>
        Effect.suspend(() => {
          const out: Array<LogEntry> = []
          for (const chunk of chunks) {
            let from = 0
            let nl = chunk.indexOf(NL, from)
            while (nl >= 0) {
              let line = chunk.subarray(from, nl)
              if (carry.length > 0) {
                carry.push(line)
                line = Buffer.concat(carry)
                carry = []
              }
              lineNo++
              const parsed = parseLine(decoder, line)
              if (Either.isLeft(parsed)) return Effect.fail(fail(parsed.left))
              out.push(parsed.right)
              from = nl + 1
              nl = chunk.indexOf(NL, from)
            }
            if (from < chunk.length) carry.push(chunk.subarray(from))
          }
          return Effect.succeed(Chunk.unsafeFromArray(out))
        }))
      const tail = Stream.suspend(() => {
        if (carry.length === 0) return Stream.empty
        lineNo++
        return Stream.fail(fail("torn trailing line (no newline)"))
      })
      return Stream.concat(body, tail)
    })

  /** The log's length, taken under the lock (repaired first): a read never sees a half-written line. */
  const lengthLocked = (session: SessionId, slot: Slot): Effect.Effect<number, DurableError> =>
    Effect.flatMap(slot.repaired ? Effect.void : repairLocked(session, slot), () =>
      Effect.map(durable.size(slot.file), Option.getOrElse(() => 0)))

  const streamTo = (slot: Slot, end: number): Stream.Stream<LogEntry, EventLogError> =>
    decodeLines(slot.file, Stream.mapError(durable.stream(slot.file, { end }), ioError))

  const read = (session: SessionId): Stream.Stream<LogEntry, EventLogError> =>
    Stream.unwrap(
      // Appends after this point are not part of this read.
      withLock(session, (slot) => Effect.map(Effect.mapError(lengthLocked(session, slot), ioError), (end) => streamTo(slot, end)))
    )

  const readThen = <A>(session: SessionId, f: (entries: ReadonlyArray<LogEntry>) => Effect.Effect<A>) =>
    withLock(session, (slot) =>
      Effect.mapError(lengthLocked(session, slot), ioError).pipe(
        Effect.flatMap((end) => Stream.runCollect(streamTo(slot, end))),
        Effect.flatMap((entries) => Effect.uninterruptible(f(Chunk.toReadonlyArray(entries))))
      ))

  const close = Effect.fn("EventLog.close")(function*(session: SessionId) {
    // Not in use: only its repaired mark to forget.
    if (!slots.has(session)) resting.delete(session)
    else yield* withLock(session, closeLocked)
  })

  const remove = Effect.fn("EventLog.remove")(function*(session: SessionId) {
    yield* withLock(session, (slot) => Effect.gen(function*() {
      yield* closeLocked(slot)
      // The journal must not hold records of this log when a log of the same name could start over.
      if (journal.dirty(slot.file)) yield* journal.checkpoint
      yield* durable.unlink(paths.pendingFile(session))
      yield* durable.unlink(paths.eventsFile(session))
      slot.repaired = true
      slot.unapplied = undefined
    })).pipe(Effect.mapError(ioError))
  })

  // Idle slots: a session not used for `idleCloseMs` gives its fd back and its slot is dropped.
  // The file stays repaired (this process wrote all of it and every append completed its WAL
  // steps — a failed step closes the handle and clears `repaired` itself), so `resting` keeps that
  // mark and reopening is an open(2), no repair. A busy lock means an append or a read is under
  // way: that slot is looked at again next time. Fibers waiting on a dropped slot's lock are all
  // woken and take the session's new slot (`locked`).
  const closeIdle = (idleMs: number): Effect.Effect<void> =>
    Effect.uninterruptible(Effect.suspend(() => {
      const now = clock.unsafeCurrentTimeMillis()
      const closing: Array<Effect.Effect<void>> = []
      for (const [session, slot] of slots) {
        // A slot holding a failed log write's record keeps it until its next use applies it.
        if (now - slot.lastUsed < idleMs || slot.unapplied !== undefined || !slot.mutex.tryTake()) continue
        slots.delete(session)
        if (slot.repaired) resting.add(session)
        const handle = slot.open
        slot.open = undefined
        const release = Effect.sync(() => slot.mutex.releaseAll())
        closing.push(handle === undefined ? release : Effect.ensuring(Scope.close(handle.scope, Exit.void), release))
      }
      // The journal's fd too, once nothing has been committed for as long.
      return Effect.zipRight(Effect.all(closing, { discard: true }), journal.idle(idleMs))
    }))
  if (options.idleCloseMs > 0) {
    yield* closeIdle(options.idleCloseMs).pipe(
      Effect.delay(Math.max(1, Math.floor(options.idleCloseMs / 2))),
      Effect.forever,
      Effect.forkScoped
    )
  }

  const readMany = (sessions: ReadonlyArray<SessionId>) => Stream.flatMap(Stream.fromIterable(sessions), read)
  const service: EventLogService = { append, appendAll, read, readMany, readThen, repair, close, remove }
  return service
})

