// One pass over one session's `events.jsonl` for crash recovery (docs/recovery.md). The log is
// read once, as raw JSON lines (a full Schema decode of every line would cost more than the read
// itself); only what recovery needs is kept: the `agent.created` record (Schema-decoded), whether
// the agent was terminated, the messages still owed to it, the requests it answered, the sync
// requests it sent, the replies it received, its interrupted turn, its usage and its recent
// activity (what `inspect_agent` shows: the last turns and messages, in small ring buffers).
// Envelopes stay raw here; the survivors are decoded once by Reconcile.
import { Effect, Either, Option, Schema, Stream } from "effect"
import { isAscii } from "node:buffer"
import { StringDecoder } from "node:string_decoder"
import type { DurableError } from "../domain/errors.js"
import { AgentCreatedData } from "../domain/events.js"
import type { SessionId } from "../domain/ids.js"
import type { DurableService } from "../storage/Durable.js"
import { excerpt } from "./Inspection.js"
import { type MessageSummary, RECENT_MESSAGES, RECENT_TURNS, type TurnSummary } from "./Activity.js"

/** A `message.enqueued` envelope as found in the log, not yet decoded. */
export interface RawEnvelope {
  readonly id: string
  readonly kind: string
  readonly sender: string
  readonly timestamp: string
  /** Position in the log (enqueue order). */
  readonly seq: number
  readonly raw: unknown
}

/** A request this agent consumed in a turn that completed: what its auto-reply was. */
export interface Answer {
  readonly requester: string
  /** The auto-reply text (the turn's response, or the error note the Orchestrator sends). */
  readonly text: string
  /** `ts` of the turn's end: the re-delivered reply's timestamp (deterministic across runs). */
  readonly ts: string
}

/** A sync request this agent sent (its `send_message` tool result said `waiting_for_reply`). */
export interface SentRequest {
  readonly id: string
  readonly recipient: string
  readonly ts: string
}

/**
 * A message of the recent-activity ring as the log tells it. `peer: null`: a broadcast (the
 * log records only how many siblings got it; Reconcile names the agent's siblings).
 */
export interface RecentMessage extends Omit<MessageSummary, "peer"> {
  readonly peer: string | null
}

export interface SessionScan {
  readonly session_id: SessionId
  readonly lines: number
  /** Set when a line is not a JSON log entry (or `agent.created` does not decode): `file:line: why`. */
  readonly corrupt: string | null
  readonly created: typeof AgentCreatedData.Type | null
  readonly terminated: boolean
  /** Enqueued to this agent and not consumed by a completed turn, in enqueue order. */
  readonly pending: ReadonlyArray<RawEnvelope>
  /** Requests consumed by completed turns → their auto-reply. */
  readonly answers: ReadonlyMap<string, Answer>
  /** `reply_to` of every response enqueued in this log (replies this agent, or USER via it, got). */
  readonly replies: ReadonlySet<string>
  readonly sent: ReadonlyArray<SentRequest>
  /** Messages this root sent to USER (logged in its own log), in order. */
  readonly toUser: ReadonlyArray<unknown>
  /** The last turn started and never ended (crash mid-turn). */
  readonly interrupted: { readonly prompt: string; readonly consumedMessages: boolean } | null
  /** `turn.start` events: provider sends so far (the scripted provider's turn counter). */
  readonly turnsStarted: number
  readonly turnsEnded: number
  readonly usage: { readonly input_tokens: number; readonly output_tokens: number; readonly cost_usd: number }
  /** The last RECENT_TURNS ended turns, oldest first (texts excerpted), as `noteTurn` records them. */
  readonly recentTurns: ReadonlyArray<TurnSummary>
  /** The last RECENT_MESSAGES messages in and out, in log order (texts excerpted), as `noteMessage` records them. */
  readonly recentMessages: ReadonlyArray<RecentMessage>
}

const decodeCreatedSchema = Schema.decodeUnknownEither(AgentCreatedData)
type Created = typeof AgentCreatedData.Type
/** Schema.UUID's pattern (effect/Schema): AgentId, SessionId and WorkspaceId refine it. */
const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/i
const uuidOrNull = (u: unknown): u is string | null => u === null || (typeof u === "string" && UUID.test(u))

/**
 * `agent.created` data, checked by hand when every field has the right type (once per log, so
 * ≈2.5 µs of Schema decode × 100k sessions); the same object the Struct decode builds (its seven
 * keys, nothing else). Anything else takes the Schema decode, which words the error.
 */
