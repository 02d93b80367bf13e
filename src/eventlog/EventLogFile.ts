// File layer of the EventLog port: `agents/<sid>/events.jsonl`, one JSON entry per line,
// appended through the pending-file WAL of seed 001 (docs/recovery.md):
//   1. write the line to `events.pending`, fsync      (Durable.writeSync)
//   2. append it to `events.jsonl`, fsync             (the session's AppendHandle, kept open)
//   3. unlink `events.pending` (no directory fsync — a resurrected pending file is deduped)
// Open/repair: cut a torn trailing line, replay a valid pending entry unless the log already
// ends with it, discard a torn pending file (it was never acknowledged). `*.tmp` is ignored.
// Each session has its own lock (appends ordered) and its own fds (no cross-session waiting).
import { Chunk, Clock, Effect, Either, ExecutionStrategy, Exit, Layer, Option, Schema, Scope, Stream } from "effect"
import { TextDecoder } from "node:util"
import { SubstratPaths } from "../config/Paths.js"
import { type DurableError, EventLogError } from "../domain/errors.js"
import { LogEntry, type LogEvent, LogLine } from "../domain/events.js"
import type { SessionId } from "../domain/ids.js"
import { type AppendHandle, Durable } from "../durable/Durable.js"
import { EventLog, type RepairReport } from "./EventLog.js"

interface Slot {
  readonly lock: Effect.Semaphore
  readonly file: string
  readonly pending: string
  /** Repaired since this process first touched it (or created by us). */
  repaired: boolean
  open: { readonly handle: AppendHandle; readonly scope: Scope.CloseableScope } | undefined
}

const NL = 0x0a
const SCAN_CHUNK = 64 * 1024

const ioError = (e: DurableError): EventLogError =>
  new EventLogError({ reason: "io", file: e.path, message: `${e.op}: ${e.message}` })

const bytesEqual = (a: Uint8Array, b: Uint8Array): boolean => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

const decodeEntry = Schema.decodeUnknownEither(LogEntry)
const encodeLine = Schema.encodeEither(LogLine)
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

/** A pending file is replayable iff it is exactly one complete, decodable line. */
const validPending = (bytes: Uint8Array): boolean =>
  bytes.length > 1 && bytes.indexOf(NL) === bytes.length - 1 &&
  Either.isRight(parseLine(new TextDecoder("utf-8", { fatal: true }), bytes.subarray(0, bytes.length - 1)))

export const make = Effect.gen(function*() {
  const durable = yield* Durable
  const paths = yield* SubstratPaths
  const layerScope = yield* Effect.scope
  const slots = new Map<SessionId, Slot>()

  const slotOf = (session: SessionId): Slot => {
    let slot = slots.get(session)
    if (slot === undefined) {
      slot = {
        lock: Effect.unsafeMakeSemaphore(1),
        file: paths.eventsFile(session),
        pending: paths.pendingFile(session),
        repaired: false,
        open: undefined
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
      const pend = yield* durable.readFile(pending)
      if (Option.isSome(pend)) {
        const bytes = pend.value
        if (!validPending(bytes)) {
          pendingDiscarded = true
        } else {
          const lastStart = end > 0 ? (yield* lastNewline(file, end - 1)) + 1 : 0
          const last = end > 0 ? yield* durable.readRange(file, lastStart, end) : new Uint8Array(0)
          if (!bytesEqual(last, bytes)) {
            if (slot.open) yield* slot.open.handle.append(bytes)
            else yield* Effect.scoped(Effect.flatMap(durable.openAppend(file), (h) => h.append(bytes)))
            pendingReplayed = true
          }
        }
        yield* durable.unlink(pending)
      }
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
        return handle
      })

  const onAppendFailure = (slot: Slot) =>
    // After a failed step the file state is unknown: drop the handle, repair on next use.
    closeLocked(slot)

  const appendLocked = (session: SessionId, slot: Slot, event: LogEvent): Effect.Effect<LogEntry, EventLogError> =>
    Effect.flatMap(Clock.currentTimeMillis, (ms) => {
      const entry = { ts: new Date(ms).toISOString(), event: event.event, data: event.data, session_id: session } as LogEntry
      const line = encodeLine(entry)
      if (Either.isLeft(line)) {
        return Effect.fail(new EventLogError({ reason: "encode", file: slot.file, message: line.left.message }))
      }
      const bytes = utf8.encode(line.right + "\n")
      const pending = slot.pending
      const steps = Effect.flatMap(openLocked(session, slot), (handle) =>
        durable.writeSync(pending, bytes).pipe(
          Effect.zipRight(handle.append(bytes)),
          Effect.zipRight(durable.unlink(pending, { syncDir: false }))
        ))
      return steps.pipe(
        Effect.tapError(() => onAppendFailure(slot)),
        Effect.mapError(ioError),
        Effect.as(entry)
      )
    })

  /**
   * `slot.lock.withPermits(1)` with a fast path: when the lock is free it is taken without
   * `Semaphore.take`'s async registration (half of the Effect side's CPU per append in
   * scripts/bench/eventlog.ts). Same semantics: the permit is held while `effect` runs and
   * released on any exit; a busy lock falls back to the queue of waiters.
   */
  const withLock = <A, E>(slot: Slot, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.flatMap(
      slot.lock.withPermitsIfAvailable(1)(effect),
      (taken) => taken._tag === "Some" ? Effect.succeed(taken.value) : slot.lock.withPermits(1)(effect)
    )

  // The hot path: untraced (a span + call-site capture per append cost ~20% of the Effect
  // side's CPU in scripts/bench/eventlog.ts), no generator.
  const append = (session: SessionId, event: LogEvent): Effect.Effect<LogEntry, EventLogError> =>
    Effect.suspend(() => {
      const slot = slotOf(session)
      return withLock(slot, appendLocked(session, slot, event))
    })

  const repair = Effect.fn("EventLog.repair")(function*(session: SessionId) {
    const slot = slotOf(session)
    return yield* slot.lock.withPermits(1)(repairLocked(session, slot)).pipe(Effect.mapError(ioError))
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

  const read = (session: SessionId): Stream.Stream<LogEntry, EventLogError> =>
    Stream.unwrap(Effect.gen(function*() {
      const slot = slotOf(session)
      const file = paths.eventsFile(session)
      // Snapshot the length under the lock: appends after this point are not part of this read,
      // and we never see a half-written line.
      const end = yield* slot.lock.withPermits(1)(Effect.gen(function*() {
        if (!slot.repaired) yield* repairLocked(session, slot)
        return Option.getOrElse(yield* durable.size(file), () => 0)
      })).pipe(Effect.mapError(ioError))
      return decodeLines(file, Stream.mapError(durable.stream(file, { end }), ioError))
    }))

  const close = Effect.fn("EventLog.close")(function*(session: SessionId) {
    const slot = slots.get(session)
    if (slot) yield* slot.lock.withPermits(1)(closeLocked(slot))
  })

  const remove = Effect.fn("EventLog.remove")(function*(session: SessionId) {
    const slot = slotOf(session)
    yield* slot.lock.withPermits(1)(Effect.gen(function*() {
      yield* closeLocked(slot)
      yield* durable.unlink(paths.pendingFile(session))
      yield* durable.unlink(paths.eventsFile(session))
      slot.repaired = true
    })).pipe(Effect.mapError(ioError))
  })

  return EventLog.of({ append, read, repair, close, remove })
})

/** The file-backed EventLog; open handles are released with the layer's scope. */
export const layer: Layer.Layer<EventLog, never, Durable | SubstratPaths> = Layer.scoped(EventLog, make)
