// Crash recovery at daemon start-up (seed 001, ARCHITECTURE §10, docs/recovery.md). Run once,
// on a freshly built (empty) orchestration state, before anything is served:
//   1. read (Read.ts): per session directory its record, a stat of its WAL file and its log,
//      folded entry by entry over Schema-decoded lines (Fold.ts)
//   2. SessionStore.recover, inlined (ACTIVE → SUSPENDED on the records read in 1); a log with a
//      torn tail or a pending WAL file is repaired through the EventLog and read again
//   3. plan (Plan.ts, pure): tree, orphans, dangling children, inboxes, requests, lost replies,
//      provider states (through the Provider port's `recoverState`), usage, activity
//   4. apply: remove orphans, terminate dangling children, fix records, write provider states,
//      log the replies recovery owes (they are new messages), seed the agent services with the
//      plan's state (StateSeeding), and — unless `resume: false` — queue the roots' recovery
//      prompts and the turns the re-injected messages and replies wake.
// Re-injecting pending messages logs nothing. Every decision is deterministic in the files on
// disk, so recovering twice (or after a crash during recovery) gives the same state.
//
// Over 300 lines because it carries out the steps above in their order as one story; the pure
// decisions are Plan.ts and Fold.ts.
import { Clock, Effect, Either, Option, Schema } from "effect"
import { SubstratConfig } from "../config/Config.js"
import { SubstratPaths } from "../config/Paths.js"
import type { DurableError, EventLogError, SessionStoreError } from "../domain/errors.js"
import { makeEvent } from "../domain/events.js"
import type { AgentId, MessageId, SessionId } from "../domain/ids.js"
import type { Budget } from "../domain/budget.js"
import type { AgentTree } from "../agent/AgentTree.js"
import { Meter, type MeterSeed } from "../meter/Meter.js"
import { type QueuedSpawn, SpawnQueue, type SpawnQueueSeed } from "../agent/SpawnQueue.js"
import type { TreeCaps } from "../domain/caps.js"
import type { OpenBreach } from "./Fold.js"
import { Session } from "../domain/session.js"
import type { LogPosition } from "../provider/Provider.js"
import { AcpAsks } from "../provider/acp/Asks.js"
import { ProviderRegistry } from "../provider/ProviderRegistry.js"
import { Durable } from "../storage/Durable.js"
import { EventLog } from "../storage/EventLog.js"
import { SessionStore } from "../storage/SessionStore.js"
import { StateSeeding } from "../agent/RecoveredState.js"
import { plan, type PlanSession, type RecoveryPlan } from "./Plan.js"
import { readLog, readSessions, readStoreSessions, refoldFrom, type SessionRead } from "./Read.js"
import { type CheckpointEntry, decodeCheckpoints, encodeCheckpoints } from "./Checkpoint.js"

export interface RecoveryOptions {
  /**
   * Default true: queue the turns recovery implies (roots' recovery prompts, agents woken by
   * re-injected requests/replies). False: seed the state only (tests, inspection).
   */
  readonly resume?: boolean
  /**
   * Write nothing (a full or failing disk): no record flips, no log repairs, no orphan removal,
   * no messages logged — the state is rebuilt from the files as they are (a log that would need
   * a repair is folded as read). Use with `resume: false`.
   */
  readonly readOnly?: boolean
}

export interface RecoveryReport {
  /** Session directories found. */
  readonly sessions: number
  /** ACTIVE records flipped to SUSPENDED. */
  readonly suspended: number
  /** Agents rebuilt into the tree, and how many of them are roots. */
  readonly agents: number
  readonly roots: number
  /** Sessions removed: no record, or no `agent.created`. */
  readonly orphansCleaned: number
  /** Children whose parent was gone: terminated. */
  readonly danglingTerminated: number
  /** Sessions already terminated (skipped). */
  readonly terminatedSkipped: number
  /** Corrupt logs (and their subtrees) left on disk, not loaded. */
  readonly quarantined: ReadonlyArray<{ readonly session: string; readonly reason: string }>
  /** Logs that needed a repair (torn tail or pending entry). */
  readonly logsRepaired: number
  /** Total lines read. */
  readonly logLines: number
  /** Messages put back into inboxes (pending = enqueued − delivered by a completed turn). */
  readonly messagesReinjected: number
  /**
   * Replies found in the responder's log but never enqueued to the requester, and a root's progress
   * lines to USER its log lacks (the daemon died between the turn's end and the line): enqueued now.
   */
  readonly repliesRedelivered: number
  /** Sync requests nobody will answer (recipient gone): answered with an error. */
  readonly requestsFailed: number
  /** Turns the crash interrupted. */
  readonly interruptedTurns: number
  /** Roots given a recovery prompt. */
  readonly recoveryPrompts: number
  /** Turns queued (0 with `resume: false`); a quarantined agent's stay held. */
  readonly turnsQueued: number
  /** Agents quarantined by this start (a crash loop). */
  readonly crashLoops: number
  /** Agents quarantined now or earlier (their turns held until `agent resume`). */
  readonly parked: number
  readonly notes: ReadonlyArray<string>
}

