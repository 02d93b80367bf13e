// Fold checkpoints (docs/recovery.md, "Start-up time and history"): where a long log's fold
// stood at a line boundary, so the next start-up reads only the lines appended since. One file
// for the home, `$SUBSTRAT_HOME/recovery.checkpoint`, one entry per session whose log has grown
// by at least CHECKPOINT_LINES lines since its last checkpoint; written by recovery with an
// atomic replace, read by the next recovery's read pass.
//
// A checkpoint is a cache, never the truth: an entry is used only if the log still holds, at
// the same byte offset, the line the fold ended on (its SHA-256); otherwise the log is folded
// from its start. A file that does not decode (damaged, or written by another FOLD_VERSION) is
// ignored whole (an entry that does not decode, alone). The fold's state is encoded and decoded with the Schemas below, built from
// the event catalog's own Schemas.
import { Either, Schema } from "effect"
import { createHash } from "node:crypto"
import { Budget } from "../domain/budget.js"
import {
  AgentCreatedData,
  AgentQuarantinedData,
  JsonValue,
  ProviderErrorData,
  TurnCompleteData
} from "../domain/events.js"
import { MessageId, SessionId, TurnId } from "../domain/ids.js"
import { MessageEnvelopeFromLog, Sender } from "../domain/message.js"
import { UsageTotals } from "../domain/usage.js"

/** Bump when the fold's state or any handler in Fold.ts changes meaning: older files are then ignored. */
export const FOLD_VERSION = 2
/** A session's log gets a (new) checkpoint once this many lines were folded past its last one. */
export const CHECKPOINT_LINES = 64

const Pending = Schema.Struct({ envelope: MessageEnvelopeFromLog, seq: Schema.Number })
const RecentMessage = Schema.Struct({
  direction: Schema.Literal("in", "out"),
  peer: Schema.NullOr(Schema.String),
  kind: Schema.String,
  message_id: Schema.String,
  text: Schema.String
})
const TurnEnd = Schema.Union(
  Schema.Struct({ _tag: Schema.Literal("complete"), data: TurnCompleteData }),
  Schema.Struct({ _tag: Schema.Literal("failed"), turn_id: TurnId, data: ProviderErrorData })
)
const Noted = Schema.Union(
  Schema.Struct({ _tag: Schema.Literal("enqueued"), envelope: MessageEnvelopeFromLog }),
  Schema.Struct({ _tag: Schema.Literal("sent"), m: RecentMessage })
)
const pairs = <K extends Schema.Schema.AnyNoContext, V extends Schema.Schema.AnyNoContext>(k: K, v: V) =>
  Schema.Array(Schema.Tuple(k, v))

/** Everything the fold of one log accumulates (Fold.ts's accumulator, as plain data). */
export const FoldState = Schema.Struct({
  created: Schema.NullOr(AgentCreatedData),
  terminated: Schema.Boolean,
  seq: Schema.Number,
  pending: Schema.Array(Pending),
  open: Schema.Array(Pending),
  /** `find:` hops not forwarded yet, and the searches whose found copy is in this log. */
  hops: Schema.Array(MessageEnvelopeFromLog),
  found: Schema.Array(MessageId),
  answers: pairs(MessageId, Schema.Struct({ requester: Sender, text: Schema.String, ts: Schema.String })),
  replies: Schema.Array(MessageId),
  sent: Schema.Array(Schema.Struct({ id: MessageId, recipient: Schema.String, ts: Schema.String })),
  toUser: Schema.Array(MessageEnvelopeFromLog),
  unanswered: Schema.Array(MessageId),
  unreadReplies: Schema.Number,
  carried: Schema.NullOr(Schema.Array(MessageId)),
  invoked: pairs(Schema.String, Schema.Struct({ tool: Schema.String, args: JsonValue })),
  openTurn: Schema.NullOr(Schema.String),
  openTurnTs: Schema.String,
  turnEnds: Schema.Array(TurnEnd),
  turnPrompts: Schema.Array(Schema.String),
  messages: Schema.Array(Noted),
  started: Schema.Number,
  ended: Schema.Number,
  inARow: Schema.Number,
  quarantine: Schema.NullOr(AgentQuarantinedData),
  usage: UsageTotals,
  budget: Schema.NullOr(Budget),
  breach: Schema.NullOr(Schema.Struct({ item_id: Schema.String, reason: Schema.String, ts: Schema.String })),
  questions: Schema.Array(Schema.Struct({ item_id: Schema.String, question: Schema.String, ts: Schema.String })),
  metered: Schema.Array(Schema.String)
})
export type FoldState = typeof FoldState.Type

/** Where one log's fold stood. */
export const CheckpointEntry = Schema.Struct({
  session_id: SessionId,
  /** Bytes of `events.jsonl` folded (up to and including the last line's newline). */
  offset: Schema.Number,
  /** Lines folded. */
  lines: Schema.Number,
  /** Length in bytes and SHA-256 (hex) of the last line folded, without its newline. */
  lastLength: Schema.Number,
  lastHash: Schema.String,
  state: FoldState
})
export type CheckpointEntry = typeof CheckpointEntry.Type

const Header = Schema.parseJson(Schema.Struct({ version: Schema.Literal(FOLD_VERSION) }))
const EntryLine = Schema.parseJson(CheckpointEntry)
const decodeHeader = Schema.decodeUnknownEither(Header)
const decodeEntry = Schema.decodeUnknownEither(EntryLine)
const encodeEntry = Schema.encodeSync(EntryLine)

/**
 * The line each entry was read from: an entry kept unchanged is written back as the same text,
 * so rewriting the file encodes only the new entries.
 */
const lineOf = new WeakMap<CheckpointEntry, string>()

export const hashLine = (line: Uint8Array): string => createHash("sha256").update(line).digest("hex")

/**
 * The entries of a checkpoint file (JSON lines: a header with the fold version, then one entry
 * per line), by session. An absent file, or one of another version, gives none; an entry that
 * does not decode is left out (its log is read whole).
 */
export const decodeCheckpoints = (bytes: Uint8Array | null): ReadonlyMap<SessionId, CheckpointEntry> => {
  const out = new Map<SessionId, CheckpointEntry>()
  if (bytes === null) return out
  const lines = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8").split("\n")
  if (Either.isLeft(decodeHeader(lines[0]))) return out
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!
    if (line.length === 0) continue
    const entry = decodeEntry(line)
    if (Either.isLeft(entry)) continue
    lineOf.set(entry.right, line)
    out.set(entry.right.session_id, entry.right)
  }
  return out
}

export const encodeCheckpoints = (entries: Iterable<CheckpointEntry>): Uint8Array => {
  const lines = [JSON.stringify({ version: FOLD_VERSION })]
  for (const e of entries) lines.push(lineOf.get(e) ?? encodeEntry(e))
  return Buffer.from(lines.join("\n") + "\n", "utf8")
}
