// Shared wiring for the orchestration scenario tests: the Orchestrator stack over the scripted
// provider, on the real file EventLog + SessionStore (a temp $SUBSTRAT_HOME) or in memory.
import { Effect, Layer, Stream } from "effect"
import { SubstratPaths } from "../../src/config/Paths.js"
import type { EventData, LogEntry, LogEventName } from "../../src/domain/events.js"
import type { SessionId } from "../../src/domain/ids.js"
import { Durable } from "../../src/storage/Durable.js"
import { EventLog } from "../../src/storage/EventLog.js"
import * as Orchestration from "../../src/agent/Orchestrator.js"
import * as ScriptedProvider from "../../src/provider/scripted/ScriptedProvider.js"
import type { Scripts } from "../../src/provider/scripted/Script.js"
import { MultiplexerConfig } from "../../src/session/Multiplexer.js"
import { SessionStore } from "../../src/storage/SessionStore.js"

export interface StackOptions {
  readonly slots?: number
  readonly scripts?: Scripts
  /** A $SUBSTRAT_HOME for the file layers; omitted: in-memory layers. */
  readonly home?: string
}

export const storage = (home?: string) =>
  home === undefined
    ? Layer.mergeAll(EventLog.layerMemory, SessionStore.layerMemory)
    : Layer.mergeAll(EventLog.layerFile, SessionStore.layerFile).pipe(
      Layer.provide(Layer.mergeAll(Durable.layer, SubstratPaths.layer(home))),
      Layer.orDie
    )

export const stack = (o: StackOptions = {}) =>
  Orchestration.layer.pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        ScriptedProvider.layer(o.scripts === undefined ? {} : { scripts: o.scripts }),
        MultiplexerConfig.layer(o.slots ?? 4),
        storage(o.home)
      )
    )
  )

export const eventsOf = (session: SessionId) =>
  Effect.flatMap(EventLog, (log) => Stream.runCollect(log.read(session))).pipe(
    Effect.map((c): ReadonlyArray<LogEntry> => [...c])
  )

export const names = (entries: ReadonlyArray<LogEntry>) => entries.map((e) => e.event)

export const dataOf = <E extends LogEventName>(entries: ReadonlyArray<LogEntry>, event: E): Array<EventData<E>> =>
  entries.filter((e) => e.event === event).map((e) => e.data as EventData<E>)
