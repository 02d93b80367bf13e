// A scripted stand-in for real LLM endpoints: one local HTTP server (TCP loopback or a Unix
// socket) speaking the Anthropic Messages API, the OpenAI Responses API, OpenAI Chat
// Completions and the Gemini API (generateContent / streamGenerateContent), answering from a
// script and recording every request. Used by our tests with the real `claude` / `codex` /
// `qwen` / `opencode` / `gemini` binaries, and by embedders who want the same offline.
//
//   const llm = yield* ScriptedLlm.make({ script: [{ reply: Reply.text("hi") }], listen: { port: 0 } })
//   // ANTHROPIC_BASE_URL=llm.baseUrl, or ANTHROPIC_UNIX_SOCKET=path + ANTHROPIC_BASE_URL=http://localhost
// Over 300 lines because one request's path (classify, record, pick the script entry, reply or
// stream with delays) is one mechanism over shared state; the per-API codecs are in scripted/.
import { Data, Effect } from "effect"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Anthropic from "./scripted/Anthropic.js"
import * as Gemini from "./scripted/Gemini.js"
import * as OpenAi from "./scripted/OpenAi.js"
import * as OpenAiChat from "./scripted/OpenAiChat.js"
import type { Api, Reply, ScriptEntry, ScriptRequest } from "./scripted/Script.js"
import { ScriptState } from "./scripted/Script.js"

export { contentText, matches, Reply } from "./scripted/Script.js"
export type { Api, Match, ReplyBlock, ScriptEntry, ScriptRequest } from "./scripted/Script.js"

export class ScriptedLlmError extends Data.TaggedError("ScriptedLlmError")<{
  readonly reason: "listen"
  readonly message: string
}> {}

export type Listen =
  | { readonly port: number; readonly host?: string }
  | { readonly socketPath: string }

export interface Options {
  readonly script?: ReadonlyArray<ScriptEntry>
  /** Answers requests no entry matches (or that arrive after the script ran out). Without one they
   * get a 400 `invalid_request_error` naming the request, so a client fails fast and visibly. */
  readonly fallback?: ScriptEntry | Reply
  readonly listen: Listen
}

export type Address =
  | { readonly _tag: "Tcp"; readonly host: string; readonly port: number }
  | { readonly _tag: "Unix"; readonly path: string }

export type RequestKind = Api | "count_tokens" | "probe" | "unknown"

export interface RecordedRequest {
  /** 0-based arrival order over all requests. */
  readonly seq: number
  readonly method: string
  readonly path: string
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  /** The parsed JSON body (or the raw text when it is not JSON; `undefined` when empty). */
  readonly body: unknown
  readonly kind: RequestKind
  readonly stream: boolean
  /** What the script matched on (model requests only). */
  readonly model?: string
  readonly system?: string
  readonly lastUser?: string
  /** Index of the script entry that answered, "fallback", or "none" (the 400 no-match answer). */
  readonly answeredBy?: number | "fallback" | "none"
  readonly label?: string
  readonly status: number
}

export interface ScriptedLlmServer {
  readonly address: Address
  /** The base URL for clients: `http://127.0.0.1:<port>`, or `http://localhost` for a Unix socket
   * (what Claude Code wants with `ANTHROPIC_UNIX_SOCKET`). No `/v1` suffix. */
  readonly baseUrl: string
  /** Every request so far, in arrival order. */
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** Only model requests (Messages, Responses, Chat Completions, Gemini generateContent). */
  readonly modelRequests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** Wait until at least `n` recorded requests satisfy `predicate` (default: model requests). */
  readonly awaitRequests: (
    n: number,
    predicate?: (r: RecordedRequest) => boolean
  ) => Effect.Effect<ReadonlyArray<RecordedRequest>>
  readonly push: (...entries: ReadonlyArray<ScriptEntry>) => Effect.Effect<void>
  readonly replace: (entries: ReadonlyArray<ScriptEntry>) => Effect.Effect<void>
  /** Entries with uses left. */
  readonly remaining: Effect.Effect<ReadonlyArray<ScriptEntry>>
}

const isModelKind = (k: RequestKind): boolean => k === "anthropic" || k === "openai-responses" || k === "openai-chat" || k === "gemini"

const classify = (method: string, path: string): RequestKind => {
  const p = path.split("?")[0]!.replace(/\/+$/, "")
  if (method === "HEAD" || (method === "GET" && (p === "" || p === "/v1"))) return "probe"
  if (method !== "POST") return "unknown"
  const g = Gemini.geminiTarget(p)
  if (g !== null) {
    return g.action === "countTokens" ? "count_tokens" : g.action === "generateContent" || g.action === "streamGenerateContent" ? "gemini" : "unknown"
  }
  if (p.endsWith("/messages/count_tokens")) return "count_tokens"
  if (p.endsWith("/messages")) return "anthropic"
  if (p.endsWith("/responses")) return "openai-responses"
  if (p.endsWith("/chat/completions")) return "openai-chat"
  return "unknown"
}

