// Crash recovery, the pure part: from the session records and one scan per log, decide what the
// recovered daemon looks like (docs/recovery.md). No I/O here; Recovery.ts applies the plan.
//  - tree: agents with `agent.created`, not terminated, reachable from a root through
//    `parent_session_id`; roots first, then children (breadth-first).
//  - orphans (a directory without a record, or a record without `agent.created`): removed.
//  - dangling (a live-looking child whose parent is not in the tree): terminated.
//  - quarantined (a log with a corrupt line, and everything below it): left on disk, not loaded.
//  - inboxes: pending = enqueued − delivered by a completed turn, in enqueue order.
//  - requests: cross-referenced across logs; see `lostReplies` and `failedRequests`.
//  - activity: the recent turns and messages each live agent's scan kept (`inspect_agent`).
import { Either, Schema } from "effect"
import { createHash } from "node:crypto"
import { AgentNode } from "../domain/agent.js"
import { type AgentId, MessageId, type SessionId } from "../domain/ids.js"
import { MessageEnvelope, MessageEnvelopeFromLog } from "../domain/message.js"
import type { Session } from "../domain/session.js"
import { addUsage as add, type UsageTotals, zeroUsage as zero } from "../domain/usage.js"
import { AgentTree, USER } from "./AgentTree.js"
import type { RawEnvelope, SessionScan } from "./LogScan.js"
import type { AgentUsage, RecentActivity as Activity } from "./Activity.js"
import { recoveryPrompt } from "./Prompt.js"
import type { PendingRequest } from "./Requests.js"

/** A reply recovery sends: a lost auto-reply re-delivered, or an error for a request nobody will answer. */
export interface PlannedReply {
  readonly kind: "lost-reply" | "failed-request"
  /** Whose log gets `message.enqueued`: the requester's, or for USER the answering root's. */
  readonly logSession: SessionId
  readonly envelope: MessageEnvelope
}

export interface RecoveryPlan {
  readonly tree: AgentTree
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
  /** Fresh arrays, one per live agent: Recovery hands them to the state as they are. */
  readonly inboxes: ReadonlyMap<AgentId, Array<MessageEnvelope>>
  readonly requests: ReadonlyArray<PendingRequest>
  readonly replies: ReadonlyArray<PlannedReply>
  /** Re-injected messages that wake their agent (requests, replies, anything from USER), in order. */
  readonly wakes: ReadonlyArray<{ readonly agent: AgentId; readonly message: MessageId }>
  /** Roots whose turn the crash interrupted, with their recovery prompt. */
  readonly prompts: ReadonlyArray<{ readonly agent: AgentId; readonly text: string }>
  /** Scripted sessions whose resume blob is behind their log: the blob to write. */
  readonly blobs: ReadonlyArray<{ readonly session: SessionId; readonly blob: Uint8Array }>
  readonly usage: ReadonlyMap<AgentId, AgentUsage>
  /** Recent activity of the live agents that have any (fresh arrays, handed to the state as they are). */
  readonly activity: ReadonlyMap<AgentId, Activity>
  /** Messages live roots sent to USER, oldest first (the Orchestrator's user outbox). */
  readonly userOutbox: ReadonlyArray<MessageEnvelope>
  /** Envelopes that did not decode (dropped). */
  readonly badMessages: number
  readonly interrupted: number
}

/** A name-based (v5-style) UUID: recovery's own messages get the same id on every run. */
export const stableId = (...parts: ReadonlyArray<string>): MessageId => {
  const h = createHash("sha256").update(`substrat-recovery:${parts.join(":")}`).digest()
  h[6] = (h[6]! & 0x0f) | 0x50
  h[8] = (h[8]! & 0x3f) | 0x80
  const x = h.subarray(0, 16).toString("hex")
  return MessageId.make(`${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`)
}

const decodeEnvelope = Schema.decodeUnknownEither(MessageEnvelopeFromLog)
/** AgentName's pattern (domain/agent.ts). */
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/

