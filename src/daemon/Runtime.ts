// The daemon's service graph below the socket: storage (Durable, EventLog with the live tap,
// SessionStore), the transcript writer, orchestration (provider registry + model forwarders, slots),
// workspaces (store, per-turn history hook, child workspaces, in-use = live tree), start-up recovery (src/recovery/Recovery.ts), and the shutdown drain. One place decides which
// implementation of each port the daemon runs.
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Context, Effect, Layer, Option } from "effect"
import { Activity } from "../agent/Activity.js"
import { Mailbox } from "../agent/Mailbox.js"
import { Turns } from "../agent/Turns.js"
import * as Meter from "../meter/Meter.js"
import { MeterPrices } from "../meter/Meter.js"
import { CapsConfig } from "../agent/SpawnQueue.js"
import { QuotaConfig } from "../agent/Quotas.js"
import * as Orchestration from "../agent/Orchestrator.js"
import { Tree } from "../agent/Tree.js"
import type { SubstratPaths } from "../config/Paths.js"
import { Durable } from "../storage/Durable.js"
import * as AgentSocket from "../mcp/AgentSocket.js"
import { AcpAsks } from "../provider/acp/Asks.js"
import * as RegistryLive from "../provider/registryLive.js"
import * as SandboxBwrap from "../sandbox/SandboxBwrap.js"
import { WorkspaceStore } from "../sandbox/WorkspaceStore.js"
import { WorkspaceHistory } from "../sandbox/WorkspaceHistory.js"
import { MultiplexerConfig } from "../session/Multiplexer.js"
import { SessionStore } from "../storage/SessionStore.js"
import { DaemonConfig } from "../config/DaemonConfig.js"
import * as EventTap from "../storage/EventTap.js"
import { layerStartupRecovery } from "../recovery/Startup.js"
import * as ChildWorkspacesLive from "./ChildWorkspacesLive.js"
import { Transcript } from "./Transcript.js"
import * as WorkspaceInUse from "./WorkspaceInUse.js"
import * as WorkspaceTurnHook from "./WorkspaceTurnHook.js"
import { EventLog } from "../storage/EventLog.js"
import { EventIndex } from "../storage/EventIndex.js"
import { EventFeed } from "../feed/EventFeed.js"
import * as Overlaps from "./Overlaps.js"
import { MergeQueue } from "./MergeQueue.js"
import { Progress } from "./Progress.js"
import { SwarmSchedules } from "../swarm/Schedules.js"
import { Swarm, SwarmConfig } from "../swarm/Swarm.js"
import * as Egress from "../egress/Egress.js"
import type { EgressResolver } from "../egress/Resolver.js"
import { presetTable } from "../config/Config.js"

/** What shutdown needs from orchestration. */
export class Drain extends Context.Tag("substrat/daemon/Drain")<Drain, {
  /** Completes when no turn is running or queued. */
  readonly awaitIdle: Effect.Effect<void>
  /** Suspend every live session; how many were suspended. */
  readonly suspendAll: Effect.Effect<number>
}>() {}

/** The storage ports over the given event log and session store (the file layers, or Postgres in cluster mode). */
const storageWith = <E1, E2, R1, R2>(log: Layer.Layer<EventLog, E1, R1>, store: Layer.Layer<SessionStore, E2, R2>) =>
  Layer.mergeAll(
    EventTap.layer.pipe(Layer.provide(Layer.mergeAll(log, EventIndex.layerFile.pipe(Layer.provide(NodeContext.layer))))),
    store
  ).pipe(Layer.provideMerge(Durable.layer))

const StorageLive = storageWith(EventLog.layerFile, SessionStore.layerFile)

/** Cluster mode: event logs and session records in Postgres (the SqlClient's), the rest on the home's disk. */
export const StorageSql = storageWith(EventLog.layerSql, SessionStore.layerSql)

const SlotsLive = Layer.unwrapEffect(Effect.map(DaemonConfig, (c) => MultiplexerConfig.layer(c.slots)))

