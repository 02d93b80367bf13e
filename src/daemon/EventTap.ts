// Decorates the EventLog so everything appended is also published, live, to in-daemon
// subscribers (the transcript writer, `agent.attach`). The orchestrator keeps writing to the
// EventLog port and knows nothing of this; subscribers see an entry only once it is durable.
import { Context, Effect, Layer, PubSub, type Queue, type Scope } from "effect"
import type { LogEntry } from "../domain/events.js"
import { EventLog } from "../storage/EventLog.js"

export interface EventTapService {
  /** A queue of every entry appended after this call, in append order per session. */
  readonly subscribe: Effect.Effect<Queue.Dequeue<LogEntry>, never, Scope.Scope>
}

export class EventTap extends Context.Tag("substrat/EventTap")<EventTap, EventTapService>() {}

/** Provides a tapped EventLog and the EventTap, given the real EventLog. */
export const layer: Layer.Layer<EventLog | EventTap, never, EventLog> = Layer.effectContext(
  Effect.gen(function*() {
    const inner = yield* EventLog
    const hub = yield* PubSub.unbounded<LogEntry>()
    const log = EventLog.of({
      ...inner,
      append: (session, event) => Effect.tap(inner.append(session, event), (entry) => PubSub.publish(hub, entry))
    })
    return Context.make(EventLog, log).pipe(Context.add(EventTap, EventTap.of({ subscribe: PubSub.subscribe(hub) })))
  })
)
