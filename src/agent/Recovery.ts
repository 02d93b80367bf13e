// Crash recovery at daemon start-up (seed 001, ARCHITECTURE §10, docs/recovery.md). Run once,
// on a freshly built (empty) orchestration state, before anything is served:
//   1. one read pass (RecoveryRead): per session directory its record, a stat of its WAL file
//      and its log (LogScan), back to back
//   2. SessionStore.recover, inlined (ACTIVE → SUSPENDED on the records read in 1); a log with a
//      torn tail or a pending WAL file is repaired through the EventLog and read again
//   3. Reconcile (pure): tree, orphans, dangling children, inboxes, requests, lost replies
//   4. apply: remove orphans, terminate dangling children, fix records, write scripted resume
//      blobs, seed the agent services through StateSeeding (tree, inboxes, pending requests, usage, recent
//      activity for `inspect_agent`), enqueue the replies recovery owes (logged: they are new
//      messages, and noted in the recent activity like deliveries), and — unless `resume: false` —
//      queue the roots' recovery prompts and the turns the re-injected messages wake.
// Re-injecting pending messages logs nothing. Every decision is deterministic in the files on
// disk, so recovering twice (or after a crash during recovery) gives the same state.
import { Clock, Effect, Schema } from "effect"
import { SubstratPaths } from "../config/Paths.js"
import type { DurableError, EventLogError, SessionStoreError } from "../domain/errors.js"
import { makeEvent } from "../domain/events.js"
import type { AgentId, SessionId } from "../domain/ids.js"
import type { MessageEnvelope } from "../domain/message.js"
import { Session } from "../domain/session.js"
import { Durable } from "../storage/Durable.js"
import { EventLog } from "../storage/EventLog.js"
import { SessionStore } from "../storage/SessionStore.js"
import { scanLog } from "./LogScan.js"
import { readSessions } from "./RecoveryRead.js"
import { type RecentActivity, withMessage } from "./Activity.js"
import { senderName } from "./Prompt.js"
import { StateSeeding } from "./RecoveredState.js"
import { type ReconcileSession, type RecoveryPlan, reconcile } from "./Reconcile.js"

export interface RecoveryOptions {
  /**
   * Default true: queue the turns recovery implies (roots' recovery prompts, agents woken by
   * re-injected requests/replies). False: seed the state only (tests, inspection).
   */
  readonly resume?: boolean
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
  /** Replies found in the responder's log but never enqueued to the requester: enqueued now. */
  readonly repliesRedelivered: number
  /** Sync requests nobody will answer (recipient gone): answered with an error. */
  readonly requestsFailed: number
  /** Turns the crash interrupted. */
  readonly interruptedTurns: number
  /** Roots given a recovery prompt. */
  readonly recoveryPrompts: number
  /** Turns queued (0 with `resume: false`). */
  readonly turnsQueued: number
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

    const saveState = (id: SessionId, f: (s: Session) => Session) =>
      Effect.flatMap(store.load(id), (rec) => store.save(f(rec)))

    /** Write what the plan changes on disk. Each step is idempotent. */
    const applyDisk = (plan: RecoveryPlan) =>
      Effect.gen(function*() {
        for (const id of plan.orphans) {
          yield* log.close(id)
          yield* durable.removeTree(paths.sessionDir(id))
        }
        for (const d of plan.dangling) {
          yield* log.append(d.session, makeEvent("agent.terminated", { agent_id: d.agent }))
          yield* saveState(d.session, (r) => new Session({ ...r, state: "terminated" }))
          yield* log.close(d.session)
        }
        for (const id of plan.markTerminated) {
          yield* saveState(id, (r) => new Session({ ...r, state: "terminated" }))
        }
        for (const b of plan.blobs) {
          yield* saveState(b.session, (r) => new Session({ ...r, provider_state: b.blob }))
        }
      })

    /**
     * Enqueue the replies recovery owes (logged first, like any message; noted in the recent
     * activity as the Router notes a delivery, and as the next recovery reads it back from the
     * log), then seed the agent services with the result.
     */
    const applyState = (plan: RecoveryPlan) =>
      Effect.gen(function*() {
        const inboxes = new Map<AgentId, ReadonlyArray<MessageEnvelope>>(plan.inboxes)
        const activity = new Map<AgentId, RecentActivity>(plan.activity)
        const userOutbox: Array<MessageEnvelope> = [...plan.userOutbox]
        for (const r of plan.replies) {
          const env: MessageEnvelope = r.envelope
          yield* log.append(r.logSession, makeEvent("message.enqueued", env))
          const summary = { kind: env.kind, message_id: env.id, text: env.payload }
          if (env.recipient === "USER") {
            yield* log.append(r.logSession, makeEvent("message.delivered", { message_id: env.id }))
            userOutbox.push(env)
            const root = env.sender
            if (root !== "USER" && root !== "SYSTEM") {
              activity.set(root, withMessage(activity.get(root), { direction: "out", peer: "USER", ...summary }))
            }
          } else if (env.recipient !== null) {
            const to = env.recipient
            const inbox = inboxes.get(to)
            if (inbox !== undefined) {
              inboxes.set(to, [...inbox, env])
              activity.set(to, withMessage(activity.get(to), { direction: "in", peer: senderName(env), ...summary }))
            }
          }
        }
        yield* seeding.seed({
          tree: plan.tree,
          inboxes,
          requests: plan.requests,
          usage: plan.usage,
          activity,
          userOutbox
        })
      })

