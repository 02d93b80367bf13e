// Crash recovery's view of one session's log (docs/recovery.md): a typed fold. Every line is
// decoded with its event's Schema from the event catalog (src/domain/events.ts, the Schemas
// the log is written with): the line's `event` tag picks the one member of the `LogEvent` union
// to decode with, extended by `ts`. The decoded entry goes to that event's handler, which
// updates the session's accumulator. A line that does not decode stops the fold and marks the
// session corrupt (recovery quarantines it). `finish` hands back plain data (`SessionLog`).
//
// What is kept: the `agent.created` record, whether the agent was terminated, the messages
// still owed to it, the requests it answered, the sync requests it sent, the replies it got,
// its interrupted turn, its turn counts and usage, an ACP agent's permission questions since its
// last completed turn, and its recent activity for `inspect_agent` (the last turns and messages,
// in small rings).
// Over 300 lines because it holds one handler per event of the catalog, side by side, so a new
// event's recovery is one entry here.
import { Either, ParseResult, Schema } from "effect"
import { type EventData, LogEvent, type LogEventName, type LoggedPermission } from "../domain/events.js"
import { MessageId, type SessionId, type TurnId } from "../domain/ids.js"
import type { MessageEnvelope } from "../domain/message.js"
import { BroadcastArgs, SendMessageArgs } from "../domain/tools.js"
import type { Budget } from "../domain/budget.js"
import type { TreeCaps } from "../domain/caps.js"
import { addUsage, type UsageTotals, zeroUsage } from "../domain/usage.js"
import {
  decodeRings,
  encodeRings,
  type MessageSummary,
  RECENT_MESSAGES,
  RECENT_TURNS,
  type TurnSummary
} from "../agent/Activity.js"
import { excerpt } from "../agent/Inspection.js"
import { senderName } from "../agent/Prompt.js"
import type { FoldState, Hold, OwedProgress } from "./Checkpoint.js"

/** A message enqueued to this agent and not consumed by a completed turn. */
export interface PendingMessage {
  readonly envelope: MessageEnvelope
  /** Position in the log (enqueue order). */
  readonly seq: number
}

/** A request this agent consumed in a turn that completed: what its auto-reply was. */
export interface Answer {
  readonly requester: MessageEnvelope["sender"]
  /** The auto-reply text (the turn's response, or the error note the Orchestrator sends). */
  readonly text: string
  /** `ts` of the turn's end: the re-delivered reply's timestamp (deterministic across runs). */
  readonly ts: string
}

/** A sync request this agent sent (its `send_message` result said `waiting_for_reply`). */
export interface SentRequest {
  readonly id: MessageId
  readonly recipient: string
  readonly ts: string
}

/**
 * A message of the recent-activity ring. `peer: null`: a broadcast (the log records only how
 * many siblings got it; the plan names the agent's siblings).
 */
export interface RecentMessage extends Omit<MessageSummary, "peer"> {
  readonly peer: string | null
}

/** Where the log says the conversation stands: what a provider needs to line its resume state up. */
export interface TurnPosition {
  /** `turn.start` events: sends to the provider so far. */
  readonly started: number
  /** Turns that ended (`turn.complete`, or `provider.error` of a turn). */
  readonly ended: number
  /** The last turn started and never ended (the crash interrupted it). */
  readonly interrupted: {
    readonly prompt: string
    readonly consumedMessages: boolean
    /** The messages that turn consumed (they are pending again), in delivery order. */
    readonly messages: ReadonlyArray<MessageId>
    readonly ts: string
  } | null
  /**
   * `turn.start`s since the last turn that ended (or the last `agent.resumed`): how many starts
   * in a row died with a turn of this agent in flight (0 when the last turn ended).
   */
  readonly interruptedInARow: number
  /**
   * The last turn ended parked (a budget on the agent's path ran out, `provider.error` with
   * `parked`) and no turn started since: the messages it had read (pending again, in delivery
   * order) and why. Its re-run carries a note saying it was paused.
   */
  readonly paused: { readonly messages: ReadonlyArray<MessageId>; readonly reason: string } | null
}


