// Crash recovery, the pure part: from the session records and each log's fold, decide what the
// recovered daemon looks like (docs/recovery.md). No I/O; Recovery.ts applies the plan. Steps:
//  1. index      — one entry per session; orphans (no record, or no `agent.created`), corrupt
//                  logs (quarantined), terminated ones (skipped; a lagging record fixed)
//  2. tree       — agents reachable from a root through `parent_session_id`, breadth-first;
//                  an `agent.created` that does not rebuild is quarantined
//  3. unreachable — below a quarantined session: quarantined too; else dangling (terminated)
//  4. inboxes    — pending = enqueued − delivered by a completed turn, in enqueue order; the
//                  requests among them pending again; the user outbox
//  5. replies    — lost replies re-delivered, requests nobody will answer failed (Requests.ts)
//  6. resume     — recovery notes of interrupted agents; provider states that lag their log; agents in a
//                  crash loop (N starts in a row died mid-turn) quarantined: their turns held
//  7. usage      — own usage and turns; terminated descendants roll up into `retired`
//  8. activity   — each live agent's recent turns and messages (`inspect_agent`)
//  9. seed       — the agent services' state (StateSeeding), with the replies of step 5
//                  delivered like the Router delivers; the turns to queue
// Over 300 lines because the nine steps share one index; each step is a small named function.
import { AgentNode, NAME_PATTERN } from "../domain/agent.js"
import type { AgentId, MessageId, SessionId } from "../domain/ids.js"
import { MessageEnvelope } from "../domain/message.js"
import type { Session } from "../domain/session.js"
import type { LogPosition } from "../provider/Provider.js"
import { addUsage, type UsageTotals, zeroUsage } from "../domain/usage.js"
import { type AgentUsage, type MessageSummary, type SeededActivity, withMessage } from "../agent/Activity.js"
import { AgentTree, USER } from "../agent/AgentTree.js"
import { pausedNote, recoveryPrompt, senderName } from "../agent/Prompt.js"
import type { RecoveredState, RecoveredTurn } from "../agent/RecoveredState.js"
import type { PendingRequest } from "../agent/Requests.js"
import type { RecentMessage, SessionLog } from "./Fold.js"
import { type AgentEntry, type Entry, entry, isAgent } from "./Entry.js"
import { type PlannedReply, replies, stableId } from "./Requests.js"
import { type HeldHop, resumableFinds } from "../agent/FindRoute.js"
import { excerpt } from "../agent/Inspection.js"

export type { PlannedReply }

export interface RecoveryPlan {
  /** What the agent services are seeded with (replies below already delivered into it). */
  readonly seed: RecoveredState
  /** Sessions removed entirely (no record, or no `agent.created`). */
  readonly orphans: ReadonlyArray<SessionId>
  /** Children whose parent is gone: log `agent.terminated`, mark the record terminated. */
  readonly dangling: ReadonlyArray<{ readonly session: SessionId; readonly agent: AgentId }>
  /** Logged `agent.terminated` but the record still says otherwise: fix the record. */
  readonly markTerminated: ReadonlyArray<SessionId>
  /** Sessions whose log is corrupt, and their descendants: left untouched. */
  readonly quarantined: ReadonlyArray<{ readonly session: SessionId; readonly reason: string }>
  /** Already terminated (skipped). */
  readonly terminated: number
  /** Pending messages put back into inboxes (before the replies). */
  readonly reinjected: number
  /** New messages recovery logs: `message.enqueued` (+ `message.delivered` for USER) each. */
  readonly replies: ReadonlyArray<PlannedReply>
  /** Recovery notes (each with the message it rides with), then the messages that wake their agent (re-injected, then replies), in order. */
  readonly turns: ReadonlyArray<RecoveredTurn>
  /** Agents given a recovery note (roots, and children whose interrupted turn a message woke). */
  readonly prompts: number
  /** Sessions whose provider state lags their log (the provider says so): the state to write. */
  readonly blobs: ReadonlyArray<{ readonly session: SessionId; readonly blob: Uint8Array }>
  readonly interrupted: number
  /** Agents quarantined now (a crash loop): log `agent.quarantined`, then the notice to USER. */
  readonly crashLoops: ReadonlyArray<CrashLoop>
  /** Every quarantined agent (new and earlier): its turns queue but do not run until resumed. */
  readonly parked: ReadonlyArray<AgentId>
}