export class RecoveryError extends Schema.TaggedError<RecoveryError>()("RecoveryError", {
  reason: Schema.Literal("not-empty"),
  message: Schema.String
}) {}

export type RecoveryFailure = RecoveryError | DurableError | EventLogError | SessionStoreError

/** ACTIVE → SUSPENDED record writes at once (their fsyncs overlap on the thread pool). */
const WRITE_CONCURRENCY = 8

export class Recovery extends Effect.Service<Recovery>()("substrat/Recovery", {
  dependencies: [StateSeeding.Default],
  effect: Effect.gen(function*() {
    const seeding = yield* StateSeeding
    const log = yield* EventLog
    const store = yield* SessionStore
    const durable = yield* Durable
    const paths = yield* SubstratPaths
    const registry = yield* ProviderRegistry
    const meter = yield* Effect.serviceOption(Meter)
    const spawns = yield* Effect.serviceOption(SpawnQueue)
    const asks = yield* Effect.serviceOption(AcpAsks)

    const saveState = (id: SessionId, f: (s: Session) => Session) =>
      Effect.flatMap(store.load(id), (rec) => store.save(f(rec)))

    /** ACTIVE → SUSPENDED (SessionStore.recover on the records already read), a few at once. */
    const suspendActive = (sessions: Array<PlanSession>) =>
      Effect.gen(function*() {
        const now = new Date(yield* Clock.currentTimeMillis).toISOString()
        const active: Array<number> = []
        for (let i = 0; i < sessions.length; i++) if (sessions[i]!.record?.state === "active") active.push(i)
        // Each save is an atomic replace with two fsyncs: run a few at once so they overlap.
        yield* Effect.forEach(active, (i) => {
          const x = sessions[i]!
          const next = new Session({ ...x.record!, state: "suspended", suspended_at: now })
          return Effect.map(store.save(next), () => {
            sessions[i] = { ...x, record: next }
          })
        }, { concurrency: WRITE_CONCURRENCY, discard: true })
        return active.length
      })

    /**
     * The Provider port's recovery hook of every provider the live-looking sessions use (a
     * provider string the registry refuses has none: its state is kept).
     */
    const providerHooks = (sessions: ReadonlyArray<PlanSession>) =>
      Effect.gen(function*() {
        const hooks = new Map<string, (state: Uint8Array, position: LogPosition) => Option.Option<Uint8Array>>()
        const seen = new Set<string>()
        for (const x of sessions) {
          const name = x.record?.provider_name
          if (name === undefined || seen.has(name) || x.log?.created == null) continue
          seen.add(name)
          const factory = yield* Effect.either(registry.get(name))
          if (Either.isRight(factory) && factory.right.recoverState !== undefined) hooks.set(name, factory.right.recoverState)
        }
        return (record: Session, position: LogPosition): Uint8Array | null => {
          const hook = hooks.get(record.provider_name)
          return hook === undefined ? null : Option.getOrNull(hook(record.provider_state, position))
        }
      })

    /** The plan of the sessions read (the configured crash-loop limit, the providers' hooks). */
    const planOf = (sessions: ReadonlyArray<PlanSession>) =>
      Effect.gen(function*() {
        const crashLoopAttempts = Option.match(yield* Effect.serviceOption(SubstratConfig), {
          onNone: () => undefined,
          onSome: (c) => c.crashLoopAttempts
        })
        return plan({
          sessions,
          recoverState: yield* providerHooks(sessions),
          ...(crashLoopAttempts === undefined ? {} : { crashLoopAttempts })
        })
      })

    /** Write what the plan changes on disk. Each step is idempotent. */
    const applyDisk = (p: RecoveryPlan) =>
      Effect.gen(function*() {
        for (const id of p.orphans) {
          yield* log.close(id)
          yield* durable.removeTree(paths.sessionDir(id))
        }
        for (const d of p.dangling) {
          yield* log.append(d.session, makeEvent("agent.terminated", { agent_id: d.agent }))
          yield* saveState(d.session, (r) => new Session({ ...r, state: "terminated" }))
          yield* log.close(d.session)
        }
        for (const id of p.markTerminated) {
          yield* saveState(id, (r) => new Session({ ...r, state: "terminated" }))
        }
        for (const b of p.blobs) {
          yield* saveState(b.session, (r) => new Session({ ...r, provider_state: b.blob }))
        }
      })

    /** Log the replies recovery owes (new messages: logged like any message, before they count). */
    const logReplies = (p: RecoveryPlan) =>
      Effect.forEach(p.replies, (r) =>
        Effect.zipRight(
          log.append(r.logSession, makeEvent("message.enqueued", r.envelope)),
          // A reply to USER is delivered at once (the user outbox), like the Router does.
          r.envelope.recipient === "USER"
            ? log.append(r.logSession, makeEvent("message.delivered", { message_id: r.envelope.id }))
            : Effect.void
        ), { discard: true })

    /** Agents in a crash loop: `agent.quarantined` in their log first, then the notice to USER. */
    const logCrashLoops = (p: RecoveryPlan) =>
      Effect.forEach(p.crashLoops, (c) =>
        log.append(c.session, makeEvent("agent.quarantined", { agent_id: c.agent, attempts: c.attempts, prompt: c.prompt })).pipe(
          Effect.zipRight(log.append(c.notice.logSession, makeEvent("message.enqueued", c.notice.envelope))),
          Effect.zipRight(log.append(c.notice.logSession, makeEvent("message.delivered", { message_id: c.notice.envelope.id })))
        ), { discard: true })

    /**
     * Rewrite the checkpoint file when an entry is new or gone. Best effort: a checkpoint only
     * saves reading, so failing to write one fails nothing (the next start reads more).
     */
    const saveCheckpoints = (
      reads: ReadonlyArray<SessionRead>,
      repaired: ReadonlyMap<SessionId, CheckpointEntry | null>,
      before: ReadonlyMap<SessionId, CheckpointEntry>,
      removed: ReadonlySet<SessionId>
    ) =>
      Effect.suspend(() => {
        const keep: Array<CheckpointEntry> = []
        for (const r of reads) {
          const cp = repaired.has(r.id) ? repaired.get(r.id)! : r.needsRepair ? null : r.checkpoint
          if (cp !== null && !removed.has(r.id)) keep.push(cp)
        }
        const changed = keep.length !== before.size || keep.some((c) => before.get(c.session_id) !== c)
        if (!changed) return Effect.void
        return Effect.flatMap(
          Effect.try({ try: () => encodeCheckpoints(keep), catch: (e) => new Error(`encode: ${String(e)}`) }),
          (bytes) => durable.replaceAtomic(paths.foldCheckpoint, bytes)
        )
      }).pipe(Effect.catchAll((e) => Effect.logWarning(`recovery: fold checkpoint not saved: ${e.message}`)))

    const run = Effect.fn("Recovery.run")(function*(options: RecoveryOptions = {}) {
      if (!(yield* seeding.isEmpty)) {
        return yield* new RecoveryError({
          reason: "not-empty",
          message: "recovery runs once, on an empty orchestrator state (daemon start-up)"
        })
      }
      // One pass over the session directories: record, WAL stat and log, each read once — a
      // long log only from where its checkpoint left off (Checkpoint.ts).
      const checkpoints = decodeCheckpoints(
        Option.getOrNull(yield* Effect.orElseSucceed(durable.readFile(paths.foldCheckpoint), () => Option.none()))
      )
      const reads = yield* readSessions(durable, paths, checkpoints)
      // Replaced where a flip or a repair changes one.
      const sessions: Array<PlanSession> = reads.slice()
      const readOnly = options.readOnly === true
      const suspended = readOnly ? 0 : yield* suspendActive(sessions)

      // Logs with a pending WAL entry or a torn tail: repaired through the EventLog, read again.
      let logsRepaired = 0
      let logLines = 0
      /** Repaired logs folded again from their checkpoint: the checkpoint to keep. */
      const repaired = new Map<SessionId, CheckpointEntry | null>()
      for (let i = 0; i < sessions.length; i++) {
        const x = sessions[i]!
        if (x.log === null) continue
        if (reads[i]!.needsRepair && !readOnly) {
          yield* log.repair(x.id)
          logsRepaired++
          const cp = checkpoints.get(x.id)
          const again = cp === undefined ? null : refoldFrom(paths.eventsFile(x.id), cp)
          if (again !== null && !again.tornTail) {
            sessions[i] = { ...x, log: again.log }
            repaired.set(x.id, again.checkpoint)
            logLines += again.log.lines - again.skipped
            continue
          }
          // No checkpoint to continue from (or it no longer matches): the whole log, which gets
          // one now, so the next start does not read it whole again.
          const whole = yield* readLog(durable, x.id, paths.eventsFile(x.id))
          sessions[i] = { ...x, log: whole.log }
          repaired.set(x.id, whole.tornTail ? null : whole.checkpoint)
          logLines += whole.log.lines
        } else {
          logLines += x.log.lines - reads[i]!.skipped
        }
      }

      const p = yield* planOf(sessions)
      if (!readOnly) {
        yield* applyDisk(p)
        yield* logReplies(p)
        yield* logCrashLoops(p)
        yield* saveCheckpoints(reads, repaired, checkpoints, new Set(p.orphans))
      }
      yield* seeding.seed(p.seed)
      yield* seeding.park(p.parked)
      if (Option.isSome(meter)) meter.value.seed(meterSeed(p.seed.tree, sessions))
      if (Option.isSome(spawns)) spawns.value.seed(spawnSeed(p.seed.tree, sessions))
      // ACP agents' interrupted turns' permission questions, asked again by their re-runs.
      if (Option.isSome(asks)) yield* asks.value.seed(new Map(sessions.flatMap((x) => (x.log === null ? [] : [[x.id, x.log.permissions] as const]))))
      if (options.resume !== false) {
        yield* seeding.queueTurns(p.turns)
        // Pending sync requests with a reply timeout: re-armed with their remaining time.
        yield* seeding.armTimeouts
        // Queued spawns that fit now start (the rest wait for room, as before the restart).
        if (Option.isSome(spawns) && !readOnly) yield* spawns.value.pump()
      }

      const report: RecoveryReport = {
        sessions: sessions.length,
        suspended,
        agents: p.seed.tree.size,
        roots: p.seed.tree.roots().length,
        orphansCleaned: p.orphans.length,
        danglingTerminated: p.dangling.length,
        terminatedSkipped: p.terminated,
        quarantined: p.quarantined,
        logsRepaired,
        logLines,
        messagesReinjected: p.reinjected,
        repliesRedelivered: p.replies.filter((r) => r.kind !== "failed-request").length,
        requestsFailed: p.replies.filter((r) => r.kind === "failed-request").length,
        interruptedTurns: p.interrupted,
        recoveryPrompts: p.prompts,
        turnsQueued: options.resume === false ? 0 : p.turns.length,
        crashLoops: p.crashLoops.length,
        parked: p.parked.length,
        notes: [
          ...p.quarantined.map((q) => `quarantined ${q.session}: ${q.reason}`),
          ...p.crashLoops.map((c) =>
            `agent ${c.name} (${c.agent}) quarantined: the daemon stopped ${c.attempts} times in a row during its turn; ` +
            `its turns are held until \`substrat agent resume ${c.name}\``
          )
        ]
      }
      return report
    })

    /**
     * Cluster mode: recover the trees whose roots are `roots` into this running daemon, from the
     * ports (Postgres), not from the home's files: a runner that took over their shard. The same
     * plan and apply as `run`, on those trees' sessions only, seeded next to the trees already
     * here (the services' seeds add). `only`: the caller knows which sessions may be theirs
     * (a superset); only those are read (else every record and live log). Returns the agents recovered.
     */
    const recoverTrees = Effect.fn("Recovery.recoverTrees")(function*(roots: ReadonlySet<string>, only?: ReadonlySet<string>) {
      const reads = yield* readStoreSessions(store, log, roots, only)
      if (reads.length === 0) return 0
      const sessions: Array<PlanSession> = reads.slice()
      yield* suspendActive(sessions)
      const p = yield* planOf(sessions)
      yield* applyDisk({ ...p, orphans: [] })
      yield* logReplies(p)
      yield* logCrashLoops(p)
      yield* seeding.seed(p.seed)
      yield* seeding.park(p.parked)
      if (Option.isSome(meter)) meter.value.seed(meterSeed(p.seed.tree, sessions))
      if (Option.isSome(spawns)) spawns.value.seed(spawnSeed(p.seed.tree, sessions))
      yield* seeding.queueTurns(p.turns)
      yield* seeding.armTimeouts
      if (Option.isSome(spawns)) yield* spawns.value.pump()
      return p.seed.tree.size
    })

    return { run, recoverTrees } as const
  })
}) {}