/** One session's log, folded. */
export interface SessionLog {
  readonly session_id: SessionId
  readonly lines: number
  /** Set when a line does not decode: `file:line: why`. Nothing else is meaningful then. */
  readonly corrupt: string | null
  readonly created: EventData<"agent.created"> | null
  readonly terminated: boolean
  /** Set by `agent.quarantined` (a crash loop), cleared by `agent.resumed`. */
  readonly quarantine: EventData<"agent.quarantined"> | null
  /** Enqueued to this agent and not consumed by a completed turn, in enqueue order. */
  readonly pending: ReadonlyArray<PendingMessage>
  /** `find:` hops logged here and not forwarded (the daemon passes them on after start-up). */
  readonly findHops: ReadonlyArray<MessageEnvelope>
  /** Searches whose found copy is in this log (their hops elsewhere are done). */
  readonly found: ReadonlyArray<MessageId>
  /** Requests consumed by completed turns → their auto-reply. */
  readonly answers: ReadonlyMap<MessageId, Answer>
  /** `reply_to` of every response enqueued in this log, and requests of this agent that timed out. */
  readonly replies: ReadonlySet<MessageId>
  readonly sent: ReadonlyArray<SentRequest>
  /** Messages this root sent to USER (logged in its own log), in order. */
  readonly toUser: ReadonlyArray<MessageEnvelope>
  /**
   * USER's requests a completed turn read but left open (it ended with requests of its own
   * outstanding) and no later turn answered: answered by the agent's next turn that ends with
   * none (docs/messaging.md, "When a user's request is answered").
   */
  readonly carried: ReadonlyArray<MessageId>
  /**
   * The last turn ended with USER's requests carried and a text, and its progress line to USER
   * (logged just after the turn's end) is not in the log: the daemon died in between. Recovery
   * sends it (TurnRunner's `answerUser`).
   */
  readonly owedProgress: OwedProgress | null
  readonly turns: TurnPosition
  readonly usage: UsageTotals
  /** The budget in force (the last `budget.set`), or null. */
  readonly budget: Budget | null
  /** A `budget.breached` not followed by a `budget.set`: still waiting for the human. */
  readonly breach: OpenBreach | null
  /** `human.asked` without its `human.answered`, oldest first. */
  readonly questions: ReadonlyArray<OpenQuestion>
  /**
   * The permission questions asked since the last `turn.complete` (the unfinished turn's, which a
   * re-run asks again: src/provider/acp/Asks.ts), with their answers, in order.
   */
  readonly permissions: ReadonlyArray<LoggedPermission>
  /** A root's own tree caps (the last `caps.set`), or null. */
  readonly caps: TreeCaps | null
  /** `spawn.queued` of this agent's without its `spawn.started` / `spawn.failed`, oldest first. */
  readonly queuedSpawns: ReadonlyArray<QueuedSpawnEntry>
  /** Messages to USER the human has read (`user.read`). */
  readonly userRead: ReadonlySet<MessageId>
  /** The last RECENT_TURNS ended turns, oldest first (texts excerpted), as `noteTurn` records them. */
  readonly recentTurns: ReadonlyArray<TurnSummary>
  /** The last RECENT_MESSAGES messages in and out, in log order (texts excerpted), as `noteMessage` records them. */
  readonly recentMessages: ReadonlyArray<RecentMessage>
  /**
   * Set when the rings are still as a checkpoint kept them (the fold added nothing to them): their
   * JSON (Activity.ts's `RecentRings`), not decoded, and whether a broadcast's peers are unnamed
   * in it. `recentTurns` and `recentMessages` are empty then.
   */
  readonly recentEncoded: { readonly json: string; readonly broadcast: boolean } | null
}

export interface OpenBreach {
  readonly item_id: string
  readonly reason: string
  readonly ts: string
}
export interface QueuedSpawnEntry {
  readonly data: EventData<"spawn.queued">
  readonly ts: string
}
export interface OpenQuestion {
  readonly item_id: string
  readonly question: string
  readonly ts: string
}

/** One decoded line of event `E`. */
interface Entry<E extends LogEventName> {
  readonly ts: string
  readonly event: E
  readonly data: EventData<E>
}
type AnyEntry = { readonly [E in LogEventName]: Entry<E> }[LogEventName]

/**
 * Per event name, the decoder of a whole line: the event's member of the `LogEvent` union
 * (`event` literal + `data` Schema) plus `ts`. Built once; `session_id` (context the log
 * instance injects) is not re-checked: the session is the directory's.
 */
const entryDecoders: ReadonlyMap<string, (u: unknown) => Either.Either<AnyEntry, ParseResult.ParseIssue>> = new Map(
  LogEvent.members.map((member) => {
    const decode = ParseResult.decodeUnknownEither(Schema.Struct({ ts: Schema.String, ...member.fields }))
    return [member.fields.event.literals[0], decode as (u: unknown) => Either.Either<AnyEntry, ParseResult.ParseIssue>]
  })
)

