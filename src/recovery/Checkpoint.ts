// Fold checkpoints (docs/recovery.md, "Start-up time and history"): where a long log's fold
// stood at a line boundary, so the next start-up reads only the lines appended since. One file
// for the home, `$SUBSTRAT_HOME/recovery.checkpoint`, one entry per session whose log has grown
// by at least CHECKPOINT_LINES lines since its last checkpoint; written by recovery with an
// atomic replace, read by the next recovery's read pass.
//
// A checkpoint is a cache, never the truth: an entry is used only if the log still holds, at
// the same byte offset, the line the fold ended on (its SHA-256); otherwise the log is folded
// from its start. A file that does not decode (damaged, or written by another FOLD_VERSION) is
// ignored whole. The fold's state is encoded and decoded with the Schemas below, built from
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
export const CHECKPOINT_LINES = 512

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

const CheckpointFile = Schema.parseJson(Schema.Struct({
  version: Schema.Literal(FOLD_VERSION),
  sessions: Schema.Array(CheckpointEntry)
}))

export const hashLine = (line: Uint8Array): string => createHash("sha256").update(line).digest("hex")

/** The entries of a checkpoint file, by session; an absent or undecodable file gives none. */
export const decodeCheckpoints = (bytes: Uint8Array | null): ReadonlyMap<SessionId, CheckpointEntry> => {
  if (bytes === null) return new Map()
  const decoded = Schema.decodeUnknownEither(CheckpointFile)(Buffer.from(bytes).toString("utf8"))
  return Either.isRight(decoded) ? new Map(decoded.right.sessions.map((e) => [e.session_id, e])) : new Map()
}

export const encodeCheckpoints = (entries: Iterable<CheckpointEntry>): Uint8Array =>
  Buffer.from(Schema.encodeSync(CheckpointFile)({ version: FOLD_VERSION, sessions: [...entries] }) + "\n", "utf8")