/** An agent the plan quarantines: the daemon died `attempts` times in a row in one of its turns. */
export interface CrashLoop {
  readonly agent: AgentId
  readonly session: SessionId
  readonly name: string
  readonly attempts: number
  /** The interrupted turn's prompt (excerpt). */
  readonly prompt: string
  /** The notice to USER (logged in the root's log, in the user outbox). */
  readonly notice: { readonly logSession: SessionId; readonly envelope: MessageEnvelope }
}

/** One session directory: its record (null: none) and, with a record, its log's fold. */
export interface PlanSession {
  readonly id: SessionId
  readonly record: Session | null
  readonly log: SessionLog | null
}

export interface PlanInput {
  /** Every session directory, sorted by id, each once; records after the ACTIVE → SUSPENDED flip. */
  readonly sessions: ReadonlyArray<PlanSession>
  /** The provider's recovery hook (Provider port `recoverState`): the state to write, or null. */
  readonly recoverState: (record: Session, position: LogPosition) => Uint8Array | null
  /**
   * Quarantine an agent once this many starts in a row died with one of its turns in flight
   * (`SUBSTRAT_CRASH_LOOP_ATTEMPTS`; default 2: the turn and one re-run).
   */
  readonly crashLoopAttempts?: number
}

/** The notice recovery sends USER when it quarantines an agent. */
const crashLoopNotice = (name: string, attempts: number, prompt: string) =>
  `[substrat] Agent ${name} was quarantined: the daemon stopped ${attempts} times in a row while ` +
  `${name} was in a turn, so that turn is not re-run at start-up (it may be what crashes the daemon). ` +
  `The turn's prompt was: <<< ${prompt} >>>. Its messages and turns are kept and wait. ` +
  `Run \`substrat agent resume ${name}\` to run them again, or \`substrat agent terminate ${name}\`.`

type Quarantine = Array<{ session: SessionId; reason: string }>

/** Step 1: entries, linked to their parents; orphans, corrupt logs, terminated sessions. */
const index = (sessions: ReadonlyArray<PlanSession>, quarantined: Quarantine) => {
  const entries: Array<Entry> = []
  const bySession = new Map<SessionId, Entry>()
  for (const x of sessions) {
    const e = entry(x.id, x.record, x.record === null ? null : x.log)
    entries.push(e)
    bySession.set(x.id, e)
  }
  const orphans: Array<SessionId> = []
  const markTerminated: Array<SessionId> = []
  const topLevel: Array<Entry> = []
  const candidates: Array<AgentEntry> = []
  let terminated = 0
  for (const e of entries) {
    if (e.record === null) {
      orphans.push(e.id)
      continue
    }
    if (e.log?.corrupt) {
      quarantined.push({ session: e.id, reason: e.log.corrupt })
      e.quarantined = true
      continue
    }
    if (!isAgent(e)) {
      orphans.push(e.id)
      continue
    }
    const parent = e.log.created.parent_session_id
    if (parent === null) topLevel.push(e)
    else {
      // A parent without a directory gets a placeholder: its kids are never reached.
      let p = bySession.get(parent)
      if (p === undefined) {
        p = entry(parent, null, null)
        bySession.set(parent, p)
      }
      ;(p.kids ??= []).push(e)
    }
    if (e.log.terminated || e.record.state === "terminated") {
      terminated++
      if (e.record.state !== "terminated") markTerminated.push(e.id)
      continue
    }
    e.candidate = true
    candidates.push(e)
  }
  return { entries, bySession, orphans, markTerminated, topLevel, candidates, terminated }
}


/**
 * Step 2: the tree, breadth-first from the roots. `AgentTree.add`'s rules are checked here in
 * O(1) each and the tree is built in one go; the node is built without re-validating (its
 * fields were decoded with the log).
 */