const parseBody = (raw: string): unknown => {
  if (raw === "") return undefined
  try {
    return JSON.parse(raw) as unknown
  } catch {
    return raw
  }
}

const toEntry = (f: ScriptEntry | Reply | undefined): ScriptEntry | undefined =>
  f === undefined ? undefined : "reply" in f ? f : { reply: f, times: Infinity }

/** The server's mutable core, outside Effect: it lives in node:http callbacks. */
class Core {
  readonly recorded: Array<RecordedRequest> = []
  readonly timers = new Set<NodeJS.Timeout>()
  readonly waiters = new Set<() => void>()
  constructor(readonly state: ScriptState) {}

  record(r: RecordedRequest): void {
    this.recorded.push(r)
    for (const w of [...this.waiters]) w()
  }

  handle(req: Http.IncomingMessage, res: Http.ServerResponse): void {
    const parts: Array<Buffer> = []
    req.on("data", (c: Buffer) => parts.push(c))
    req.on("end", () => this.answer(req, res, Buffer.concat(parts).toString("utf8")))
  }

  private answer(req: Http.IncomingMessage, res: Http.ServerResponse, raw: string): void {
    const method = req.method ?? "GET"
    const path = req.url ?? "/"
    const body = parseBody(raw)
    const kind = classify(method, path)
    const base = { seq: this.recorded.length, method, path, headers: { ...req.headers }, body, kind }
    const gemini = Gemini.geminiTarget(path)
    const stream = gemini !== null
      ? gemini.action === "streamGenerateContent"
      : typeof body === "object" && body !== null && (body as { stream?: unknown }).stream === true

    if (kind === "probe") {
      this.record({ ...base, stream: false, status: 200 })
      res.writeHead(200, { "content-type": "text/plain" })
      res.end(method === "HEAD" ? undefined : "scripted-llm")
      return
    }
    if (kind === "count_tokens") {
      this.record({ ...base, stream: false, status: 200 })
      json(res, 200, gemini !== null ? Gemini.countTokens(raw) : Anthropic.countTokens(raw))
      return
    }
    if (kind === "unknown") {
      this.record({ ...base, stream: false, status: 404 })
      json(res, 404, { type: "error", error: { type: "not_found_error", message: `scripted-llm: no route ${method} ${path}` } })
      return
    }

    const request: ScriptRequest = kind === "anthropic"
      ? Anthropic.readRequest(body, raw)
      : kind === "openai-responses"
      ? OpenAi.readResponsesRequest(body, raw)
      : kind === "gemini"
      ? Gemini.readRequest(body, raw, gemini?.model ?? "")
      : OpenAiChat.readChatRequest(body, raw)
    const picked = this.state.take(request)
    const seen = { model: request.model, system: request.system, lastUser: request.lastUser }
    if (picked === undefined) {
      const reply: Reply = {
        _tag: "Error",
        status: 400,
        message: `scripted-llm: no script entry matches request #${base.seq} (lastUser: ${JSON.stringify(request.lastUser.slice(0, 200))})`
      }
      this.record({ ...base, ...seen, stream, answeredBy: "none", status: 400 })
      this.reply(res, kind, reply, request, stream)
      return
    }
    const { entry, index } = picked
    const status = entry.reply._tag === "Error" ? entry.reply.status : entry.reply._tag === "Raw" ? entry.reply.status ?? 200 : 200
    this.record({
      ...base,
      ...seen,
      stream,
      answeredBy: index,
      ...(entry.label === undefined ? {} : { label: entry.label }),
      status
    })
    const go = () => this.reply(res, kind, entry.reply, request, stream, entry.frameDelayMs ?? 0)
    if (entry.delayMs !== undefined && entry.delayMs > 0) {
      const t = setTimeout(() => {
        this.timers.delete(t)
        go()
      }, entry.delayMs)
      this.timers.add(t)
    } else {
      go()
    }
  }

