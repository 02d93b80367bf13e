// The HTTP side of the `openai` provider: POST {base}/chat/completions with `stream: true`, the
// body decoded line by line by a ChatAccumulator (ChatStream.ts) while its text deltas stream out.
// Node's fetch (undici); interrupting the stream cancels the body and closes the connection.
//
// Failures are `ChatError`s with a kind and whether a retry could help:
//   connect    connection refused/reset, DNS…          retryable
//   timeout    no headers, or no chunk, within timeoutMs  retryable before the body, not after
//   http       a non-2xx status (the body's error message) retryable for 408, 409, 429, 5xx
//   malformed  an event that is not JSON / not a chunk    not retryable
//   api        an `error` object inside the stream        not retryable
//   truncated  the body ended before finish_reason/[DONE] not retryable (output was streamed)
// A request is retried (maxRetries, exponential backoff from retryDelayMs) only while nothing of
// its body has been read, so no text is ever streamed twice.
import { Data, Duration, Effect, Option, Redacted, Schedule, Stream } from "effect"
import { ChatAccumulator, completeJson, isFault, type StreamFault } from "./ChatStream.js"
import { completionsUrl, type OpenAiSettingsShape } from "./Settings.js"

export class ChatError extends Data.TaggedError("ChatError")<{
  readonly kind: "connect" | "timeout" | "http" | "malformed" | "api" | "truncated"
  readonly status: number | null
  readonly retryable: boolean
  readonly message: string
}> {}

const retryableStatus = (status: number) => status === 408 || status === 409 || status === 429 || status >= 500

/** The cause chain of a fetch failure as one line (`fetch failed: connect ECONNREFUSED …`). */
const causeText = (e: unknown): string => {
  const parts: Array<string> = []
  let cur: unknown = e
  for (let i = 0; i < 4 && cur !== undefined && cur !== null; i++) {
    if (cur instanceof Error) {
      const code = (cur as NodeJS.ErrnoException).code
      parts.push(code !== undefined && !cur.message.includes(code) ? `${cur.message} (${code})` : cur.message)
      cur = cur.cause
    } else {
      parts.push(String(cur))
      break
    }
  }
  return parts.join(": ")
}

/** Whether the failure's cause chain holds an errno `code`. */
const hasCode = (e: unknown, code: string): boolean => {
  let cur: unknown = e
  for (let i = 0; i < 4 && cur instanceof Error; i++, cur = cur.cause) {
    if ((cur as NodeJS.ErrnoException).code === code) return true
  }
  return false
}

const connectError = (url: string, e: unknown) => {
  const text = causeText(e)
  const refused = hasCode(e, "ECONNREFUSED")
  return new ChatError({
    kind: "connect",
    status: null,
    retryable: true,
    message: `${refused ? "connection refused" : "cannot reach the endpoint"} at ${url}: ${text}`
  })
}

const faultError = (f: StreamFault) => new ChatError({ kind: f.kind, status: null, retryable: false, message: f.message })

/** The error message of a non-2xx body: OpenAI's `{"error":{"message"}}`, else the text, clipped. */
const httpMessage = (body: string): string => {
  try {
    const j: unknown = JSON.parse(body)
    if (typeof j === "object" && j !== null && "error" in j) {
      const e = j.error
      if (typeof e === "object" && e !== null && "message" in e && typeof e.message === "string") return e.message
      if (typeof e === "string") return e
    }
  } catch {
    // not JSON: the text itself
  }
  const t = body.trim()
  return t.length > 300 ? `${t.slice(0, 300)}…` : t
}

/** Read a (small) body as text, bounded by the timeout; errors become "". */
const bodyText = (res: Response, timeoutMs: number) =>
  Effect.tryPromise(() => res.text()).pipe(
    Effect.timeout(Duration.millis(timeoutMs)),
    Effect.orElseSucceed(() => "")
  )

