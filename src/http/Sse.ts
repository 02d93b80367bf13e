// Server-Sent Events of the event feed (GET /v1/events). Each log entry is one event (default
// type, `data:` = the entry as JSON with its `position` and `line`); its `id:` is its global position
// (src/feed/Cursor.ts), so a client reconnecting with `Last-Event-ID` — also to a restarted daemon —
// gets exactly what it has not seen. `event: live` marks the end of the backlog (its id is the
// position the stream stands at); `event: error` ends a stream that failed; a comment every 15 s
// keeps idle connections open.
import { HttpServerResponse } from "@effect/platform"
import { Stream } from "effect"
import { toRpcError } from "../daemon/WireErrors.js"
import * as Cursor from "../feed/Cursor.js"
import type { FeedItem } from "../feed/EventFeed.js"

const utf8 = new TextEncoder()

const heartbeat = Stream.tick("15 seconds").pipe(Stream.drop(1), Stream.map(() => ": keep-alive\n\n"))

/** The SSE frames of a feed. */
export const frames = <E>(items: Stream.Stream<FeedItem, E>): Stream.Stream<string> =>
  Stream.suspend(() => {
    // Ids only grow: an entry without a position of its own (brought along by a session joining
    // a tree) leaves the client's Last-Event-ID where it was.
    let last = 0
    const idLine = (position: number): string => {
      if (position <= last) return ""
      last = position
      return `id: ${Cursor.encode(position)}\n`
    }
    const body = items.pipe(
      Stream.map((item) => {
        if (item._tag === "Live") return `${idLine(item.cursor)}event: live\ndata: {}\n\n`
        const data = JSON.stringify({ position: item.position, line: item.line, ...item.entry })
        return `${idLine(item.position)}data: ${data}\n\n`
      }),
      Stream.catchAll((e) => {
        const err = toRpcError(e)
        return Stream.make(`event: error\ndata: ${JSON.stringify({ _tag: err._tag, message: err.message })}\n\n`)
      })
    )
    return Stream.concat(Stream.make("retry: 1000\n\n"), Stream.merge(body, heartbeat, { haltStrategy: "left" }))
  })

export const response = <E>(items: Stream.Stream<FeedItem, E>): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.stream(Stream.map(frames(items), (s) => utf8.encode(s)), {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
  })