const buildTree = (topLevel: ReadonlyArray<Entry>, quarantined: Quarantine) => {
  const nodes: Array<AgentNode> = []
  /** The entries of `nodes`, index for index (tree order). */
  const live: Array<AgentEntry> = []
  const ids = new Set<AgentId>()
  const siblingNames = new Map<Entry | null, Set<string>>()
  const queue = topLevel.filter((e): e is AgentEntry => e.candidate && isAgent(e))
  for (let i = 0; i < queue.length; i++) {
    const e = queue[i]!
    const c = e.log.created
    const parentEntry = e.parent
    const names = siblingNames.get(parentEntry)
    const problem = !NAME_PATTERN.test(c.name) || c.role.length < 1 || c.role.length > 64
      ? `invalid name or role "${c.name}"/"${c.role}"`
      : ids.has(c.agent_id)
      ? `agent ${c.agent_id} already exists`
      : c.name === USER
      ? `"${USER}" is reserved`
      : names?.has(c.name)
      ? `the name "${c.name}" is taken among its siblings`
      : null
    if (problem !== null) {
      quarantined.push({ session: e.id, reason: `cannot rebuild agent ${c.name}: ${problem}` })
      e.quarantined = true
      continue
    }
    nodes.push(
      new AgentNode({
        id: c.agent_id,
        name: c.name,
        session_id: e.id,
        parent_id: parentEntry === null || !isAgent(parentEntry) ? null : parentEntry.log.created.agent_id,
        instructions: c.instructions,
        role: c.role,
        provider: c.provider,
        workspace_id: c.workspace,
        state: "idle",
        ...(c.approve === undefined ? {} : { approve: c.approve })
      }, true)
    )
    live.push(e)
    ids.add(c.agent_id)
    if (names === undefined) siblingNames.set(parentEntry, new Set([c.name]))
    else names.add(c.name)
    e.live = true
    for (const k of e.kids ?? []) {
      if (k.candidate && isAgent(k)) {
        k.parent = e
        queue.push(k)
      }
    }
  }
  return { tree: AgentTree.fromValidNodes(nodes), nodes, live }
}

/** Step 3: candidates the walk did not reach — below a quarantined session, or dangling. */
const unreachable = (
  candidates: ReadonlyArray<AgentEntry>,
  bySession: ReadonlyMap<SessionId, Entry>,
  quarantined: Quarantine
) => {
  const underQuarantine = (e: AgentEntry): boolean => {
    let p = e.log.created.parent_session_id
    const seen = new Set<SessionId>()
    while (p !== null && !seen.has(p)) {
      const pe = bySession.get(p)
      if (pe === undefined) return false
      if (pe.quarantined) return true
      seen.add(p)
      p = isAgent(pe) ? pe.log.created.parent_session_id : null
    }
    return false
  }
  const dangling: Array<{ session: SessionId; agent: AgentId }> = []
  for (const e of candidates) {
    if (e.live) continue
    if (underQuarantine(e)) {
      quarantined.push({ session: e.id, reason: "below a quarantined session" })
      e.quarantined = true
    } else {
      dangling.push({ session: e.id, agent: e.log.created.agent_id })
    }
  }
  return dangling
}

const wakes = (env: MessageEnvelope) =>
  env.kind === "request" || env.kind === "response" || env.sender === USER || (env.sender === "SYSTEM" && env.queued !== true)

/**
 * Step 4: each live agent's pending messages back in its inbox; the requests among them are
 * pending again (unless answered, or their requester is gone); the user outbox.
 */