/** POST the request until the response headers are in (no retry). */
const post = (s: OpenAiSettingsShape, body: string): Effect.Effect<Response, ChatError> => {
  const url = completionsUrl(s)
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "text/event-stream, application/json"
  }
  if (Option.isSome(s.apiKey)) headers["authorization"] = `Bearer ${Redacted.value(s.apiKey.value)}`
  return Effect.tryPromise({
    try: (signal) => fetch(url, { method: "POST", headers, body, signal }),
    catch: (e) => connectError(url, e)
  }).pipe(
    Effect.timeoutFail({
      duration: Duration.millis(s.timeoutMs),
      onTimeout: () =>
        new ChatError({ kind: "timeout", status: null, retryable: true, message: `no response from ${url} within ${s.timeoutMs} ms` })
    }),
    Effect.flatMap((res) =>
      res.ok
        ? Effect.succeed(res)
        : Effect.flatMap(bodyText(res, s.timeoutMs), (text) =>
          Effect.fail(
            new ChatError({
              kind: "http",
              status: res.status,
              retryable: retryableStatus(res.status),
              message: `HTTP ${res.status} from ${url}${text === "" ? "" : `: ${httpMessage(text)}`}`
            })
          ))
    )
  )
}

/** `post` with retries of retryable failures (nothing of the body has been read yet). */
const postWithRetries = (s: OpenAiSettingsShape, body: string): Effect.Effect<Response, ChatError> =>
  post(s, body).pipe(
    Effect.retry({
      schedule: Schedule.exponential(Duration.millis(Math.max(1, s.retryDelayMs))),
      times: s.maxRetries,
      while: (e) => e.retryable
    }),
    Effect.mapError((e) =>
      e.retryable && s.maxRetries > 0 ? new ChatError({ ...e, message: `${e.message} (gave up after ${s.maxRetries + 1} attempts)` }) : e
    )
  )

/**
 * One model call: the text deltas as they arrive. `acc` holds the rest (tool calls, finish
 * reason, usage) once the stream has ended without error.
 */
export const streamCompletion = (
  s: OpenAiSettingsShape,
  request: unknown,
  acc: ChatAccumulator
): Stream.Stream<string, ChatError> =>
  Stream.unwrap(Effect.map(postWithRetries(s, JSON.stringify(request)), (res) => {
    const idle = () =>
      new ChatError({
        kind: "timeout",
        status: null,
        retryable: false,
        message: `the response stream from ${completionsUrl(s)} stalled for ${s.timeoutMs} ms`
      })
    const fromFeed = (r: ReadonlyArray<string> | StreamFault): Effect.Effect<ReadonlyArray<string>, ChatError> =>
      isFault(r) ? Effect.fail(faultError(r)) : Effect.succeed(r)
    const contentType = res.headers.get("content-type") ?? ""
    acc.status = res.status
    acc.streamed = res.body !== null && contentType.includes("text/event-stream")
    if (res.body === null || !contentType.includes("text/event-stream")) {
      // A server that answered with one JSON body (it ignored `stream: true`).
      return Stream.fromIterableEffect(
        Effect.tryPromise({ try: () => res.text(), catch: (e) => new ChatError({ kind: "truncated", status: null, retryable: false, message: `reading the response body failed: ${causeText(e)}` }) }).pipe(
          Effect.timeoutFail({ duration: Duration.millis(s.timeoutMs), onTimeout: idle }),
          Effect.flatMap((text) => fromFeed(completeJson(acc, text)))
        )
      )
    }
    const body = res.body
    return Stream.fromReadableStream({
      evaluate: () => body,
      onError: (e) =>
        new ChatError({ kind: "truncated", status: null, retryable: false, message: `the response stream broke: ${causeText(e)}` })
    }).pipe(
      Stream.timeoutFail(idle, Duration.millis(s.timeoutMs)),
      Stream.decodeText(),
      Stream.splitLines,
      Stream.mapEffect((line) => fromFeed(acc.line(line))),
      Stream.concat(Stream.fromEffect(Effect.suspend(() => fromFeed(acc.end())))),
      Stream.flattenIterables
    )
  }))

export { ChatAccumulator }