const wakes = (env: MessageEnvelope) => env.kind === "request" || env.kind === "response" || env.sender === "USER"

export { recoveryPrompt }

/** The scripted provider's resume blob (v1), see provider/scripted/ScriptedProvider.ts. */
const ScriptedBlob = Schema.parseJson(Schema.Struct({ v: Schema.Literal(1), agent: Schema.String, turn: Schema.Number }))
const decodeScriptedBlob = Schema.decodeUnknownEither(ScriptedBlob)

const scriptedBlob = (record: Session, scan: SessionScan, name: string): Uint8Array | null => {
  if (record.provider_name !== "scripted" && !record.provider_name.startsWith("scripted:")) return null
  // Sends that completed or failed; an interrupted one is sent again.
  const turn = scan.turnsStarted - (scan.interrupted === null ? 0 : 1)
  if (turn <= 0 && record.provider_state.byteLength === 0) return null
  const current = decodeScriptedBlob(new TextDecoder().decode(record.provider_state))
  if (Either.isRight(current) && current.right.turn === turn && current.right.agent === name) return null
  return new TextEncoder().encode(JSON.stringify({ v: 1, agent: name, key: "(recovered)", turn }))
}

/** One session directory: its record (null: none) and, with a record, its log's scan. */
export interface ReconcileSession {
  readonly id: SessionId
  readonly record: Session | null
  readonly scan: SessionScan | null
}

/** Per-session working state (fields instead of a Map per property: 100k sessions). */
interface Entry {
  readonly id: SessionId
  readonly record: Session | null
  readonly scan: SessionScan | null
  /** Sessions whose `agent.created` names this one as parent (valid logs only), in id order. */
  kids: Array<Entry> | undefined
  /** Set when the breadth-first walk reaches this session: the live parent's entry. */
  parent: Entry | null
  candidate: boolean
  live: boolean
  quarantined: boolean
}