/** The successful result of `send_message` / `broadcast` as ToolHandler logs it (Router's SendResult). */
const decodeSendResult = Schema.decodeUnknownEither(
  Schema.Struct({ message_id: MessageId, waiting_for_reply: Schema.Boolean })
)
const decodeBroadcastResult = Schema.decodeUnknownEither(Schema.Struct({ message_id: MessageId }))
const decodeSendArgs = Schema.decodeUnknownEither(SendMessageArgs)
const decodeBroadcastArgs = Schema.decodeUnknownEither(BroadcastArgs)

// Shared by every log without answers/replies (read-only views: never mutated).
const noAnswers: ReadonlyMap<MessageId, Answer> = new Map()
const noReplies: ReadonlySet<MessageId> = new Set()
const noRead: ReadonlySet<MessageId> = new Set()
const none: ReadonlyArray<never> = []

/** How a turn ended, as its recent-activity entry needs it. */
type TurnEnd =
  | { readonly _tag: "complete"; readonly data: EventData<"turn.complete"> }
  | { readonly _tag: "failed"; readonly turn_id: TurnId; readonly data: EventData<"provider.error"> }

/**
 * A turn of the ring: how it ended and its prompt (summarised by `finish`, for the few kept), or
 * its summary already (a checkpoint keeps summaries, not whole turns).
 */
type RecentTurn =
  | { readonly _tag: "ended"; readonly end: TurnEnd; readonly prompt: string }
  | { readonly _tag: "summary"; readonly s: TurnSummary }

/** What `noteTurn` (Orchestrator) records for a turn that ended with `end`. */
const turnSummary = (t: RecentTurn): TurnSummary => {
  if (t._tag === "summary") return t.s
  const { end, prompt } = t
  return end._tag === "complete"
    ? { turn_id: end.data.turn_id, prompt: excerpt(prompt), response: excerpt(end.data.response), error: null }
    : { turn_id: end.turn_id, prompt: excerpt(prompt), response: "", error: `${end.data.reason}: ${end.data.message}` }
}

/**
 * A message of the ring: a `message.enqueued` (in, or out to USER), a tool call's send, or its
 * summary already (a checkpoint keeps summaries, not whole envelopes).
 */
type Noted =
  | { readonly _tag: "enqueued"; readonly envelope: MessageEnvelope }
  | { readonly _tag: "sent"; readonly m: RecentMessage }
  | { readonly _tag: "summary"; readonly m: RecentMessage }

/** What `noteMessage` (Router) records. */
const messageSummary = (n: Noted): RecentMessage => {
  if (n._tag === "summary") return n.m
  if (n._tag === "sent") return { ...n.m, text: excerpt(n.m.text) }
  const env = n.envelope
  const out = env.recipient === "USER"
  return {
    direction: out ? "out" : "in",
    peer: out ? "USER" : senderName(env),
    kind: env.kind,
    message_id: env.id,
    text: excerpt(env.payload)
  }
}