const decodeCreated = (d: Json): Either.Either<Created, { readonly message: string }> => {
  const { agent_id, name, parent_session_id, instructions, role, provider, workspace } = d
  if (
    typeof agent_id === "string" && UUID.test(agent_id) && typeof name === "string" &&
    uuidOrNull(parent_session_id) && typeof instructions === "string" && typeof role === "string" &&
    typeof provider === "string" && uuidOrNull(workspace)
  ) {
    // The checks above are the Struct's (brands are compile-time only).
    return Either.right({ agent_id, name, parent_session_id, instructions, role, provider, workspace } as Created)
  }
  return decodeCreatedSchema(d)
}

type Json = Record<string, unknown>
const isObj = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)
const str = (u: unknown): string | null => typeof u === "string" ? u : null
const num = (u: unknown): number => typeof u === "number" && Number.isFinite(u) ? u : 0

// Shared by every scan without answers/replies (read-only views: never mutated).
const noAnswers: ReadonlyMap<string, Answer> = new Map()
const noReplies: ReadonlySet<string> = new Set()
const none: ReadonlyArray<never> = []

/** A message a tool call sent (to an agent, or a broadcast), for the recent-activity ring. */
class OutNote {
  constructor(readonly m: RecentMessage) {}
}

/** What `noteTurn` (Orchestrator) records for a turn that ended with `end` (`turn.complete` or `provider.error`). */
const turnSummary = (end: Json, prompt: string): TurnSummary => {
  const failed = end["response"] === undefined
  return {
    turn_id: str(end["turn_id"]) ?? "",
    prompt: excerpt(prompt),
    response: failed ? "" : excerpt(str(end["response"]) ?? ""),
    error: failed ? `${str(end["reason"]) ?? "error"}: ${str(end["message"]) ?? "provider error"}` : null
  }
}

/**
 * What `noteMessage` (Router) records: a tool call's send as noted, a `message.enqueued` as
 * `in` (peer: the sender's name) or, addressed to USER, as `out`.
 */
const messageSummary = (x: Json | OutNote): RecentMessage => {
  if (x instanceof OutNote) return { ...x.m, text: excerpt(x.m.text) }
  const meta = x["metadata"]
  const out = x["recipient"] === "USER"
  return {
    direction: out ? "out" : "in",
    // The typed field, or (logs written before it) the `metadata` string.
    peer: out ? "USER" : str(x["sender_name"]) ?? (isObj(meta) ? str(meta["sender_name"]) : null) ?? String(x["sender"] ?? ""),
    kind: str(x["kind"]) ?? "",
    message_id: str(x["id"]) ?? "",
    text: excerpt(str(x["payload"]) ?? "")
  }
}

/** The fold over the lines of one log. Feed lines with `line`, then `finish`. */
export class ScanFold {
  private lines = 0
  private corrupt: string | null = null
  private created: Created | null = null
  private terminated = false
  private seq = 0
  private readonly pending = new Map<string, RawEnvelope>()
  /** Consumed since the last turn end: final once a turn ends, back to pending at EOF. */
  private readonly open = new Map<string, RawEnvelope>()
  // Created on first use: most logs never need them, and at 100k sessions the empty
  // collections were a measurable share of the heap (and of GC) until Reconcile ran.
  private answers: Map<string, Answer> | undefined
  private replies: Set<string> | undefined
  private sent: Array<SentRequest> | undefined
  private toUser: Array<unknown> | undefined
  /** `send_message` / `broadcast` calls waiting for their result: call id → arguments. */
  private invoked: Map<string, Json> | undefined
  private openTurn: string | null = null
  // Recent activity: bounded rings of what the log lines already hold (no object per line:
  // summaries are built by `finish`, for the few kept), created on first use.
  /** `turn.complete` / `provider.error` data of the last turns, and their prompts. */
  private turnEnds: Array<Json> | undefined
  private turnPrompts: Array<string> | undefined
  /** `message.enqueued` data (in, or out to USER), or an OutNote (a tool call's send). */
  private messages: Array<Json | OutNote> | undefined
  private turnsStarted = 0
  private turnsEnded = 0
  private input = 0
  private output = 0
  private cost = 0

  constructor(readonly session_id: SessionId, readonly file: string) {}

  get failed(): boolean {
    return this.corrupt !== null
  }

  private fail(why: string): void {
    if (this.corrupt === null) this.corrupt = `${this.file}:${this.lines}: ${why}`
  }

  private noteMessage(m: Json | OutNote): void {
    const ring = this.messages ??= []
    ring.push(m)
    if (ring.length > RECENT_MESSAGES) ring.shift()
  }