const inboxes = (
  nodes: ReadonlyArray<AgentNode>,
  live: ReadonlyArray<AgentEntry>,
  answered: ReadonlySet<MessageId>,
  alive: (requester: MessageEnvelope["sender"]) => boolean
) => {
  const byAgent = new Map<AgentId, Array<MessageEnvelope>>()
  const requests: Array<PendingRequest> = []
  const woken: Array<{ agent: AgentId; message: MessageId }> = []
  /** Requests some live agent holds: answered when it runs. */
  const held = new Set<MessageId>()
  for (let i = 0; i < nodes.length; i++) {
    const node = nodes[i]!
    const inbox: Array<MessageEnvelope> = []
    for (const { envelope: env } of live[i]!.log.pending) {
      inbox.push(env)
      if (env.kind === "request") {
        held.add(env.id)
        const from = env.sender
        if (from !== "SYSTEM" && !answered.has(env.id) && alive(from)) requests.push({ id: env.id, from, to: node.id })
      }
      if (wakes(env)) woken.push({ agent: node.id, message: env.id })
    }
    // USER's requests it read and still owes an answer: its next turn with nothing outstanding answers them.
    for (const id of live[i]!.log.carried) {
      if (!answered.has(id)) requests.push({ id, from: USER, to: node.id, carried: true })
    }
    byAgent.set(node.id, inbox)
  }
  const userOutbox: Array<MessageEnvelope> = []
  for (const e of live) if (e.parent === null) userOutbox.push(...e.log.toUser)
  userOutbox.sort((a, b) => a.timestamp < b.timestamp ? -1 : a.timestamp > b.timestamp ? 1 : 0)
  return { inboxes: byAgent, requests, wakes: woken, held, userOutbox }
}

/** The note an agent whose turn the crash interrupted gets, and the messages that turn consumed. */
interface RecoveryNote {
  readonly agent: AgentId
  readonly root: boolean
  readonly messages: ReadonlyArray<MessageId>
  readonly text: string
}

/**
 * The turns recovery queues, per agent in this order: the turn with the recovery note, then one
 * turn per re-injected waking message, then the replies recovery sends. The note rides with the
 * waking message the interrupted turn was handling (so the note and that message arrive in one
 * turn; the turn also takes the non-waking messages it had consumed). A root whose interrupted
 * turn consumed no waking message gets the note alone (with that turn's prompt, when it had no
 * messages). A child with none is not woken: it runs only when a message wakes it.
 */
const queuedTurns = (
  notes: ReadonlyArray<RecoveryNote>,
  wakes: ReadonlyArray<{ readonly agent: AgentId; readonly message: MessageId }>,
  owed: ReadonlyArray<PlannedReply>
): { turns: Array<RecoveredTurn>; told: number } => {
  const turns: Array<RecoveredTurn> = []
  const carrier = new Map<MessageId, string>()
  let told = 0
  const waking = new Set(wakes.map((x) => x.message))
  for (const n of notes) {
    const w = n.messages.find((m) => waking.has(m))
    if (w !== undefined) {
      carrier.set(w, n.text)
      turns.push({ _tag: "message", agent: n.agent, id: w, note: n.text })
      told++
    } else if (n.root) {
      turns.push({ _tag: "prompt", agent: n.agent, text: n.text })
      told++
    }
  }
  for (const w of wakes) if (!carrier.has(w.message)) turns.push({ _tag: "message", agent: w.agent, id: w.message })
  for (const r of owed) {
    const to = r.envelope.recipient
    if (to !== null && to !== USER) turns.push({ _tag: "message", agent: to, id: r.envelope.id })
  }
  return { turns, told }
}

/**
 * Step 6: recovery notes for agents whose turn was interrupted; provider states that lag the log; agents in a
 * crash loop (quarantined now, or still quarantined from an earlier start) are parked.
 */