/** The accumulator of one session's fold. Its handlers (below) are the only writers. */
class Acc {
  created: EventData<"agent.created"> | null = null
  terminated = false
  seq = 0
  readonly pending = new Map<MessageId, PendingMessage>()
  /** `find:` hops not forwarded yet (never in the inbox: no turn reads them). */
  hops: Map<MessageId, MessageEnvelope> | undefined
  found: Array<MessageId> | undefined
  /** Consumed since the last turn end: final once a turn ends, back to pending at EOF. */
  readonly open = new Map<MessageId, PendingMessage>()
  // Created on first use: most logs never need them, and at 100k sessions the empty
  // collections are a measurable share of the heap (and of GC) until the plan runs.
  answers: Map<MessageId, Answer> | undefined
  replies: Set<MessageId> | undefined
  sent: Array<SentRequest> | undefined
  toUser: Array<MessageEnvelope> | undefined
  /** Sync requests this agent sent that no reply (or timeout) has answered yet. */
  unanswered: Set<MessageId> | undefined
  /** Responses enqueued to this agent that no turn has read yet. */
  unreadReplies = 0
  /** USER's requests read by a turn that ended with work outstanding, not answered since. */
  carried: Array<MessageId> | undefined
  /** Set by a turn that carried USER's requests with a text; cleared by its progress line (SessionLog.owedProgress). */
  owedProgress: OwedProgress | null = null
  /** `send_message` / `broadcast` calls waiting for their result: call id → tool and arguments. */
  invoked: Map<string, { readonly tool: string; readonly args: unknown }> | undefined
  openTurn: string | null = null
  openTurnTs = ""
  /** The last turn was parked, none started since: what it had read, and why (TurnPosition.paused). */
  paused: { readonly messages: ReadonlyArray<MessageId>; readonly reason: string } | null = null
  /** The last turns (summaries are built by `finish`, for the few kept). */
  turns: Array<RecentTurn> | undefined
  messages: Array<Noted> | undefined
  /**
   * The rings as a checkpoint kept them (`turns` and `messages` are then unset), decoded only
   * when the fold notes more; `broadcast`: a broadcast's peers are unnamed in them.
   */
  recentJson: string | undefined
  broadcast = false
  started = 0
  ended = 0
  /** `turn.start`s since the last turn end or `agent.resumed`. */
  inARow = 0
  quarantine: EventData<"agent.quarantined"> | null = null
  usage: UsageTotals = zeroUsage
  budget: Budget | null = null
  breach: OpenBreach | null = null
  questions: Array<OpenQuestion> | undefined
  /** Permission questions since the last `turn.complete` (SessionLog.permissions). */
  permissions: Array<LoggedPermission> | undefined
  caps: TreeCaps | null = null
  queuedSpawns: Map<string, QueuedSpawnEntry> | undefined
  userRead: Set<MessageId> | undefined
  /** Turns with request-level `usage` events: their turn-level `usage` is not counted again. */
  metered: Set<string> | undefined
  /** `usage.reserved` not settled by a `usage` yet: each counts at its size (the request may have run). */
  holds: Map<string, Hold> | undefined

  /** The accumulator as plain data (a checkpoint, Checkpoint.ts): only what is not empty. */
  toState(): FoldState {
    const s: { -readonly [K in keyof FoldState]: FoldState[K] } = {}
    const list = <A>(xs: Iterable<A> | undefined): Array<A> | undefined => {
      if (xs === undefined) return undefined
      const out = [...xs]
      return out.length === 0 ? undefined : out
    }
    const put = <K extends keyof FoldState>(k: K, v: FoldState[K] | null | undefined): void => {
      if (v !== undefined && v !== null) s[k] = v
    }
    put("created", this.created)
    if (this.terminated) s.terminated = true
    if (this.seq !== 0) s.seq = this.seq
    put("pending", list(this.pending.values()))
    put("open", list(this.open.values()))
    put("hops", list(this.hops?.values()))
    put("found", list(this.found))
    put("answers", list(this.answers))
    put("replies", list(this.replies))
    put("sent", list(this.sent))
    put("toUser", list(this.toUser))
    put("unanswered", list(this.unanswered))
    if (this.unreadReplies !== 0) s.unreadReplies = this.unreadReplies
    put("carried", list(this.carried))
    put("owedProgress", this.owedProgress)
    put("invoked", list(this.invoked))
    // (The turn's `ts` means something only while it is open.)
    if (this.openTurn !== null) {
      s.openTurn = this.openTurn
      s.openTurnTs = this.openTurnTs
    }
    put("paused", this.paused)
    if (this.recentJson !== undefined ? this.broadcast : this.messages?.some((m) => messageSummary(m).peer === null)) {
      s.broadcast = true
    }
    if (this.started !== 0) s.started = this.started
    if (this.ended !== 0) s.ended = this.ended
    if (this.inARow !== 0) s.inARow = this.inARow
    put("quarantine", this.quarantine)
    if (this.usage !== zeroUsage) s.usage = this.usage
    put("budget", this.budget)
    put("breach", this.breach)
    put("questions", list(this.questions))
    put("permissions", list(this.permissions))
    put("metered", list(this.metered))
    put("holds", list(this.holds))
    put("caps", this.caps)
    put("queuedSpawns", list(this.queuedSpawns?.values()))
    put("userRead", list(this.userRead))
    return s
  }

  /** The recent-activity rings as a checkpoint keeps them (Activity.ts's `RecentRings` as JSON), or none. */
  recent(): string | undefined {
    if (this.recentJson !== undefined) return this.recentJson
    if (this.turns === undefined && this.messages === undefined) return undefined
    return encodeRings({ turns: this.turns?.map(turnSummary), messages: this.messages?.map(messageSummary) })
  }