  private reply(res: Http.ServerResponse, kind: Api, reply: Reply, request: ScriptRequest, stream: boolean, frameDelayMs = 0): void {
    if (res.destroyed) return
    if (reply._tag === "Error") {
      json(res, reply.status, kind === "anthropic" ? Anthropic.errorBody(reply) : kind === "gemini" ? Gemini.errorBody(reply) : OpenAi.openAiErrorBody(reply))
      return
    }
    if (reply._tag === "Raw") {
      res.writeHead(reply.status ?? 200, { "content-type": reply.contentType })
      res.end(reply.body)
      return
    }
    if (reply._tag === "Disconnect") {
      res.writeHead(200, sseHeaders(kind))
      res.write(
        kind === "anthropic"
          ? "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{"
          : kind === "gemini"
          ? Gemini.partialFrame
          : "data: {\"type\":\"response.cr"
      )
      res.destroy()
      return
    }
    if (!stream) {
      json(
        res,
        200,
        kind === "anthropic"
          ? Anthropic.messageJson(reply, request)
          : kind === "openai-responses"
          ? OpenAi.responsesJson(reply, request)
          : kind === "gemini"
          ? Gemini.responseJson(reply, request)
          : OpenAiChat.chatJson(reply, request)
      )
      return
    }
    const frames = kind === "anthropic"
      ? Anthropic.streamFrames(reply, request)
      : kind === "openai-responses"
      ? OpenAi.responsesFrames(reply, request)
      : kind === "gemini"
      ? Gemini.streamFrames(reply, request)
      : OpenAiChat.chatFrames(reply, request)
    res.writeHead(200, sseHeaders(kind))
    if (frameDelayMs <= 0) {
      for (const f of frames) res.write(f)
      res.end()
      return
    }
    // Slowly: one frame, then a pause, as long as someone reads (the upstream stops when its client leaves).
    let i = 0
    const next = () => {
      if (res.destroyed) return
      if (i >= frames.length) return void res.end()
      res.write(frames[i++]!)
      const t = setTimeout(() => {
        this.timers.delete(t)
        next()
      }, frameDelayMs)
      this.timers.add(t)
    }
    next()
  }
}

const sseHeaders = (kind: Api): Http.OutgoingHttpHeaders => ({
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  connection: "keep-alive",
  [kind === "anthropic" ? "request-id" : "x-request-id"]: `req_scripted_${Date.now().toString(36)}`
})

const json = (res: Http.ServerResponse, status: number, body: unknown): void => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

/** Start a scripted endpoint for the life of the current scope. */
export const make = Effect.fn("ScriptedLlm.make")(function*(options: Options) {
  const core = new Core(new ScriptState(options.script ?? [], toEntry(options.fallback)))
  const server = yield* Effect.acquireRelease(
    Effect.async<Http.Server, ScriptedLlmError>((resume) => {
      const s = Http.createServer((req, res) => core.handle(req, res))
      s.keepAliveTimeout = 1_000
      const onError = (e: Error) => resume(Effect.fail(new ScriptedLlmError({ reason: "listen", message: e.message })))
      s.once("error", onError)
      const ready = () => {
        s.off("error", onError)
        resume(Effect.succeed(s))
      }
      if ("socketPath" in options.listen) s.listen(options.listen.socketPath, ready)
      else s.listen(options.listen.port, options.listen.host ?? "127.0.0.1", ready)
    }),
    (s) =>
      Effect.async<void>((resume) => {
        for (const t of core.timers) clearTimeout(t)
        core.timers.clear()
        s.close(() => resume(Effect.void))
        s.closeAllConnections()
      })
  )
  const address: Address = "socketPath" in options.listen
    ? { _tag: "Unix", path: options.listen.socketPath }
    : { _tag: "Tcp", host: (server.address() as AddressInfo).address, port: (server.address() as AddressInfo).port }
  const baseUrl = address._tag === "Unix" ? "http://localhost" : `http://${address.host}:${address.port}`

  const select = (predicate: (r: RecordedRequest) => boolean) => core.recorded.filter(predicate)
  const modelOnly = (r: RecordedRequest) => isModelKind(r.kind)
  const awaitRequests = (n: number, predicate: (r: RecordedRequest) => boolean = modelOnly) =>
    Effect.async<ReadonlyArray<RecordedRequest>>((resume) => {
      const check = () => {
        const hits = select(predicate)
        if (hits.length >= n) {
          core.waiters.delete(check)
          resume(Effect.succeed(hits))
        }
      }
      core.waiters.add(check)
      check()
      return Effect.sync(() => core.waiters.delete(check))
    })

  return {
    address,
    baseUrl,
    requests: Effect.sync(() => [...core.recorded]),
    modelRequests: Effect.sync(() => select(modelOnly)),
    awaitRequests,
    push: (...entries) => Effect.sync(() => core.state.push(entries)),
    replace: (entries) => Effect.sync(() => core.state.replace(entries)),
    remaining: Effect.sync(() => core.state.remaining())
  } satisfies ScriptedLlmServer
})