const resume = (tree: AgentTree, nodes: ReadonlyArray<AgentNode>, live: ReadonlyArray<AgentEntry>, input: PlanInput) => {
  const notes: Array<RecoveryNote> = []
  const blobs: Array<{ session: SessionId; blob: Uint8Array }> = []
  const crashLoops: Array<CrashLoop> = []
  const parked: Array<AgentId> = []
  const limit = Math.max(1, input.crashLoopAttempts ?? 2)
  let interrupted = 0
  for (let i = 0; i < nodes.length; i++) {
    const node = nodes[i]!
    const { log, record } = live[i]!
    const cut = log.turns.interrupted
    if (log.quarantine !== null) parked.push(node.id)
    else if (cut !== null && log.turns.interruptedInARow >= limit) {
      parked.push(node.id)
      let root: AgentEntry = live[i]!
      while (root.parent !== null && isAgent(root.parent)) root = root.parent
      const prompt = excerpt(cut.prompt)
      const attempts = log.turns.interruptedInARow
      crashLoops.push({
        agent: node.id,
        session: node.session_id,
        name: node.name,
        attempts,
        prompt,
        notice: {
          logSession: root.id,
          envelope: new MessageEnvelope({
            id: stableId("quarantine", node.session_id, String(log.turns.started)),
            timestamp: cut.ts,
            sender: "SYSTEM",
            recipient: USER,
            reply_to: null,
            kind: "notification",
            payload: crashLoopNotice(node.name, attempts, prompt),
            sender_name: "SYSTEM",
            recovered: true
          })
        }
      })
    }
    if (cut !== null) {
      interrupted++
      notes.push({
        agent: node.id,
        root: node.parent_id === null,
        messages: cut.messages,
        text: recoveryPrompt({
          prompt: cut.prompt,
          consumedMessages: cut.consumedMessages,
          children: tree.children(node.id).map((c) => c.name)
        })
      })
    } else if (log.turns.paused !== null) {
      // Parked when its budget ran out: its re-run (once the budget is raised: the turn gate
      // holds it until then) takes the same messages, with the note the live re-run has.
      notes.push({
        agent: node.id,
        root: node.parent_id === null,
        messages: log.turns.paused.messages,
        text: pausedNote(log.turns.paused.reason)
      })
    }
    const blob = input.recoverState(record!, {
      agent_name: node.name,
      turnsStarted: log.turns.started,
      interrupted: cut !== null
    })
    if (blob !== null) blobs.push({ session: node.session_id, blob })
  }
  return { notes, blobs, interrupted, crashLoops, parked }
}

/** Step 7: own usage from the log; terminated descendants roll up into `retired`. */
const usage = (nodes: ReadonlyArray<AgentNode>, live: ReadonlyArray<AgentEntry>) => {
  const retiredOf = (e: Entry, seen: Set<Entry>): { u: UsageTotals; turns: number } => {
    let u = zeroUsage
    let turns = 0
    for (const k of e.kids ?? []) {
      if (k.live || seen.has(k) || !isAgent(k)) continue
      seen.add(k)
      const r = retiredOf(k, seen)
      u = addUsage(u, addUsage(k.log.usage, r.u))
      turns += k.log.turns.ended + r.turns
    }
    return { u, turns }
  }
  const out = new Map<AgentId, AgentUsage>()
  for (let i = 0; i < nodes.length; i++) {
    const e = live[i]!
    // A Set only for agents with children (most agents have none).
    const r = e.kids === undefined ? { u: zeroUsage, turns: 0 } : retiredOf(e, new Set())
    out.set(nodes[i]!.id, { own: e.log.usage, turns: e.log.turns.ended, retired: r.u, retiredTurns: r.turns })
  }
  return out
}

const allNamed = (ms: ReadonlyArray<RecentMessage>): ms is ReadonlyArray<MessageSummary> => ms.every((m) => m.peer !== null)

/**
 * Step 8: the folds' recent-activity rings; a broadcast's peers are the sender's siblings now
 * (the log records only how many got it).
 */
const activity = (tree: AgentTree, nodes: ReadonlyArray<AgentNode>, live: ReadonlyArray<AgentEntry>) => {
  const out = new Map<AgentId, SeededActivity>()
  const peers = (id: AgentId) => tree.team(id).map((t) => t.name).join(",") || "(nobody)"
  for (let i = 0; i < nodes.length; i++) {
    const log = live[i]!.log
    const id = nodes[i]!.id
    // Rings a checkpoint kept stay encoded: the Activity service decodes them when first asked.
    const enc = log.recentEncoded
    if (enc !== null) {
      out.set(id, { _tag: "EncodedActivity", json: enc.json, broadcastPeers: enc.broadcast ? peers(id) : "" })
      continue
    }
    if (log.recentTurns.length === 0 && log.recentMessages.length === 0) continue
    // The fold's rings as they are (never mutated: the seed's updates make new arrays), unless a
    // broadcast needs its peers named.
    const ms = log.recentMessages
    out.set(id, {
      turns: log.recentTurns,
      messages: allNamed(ms) ? ms : ms.map((m) => ({
        ...m,
        peer: m.peer ?? peers(id)
      }))
    })
  }
  return out
}

/**
 * Step 9: the replies recovery sends, delivered into the seed the way the Router delivers
 * (into the recipient's inbox, or USER's outbox) and noted in the recent activity (as the next
 * recovery reads them back from the log).
 */
