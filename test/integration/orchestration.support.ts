// Shared wiring for the orchestration scenario tests: the Orchestrator stack over the scripted
// provider, on the real file EventLog + SessionStore (a temp $SUBSTRAT_HOME) or in memory.
import { Effect, Layer, Stream } from "effect"
import { SubstratPaths } from "../../src/config/Paths.js"
import type { EventData, LogEntry, LogEventName } from "../../src/domain/events.js"
import type { SessionId } from "../../src/domain/ids.js"
import * as DurableLive from "../../src/durable/DurableLive.js"
import { EventLog } from "../../src/eventlog/EventLog.js"
import * as EventLogFile from "../../src/eventlog/EventLogFile.js"
import * as EventLogMemory from "../../src/eventlog/EventLogMemory.js"
import * as Orchestration from "../../src/agent/Orchestrator.js"
import * as ScriptedProvider from "../../src/provider/scripted/ScriptedProvider.js"
import type { Scripts } from "../../src/provider/scripted/Script.js"
import { MultiplexerConfig } from "../../src/session/Multiplexer.js"
import * as SessionStoreFile from "../../src/session/SessionStoreFile.js"
import * as SessionStoreMemory from "../../src/session/SessionStoreMemory.js"

export interface StackOptions {
  readonly slots?: number
  readonly scripts?: Scripts
  /** A $SUBSTRAT_HOME for the file layers; omitted: in-memory layers. */
  readonly home?: string
}

export const storage = (home?: string) =>
  home === undefined
    ? Layer.mergeAll(EventLogMemory.layerMemory, SessionStoreMemory.layerMemory)
    : Layer.mergeAll(EventLogFile.layer, SessionStoreFile.layer).pipe(
      Layer.provide(Layer.mergeAll(DurableLive.layer, SubstratPaths.layer(home))),
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