/**
 * Providers the daemon knows: scripted + claude + codex + cursor-agent (src/provider/registryLive.ts).
 * The layer also serves the model forwarders on `$SUBSTRAT_HOME/llm/*.sock` (the API keys stay in
 * the daemon; sandboxes only see the sockets). CLI providers run in bwrap through `SandboxLive`.
 */
// The Meter (budgets, the human inbox; src/meter/Meter.ts) sits below the providers — every
// agent's model forwarder meters through it — and below the turn runner (TurnGate, HumanDesk).
// Turns, Activity and Mailbox are the same layers the agent services use (memoized by reference).
const MeterLive = Meter.ports.pipe(
  Layer.provideMerge(Meter.Meter.Default),
  Layer.provide(Layer.unwrapEffect(Effect.map(DaemonConfig, (c) => MeterPrices.layer(Option.getOrUndefined(c.meter.prices))))),
  Layer.provide(Mailbox.DefaultWithoutDependencies),
  Layer.provide(Layer.mergeAll(Layer.effect(Tree, Tree), Turns.Default, Activity.Default))
)

const ProvidersLive = Layer.unwrapEffect(Effect.map(DaemonConfig, (config) => RegistryLive.layerDaemon(config))).pipe(
  Layer.provide(AgentSocket.toolEndpoint)
)
const SandboxLive = Layer.unwrapEffect(Effect.map(DaemonConfig, (c) =>
  SandboxBwrap.layerBwrap({
    sandboxUser: { uid: c.sandbox.uid, gid: c.sandbox.gid },
    defaultLimits: { workspace_growth_bytes: c.sandbox.workspaceGrowthBytes === 0 ? null : c.sandbox.workspaceGrowthBytes },
    growthHint: "raise it with `sandbox.workspace_growth_bytes` in config.toml or SUBSTRAT_SANDBOX_WORKSPACE_GROWTH_BYTES (0: unbounded)"
  })
)).pipe(Layer.provide(NodeContext.layer))

// The egress proxies (src/egress/Egress.ts): below the providers (each CLI turn serves its own),
// above the workspace store and the logs. The resolver comes from the caller (Daemon.run: the
// system's; a test's fixed names).
const EgressLive = Layer.unwrapEffect(Effect.map(DaemonConfig, (c) =>
  Egress.layer({
    presets: presetTable(c),
    bytesPerTurn: c.egress.bytesPerTurn,
    bytesPerDay: c.egress.bytesPerDay,
    maxConnections: c.egress.maxConnections
  })
))

// The agent tree (Tree) is built below everything that reads it: the workspace in-use
// registry asks the live tree (WorkspaceInUse.ts), and recovery seeds the same Tree.
const StateLive = Tree.Default

// Tree caps (config `caps.*`: every tree's defaults, and what a spawn past them gets).
const CapsLive = Layer.unwrapEffect(Effect.map(DaemonConfig, (c) =>
  CapsConfig.layer({ max_depth: c.caps.maxDepth, max_children: c.caps.maxChildren, max_live: c.caps.maxLive }, c.caps.policy)))

// Quotas on what an agent sends (src/agent/Quotas.ts), on by default.
const QuotasLive = Layer.unwrapEffect(Effect.map(DaemonConfig, (c) =>
  Layer.succeed(QuotaConfig, {
    limits: {
      messages_per_minute: c.quotas.messagesPerMinute,
      message_bytes_per_hour: c.quotas.messageBytesPerHour,
      open_questions: c.quotas.openQuestions,
      spawns_per_minute: c.quotas.spawnsPerMinute,
      tool_calls_per_turn: c.quotas.toolCallsPerTurn,
      log_bytes_per_hour: c.quotas.logBytesPerHour
    },
    parkAfter: c.quotas.parkAfter
  })))

const OrchestrationLive = Orchestration.layerWithTree(Layer.effect(Tree, Tree)).pipe(
  Layer.provideMerge(Layer.mergeAll(ProvidersLive, SlotsLive, CapsLive, QuotasLive)),
  Layer.provideMerge(MeterLive)
)

