// Server-Sent Events of the event feed (GET /v1/events). Each log entry is one event (default
// type, `data:` = the entry as JSON with its `position` and `line`); its `id:` is its global position
// (src/feed/Cursor.ts), so a client reconnecting with `Last-Event-ID` — also to a restarted daemon —
// gets exactly what it has not seen. `event: live` marks the end of the backlog (its id is the
// position the stream stands at); `event: error` ends a stream that failed; a comment every 15 s
// keeps idle connections open (the feed's keep-alive ticks, shared by every stream).
// Live events are encoded once for every client: the feed's hub hands every stream that takes the
// same events of a batch the same array, and its bytes (the frames, one buffer) are kept with it
// (a WeakMap, gone with the array). The hub's one pass per batch pushes those bytes into each
// client's response body, a Node Readable that platform-node pipes to the socket: a client costs
// no fiber, stream stage, serialisation or encoding per event, only a push and its socket write.
// The bytes a client has not taken yet are bounded (`queueLimit`): one that reads slower than events
// come is dropped — what it has queued is sent, then a comment saying so, then the response ends —
// and it resumes by `Last-Event-ID` from the logs. The backlog is encoded as the client reads it
// (once per entry, kept with the entry); live batches wait behind it, under the same bound.
import { HttpServerResponse } from "@effect/platform"
import { Effect, Either, Exit, Runtime, Scope } from "effect"
import { Readable } from "node:stream"
import { toRpcError } from "../protocol/WireErrors.js"
import type { LogEntry } from "../domain/events.js"
import * as Cursor from "../feed/Cursor.js"
import type { EventFeed, FeedEvent, FeedItem, FeedOptions } from "../feed/EventFeed.js"

const utf8 = new TextEncoder()

/** Bytes a client may have queued and not yet taken; a batch past it drops the client. */
export const queueLimit = 4 * 1024 * 1024

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

const retry = utf8.encode("retry: 1000\n\n")
const keepAlive = utf8.encode(": keep-alive\n\n")
const dropped = utf8.encode(": dropped: this client fell behind; reconnect with Last-Event-ID\n\n")
const errorFrame = (e: unknown): Uint8Array => {
  const err = toRpcError(e)
  return utf8.encode(`event: error\ndata: ${JSON.stringify({ _tag: err._tag, message: err.message })}\n\n`)
}

/**
 * The frames of some items as one buffer. `last`: the id the client has; an event moves it only
 * forward (one without a position of its own, brought along by a session joining a tree, has no
 * `id:`). Returns the new `last`.
 */
const encode = (items: ReadonlyArray<FeedItem>, last: number, out: Array<Uint8Array>): number => {
  for (const item of items) {
    if (item._tag === "KeepAlive") {
      out.push(keepAlive)
    } else if (item._tag === "Live") {
      const moves = item.cursor > last
      out.push(utf8.encode(`${moves ? `id: ${Cursor.encode(item.cursor)}\n` : ""}event: live\ndata: {}\n\n`))
      if (moves) last = item.cursor
    } else {
      const moves = item.position > last
      out.push(frameOf(item, moves))
      if (moves) last = item.position
    }
  }
  return last
}

/**
 * Live items' bytes, encoded once per array (the hub gives every stream taking the same items the
 * same array). Live events come after the backlog, so each moves the id unless it has no position.
 */
const liveBytes = new WeakMap<ReadonlyArray<FeedItem>, Uint8Array>()
const bytesOf = (items: ReadonlyArray<FeedItem>): Uint8Array => {
  let bytes = liveBytes.get(items)
  if (bytes === undefined) {
    const parts: Array<Uint8Array> = []
    encode(items, 0, parts)
    bytes = concat(parts)
    liveBytes.set(items, bytes)
  }
  return bytes
}

/** Backlog items per buffer (encoded when the client is ready for more). */
const backlogChunk = 4096

/**
 * A feed stream's SSE body: `retry`, the backlog, then every live batch the hub pushes, until the
 * client goes (the Readable is destroyed: the subscription ends) or falls `limit` bytes behind.
 */
export const open = (feed: EventFeed, options: FeedOptions, limit: number = queueLimit): Effect.Effect<Readable> =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    // The Readable's destroy (a Node callback) closes the scope on the caller's runtime.
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    // Unknown until the subscription is made: nothing live may pass it before; `at`: the next backlog item to push.
    let backlog: ReadonlyArray<FeedItem> | undefined
    let at = 0
    let last = 0
    // Live batches that came while backlog remains (undefined once it is all pushed) and their bytes.
    let behind: Array<Uint8Array> | undefined = []
    let behindBytes = 0
    let done = false
    const end = (tail: Uint8Array) => {
      done = true
      backlog = []
      at = 0
      behind = undefined
      out.push(tail)
      out.push(null)
    }
    /** Pushes backlog while the client wants more, then what waited behind it. */
    const pump = () => {
      if (backlog === undefined) return
      while (!done && at < backlog.length) {
        const parts: Array<Uint8Array> = []
        last = encode(backlog.slice(at, at + backlogChunk), last, parts)
        at += backlogChunk
        if (!out.push(concat(parts))) return
      }
      if (done || behind === undefined) return
      for (const b of behind) out.push(b)
      behind = undefined
    }
    const out: Readable = new Readable({
      read: pump,
      destroy: (error, callback) => {
        done = true
        runFork(Scope.close(scope, Exit.void))
        callback(error)
      }
    })
    const offer = (items: ReadonlyArray<FeedItem>): boolean => {
      if (done) return false
      const bytes = bytesOf(items)
      if (behind !== undefined) {
        behindBytes += bytes.length
        if (behindBytes <= limit) {
          behind.push(bytes)
          return true
        }
      } else if (out.readableLength + bytes.length <= limit) {
        out.push(bytes)
        return true
      }
      end(dropped)
      return false
    }
    out.push(retry)
    const opened = yield* feed.subscribe(options, { offer }).pipe(
      Scope.extend(scope),
      Effect.either,
      Effect.onInterrupt(() => Scope.close(scope, Exit.void))
    )
    if (Either.isLeft(opened)) {
      end(errorFrame(opened.left))
    } else if (!done) {
      backlog = opened.right
      pump()
    }
    return out
  })

/** The SSE response of a feed stream (with keep-alive comments). */
export const response = (feed: EventFeed, options: Omit<FeedOptions, "keepAlive">): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
  Effect.map(open(feed, { ...options, keepAlive: true }), (body) =>
    HttpServerResponse.raw(body, {
      contentType: "text/event-stream",
      headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
    }))
