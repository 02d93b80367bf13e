// Fold checkpoints (docs/recovery.md, "Start-up time and history"): where a log's fold stood
// at a line boundary, so the next start-up reads only the lines appended since — and does not
// open a log that has not changed at all. One file for the home, `$SUBSTRAT_HOME/recovery.checkpoint`,
// one entry per session whose log was folded past its last checkpoint; written by recovery with
// an atomic replace, read by the next recovery's read pass.
//
// A checkpoint is a cache, never the truth. An entry is used without opening the log only if
// the checkpoint covered the whole file and `stat` shows the same file as then (inode, size,
// mtime and ctime in ns: the log is append-only, and every append, repair or rewrite changes
// size or times). Otherwise it is used only if the log still holds, at the same byte offset, the
// line the fold ended on (its SHA-256), and the log is folded on from there; failing that, from
// its start. A file that does not decode (damaged, or written by another FOLD_VERSION) is
// ignored whole (an entry that does not decode, alone). The fold's state is encoded and decoded
// with the Schemas below, built from the event catalog's own Schemas; the recent-activity rings
// ride on the entry's line undecoded (`CheckpointEntry.recent`).
import { Either, Schema } from "effect"
import { isAscii } from "node:buffer"
import { createHash } from "node:crypto"
import type { BigIntStats } from "node:fs"
import { Budget } from "../domain/budget.js"
import { TreeCaps } from "../domain/caps.js"
import { AgentCreatedData, AgentQuarantinedData, JsonValue, PermissionAnsweredData, SpawnQueuedData } from "../domain/events.js"
import { MessageId, SessionId, TurnId } from "../domain/ids.js"
import { MessageEnvelopeFromLog, Sender } from "../domain/message.js"
import { Session } from "../domain/session.js"
import { UsageTotals } from "../domain/usage.js"

/** Bump when the fold's state or any handler in Fold.ts changes meaning: older files are then ignored. */
export const FOLD_VERSION = 7
/** A session's log gets a (new) checkpoint once this many lines were folded past its last one. */
export const CHECKPOINT_LINES = 1

/** An unsettled model-request reservation (`usage.reserved`), as the fold keeps it. */
export const Hold = Schema.Struct({
  turn_id: Schema.NullOr(Schema.String),
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  cost_usd: Schema.Number
})
export type Hold = typeof Hold.Type

/** A turn's progress line to USER that its log does not hold yet (Fold.ts `SessionLog.owedProgress`). */
export const OwedProgress = Schema.Struct({ turn_id: TurnId, text: Schema.String, ts: Schema.String })
export type OwedProgress = typeof OwedProgress.Type

const Pending = Schema.Struct({ envelope: MessageEnvelopeFromLog, seq: Schema.Number })
const pairs = <K extends Schema.Schema.AnyNoContext, V extends Schema.Schema.AnyNoContext>(k: K, v: V) =>
  Schema.Array(Schema.Tuple(k, v))

/**
 * Everything the fold of one log accumulates (Fold.ts's accumulator, as plain data). Every field
 * is optional: absent means empty, null, 0 or false, so a checkpoint holds (and decodes) only
 * what its log made non-empty.
 */
export const FoldState = Schema.Struct({
  created: Schema.optional(AgentCreatedData),
  terminated: Schema.optional(Schema.Literal(true)),
  seq: Schema.optional(Schema.Number),
  pending: Schema.optional(Schema.Array(Pending)),
  open: Schema.optional(Schema.Array(Pending)),
  /** `find:` hops not forwarded yet, and the searches whose found copy is in this log. */
  hops: Schema.optional(Schema.Array(MessageEnvelopeFromLog)),
  found: Schema.optional(Schema.Array(MessageId)),
  answers: Schema.optional(pairs(MessageId, Schema.Struct({ requester: Sender, text: Schema.String, ts: Schema.String }))),
  replies: Schema.optional(Schema.Array(MessageId)),
  sent: Schema.optional(Schema.Array(Schema.Struct({ id: MessageId, recipient: Schema.String, ts: Schema.String }))),
  toUser: Schema.optional(Schema.Array(MessageEnvelopeFromLog)),
  unanswered: Schema.optional(Schema.Array(MessageId)),
  unreadReplies: Schema.optional(Schema.Number),
  carried: Schema.optional(Schema.Array(MessageId)),
  /** The last turn's progress line to USER, not logged yet (SessionLog.owedProgress). */
  owedProgress: Schema.optional(OwedProgress),
  invoked: Schema.optional(pairs(Schema.String, Schema.Struct({ tool: Schema.String, args: JsonValue }))),
  openTurn: Schema.optional(Schema.String),
  openTurnTs: Schema.optional(Schema.String),
  /** The last turn was parked (a budget ran out) and none started since: what it had read, and why. */
  paused: Schema.optional(Schema.Struct({ messages: Schema.Array(MessageId), reason: Schema.String })),
  /**
   * The recent-activity ring of messages names a broadcast's peers as null (the plan names
   * them). The rings themselves are not here: see `CheckpointEntry.recent`.
   */
  broadcast: Schema.optional(Schema.Literal(true)),
  started: Schema.optional(Schema.Number),
  ended: Schema.optional(Schema.Number),
  inARow: Schema.optional(Schema.Number),
  quarantine: Schema.optional(AgentQuarantinedData),
  usage: Schema.optional(UsageTotals),
  budget: Schema.optional(Budget),
  breach: Schema.optional(Schema.Struct({ item_id: Schema.String, reason: Schema.String, ts: Schema.String })),
  questions: Schema.optional(Schema.Array(Schema.Struct({ item_id: Schema.String, question: Schema.String, ts: Schema.String }))),
  permissions: Schema.optional(Schema.Array(Schema.Struct({
    item_id: Schema.String,
    key: Schema.String,
    choice: Schema.NullOr(PermissionAnsweredData.fields.choice)
  }))),
  metered: Schema.optional(Schema.Array(Schema.String)),
  holds: Schema.optional(pairs(Schema.String, Hold)),
  caps: Schema.optional(TreeCaps),
  queuedSpawns: Schema.optional(Schema.Array(Schema.Struct({ data: SpawnQueuedData, ts: Schema.String }))),
  userRead: Schema.optional(Schema.Array(MessageId))
})
export type FoldState = typeof FoldState.Type