/** Budgets, open breaches and open questions of the live agents, from their logs. */
const meterSeed = (tree: AgentTree, sessions: ReadonlyArray<PlanSession>): MeterSeed => {
  const logs = new Map(sessions.map((x) => [x.id, x.log] as const))
  const budgets = new Map<AgentId, Budget>()
  const breaches = new Map<AgentId, OpenBreach>()
  const questions: Array<MeterSeed["questions"][number]> = []
  const read = new Set<MessageId>()
  for (const n of tree.nodes.values()) {
    const l = logs.get(n.session_id)
    if (l === null || l === undefined) continue
    if (l.budget !== null) budgets.set(n.id, l.budget)
    if (l.breach !== null) breaches.set(n.id, l.breach)
    for (const q of l.questions) questions.push({ ...q, agent: n.id })
    for (const id of l.userRead) read.add(id)
  }
  return { budgets, breaches, questions, read }
}

/**
 * Roots' own caps and the queued spawns of live parents, oldest first. A queued spawn whose
 * child exists already (born, then the crash came before its `spawn.started`) is done.
 */
const spawnSeed = (tree: AgentTree, sessions: ReadonlyArray<PlanSession>): SpawnQueueSeed => {
  const logs = new Map(sessions.map((x) => [x.id, x.log] as const))
  const caps = new Map<AgentId, TreeCaps>()
  const queued: Array<QueuedSpawn> = []
  for (const n of tree.nodes.values()) {
    const l = logs.get(n.session_id)
    if (l === null || l === undefined) continue
    if (l.caps !== null) caps.set(n.id, l.caps)
    for (const { data: d, ts } of l.queuedSpawns) {
      if (tree.childNamed(n.id, d.name) !== undefined) continue
      queued.push({
        queue_id: d.queue_id,
        parent: n.id,
        reason: d.reason,
        ts,
        args: {
          name: d.name,
          instructions: d.instructions,
          role: d.role,
          workspace_subdir: d.workspace_subdir,
          ...(d.workspace === undefined ? {} : { workspace: d.workspace }),
          provider: d.provider,
          budget: d.budget
        }
      })
    }
  }
  queued.sort((a, b) => a.ts.localeCompare(b.ts))
  return { caps, queued }
}

/** One line for the daemon's start-up log. */
export const describeReport = (r: RecoveryReport): string =>
  `recovered ${r.sessions} session(s): ${r.agents} agent(s) (${r.roots} root(s)), ${r.suspended} suspended, ` +
  `${r.orphansCleaned} orphan(s) cleaned, ${r.danglingTerminated} dangling terminated, ` +
  `${r.terminatedSkipped} terminated skipped, ${r.logLines} log line(s) read, ${r.logsRepaired} log(s) repaired, ` +
  `${r.messagesReinjected} message(s) re-injected, ${r.repliesRedelivered} repl(ies) re-delivered, ` +
  `${r.requestsFailed} request(s) failed, ${r.interruptedTurns} interrupted turn(s), ${r.turnsQueued} turn(s) queued, ` +
  `${r.parked} agent(s) quarantined (${r.crashLoops} new)`