  /** A turn ended (`data`: its `turn.complete` or `provider.error`); call before `endTurn`. */
  private noteTurn(data: Json): void {
    const ends = this.turnEnds ??= []
    const prompts = this.turnPrompts ??= []
    ends.push(data)
    prompts.push(this.openTurn ?? "")
    if (ends.length > RECENT_TURNS) {
      ends.shift()
      prompts.shift()
    }
  }

  private endTurn(response: string | null, error: string | null, ts: string): void {
    for (const [id, env] of this.open) {
      if (env.kind === "request") {
        const text = error === null
          ? response ?? ""
          : `[error] ${this.created?.name ?? "the agent"} failed to answer: ${error}`
        ;(this.answers ??= new Map()).set(id, { requester: env.sender, text, ts })
      }
    }
    this.open.clear()
    this.openTurn = null
    this.turnsEnded++
  }

  /** One line, without its newline. */
  line(text: string): void {
    if (this.corrupt !== null) return
    this.lines++
    if (text.length === 0) return this.fail("empty line")
    let o: unknown
    try {
      o = JSON.parse(text)
    } catch (e) {
      return this.fail(e instanceof Error ? e.message : String(e))
    }
    if (!isObj(o)) return this.fail("not a JSON object")
    const event = str(o["event"])
    const ts = str(o["ts"])
    const data = o["data"]
    if (event === null || ts === null || !isObj(data)) return this.fail("not a log entry (event, ts, data)")
    switch (event) {
      case "agent.created": {
        if (this.created !== null) return
        const d = decodeCreated(data)
        if (Either.isLeft(d)) return this.fail(`agent.created: ${d.left.message}`)
        this.created = d.right
        return
      }
      case "agent.terminated":
        this.terminated = true
        return
      case "message.enqueued": {
        const id = str(data["id"])
        const kind = str(data["kind"])
        if (id === null || kind === null) return this.fail("message.enqueued without id/kind")
        const replyTo = str(data["reply_to"])
        if (kind === "response" && replyTo !== null) (this.replies ??= new Set()).add(replyTo)
        this.noteMessage(data)
        // Messages to USER are logged (enqueued + delivered) in the sending root's own log.
        if (data["recipient"] === "USER") {
          ;(this.toUser ??= []).push(data)
          return
        }
        this.pending.set(id, {
          id,
          kind,
          sender: str(data["sender"]) ?? "",
          timestamp: str(data["timestamp"]) ?? ts,
          seq: this.seq++,
          raw: data
        })
        return
      }
      case "message.timed_out": {
        // A sync request of this agent's that timed out: answered, no longer pending.
        const id = str(data["message_id"])
        if (id !== null) (this.replies ??= new Set()).add(id)
        return
      }
      case "message.delivered": {
        const id = str(data["message_id"])
        if (id === null) return this.fail("message.delivered without message_id")
        const env = this.pending.get(id)
        if (env !== undefined) {
          this.pending.delete(id)
          this.open.set(id, env)
        }
        return
      }
      case "turn.start":
        this.openTurn = str(data["prompt"]) ?? ""
        this.turnsStarted++
        return
      case "turn.complete":
        this.noteTurn(data)
        return this.endTurn(str(data["response"]) ?? "", null, ts)
      case "provider.error":
        if (data["turn_id"] !== null && data["turn_id"] !== undefined) {
          this.noteTurn(data)
          this.endTurn(null, str(data["message"]) ?? "provider error", ts)
        }
        return
      case "usage":
        this.input += num(data["input_tokens"])
        this.output += num(data["output_tokens"])
        this.cost += num(data["cost_usd"])
        return
      case "tool_call.invoked": {
        const tool = data["tool"]
        if (tool !== "send_message" && tool !== "broadcast") return
        const call = str(data["call_id"])
        const args = data["arguments"]
        if (call !== null && isObj(args)) (this.invoked ??= new Map()).set(call, args)
        return
      }
      case "tool_call.result": {
        const tool = data["tool"]
        if (tool !== "send_message" && tool !== "broadcast") return
        const call = str(data["call_id"])
        const args = call === null ? undefined : this.invoked?.get(call)
        if (call !== null) this.invoked?.delete(call)
        const r = data["result"]
        if (data["is_error"] !== false || !isObj(r)) return
        const id = str(r["message_id"])
        if (id === null) return
        const text = args === undefined ? "" : str(args["text"]) ?? ""
        if (tool === "broadcast") {
          return this.noteMessage(new OutNote({ direction: "out", peer: null, kind: "multicast", message_id: id, text }))
        }
        const recipient = args === undefined ? null : str(args["recipient"])
        const waiting = r["waiting_for_reply"] === true
        if (waiting) (this.sent ??= []).push({ id, recipient: recipient ?? "?", ts })
        // A message to USER is noted by its own `message.enqueued` (in this log, before this result).
        if (recipient !== "USER") {
          const kind = args !== undefined && str(args["reply_to"]) !== null
            ? "response"
            : waiting
            ? "request"
            : "notification"
          this.noteMessage(new OutNote({ direction: "out", peer: recipient ?? "?", kind, message_id: id, text }))
        }
        return
      }
      default:
        return
    }
  }