const deliver = (
  seed: {
    readonly inboxes: Map<AgentId, Array<MessageEnvelope>>
    readonly activity: Map<AgentId, SeededActivity>
    readonly userOutbox: Array<MessageEnvelope>
  },
  owed: ReadonlyArray<PlannedReply>
): void => {
  for (const { envelope: env } of owed) {
    const summary = { kind: env.kind, message_id: env.id, text: env.payload }
    if (env.recipient === USER) {
      seed.userOutbox.push(env)
      const root = env.sender
      if (root !== USER && root !== "SYSTEM") {
        seed.activity.set(root, withMessage(seed.activity.get(root), { direction: "out", peer: USER, ...summary }))
      }
    } else if (env.recipient !== null) {
      const to = env.recipient
      const inbox = seed.inboxes.get(to)
      if (inbox !== undefined) {
        inbox.push(env)
        seed.activity.set(to, withMessage(seed.activity.get(to), { direction: "in", peer: senderName(env), ...summary }))
      }
    }
  }
}

/** `find:` searches in transit: the hops live agents hold, against the found copies anywhere (FindRoute). */
const searches = (entries: ReadonlyArray<Entry>, live: ReadonlyArray<AgentEntry>) => {
  const hops: Array<HeldHop> = []
  for (const e of live) for (const envelope of e.log.findHops) hops.push({ agent: e.log.created.agent_id, envelope })
  const found = new Map<MessageId, AgentId>()
  if (hops.length === 0) return resumableFinds(hops, found)
  for (const e of entries) {
    if (!isAgent(e)) continue
    for (const origin of e.log.found) found.set(origin, e.log.created.agent_id)
  }
  return resumableFinds(hops, found)
}

export const plan = (input: PlanInput): RecoveryPlan => {
  const quarantined: Quarantine = []
  const ix = index(input.sessions, quarantined)
  const { tree, nodes, live } = buildTree(ix.topLevel, quarantined)
  const dangling = unreachable(ix.candidates, ix.bySession, quarantined)

  // Every session that ever had an agent (terminated included): agent → session.
  const sessionOf = new Map<AgentId, Entry>()
  for (const e of ix.entries) if (isAgent(e)) sessionOf.set(e.log.created.agent_id, e)
  const alive = (requester: MessageEnvelope["sender"]) =>
    requester === USER || (requester !== "SYSTEM" && sessionOf.get(requester)?.live === true)
  // Replies already given anywhere (the requester's log, or for USER the root's own).
  const answered = new Set<MessageId>()
  for (const e of ix.entries) if (e.log !== null) for (const r of e.log.replies) answered.add(r)

  const ib = inboxes(nodes, live, answered, alive)
  let reinjected = 0
  for (const inbox of ib.inboxes.values()) reinjected += inbox.length
  const finds = searches(ix.entries, live)
  // A sync find: in transit is held (its hops resume): its searcher is not told it failed.
  for (const h of finds.resume) if (h.envelope.find?.sync === true) ib.held.add(h.envelope.find.origin)
  const owed = replies({ entries: ix.entries, live, answered, held: ib.held, alive, sessionOf })
  const rs = resume(tree, nodes, live, input)
  const recent = activity(tree, nodes, live)
  deliver({ inboxes: ib.inboxes, activity: recent, userOutbox: ib.userOutbox }, owed)
  for (const c of rs.crashLoops) ib.userOutbox.push(c.notice.envelope)

  const { turns, told } = queuedTurns(rs.notes, ib.wakes, owed)
  return {
    seed: {
      tree,
      inboxes: ib.inboxes,
      requests: ib.requests,
      usage: usage(nodes, live),
      activity: recent,
      userOutbox: ib.userOutbox,
      finds
    },
    orphans: ix.orphans,
    dangling,
    markTerminated: ix.markTerminated,
    quarantined,
    terminated: ix.terminated,
    reinjected,
    replies: owed,
    turns,
    prompts: told,
    blobs: rs.blobs,
    interrupted: rs.interrupted,
    crashLoops: rs.crashLoops,
    parked: rs.parked
  }
}
