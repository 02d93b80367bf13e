// Admin method `events.follow`: the daemon's event stream (docs/protocol.md).
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import { Schema } from "effect"
import { LogEntry } from "../../domain/events.js"
import { SessionId } from "../../domain/ids.js"
import { AdminMiddleware, AgentRef, RpcError } from "./common.js"

/** One item of `events.follow`: an entry of an agent's event log, or the end of the backlog. */
export const FeedItem = Schema.Union(
  Schema.Struct({
    kind: Schema.Literal("event"),
    /** The stream's position after this item: pass it as `from` to resume right after it. */
    cursor: Schema.String,
    session_id: SessionId,
    /** Line of the entry in that session's events.jsonl. */
    line: Schema.Number,
    ts: Schema.String,
    event: Schema.String,
    /** Who it is about: for a message its sender (USER, SYSTEM or an agent's name), else the log's agent. */
    agent: Schema.String,
    /** One line for people (no time, no name); null for bookkeeping entries (usage, deliveries, …). */
    text: Schema.NullOr(Schema.String),
    entry: LogEntry
  }),
  Schema.Struct({ kind: Schema.Literal("live"), cursor: Schema.String })
)
export type FeedItem = typeof FeedItem.Type

/**
 * The daemon's event stream (src/feed/EventFeed.ts): every agent, one agent (`agent`) or an
 * agent's subtree (`tree`), terminated agents included; from the start, from a cursor (`from`:
 * an item's `cursor`, so nothing is missed or repeated across a reconnect or a daemon restart),
 * or from now (`from: "end"`); `after` (ISO time) skips older backlog entries. After the backlog
 * comes one `live` item; with `follow` the stream then goes on with new entries, else it ends.
 */
export class EventsFollowRpc extends Rpc.make("events.follow", {
  payload: {
    agent: Schema.optional(AgentRef),
    tree: Schema.optional(AgentRef),
    from: Schema.optional(Schema.String),
    after: Schema.optional(Schema.String),
    follow: Schema.optional(Schema.Boolean)
  },
  success: FeedItem,
  error: RpcError,
  stream: true
}) {}

export const EventsGroup = RpcGroup.make(EventsFollowRpc).middleware(AdminMiddleware)