// Workspaces: the store (in use = a live agent has it), per-turn history + the TurnHooks that
// records each turn's diff (WorkspaceTurnHook.ts), child workspaces for `spawn_agent(workspace_subdir)`.
const WorkspaceStoreLive = WorkspaceStore.Default.pipe(Layer.provide(Layer.mergeAll(WorkspaceInUse.layer, NodeContext.layer, SandboxLive)))
const ChildWorkspacesConfigured = Layer.unwrapEffect(Effect.map(DaemonConfig, (c) => ChildWorkspacesLive.layer({ spawnMode: c.workspaces.spawnMode })))
const WorkspacesLive = Layer.mergeAll(WorkspaceTurnHook.layer.pipe(Layer.provide(SandboxLive)), ChildWorkspacesConfigured).pipe(
  Layer.provideMerge(WorkspaceHistory.Default.pipe(Layer.provide(SandboxLive))),
  Layer.provideMerge(WorkspaceStoreLive),
  Layer.provide(NodeContext.layer)
)

const DrainLive = Layer.effect(
  Drain,
  Effect.gen(function*() {
    const o = yield* Orchestration.Orchestrator
    return Drain.of({
      awaitIdle: o.awaitIdle,
      suspendAll: Effect.gen(function*() {
        // Past the grace period turns may still run, and a session mid-turn cannot be suspended:
        // stop them first (nothing to stop when idle). Their logs keep the open turn for recovery.
        yield* o.stopTurns()
        // The sessions of this daemon's agents (in cluster mode the store holds every runner's).
        let n = 0
        for (const agent of yield* o.list) {
          yield* o.suspend(agent.session_id).pipe(
            Effect.tap((live) => Effect.sync(() => live && n++)),
            Effect.catchAllCause((c) => Effect.logWarning(`could not suspend ${agent.session_id}`, c))
          )
        }
        return n
      })
    })
  })
)

// Start-up recovery: the full Recovery (tree rebuild, orphans, re-injection, resume); the
// fallback `layerSessionsOnly` (src/recovery/StartupRecovery.ts) only runs SessionStore.recover.
// Swarm mode (src/swarm/Swarm.ts): node agents in the same tree; resumed after recovery (Daemon.ts).
const SwarmLive = SwarmSchedules.Default.pipe(
  Layer.provideMerge(Swarm.Default),
  Layer.provideMerge(Layer.unwrapEffect(Effect.map(DaemonConfig, (c) =>
    Layer.succeed(SwarmConfig, { home: c.home, defaultProvider: c.defaultProvider }))))
)

// The event feed (src/feed/EventFeed.ts) is one for the daemon, shared by the admin socket's and
// HTTP's handlers: its directory of session owners is filled by one read of every log.
/** The runtime over the given storage (cluster mode: `StorageSql` with the Postgres client provided). */
export const runtimeOn = <E, R>(storage: Layer.Layer<Layer.Layer.Success<typeof StorageLive>, E, R>) => Layer.mergeAll(
  DrainLive,
  layerStartupRecovery,
  SwarmLive,
  Progress.Default,
  EventFeed.Default,
  Overlaps.layer,
  MergeQueue.Default.pipe(Layer.provide(NodeContext.layer))
).pipe(
  Layer.provideMerge(OrchestrationLive),
  Layer.provideMerge(EgressLive),
  // ACP permission requests in the human inbox (acp.approve = ask): asked by the acp provider, answered by inbox.answer.
  Layer.provideMerge(AcpAsks.layer),
  Layer.provideMerge(Layer.mergeAll(WorkspacesLive, SandboxLive)),
  Layer.provideMerge(StateLive),
  Layer.provideMerge(Transcript.Default),
  Layer.provideMerge(storage)
)

export const RuntimeLive = runtimeOn(StorageLive)

export type RuntimeServices = Layer.Layer.Success<typeof RuntimeLive>
export type RuntimeRequirements = Layer.Layer.Context<typeof RuntimeLive> | SubstratPaths | EgressResolver