/**
 * Which file `stat` saw (inode, size, modification and change times in ns; the big numbers as
 * decimal strings).
 */
export const FileIdentity = Schema.Struct({
  ino: Schema.String,
  size: Schema.Number,
  mtime_ns: Schema.String,
  ctime_ns: Schema.String
})
export type FileIdentity = typeof FileIdentity.Type

export const identityOf = (s: BigIntStats): FileIdentity => ({
  ino: s.ino.toString(),
  size: Number(s.size),
  mtime_ns: s.mtimeNs.toString(),
  ctime_ns: s.ctimeNs.toString()
})

/** Whether `s` is the file `id` describes, unchanged. */
export const sameFile = (id: FileIdentity, s: BigIntStats): boolean =>
  id.size === Number(s.size) && id.ino === s.ino.toString() && id.mtime_ns === s.mtimeNs.toString() &&
  id.ctime_ns === s.ctimeNs.toString()

/** The session's record (`session.json`) as read, and the file it was read from. */
export const RecordCopy = Schema.Struct({ file: FileIdentity, session: Session })
export type RecordCopy = typeof RecordCopy.Type

/** Where one log's fold stood (without its recent-activity rings: `CheckpointEntry`). */
export const CheckpointHead = Schema.Struct({
  session_id: SessionId,
  /** Bytes of `events.jsonl` folded (up to and including the last line's newline). */
  offset: Schema.Number,
  /** Lines folded. */
  lines: Schema.Number,
  /** Length in bytes and SHA-256 (hex) of the last line folded, without its newline. */
  lastLength: Schema.Number,
  lastHash: Schema.String,
  /** The log as `stat` saw it when its bytes up to `offset` were all of it; null otherwise. */
  log: Schema.NullOr(FileIdentity),
  /** The record, used instead of reading it while `stat` shows the same file. */
  record: Schema.optional(RecordCopy),
  state: FoldState
})

/**
 * Where one log's fold stood. `recent`: its recent-activity rings, as the JSON of
 * Activity.ts's `RecentRings` (summaries, texts excerpted), written after the head on the same
 * line behind a tab (JSON text never holds a raw tab) and not decoded at start-up: the Activity
 * service decodes an agent's rings when they are first asked for, and the fold when it notes more.
 */
export type CheckpointEntry = typeof CheckpointHead.Type & { readonly recent?: string | undefined }

const Header = Schema.parseJson(Schema.Struct({ version: Schema.Literal(FOLD_VERSION) }))
const EntryLine = Schema.parseJson(CheckpointHead)
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
/** Bytes as a string: pure ASCII (most logs) as latin1 — a straight copy, several times faster than UTF-8 decoding and the same string. */
export const textOf = (buf: Buffer): string => (isAscii(buf) ? buf.toString("latin1") : buf.toString("utf8"))

export const decodeCheckpoints = (bytes: Uint8Array | null): ReadonlyMap<SessionId, CheckpointEntry> => {
  const out = new Map<SessionId, CheckpointEntry>()
  if (bytes === null) return out
  const lines = textOf(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)).split("\n")
  if (Either.isLeft(decodeHeader(lines[0]))) return out
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!
    if (line.length === 0) continue
    const tab = line.indexOf("\t")
    const head = decodeEntry(tab < 0 ? line : line.slice(0, tab))
    if (Either.isLeft(head)) continue
    const entry: CheckpointEntry = tab < 0 ? head.right : { ...head.right, recent: line.slice(tab + 1) }
    lineOf.set(entry, line)
    out.set(entry.session_id, entry)
  }
  return out
}

export const encodeCheckpoints = (entries: Iterable<CheckpointEntry>): Uint8Array => {
  const lines = [JSON.stringify({ version: FOLD_VERSION })]
  for (const e of entries) {
    lines.push(lineOf.get(e) ?? (e.recent === undefined ? encodeEntry(e) : `${encodeEntry(e)}\t${e.recent}`))
  }
  return Buffer.from(lines.join("\n") + "\n", "utf8")
}