export const reconcile = (input: {
  /** Every session directory, sorted by id, each once; records after `SessionStore.recover`. */
  readonly sessions: ReadonlyArray<ReconcileSession>
}): RecoveryPlan => {
  const orphans: Array<SessionId> = []
  const quarantined: Array<{ session: SessionId; reason: string }> = []
  const markTerminated: Array<SessionId> = []
  const dangling: Array<{ session: SessionId; agent: AgentId }> = []
  let terminated = 0

  const entries: Array<Entry> = []
  const bySession = new Map<SessionId, Entry>()
  for (const x of input.sessions) {
    const e: Entry = {
      id: x.id,
      record: x.record,
      scan: x.record === null ? null : x.scan,
      kids: undefined,
      parent: null,
      candidate: false,
      live: false,
      quarantined: false
    }
    entries.push(e)
    bySession.set(x.id, e)
  }
  // Every session that ever had an agent (terminated included): agent → session.
  const sessionOf = new Map<AgentId, Entry>()
  const topLevel: Array<Entry> = []
  const candidates: Array<Entry> = []
  for (const e of entries) {
    const rec = e.record
    const scan = e.scan
    if (rec === null) {
      orphans.push(e.id)
      continue
    }
    if (scan?.corrupt) {
      quarantined.push({ session: e.id, reason: scan.corrupt })
      e.quarantined = true
      continue
    }
    if (!scan || scan.created === null) {
      orphans.push(e.id)
      continue
    }
    sessionOf.set(scan.created.agent_id, e)
    const parent = scan.created.parent_session_id
    if (parent === null) topLevel.push(e)
    else {
      // A parent without a directory gets a placeholder: its kids are never reached.
      let p = bySession.get(parent)
      if (p === undefined) {
        p = {
          id: parent,
          record: null,
          scan: null,
          kids: undefined,
          parent: null,
          candidate: false,
          live: false,
          quarantined: false
        }
        bySession.set(parent, p)
      }
      ;(p.kids ??= []).push(e)
    }
    if (scan.terminated || rec.state === "terminated") {
      terminated++
      if (rec.state !== "terminated") markTerminated.push(e.id)
      continue
    }
    e.candidate = true
    candidates.push(e)
  }

  // Build the tree breadth-first from the roots; the unreachable are dangling or quarantined.
  // `add`'s rules, checked here in O(1) each; the tree is built in one go at the end.
  const nodes: Array<AgentNode> = []
  /** The entries of `nodes`, index for index (tree order). */
  const liveEntries: Array<Entry> = []
  const ids = new Set<AgentId>()
  const siblingNames = new Map<Entry | null, Set<string>>()
  const queue: Array<Entry> = topLevel.filter((e) => e.candidate)
  for (let i = 0; i < queue.length; i++) {
    const e = queue[i]!
    const c = e.scan!.created!
    const parentEntry = e.parent
    const parentAgent = parentEntry === null ? null : parentEntry.scan!.created!.agent_id
    // Name and role checked here (AgentCreatedData types them as strings); the rest was
    // decoded by the scan, so the node is built without re-validating (hot for 100k agents).
    const node = !NAME.test(c.name) || c.role.length < 1 || c.role.length > 64
      ? Either.left(`invalid name or role "${c.name}"/"${c.role}"`)
      : Either.right(new AgentNode({
        id: c.agent_id,
        name: c.name,
        session_id: e.id,
        parent_id: parentAgent,
        instructions: c.instructions,
        role: c.role,
        provider: c.provider,
        workspace_id: c.workspace,
        state: "idle"
      }, true))
    let names = siblingNames.get(parentEntry)
    const problem = Either.isLeft(node)
      ? String(node.left)
      : ids.has(c.agent_id)
      ? `agent ${c.agent_id} already exists`
      : c.name === USER
      ? `"${USER}" is reserved`
      : names?.has(c.name)
      ? `the name "${c.name}" is taken among its siblings`
      : null
    if (problem !== null || Either.isLeft(node)) {
      quarantined.push({ session: e.id, reason: `cannot rebuild agent ${c.name}: ${problem}` })
      e.quarantined = true
      continue
    }
    nodes.push(node.right)
    liveEntries.push(e)
    ids.add(c.agent_id)
    if (names === undefined) {
      names = new Set<string>()
      siblingNames.set(parentEntry, names)
    }
    names.add(c.name)
    e.live = true
    if (e.kids !== undefined) {
      for (const k of e.kids) {
        if (k.candidate) {
          k.parent = e
          queue.push(k)
        }
      }
    }
  }
  const tree = AgentTree.fromValidNodes(nodes)
  // A candidate not reached: below a quarantined session → quarantined too; else dangling.
  const underQuarantine = (e: Entry): boolean => {
    let p = e.scan?.created?.parent_session_id ?? null
    const seen = new Set<SessionId>()
    while (p !== null && !seen.has(p)) {
      const pe = bySession.get(p)
      if (pe?.quarantined) return true
      seen.add(p)
      p = pe?.scan?.created?.parent_session_id ?? null
    }
    return false
  }
  for (const e of candidates) {
    if (e.live) continue
    if (underQuarantine(e)) {
      quarantined.push({ session: e.id, reason: "below a quarantined session" })
      e.quarantined = true
    } else {
      dangling.push({ session: e.id, agent: e.scan!.created!.agent_id })
    }
  }

  const liveAgent = (a: string): a is AgentId => sessionOf.get(a as AgentId)?.live === true
  const alive = (requester: string) => requester === "USER" || liveAgent(requester)

  // Replies already given anywhere (the requester's log, or for USER the root's own).
  const answered = new Set<string>()
  for (const e of entries) if (e.scan !== null) for (const r of e.scan.replies) answered.add(r)

  // Inboxes, pending requests, wakes.
  const inboxes = new Map<AgentId, Array<MessageEnvelope>>()
  const requests: Array<PendingRequest> = []
  const wakeList: Array<{ agent: AgentId; message: MessageId }> = []
  const handled = new Set<string>()
  let badMessages = 0
  for (let i = 0; i < nodes.length; i++) {
    const node = nodes[i]!
    const scan = liveEntries[i]!.scan!
    const inbox: Array<MessageEnvelope> = []
    for (const raw of scan.pending) {
      const env = decodeEnvelope(raw.raw)
      if (Either.isLeft(env)) {
        badMessages++
        continue
      }
      inbox.push(env.right)
      if (env.right.kind === "request") {
        handled.add(raw.id)
        const from = env.right.sender
        if (from !== "SYSTEM" && !answered.has(raw.id) && alive(from)) {
          requests.push({ id: env.right.id, from, to: node.id })
        }
      }
      if (wakes(env.right)) wakeList.push({ agent: node.id, message: env.right.id })
    }
    inboxes.set(node.id, inbox)
  }

  // The user outbox: what live roots said to USER.
  const userOutbox: Array<MessageEnvelope> = []
  for (const e of liveEntries) {
    if (e.parent !== null) continue
    for (const raw of e.scan!.toUser) {
      const env = decodeEnvelope(raw)
      if (Either.isLeft(env)) badMessages++
      else userOutbox.push(env.right)
    }
  }
  userOutbox.sort((a, b) => a.timestamp < b.timestamp ? -1 : a.timestamp > b.timestamp ? 1 : 0)

  // Lost replies: a live agent answered (its turn completed) but the reply never reached the requester.
  const replies: Array<PlannedReply> = []
  const replyEnvelope = (args: {
    id: MessageId
    sender: AgentId | "SYSTEM"
    senderName: string
    recipient: AgentId | "USER"
    replyTo: string
    text: string
    ts: string
  }) =>
    new MessageEnvelope({
      id: args.id,
      timestamp: args.ts,
      sender: args.sender,
      recipient: args.recipient,
      reply_to: MessageId.make(args.replyTo),
      kind: "response",
      payload: args.text,
      sender_name: args.senderName,
      recovered: true
    })
  // (The answering agent may have been terminated since: its answer is still delivered.)
  for (const e of entries) {
    const scan = e.scan
    if (scan === null || scan.created === null || scan.corrupt !== null) continue
    for (const [r, a] of scan.answers) {
      handled.add(r)
      if (answered.has(r) || !alive(a.requester)) continue
      const recipient = a.requester === "USER" ? "USER" : a.requester as AgentId
      // An answer to USER is logged in the answering root's own log: only while it lives.
      if (recipient === "USER" && !e.live) continue
      replies.push({
        kind: "lost-reply",
        logSession: recipient === "USER" ? e.id : sessionOf.get(recipient)!.id,
        envelope: replyEnvelope({
          id: stableId("reply", r),
          sender: scan.created.agent_id,
          senderName: scan.created.name,
          recipient,
          replyTo: r,
          text: a.text,
          ts: a.ts
        })
      })
      answered.add(r)
    }
  }

  // Failed requests: a live requester waits on a request no live agent holds or answered.
  const fail = (r: string, requester: string, recipient: { id: AgentId | null; name: string }, ts: string) => {
    if (answered.has(r) || handled.has(r) || !alive(requester) || requester === "SYSTEM") return
    handled.add(r)
    answered.add(r)
    const to = requester === "USER" ? "USER" : requester as AgentId
    // USER's requests go to roots; a dead root has no log to carry the answer.
    if (to === "USER") return
    replies.push({
      kind: "failed-request",
      logSession: sessionOf.get(to)!.id,
      envelope: replyEnvelope({
        id: stableId("failed", r),
        sender: recipient.id ?? "SYSTEM",
        senderName: recipient.name,
        recipient: to,
        replyTo: r,
        text:
          `[error] ${recipient.name} is gone (lost in a daemon crash or terminated); request ${r} will not be answered`,
        ts
      })
    })
  }
  // Requests held by agents that are not in the tree (dangling, terminated): nobody will answer.
  for (const e of entries) {
    const scan = e.scan
    if (e.live || scan === null || scan.created === null || scan.corrupt !== null) continue
    const who = { id: scan.created.agent_id, name: scan.created.name }
    for (const env of scan.pending) if (env.kind === "request") fail(env.id, env.sender, who, env.timestamp)
  }
  // Requests a live agent sent (tool result acknowledged) that reached no log: the recipient
  // was never born (deferred spawn lost in the crash) or vanished.
  for (let i = 0; i < nodes.length; i++) {
    const node = nodes[i]!
    for (const s of liveEntries[i]!.scan!.sent) fail(s.id, node.id, { id: null, name: s.recipient }, s.ts)
  }
  for (const r of replies) {
    if (r.envelope.recipient !== "USER") {
      wakeList.push({ agent: r.envelope.recipient as AgentId, message: r.envelope.id })
    }
  }

  // Roots interrupted mid-turn get a recovery prompt; scripted blobs catch up with the log.
  const prompts: Array<{ agent: AgentId; text: string }> = []
  const blobs: Array<{ session: SessionId; blob: Uint8Array }> = []
  let interrupted = 0
  for (let i = 0; i < nodes.length; i++) {
    const node = nodes[i]!
    const e = liveEntries[i]!
    const scan = e.scan!
    if (scan.interrupted) {
      interrupted++
      if (node.parent_id === null) {
        prompts.push({
          agent: node.id,
          text: recoveryPrompt({
            prompt: scan.interrupted.prompt,
            consumedMessages: scan.interrupted.consumedMessages,
            children: tree.children(node.id).map((c) => c.name)
          })
        })
      }
    }
    const blob = scriptedBlob(e.record!, scan, node.name)
    if (blob) blobs.push({ session: node.session_id, blob })
  }

  // Usage: own from the log; terminated descendants roll up into `retired`.
  const retiredOf = (e: Entry, seen: Set<Entry>): { u: UsageTotals; turns: number } => {
    let u = zero
    let turns = 0
    for (const k of e.kids ?? []) {
      if (k.live || seen.has(k)) continue
      seen.add(k)
      const r = retiredOf(k, seen)
      // (Every kid has a scan: only sessions with a valid log are anyone's kid.)
      u = add(u, add(k.scan!.usage, r.u))
      turns += k.scan!.turnsEnded + r.turns
    }
    return { u, turns }
  }
  const usage = new Map<AgentId, AgentUsage>()
  for (let i = 0; i < nodes.length; i++) {
    const e = liveEntries[i]!
    const scan = e.scan!
    // A Set only for agents with children (most agents have none).
    const r = e.kids === undefined ? { u: zero, turns: 0 } : retiredOf(e, new Set())
    usage.set(nodes[i]!.id, { own: scan.usage, turns: scan.turnsEnded, retired: r.u, retiredTurns: r.turns })
  }

  // Recent activity: the scans' rings; a broadcast's peers are the sender's siblings now (the
  // log records only how many got it).
  const activity = new Map<AgentId, Activity>()
  for (let i = 0; i < nodes.length; i++) {
    const scan = liveEntries[i]!.scan!
    if (scan.recentTurns.length === 0 && scan.recentMessages.length === 0) continue
    const id = nodes[i]!.id
    activity.set(id, {
      turns: [...scan.recentTurns],
      messages: scan.recentMessages.map((m) => ({
        ...m,
        peer: m.peer ?? (tree.team(id).map((t) => t.name).join(",") || "(nobody)")
      }))
    })
  }

  return {
    tree,
    orphans,
    dangling,
    markTerminated,
    quarantined,
    terminated,
    inboxes,
    requests,
    replies,
    wakes: wakeList,
    prompts,
    blobs,
    usage,
    activity,
    userOutbox,
    badMessages,
    interrupted
  }
}

export type { RawEnvelope }
