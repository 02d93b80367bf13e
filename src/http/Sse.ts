// Server-Sent Events of the event feed (GET /v1/events). Each log entry is one event (default
// type, `data:` = the entry as JSON with its `position`); its `id:` is the stream's cursor after it
// (src/feed/Cursor.ts), so a client reconnecting with `Last-Event-ID` — also to a restarted daemon —
// gets exactly what it has not seen. `event: live` marks the end of the backlog (its id is the
// cursor of every followed session); `event: error` ends a stream that failed; a comment every
// 15 s keeps idle connections open.
import { HttpServerResponse } from "@effect/platform"
import { Stream } from "effect"
import { toRpcError } from "../daemon/WireErrors.js"
import * as Cursor from "../feed/Cursor.js"
import type { FeedItem } from "../feed/EventFeed.js"

const utf8 = new TextEncoder()

const heartbeat = Stream.tick("15 seconds").pipe(Stream.drop(1), Stream.map(() => ": keep-alive\n\n"))

/** The SSE frames of a feed, with ids continuing from `start`. */
export const frames = <E>(items: Stream.Stream<FeedItem, E>, start: Cursor.Cursor): Stream.Stream<string> =>
  Stream.suspend(() => {
    const cursor = new Map(start)
    const body = items.pipe(
      Stream.map((item) => {
        if (item._tag === "Live") {
          for (const [k, n] of item.cursor) cursor.set(k, Math.max(n, cursor.get(k) ?? 0))
          return `id: ${Cursor.encode(cursor)}\nevent: live\ndata: {}\n\n`
        }
        cursor.set(Cursor.keyOf(item.session), item.line)
        const data = JSON.stringify({ position: `${Cursor.keyOf(item.session)}:${item.line}`, line: item.line, ...item.entry })
        return `id: ${Cursor.encode(cursor)}\ndata: ${data}\n\n`
      }),
      Stream.catchAll((e) => {
        const err = toRpcError(e)
        return Stream.make(`event: error\ndata: ${JSON.stringify({ _tag: err._tag, message: err.message })}\n\n`)
      })
    )
    return Stream.concat(Stream.make("retry: 1000\n\n"), Stream.merge(body, heartbeat, { haltStrategy: "left" }))
  })

export const response = <E>(items: Stream.Stream<FeedItem, E>, start: Cursor.Cursor): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.stream(Stream.map(frames(items, start), (s) => utf8.encode(s)), {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
  })