    const run = Effect.fn("Recovery.run")(function*(options: RecoveryOptions = {}) {
      if (!(yield* seeding.isEmpty)) {
        return yield* new RecoveryError({
          reason: "not-empty",
          message: "recovery runs once, on an empty orchestrator state (daemon start-up)"
        })
      }
      // One pass over the session directories: record, WAL stat and log, each read once.
      const reads = yield* readSessions(durable, paths)
      // SessionStore.recover, inlined so the records are read once and the flips counted.
      const now = new Date(yield* Clock.currentTimeMillis).toISOString()
      // The reads themselves (a SessionRead is a ReconcileSession); replaced where a flip or a
      // repair changes one.
      const sessions: Array<ReconcileSession> = reads.slice()
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
      const suspended = active.length

      // Logs with a pending WAL entry or a torn tail: repaired through the EventLog, read again.
      let logsRepaired = 0
      let logLines = 0
      for (let i = 0; i < sessions.length; i++) {
        const x = sessions[i]!
        if (x.scan === null) continue
        if (reads[i]!.needsRepair) {
          yield* log.repair(x.id)
          const again = (yield* scanLog(durable, x.id, paths.eventsFile(x.id))).scan
          sessions[i] = { ...x, scan: again }
          logsRepaired++
        }
        logLines += sessions[i]!.scan!.lines
      }

      const plan = reconcile({ sessions })
      yield* applyDisk(plan)
      let reinjected = 0
      for (const inbox of plan.inboxes.values()) reinjected += inbox.length
      yield* applyState(plan)

      let turnsQueued = 0
      if (options.resume !== false) {
        yield* seeding.queueTurns([
          ...plan.prompts.map((p) => ({ _tag: "prompt", agent: p.agent, text: p.text }) as const),
          ...plan.wakes.map((w) => ({ _tag: "message", agent: w.agent, id: w.message }) as const)
        ])
        turnsQueued = plan.prompts.length + plan.wakes.length
        // Pending sync requests with a reply timeout: re-armed with their remaining time.
        yield* seeding.armTimeouts
      }

      const notes: Array<string> = []
      for (const q of plan.quarantined) notes.push(`quarantined ${q.session}: ${q.reason}`)
      if (plan.badMessages > 0) notes.push(`${plan.badMessages} undecodable message(s) dropped`)
      const report: RecoveryReport = {
        sessions: sessions.length,
        suspended,
        agents: plan.tree.size,
        roots: plan.tree.roots().length,
        orphansCleaned: plan.orphans.length,
        danglingTerminated: plan.dangling.length,
        terminatedSkipped: plan.terminated,
        quarantined: plan.quarantined,
        logsRepaired,
        logLines,
        messagesReinjected: reinjected,
        repliesRedelivered: plan.replies.filter((r) => r.kind === "lost-reply").length,
        requestsFailed: plan.replies.filter((r) => r.kind === "failed-request").length,
        interruptedTurns: plan.interrupted,
        recoveryPrompts: plan.prompts.length,
        turnsQueued,
        notes
      }
      return report
    })

    return { run } as const
  })
}) {}

/** One line for the daemon's start-up log. */
export const describeReport = (r: RecoveryReport): string =>
  `recovered ${r.sessions} session(s): ${r.agents} agent(s) (${r.roots} root(s)), ${r.suspended} suspended, ` +
  `${r.orphansCleaned} orphan(s) cleaned, ${r.danglingTerminated} dangling terminated, ` +
  `${r.terminatedSkipped} terminated skipped, ${r.logsRepaired} log(s) repaired, ` +
  `${r.messagesReinjected} message(s) re-injected, ${r.repliesRedelivered} repl(ies) re-delivered, ` +
  `${r.requestsFailed} request(s) failed, ${r.interruptedTurns} interrupted turn(s), ${r.turnsQueued} turn(s) queued`
