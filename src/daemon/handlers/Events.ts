// Handler of `events.follow` (src/protocol/admin/events.ts): the EventFeed of one agent, one tree or
// everything, from a position, as lines people read (FeedLines.ts) with their entries.
import { Effect, Option, Stream } from "effect"
import * as Cursor from "../../feed/Cursor.js"
import { EventFeed, type FeedScope } from "../../feed/EventFeed.js"
import { type FeedMemory, feedLine } from "../FeedLines.js"
import { makeResolver, type Resolver } from "../Resolver.js"
import { EventsGroup, type FeedItem, InvalidInput } from "../../protocol/AdminRpcs.js"
import { emptyNames } from "../TranscriptLines.js"
import { handlersOf, served } from "./Middleware.js"
import { learnName } from "./Shared.js"

/** What `events.follow` streams: its scope, start, time filter, and the names known so far. */
const followScope = (resolver: Resolver, p: {
  readonly agent?: string | undefined
  readonly tree?: string | undefined
  readonly from?: string | undefined
  readonly after?: string | undefined
}) =>
  Effect.gen(function*() {
    if (p.agent !== undefined && p.tree !== undefined) {
      return yield* new InvalidInput({ field: "tree", message: "give an agent or a tree, not both" })
    }
    const scope: FeedScope = p.tree !== undefined
      ? { _tag: "tree", agent: (yield* resolver.agent(p.tree, { terminated: true })).node.id }
      : p.agent !== undefined
      ? { _tag: "agent", agent: (yield* resolver.agent(p.agent, { terminated: true })).node.session_id }
      : { _tag: "all" }
    const from = p.from === undefined || p.from === "start" ? Cursor.empty : p.from === "end" ? "end" as const : Cursor.decode(p.from)
    if (from === undefined) {
      return yield* new InvalidInput({
        field: "from",
        message: `not a position in the event stream: ${JSON.stringify(p.from)} (expected "start", "end" or the cursor of an item)`
      })
    }
    const after = p.after === undefined ? undefined : Date.parse(p.after)
    if (after !== undefined && Number.isNaN(after)) {
      return yield* new InvalidInput({ field: "after", message: `not a time: ${JSON.stringify(p.after)} (expected an ISO 8601 time)` })
    }
    const names = emptyNames()
    for (const n of yield* resolver.agents(true)) learnName(names, n.id, n.name, n.session_id)
    return { scope, from, after, names }
  })

export const EventsHandlers = served(EventsGroup, Effect.gen(function*() {
  const resolver = yield* makeResolver
  const feed = yield* EventFeed

  return handlersOf(EventsGroup)({
    "events.follow": (p) =>
      Stream.unwrap(Effect.map(followScope(resolver, p), ({ after, from, names, scope }) => {
        let live = false
        const said: FeedMemory = new Map()
        const items = feed.stream({ scope, from }).pipe(
          Stream.filterMap((item): Option.Option<FeedItem> => {
            if (item._tag === "KeepAlive") return Option.none()
            if (item._tag === "Live") {
              live = true
              return Option.some({ kind: "live", cursor: Cursor.encode(item.cursor) })
            }
            const e = item.entry
            if (e.event === "agent.created") learnName(names, e.data.agent_id, e.data.name, e.session_id)
            if (!live && after !== undefined && Date.parse(e.ts) < after) return Option.none()
            const { agent, text } = feedLine(e, names, said)
            return Option.some({
              kind: "event",
              cursor: Cursor.encode(item.position),
              session_id: item.session,
              line: item.line,
              ts: e.ts,
              event: e.event,
              agent,
              text,
              entry: e
            })
          })
        )
        return p.follow === true ? items : items.pipe(Stream.takeUntil((i) => i.kind === "live"))
      }))
  })
}))