  /** The checkpoint's rings, decoded to note more (a ring that does not decode starts empty). */
  private unpack(): void {
    if (this.recentJson === undefined) return
    const r = decodeRings(this.recentJson)
    this.recentJson = undefined
    if (Either.isLeft(r)) return
    if (r.right.turns !== undefined) this.turns = r.right.turns.map((t) => ({ _tag: "summary", s: t }))
    if (r.right.messages !== undefined) this.messages = r.right.messages.map((m) => ({ _tag: "summary", m }))
  }

  /** An accumulator that continues from a checkpoint's state (and its undecoded rings). */
  static fromState(s: FoldState, recent: string | undefined): Acc {
    const acc = new Acc()
    const some = <A>(xs: ReadonlyArray<A> | undefined): Array<A> | undefined => (xs === undefined ? undefined : [...xs])
    acc.created = s.created ?? null
    acc.terminated = s.terminated === true
    acc.seq = s.seq ?? 0
    for (const p of s.pending ?? none) acc.pending.set(p.envelope.id, p)
    for (const p of s.open ?? none) acc.open.set(p.envelope.id, p)
    if (s.hops !== undefined) acc.hops = new Map(s.hops.map((e) => [e.id, e]))
    acc.found = some(s.found)
    if (s.answers !== undefined) acc.answers = new Map(s.answers)
    if (s.replies !== undefined) acc.replies = new Set(s.replies)
    acc.sent = some(s.sent)
    acc.toUser = some(s.toUser)
    if (s.unanswered !== undefined) acc.unanswered = new Set(s.unanswered)
    acc.unreadReplies = s.unreadReplies ?? 0
    acc.carried = some(s.carried)
    acc.owedProgress = s.owedProgress ?? null
    if (s.invoked !== undefined) acc.invoked = new Map(s.invoked)
    acc.openTurn = s.openTurn ?? null
    acc.openTurnTs = s.openTurnTs ?? ""
    acc.paused = s.paused ?? null
    acc.recentJson = recent
    acc.broadcast = s.broadcast === true
    acc.started = s.started ?? 0
    acc.ended = s.ended ?? 0
    acc.inARow = s.inARow ?? 0
    acc.quarantine = s.quarantine ?? null
    acc.usage = s.usage ?? zeroUsage
    acc.budget = s.budget ?? null
    acc.breach = s.breach ?? null
    acc.questions = some(s.questions)
    acc.permissions = s.permissions?.map((q) => ({ ...q }))
    if (s.metered !== undefined) acc.metered = new Set(s.metered)
    if (s.holds !== undefined) acc.holds = new Map(s.holds)
    acc.caps = s.caps ?? null
    if (s.queuedSpawns !== undefined) acc.queuedSpawns = new Map(s.queuedSpawns.map((q) => [q.data.queue_id, q]))
    if (s.userRead !== undefined) acc.userRead = new Set(s.userRead)
    return acc
  }

  noteMessage(m: Noted): void {
    this.unpack()
    const ring = this.messages ??= []
    ring.push(m)
    if (ring.length > RECENT_MESSAGES) ring.shift()
  }

  /** A turn ended: its summary noted, the requests it consumed answered with `reply`. */
  endTurn(end: TurnEnd, ts: string): void {
    this.noteEnded(end)
    const text = end._tag === "complete"
      ? end.data.response
      : `[error] ${this.created?.name ?? "the agent"} failed to answer: ${end.data.message}`
    // The answer rule, as TurnRunner applies it: USER's requests read so far are answered by a
    // turn that ends with nothing outstanding, and carried past one that does not.
    const users = [...(this.carried ?? none)]
    for (const [id, p] of this.open) {
      if (p.envelope.kind !== "request") continue
      if (p.envelope.sender === "USER") users.push(id)
      else (this.answers ??= new Map()).set(id, { requester: p.envelope.sender, text, ts })
    }
    const id = end._tag === "complete" ? end.data.turn_id : end.turn_id
    if ((this.unanswered?.size ?? 0) > 0 || this.unreadReplies > 0 || (this.questions?.length ?? 0) > 0) {
      this.carried = users
      // Its text goes to USER as progress, logged right after this end.
      this.owedProgress = users.length > 0 && text !== "" ? { turn_id: id, text, ts } : null
    } else {
      for (const u of users) (this.answers ??= new Map()).set(u, { requester: "USER", text, ts })
      this.carried = undefined
      this.owedProgress = null
    }
    this.closeTurn(id)
  }

  /** The ended turn onto the recent ring. */
  private noteEnded(end: TurnEnd): void {
    this.unpack()
    const ring = this.turns ??= []
    ring.push({ _tag: "ended", end, prompt: this.openTurn ?? "" })
    if (ring.length > RECENT_TURNS) ring.shift()
  }