  finish(): SessionScan {
    const consumed = this.open.size > 0
    const pending = this.open.size === 0
      ? [...this.pending.values()]
      : [...this.open.values(), ...this.pending.values()].sort((a, b) => a.seq - b.seq)
    return {
      session_id: this.session_id,
      lines: this.lines,
      corrupt: this.corrupt,
      created: this.created,
      terminated: this.terminated,
      pending,
      answers: this.answers ?? noAnswers,
      replies: this.replies ?? noReplies,
      sent: this.sent ?? none,
      toUser: this.toUser ?? none,
      interrupted: this.openTurn === null ? null : { prompt: this.openTurn, consumedMessages: consumed },
      turnsStarted: this.turnsStarted,
      turnsEnded: this.turnsEnded,
      usage: { input_tokens: this.input, output_tokens: this.output, cost_usd: this.cost },
      recentTurns: this.turnEnds === undefined ? none : this.turnEnds.map((d, i) => turnSummary(d, this.turnPrompts![i]!)),
      recentMessages: this.messages === undefined ? none : this.messages.map(messageSummary)
    }
  }
}

/** Whole-file reads up to this size (one syscall pair); larger logs stream in chunks. */
export const WHOLE_FILE = 4 * 1024 * 1024
const CHUNK = 1024 * 1024

export interface ScanResult {
  readonly scan: SessionScan
  /** The file ends without a newline (a torn tail the EventLog must repair first). */
  readonly tornTail: boolean
}

/** Feed decoded text to the fold, splitting lines; returns the unterminated remainder. */
const feed = (fold: ScanFold, carry: string, text: string): string => {
  let from = 0
  let nl = text.indexOf("\n")
  if (nl < 0) return carry + text
  fold.line(carry + text.slice(0, nl))
  from = nl + 1
  while ((nl = text.indexOf("\n", from)) >= 0 && !fold.failed) {
    fold.line(text.slice(from, nl))
    from = nl + 1
  }
  return text.slice(from)
}

/**
 * Fold a whole file's bytes (the fast path: one read, one decode, a plain loop). The bytes are
 * decoded before this returns, so they may be a view into a reused buffer.
 */
export const foldBytes = (session_id: SessionId, file: string, bytes: Uint8Array): ScanResult => {
  const fold = new ScanFold(session_id, file)
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  // Pure ASCII (most logs: JSON escapes nothing but the content is usually English) decodes as
  // latin1 — a straight copy, several times faster than UTF-8 decoding and the same string.
  const text = isAscii(buf) ? buf.toString("latin1") : buf.toString("utf8")
  const carry = feed(fold, "", text)
  return { scan: fold.finish(), tornTail: carry.length > 0 }
}

/**
 * Read one log once and fold it. An absent file scans as empty. Up to WHOLE_FILE bytes: one
 * synchronous `readFile` and a plain loop over the lines inside one `Effect.map` (no per-line
 * Effect; measured faster than asynchronous reads with a few logs in flight — the parse, not the
 * read, is the cost). Larger logs stream in CHUNK pieces (bounded memory).
 */
export const scanLog = (
  durable: DurableService,
  session_id: SessionId,
  file: string
): Effect.Effect<ScanResult, DurableError> =>
  Effect.flatMap(durable.size(file), (found) => {
    const size = Option.getOrElse(found, () => 0)
    if (size === 0) return Effect.succeed(foldBytes(session_id, file, new Uint8Array(0)))
    if (size <= WHOLE_FILE) {
      return Effect.map(durable.readFile(file), (bytes) =>
        foldBytes(session_id, file, Option.getOrElse(bytes, () => new Uint8Array(0))))
    }
    return Effect.suspend(() => {
      const fold = new ScanFold(session_id, file)
      const decoder = new StringDecoder("utf8")
      let carry = ""
      return Stream.runForEach(
        durable.stream(file, { chunkSize: CHUNK }),
        (chunk) =>
          Effect.sync(() => {
            if (!fold.failed) carry = feed(fold, carry, decoder.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)))
          })
      ).pipe(Effect.map(() => {
        carry += decoder.end()
        return { scan: fold.finish(), tornTail: carry.length > 0 }
      }))
    })
  })
