// Server-Sent Events of the event feed (GET /v1/events). Each log entry is one event (default
// type, `data:` = the entry as JSON with its `position` and `line`); its `id:` is its global position
// (src/feed/Cursor.ts), so a client reconnecting with `Last-Event-ID` — also to a restarted daemon —
// gets exactly what it has not seen. `event: live` marks the end of the backlog (its id is the
// position the stream stands at); `event: error` ends a stream that failed; a comment every 15 s
// keeps idle connections open (the feed's keep-alive ticks, shared by every stream: a timer merged
// into each stream would cost every client a fiber hand-off per chunk it sends).
// An entry's frame is serialised and UTF-8 encoded once, for every client following it: the event
// tap hands the same entry object to every stream, and its bytes are kept with it (a WeakMap, gone
// with the entry). Each stream then only copies references, and writes what one chunk of the feed
// brought as one buffer.
import { HttpServerResponse } from "@effect/platform"
import { Chunk, Stream } from "effect"
import { toRpcError } from "../protocol/WireErrors.js"
import type { LogEntry } from "../domain/events.js"
import * as Cursor from "../feed/Cursor.js"
import type { FeedEvent, FeedItem } from "../feed/EventFeed.js"

const utf8 = new TextEncoder()

/** An entry's frame at one position and line: without and with its `id:` line. */
interface Encoded {
  readonly position: number
  readonly line: number
  readonly data: Uint8Array
  withId: Uint8Array | undefined
}
const encoded = new WeakMap<LogEntry, Encoded>()

const frameOf = (item: FeedEvent, withId: boolean): Uint8Array => {
  let e = encoded.get(item.entry)
  if (e === undefined || e.position !== item.position || e.line !== item.line) {
    const data = JSON.stringify({ position: item.position, line: item.line, ...item.entry })
    e = { position: item.position, line: item.line, data: utf8.encode(`data: ${data}\n\n`), withId: undefined }
    encoded.set(item.entry, e)
  }
  if (!withId) return e.data
  if (e.withId === undefined) {
    const id = utf8.encode(`id: ${Cursor.encode(item.position)}\n`)
    const both = new Uint8Array(id.length + e.data.length)
    both.set(id)
    both.set(e.data, id.length)
    e.withId = both
  }
  return e.withId
}

const concat = (parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  if (parts.length === 1) return parts[0]!
  let n = 0
  for (const p of parts) n += p.length
  const out = new Uint8Array(n)
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

const keepAlive = utf8.encode(": keep-alive\n\n")

/** The SSE frames of a feed, as the bytes to write: one buffer per chunk of the feed. */
export const frames = <E>(items: Stream.Stream<FeedItem, E>): Stream.Stream<Uint8Array> =>
  Stream.suspend(() => {
    // Ids only grow: an entry without a position of its own (brought along by a session joining
    // a tree) leaves the client's Last-Event-ID where it was.
    let last = 0
    const advances = (position: number): boolean => {
      if (position <= last) return false
      last = position
      return true
    }
    const body = items.pipe(
      Stream.mapChunks((chunk) => {
        if (Chunk.isEmpty(chunk)) return Chunk.empty<Uint8Array>()
        const parts: Array<Uint8Array> = []
        for (const item of chunk) {
          if (item._tag === "KeepAlive") {
            parts.push(keepAlive)
          } else if (item._tag === "Live") {
            const id = advances(item.cursor) ? `id: ${Cursor.encode(item.cursor)}\n` : ""
            parts.push(utf8.encode(`${id}event: live\ndata: {}\n\n`))
          } else {
            parts.push(frameOf(item, advances(item.position)))
          }
        }
        return Chunk.of(concat(parts))
      }),
      Stream.catchAll((e) => {
        const err = toRpcError(e)
        return Stream.make(utf8.encode(`event: error\ndata: ${JSON.stringify({ _tag: err._tag, message: err.message })}\n\n`))
      })
    )
    return Stream.concat(Stream.make(utf8.encode("retry: 1000\n\n")), body)
  })

/** The SSE response of a feed stream (open it with `keepAlive: true`). */
export const response = <E>(items: Stream.Stream<FeedItem, E>): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.stream(frames(items), {
    contentType: "text/event-stream",
    headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
  })
