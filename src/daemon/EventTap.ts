// Decorates the EventLog so everything appended is also published, live, to in-daemon
// subscribers (the transcript writer, `agent.attach`, the event feed). The orchestrator keeps
// writing to the EventLog port and knows nothing of this; subscribers see an entry only once it
// is durable.
// Each session's appends go through the tap one at a time (its own permit, so different sessions
// never wait on each other) and are numbered in that order: `seq` is the n-th append to that
// session through this tap. With `snapshot` — the log read under the same permit, with the count
// of appends so far — a subscriber turns `seq` into the entry's line number in events.jsonl
// (src/feed/EventFeed.ts), a position that survives restarts.
import { type Chunk, Context, Effect, Layer, PubSub, type Queue, type Scope, Stream } from "effect"
import type { EventLogError } from "../domain/errors.js"
import type { LogEntry } from "../domain/events.js"
import type { SessionId } from "../domain/ids.js"
import { EventLog } from "../storage/EventLog.js"

/** An appended entry with its number among this process's appends to its session (1-based). */
export interface Tapped {
  readonly entry: LogEntry
  readonly seq: number
}

/** A session's whole log, read while no append to it runs, and how many appends the tap has seen. */
export interface TapSnapshot {
  readonly entries: Chunk.Chunk<LogEntry>
  readonly appended: number
}

export interface EventTapService {
  /** A queue of every entry appended after this call, in append order per session. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<LogEntry>, never, Scope.Scope>
  /** The same, numbered per session (see the header). */
  readonly subscribeNumbered: Effect.Effect<Queue.Dequeue<Tapped>, never, Scope.Scope>
  /** Read a session's log with no append to it in between; `appended` counts this process's appends. */
  readonly snapshot: (session: SessionId) => Effect.Effect<TapSnapshot, EventLogError>
}

export class EventTap extends Context.Tag("substrat/EventTap")<EventTap, EventTapService>() {}

interface Slot {
  readonly permit: Effect.Semaphore
  appended: number
}

/** Provides a tapped EventLog and the EventTap, given the real EventLog. */
export const layer: Layer.Layer<EventLog | EventTap, never, EventLog> = Layer.effectContext(
  Effect.gen(function*() {
    const inner = yield* EventLog
    const hub = yield* PubSub.unbounded<LogEntry>()
    const numbered = yield* PubSub.unbounded<Tapped>()
    const slots = new Map<SessionId, Slot>()
    const slotOf = (session: SessionId): Slot => {
      let slot = slots.get(session)
      if (slot === undefined) {
        slot = { permit: Effect.unsafeMakeSemaphore(1), appended: 0 }
        slots.set(session, slot)
      }
      return slot
    }
    const log = EventLog.of({
      ...inner,
      append: (session, event) =>
        Effect.suspend(() => {
          const slot = slotOf(session)
          return slot.permit.withPermits(1)(Effect.tap(inner.append(session, event), (entry) =>
            Effect.suspend(() => {
              slot.appended += 1
              return Effect.zipRight(PubSub.publish(numbered, { entry, seq: slot.appended }), PubSub.publish(hub, entry))
            })))
        })
    })
    const snapshot = (session: SessionId) =>
      Effect.suspend(() => {
        const slot = slotOf(session)
        return slot.permit.withPermits(1)(
          Effect.map(Stream.runCollect(inner.read(session)), (entries) => ({ entries, appended: slot.appended }))
        )
      })
    return Context.make(EventLog, log).pipe(Context.add(
      EventTap,
      EventTap.of({ subscribe: PubSub.subscribe(hub), subscribeNumbered: PubSub.subscribe(numbered), snapshot })
    ))
  })
)
