// The daemon's service graph below the socket: storage (Durable, EventLog with the live tap,
// SessionStore), the transcript writer, orchestration, the recovery hook, and the shutdown
// drain. One place decides which implementation of each port the daemon runs.
import { Context, Effect, Layer } from "effect"
import type { SubstratPaths } from "../config/Paths.js"
import * as DurableLive from "../durable/DurableLive.js"
import type { EventLog } from "../eventlog/EventLog.js"
import * as EventLogFile from "../eventlog/EventLogFile.js"
import type { SessionStore } from "../session/SessionStore.js"
import { layerMemory as SessionStoreMemory } from "../session/SessionStoreMemory.js"
import type { DaemonConfig } from "./Config.js"
import * as EventTap from "./EventTap.js"
import { StartupRecovery, layerSessionsOnly } from "./StartupRecovery.js"
import { Transcript } from "./Transcript.js"

/** What shutdown needs from orchestration. */
export class Drain extends Context.Tag("substrat/daemon/Drain")<Drain, {
  /** Completes when no turn is running or queued. */
  readonly awaitIdle: Effect.Effect<void>
  /** Suspend every live session; how many were suspended. */
  readonly suspendAll: Effect.Effect<number>
}>() {}

const StorageLive = Layer.mergeAll(
  EventTap.layer.pipe(Layer.provide(EventLogFile.layer)),
  SessionStoreMemory
).pipe(Layer.provideMerge(DurableLive.layer))

const DrainNoop = Layer.succeed(Drain, Drain.of({ awaitIdle: Effect.void, suspendAll: Effect.succeed(0) }))

export type RuntimeServices = EventLog | EventTap.EventTap | SessionStore | Transcript | StartupRecovery | Drain

export const RuntimeLive: Layer.Layer<RuntimeServices, never, SubstratPaths | DaemonConfig> = Layer.mergeAll(
  Transcript.Default,
  layerSessionsOnly,
  DrainNoop
).pipe(Layer.provideMerge(StorageLive))