  /** No turn open any more: its read messages dealt with, the turn counters moved on. */
  private closeTurn(id: TurnId): void {
    this.open.clear()
    this.openTurn = null
    // Its usage is settled (the turn-level `usage` comes before the end): like the live Activity,
    // forget that it was metered, so the set holds open turns only instead of growing with history.
    if (this.metered?.delete(id) === true && this.metered.size === 0) this.metered = undefined
    this.ended++
    this.inARow = 0
  }

  /**
   * A turn parked (its budget ran out mid-way): it ends, but answers nobody. The messages it read
   * are pending again, ahead of the rest as they were, and wait for its re-run.
   */
  parkTurn(turnId: TurnId, data: EventData<"provider.error">, reason: string): void {
    this.noteEnded({ _tag: "failed", turn_id: turnId, data })
    const read = [...this.open.values()]
    for (const p of read) if (p.envelope.kind === "response") this.unreadReplies++
    const all = [...read, ...this.pending.values()].sort((x, y) => x.seq - y.seq)
    this.pending.clear()
    for (const p of all) this.pending.set(p.envelope.id, p)
    this.paused = { messages: read.map((p) => p.envelope.id), reason }
    this.owedProgress = null
    this.closeTurn(turnId)
  }

  /** A `send_message` / `broadcast` call's result (logged after its `tool_call.invoked`). */
  sendResult(data: EventData<"tool_call.result">, ts: string): void {
    const call = this.invoked?.get(data.call_id)
    this.invoked?.delete(data.call_id)
    if (data.is_error) return
    if (data.tool === "broadcast") {
      const r = decodeBroadcastResult(data.result)
      if (Either.isLeft(r)) return
      const args = call === undefined ? undefined : Either.getRight(decodeBroadcastArgs(call.args))
      const text = args === undefined || args._tag === "None" ? "" : args.value.text
      return this.noteMessage({
        _tag: "sent",
        m: { direction: "out", peer: null, kind: "multicast", message_id: r.right.message_id, text }
      })
    }
    const r = decodeSendResult(data.result)
    if (Either.isLeft(r)) return
    const decoded = call === undefined ? undefined : decodeSendArgs(call.args)
    const args = decoded === undefined || Either.isLeft(decoded) ? null : decoded.right
    const { message_id, waiting_for_reply } = r.right
    if (waiting_for_reply) {
      ;(this.sent ??= []).push({ id: message_id, recipient: args?.recipient ?? "?", ts })
      // (Its reply may be logged before this result: then it is answered already.)
      if (!this.replies?.has(message_id)) (this.unanswered ??= new Set()).add(message_id)
    }
    // A message to USER is noted by its own `message.enqueued` (in this log, before this result).
    if (args?.recipient === "USER") return
    const kind = args?.reply_to !== undefined ? "response" : waiting_for_reply ? "request" : "notification"
    this.noteMessage({
      _tag: "sent",
      m: { direction: "out", peer: args?.recipient ?? "?", kind, message_id, text: args?.text ?? "" }
    })
  }
}

type Handler<E extends LogEventName> = (acc: Acc, data: EventData<E>, ts: string) => void
const ignore = (): void => {}

