// Crash recovery, step 5 of the plan (pure; docs/recovery.md, "Lost replies"): every sync
// request acknowledged to a live requester is answered or still owed by a live agent.
//  - lost reply: the recipient consumed the request in a turn that ended, but no response is
//    logged anywhere: the reply that turn produced is enqueued now;
//  - failed request: no live agent holds or answered it (the recipient was terminated or
//    dangling, or never born): the requester gets an error reply;
//  - lost progress: a root's turn ended with USER's request carried (work outstanding) but its
//    text never reached USER as progress: the progress line is enqueued now.
import { createHash } from "node:crypto"
import { type AgentId, MessageId, type SessionId } from "../domain/ids.js"
import { MessageEnvelope } from "../domain/message.js"
import { USER } from "../agent/AgentTree.js"
import { type AgentEntry, type Entry, isAgent } from "./Entry.js"

/** A message recovery sends: a lost auto-reply or progress line re-delivered, or an error for a request nobody will answer. */
export interface PlannedReply {
  readonly kind: "lost-reply" | "lost-progress" | "failed-request"
  /** Whose log gets `message.enqueued`: the requester's, or for USER the answering root's. */
  readonly logSession: SessionId
  readonly envelope: MessageEnvelope
}

/** A name-based (v5-style) UUID: recovery's own messages get the same id on every run. */
export const stableId = (...parts: ReadonlyArray<string>): MessageId => {
  const h = createHash("sha256").update(`substrat-recovery:${parts.join(":")}`).digest()
  h[6] = (h[6]! & 0x0f) | 0x50
  h[8] = (h[8]! & 0x3f) | 0x80
  const x = h.subarray(0, 16).toString("hex")
  return MessageId.make(`${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`)
}

const replyEnvelope = (args: {
  readonly id: MessageId
  readonly sender: AgentId | "SYSTEM"
  readonly senderName: string
  readonly recipient: AgentId | "USER"
  readonly replyTo: MessageId
  readonly text: string
  readonly ts: string
}) =>
  new MessageEnvelope({
    id: args.id,
    timestamp: args.ts,
    sender: args.sender,
    recipient: args.recipient,
    reply_to: args.replyTo,
    kind: "response",
    payload: args.text,
    sender_name: args.senderName,
    recovered: true
  })

export const replies = (input: {
  readonly entries: ReadonlyArray<Entry>
  readonly live: ReadonlyArray<AgentEntry>
  /** Requests with a reply in some log; recovery's own replies are added as they are planned. */
  readonly answered: Set<MessageId>
  /** Requests pending in a live agent's inbox (it answers them when it runs). */
  readonly held: ReadonlySet<MessageId>
  readonly alive: (requester: MessageEnvelope["sender"]) => boolean
  readonly sessionOf: ReadonlyMap<AgentId, Entry>
}): ReadonlyArray<PlannedReply> => {
  const { answered, alive, sessionOf } = input
  const handled = new Set<MessageId>(input.held)
  const out: Array<PlannedReply> = []

  // Lost replies: an agent answered (its turn completed) but the reply never reached the
  // requester. (The answering agent may have been terminated since: its answer still goes.)
  for (const e of input.entries) {
    if (!isAgent(e)) continue
    const created = e.log.created
    for (const [request, a] of e.log.answers) {
      handled.add(request)
      if (answered.has(request) || !alive(a.requester) || a.requester === "SYSTEM") continue
      // An answer to USER is logged in the answering root's own log: only while it lives.
      if (a.requester === USER && !e.live) continue
      out.push({
        kind: "lost-reply",
        logSession: a.requester === USER ? e.id : sessionOf.get(a.requester)!.id,
        envelope: replyEnvelope({
          id: stableId("reply", request),
          sender: created.agent_id,
          senderName: created.name,
          recipient: a.requester,
          replyTo: request,
          text: a.text,
          ts: a.ts
        })
      })
      answered.add(request)
    }
  }

  // Lost progress: a root's turn ended with USER's request still open (it asked a child or the
  // human), and the daemon died before that turn's text reached USER as progress.
  for (const e of input.live) {
    const owed = e.log.owedProgress
    if (owed === null) continue
    const created = e.log.created
    out.push({
      kind: "lost-progress",
      logSession: e.id,
      envelope: new MessageEnvelope({
        id: stableId("progress", e.id, owed.turn_id),
        timestamp: owed.ts,
        sender: created.agent_id,
        recipient: USER,
        reply_to: null,
        kind: "notification",
        payload: owed.text,
        sender_name: created.name,
        progress: true,
        recovered: true
      })
    })
  }

  // Failed requests: a live requester waits on a request no live agent holds or answered.
  const fail = (
    request: MessageId,
    requester: MessageEnvelope["sender"],
    recipient: { readonly name: string },
    ts: string
  ) => {
    if (answered.has(request) || handled.has(request) || !alive(requester) || requester === "SYSTEM") return
    handled.add(request)
    answered.add(request)
    // USER's requests go to roots; a dead root has no log to carry the answer.
    if (requester === USER) return
    out.push({
      kind: "failed-request",
      logSession: sessionOf.get(requester)!.id,
      // From SYSTEM, not from the lost agent: a new agent may have its name by now, and a reply
      // "from" that name would read as that agent's answer.
      envelope: replyEnvelope({
        id: stableId("failed", request),
        sender: "SYSTEM",
        senderName: "SYSTEM",
        recipient: requester,
        replyTo: request,
        text: `[error] your request ${request} to ${recipient.name} will not be answered: ` +
          `${recipient.name} is gone (lost in a daemon crash or terminated)`,
        ts
      })
    })
  }
  // Requests held by agents that are not in the tree (dangling, terminated): nobody will answer.
  for (const e of input.entries) {
    if (e.live || !isAgent(e)) continue
    const who = { name: e.log.created.name }
    for (const { envelope: env } of e.log.pending) {
      if (env.kind === "request") fail(env.id, env.sender, who, env.timestamp)
    }
  }
  // Requests a live agent sent (tool result acknowledged) that reached no log: the recipient
  // was never born (deferred spawn lost in the crash) or vanished.
  for (const e of input.live) {
    for (const s of e.log.sent) fail(s.id, e.log.created.agent_id, { name: s.recipient }, s.ts)
  }
  return out
}