/** One function per event: how it changes the accumulator. */
const handlers: { readonly [E in LogEventName]: Handler<E> } = {
  "session.created": ignore,
  "session.restored": ignore,
  "suspend.result": ignore,
  "workspace.diff": ignore,
  "egress.request": ignore,
  // The unfinished turn's permission questions: its re-run asks them again (src/provider/acp/Asks.ts).
  "permission.asked": (acc, data) => {
    ;(acc.permissions ??= []).push({ item_id: data.item_id, key: data.key, choice: null })
  },
  "permission.answered": (acc, data) => {
    const i = acc.permissions?.findIndex((q) => q.item_id === data.item_id) ?? -1
    if (i >= 0) acc.permissions![i] = { ...acc.permissions![i]!, choice: data.choice }
  },
  "workspace.overlap": ignore,
  // The merge queue reads its own items back (src/daemon/MergeQueue.ts).
  "merge.queued": ignore,
  "merge.held": ignore,
  "merge.merged": ignore,
  "merge.failed": ignore,
  "budget.set": (acc, data) => {
    acc.budget = data
    acc.breach = null
  },
  "budget.breached": (acc, data, ts) => {
    acc.breach = { item_id: data.item_id, reason: data.reason, ts }
  },
  "human.asked": (acc, data, ts) => {
    ;(acc.questions ??= []).push({ item_id: data.item_id, question: data.question, ts })
  },
  "human.answered": (acc, data) => {
    if (acc.questions !== undefined) acc.questions = acc.questions.filter((q) => q.item_id !== data.item_id)
  },
  "caps.set": (acc, data) => {
    acc.caps = data
  },
  "spawn.queued": (acc, data, ts) => {
    ;(acc.queuedSpawns ??= new Map()).set(data.queue_id, { data, ts })
  },
  "spawn.started": (acc, data) => {
    acc.queuedSpawns?.delete(data.queue_id)
  },
  "spawn.failed": (acc, data) => {
    acc.queuedSpawns?.delete(data.queue_id)
  },
  "user.read": (acc, data) => {
    const read = acc.userRead ??= new Set()
    for (const id of data.message_ids) read.add(id)
  },
  "agent.created": (acc, data) => {
    if (acc.created === null) acc.created = data
  },
  "agent.terminated": (acc) => {
    acc.terminated = true
  },
  "agent.quarantined": (acc, data) => {
    acc.quarantine = data
  },
  "agent.resumed": (acc) => {
    acc.quarantine = null
    acc.inARow = 0
  },
  "message.enqueued": (acc, env) => {
    if (env.find?.state === "hop") {
      ;(acc.hops ??= new Map()).set(env.id, env)
      return
    }
    if (env.find?.state === "found") (acc.found ??= []).push(env.find.origin)
    if (env.kind === "response" && env.reply_to !== null) {
      ;(acc.replies ??= new Set()).add(env.reply_to)
      acc.unanswered?.delete(env.reply_to)
      if (env.recipient !== "USER") acc.unreadReplies++
    }
    acc.noteMessage({ _tag: "enqueued", envelope: env })
    // Messages to USER are logged (enqueued + delivered) in the sending root's own log.
    if (env.recipient === "USER") {
      ;(acc.toUser ??= []).push(env)
      if (env.progress === true) acc.owedProgress = null
      return
    }
    acc.pending.set(env.id, { envelope: env, seq: acc.seq++ })
  },
  // A sync request of this agent's that timed out: answered, no longer owed.
  "message.timed_out": (acc, data) => {
    ;(acc.replies ??= new Set()).add(data.message_id)
    acc.unanswered?.delete(data.message_id)
  },
  "message.forwarded": (acc, data) => {
    acc.hops?.delete(data.message_id)
  },
  "message.delivered": (acc, data) => {
    const p = acc.pending.get(data.message_id)
    if (p !== undefined) {
      if (p.envelope.kind === "response") acc.unreadReplies--
      acc.pending.delete(data.message_id)
      acc.open.set(data.message_id, p)
    }
  },
  "turn.start": (acc, data, ts) => {
    acc.paused = null
    acc.owedProgress = null
    acc.openTurn = data.prompt
    acc.openTurnTs = ts
    acc.started++
    acc.inARow++
  },
  "turn.complete": (acc, data, ts) => {
    acc.permissions = undefined
    acc.endTurn({ _tag: "complete", data }, ts)
  },
  "provider.error": (acc, data, ts) => {
    if (data.turn_id === null) return
    if (data.parked !== undefined) acc.parkTurn(data.turn_id, data, data.parked)
    else acc.endTurn({ _tag: "failed", turn_id: data.turn_id, data }, ts)
  },
  "usage.reserved": (acc, data) => {
    const { reservation_id, turn_id, input_tokens, output_tokens, cost_usd } = data
    ;(acc.holds ??= new Map()).set(reservation_id, { turn_id, input_tokens, output_tokens, cost_usd })
    if (turn_id !== null) (acc.metered ??= new Set()).add(turn_id)
  },
  "forwarder.refused": ignore,
  usage: (acc, data) => {
    if (data.reservation_id !== undefined && acc.holds?.delete(data.reservation_id) === true && acc.holds.size === 0) {
      acc.holds = undefined
    }
    if (data.source === "request") {
      if (data.turn_id !== null) (acc.metered ??= new Set()).add(data.turn_id)
    } else if (data.turn_id !== null && acc.metered?.has(data.turn_id) === true) return
    acc.usage = addUsage(acc.usage, data)
  },
  "tool_call.invoked": (acc, data) => {
    if (data.tool === "send_message" || data.tool === "broadcast") {
      ;(acc.invoked ??= new Map()).set(data.call_id, { tool: data.tool, args: data.arguments })
    }
  },
  "tool_call.result": (acc, data, ts) => {
    if (data.tool === "send_message" || data.tool === "broadcast") acc.sendResult(data, ts)
  }
}

/** Apply one decoded entry (the correlated dispatch TypeScript cannot see through a union). */
const apply = (acc: Acc, entry: AnyEntry): void =>
  (handlers[entry.event] as Handler<typeof entry.event>)(acc, entry.data, entry.ts)

/** The fold over the entries of one log. Feed parsed JSON lines with `entry`, then `finish`. */
export class SessionFold {
  private lines = 0
  private corrupt: string | null = null
  private readonly acc: Acc

  /** `from`: continue after the lines a checkpoint folded (Checkpoint.ts). */
  constructor(
    readonly session_id: SessionId,
    readonly file: string,
    from?: { readonly lines: number; readonly state: FoldState; readonly recent?: string | undefined }
  ) {
    this.acc = from === undefined ? new Acc() : Acc.fromState(from.state, from.recent)
    this.lines = from?.lines ?? 0
  }

  /** Lines folded so far (a checkpoint's included). */
  get folded(): number {
    return this.lines
  }

  /** Where the fold stands, as a checkpoint's state (meaningful while it has not failed). */
  state(): FoldState {
    return this.acc.toState()
  }

  /** Its recent-activity rings, as a checkpoint keeps them (JSON), or none. */
  recent(): string | undefined {
    return this.acc.recent()
  }

  get failed(): boolean {
    return this.corrupt !== null
  }

  /** Stop at line `this.lines`. */
  fail(why: string): void {
    if (this.corrupt === null) this.corrupt = `${this.file}:${this.lines}: ${why}`
  }

  /** Count a line that does not parse as JSON (or is empty), and stop there. */
  badLine(why: string): void {
    if (this.corrupt !== null) return
    this.lines++
    this.fail(why)
  }

  /** One line, as `JSON.parse` returned it. */
  entry(json: unknown): void {
    if (this.corrupt !== null) return
    this.lines++
    const name = typeof json === "object" && json !== null ? (json as { readonly event?: unknown }).event : undefined
    const decode = typeof name === "string" ? entryDecoders.get(name) : undefined
    if (decode === undefined) return this.fail(`not a log entry: unknown event ${JSON.stringify(name ?? null)}`)
    const entry = decode(json)
    if (Either.isLeft(entry)) return this.fail(`${name}: ${ParseResult.TreeFormatter.formatIssueSync(entry.left)}`)
    apply(this.acc, entry.right)
  }

  finish(): SessionLog {
    const a = this.acc
    const consumed = a.open.size > 0
    const pending = a.open.size === 0
      ? [...a.pending.values()]
      : [...a.open.values(), ...a.pending.values()].sort((x, y) => x.seq - y.seq)
    return {
      session_id: this.session_id,
      lines: this.lines,
      corrupt: this.corrupt,
      created: a.created,
      terminated: a.terminated,
      quarantine: a.quarantine,
      pending,
      findHops: a.hops === undefined ? none : [...a.hops.values()],
      found: a.found ?? none,
      answers: a.answers ?? noAnswers,
      replies: a.replies ?? noReplies,
      sent: a.sent ?? none,
      toUser: a.toUser ?? none,
      carried: a.carried === undefined ? none : a.carried.filter((id) => !a.replies?.has(id)),
      owedProgress: a.owedProgress,
      turns: {
        started: a.started,
        ended: a.ended,
        interrupted: a.openTurn === null
          ? null
          : { prompt: a.openTurn, consumedMessages: consumed, messages: [...a.open.keys()], ts: a.openTurnTs },
        interruptedInARow: a.openTurn === null ? 0 : a.inARow,
        paused: a.paused
      },
      // A reservation never settled (the daemon died with its request in flight) is charged whole.
      usage: a.holds === undefined ? a.usage : [...a.holds.values()].reduce<UsageTotals>((u, h) => addUsage(u, h), a.usage),
      budget: a.budget,
      breach: a.breach,
      questions: a.questions ?? none,
      permissions: a.permissions ?? none,
      caps: a.caps,
      queuedSpawns: a.queuedSpawns === undefined ? none : [...a.queuedSpawns.values()],
      userRead: a.userRead ?? noRead,
      recentTurns: a.turns === undefined ? none : a.turns.map(turnSummary),
      recentMessages: a.messages === undefined ? none : a.messages.map(messageSummary),
      recentEncoded: a.recentJson === undefined ? null : { json: a.recentJson, broadcast: a.broadcast }
    }
  }
}
