// The daemon-owned model forwarder: a Unix socket that sandboxes get bound in (at
// /run/substrat/llm.sock), relaying HTTP to the configured upstream — streaming, byte for byte.
// The API key lives only in the daemon: the forwarder drops whatever credential the client sent
// (the sandbox only has a placeholder) and injects the real one. Nothing else is rewritten.
//
// Only the model endpoints of its API are relayed (ForwarderRoutes.ts: exact method, path and
// query; ambiguous spellings refused outright). Anything else gets a 403 saying so, is never
// relayed and never carries the key; with a meter, it is logged (`refused`). Model request
// bodies are read whole first (at most `maxBodyBytes`, else 413; compressed bodies 415).
//
// Metering (optional `meter`, docs/budgets.md): a model request's most expensive outcome is
// reserved before it is relayed (src/domain/estimate.ts: input from the body, output at its cap):
// `reserve` may wait while the requests in flight fill a budget, or refuse (BudgetExceeded: the
// client gets a 400 whose message says why). As its response streams back, usage is read from a
// copy of the bytes (src/domain/requestUsage.ts) and `settle` charges it when the response is
// over. A client that leaves early does not end the response: the forwarder reads on to the
// upstream's final usage (what it bills), with an idle limit; a response cut short is charged
// at least what it streamed. count_tokens is budget-checked the same way (it costs nothing).
// The daemon serves one such forwarder per agent (its socket is the agent's identity), relaying
// to the shared forwarder (`upstreamSocket`) that holds the key.
// Tracing (optional `meter.span`): each metered model request is a span, begun before admission
// and ended when its response has been relayed and its usage recorded — HTTP status, streamed or
// not, model, tokens (uncached in, out, cache read, cache write) and cost as attributes; a refused
// request, an upstream error status or an unreachable upstream end it with an error status.
//
//   Anthropic: SUBSTRAT_ANTHROPIC_UPSTREAM (default https://api.anthropic.com), key ANTHROPIC_API_KEY
//              as `x-api-key` (or ANTHROPIC_AUTH_TOKEN as `Authorization: Bearer`)
//   OpenAI:    SUBSTRAT_OPENAI_UPSTREAM (default https://api.openai.com), key OPENAI_API_KEY as
//              `Authorization: Bearer`
//   Gemini:    SUBSTRAT_GEMINI_UPSTREAM (default https://generativelanguage.googleapis.com), key
//              GEMINI_API_KEY as `x-goog-api-key`; the model is in the path (ForwarderRoutes.ts)
// Without a key the client's own credential header passes through unchanged (scripted endpoints).
//
// Over 300 lines because `serve` is one request's path from the sandbox to the upstream and back
// (checks, credentials, relay, usage, span), kept in the order it happens.
import { Data, Effect, Exit, Fiber, Option, Redacted, Runtime, type Scope } from "effect"
import * as Http from "node:http"
import * as Https from "node:https"
import * as Zlib from "node:zlib"
import type { Settings } from "../../config/Config.js"
import type { BudgetExceeded, EventLogError } from "../../domain/errors.js"
import { estimateOf, type RequestEstimate } from "../../domain/estimate.js"
import { type ModelApi, type RequestUsage, ResponseTap } from "../../domain/requestUsage.js"
import { type ModelRequestSpan, usageAttributes } from "../../telemetry/Tracing.js"
import type { Hold } from "../ModelMeter.js"
import { listenScoped } from "../../sandbox/SocketServer.js"
import { allowedText, routeOf } from "./ForwarderRoutes.js"

export class ForwarderError extends Data.TaggedError("ForwarderError")<{
  readonly socketPath: string
  readonly message: string
}> {}

export interface Credential {
  /** Lower-case header name: `x-api-key`, `authorization` or `x-goog-api-key`. */
  readonly header: string
  readonly value: string
}

export interface ForwarderOptions {
  readonly socketPath: string
  /** Which API's endpoints are relayed (ForwarderRoutes.ts). */
  readonly api: ModelApi
  /** Origin plus optional path prefix, e.g. `https://api.anthropic.com` or `http://127.0.0.1:4000/base`. */
  readonly upstream: string
  /** Injected in place of any client credential; null: pass the client's through. */
  readonly credential: Credential | null
  /** Reach the upstream through this Unix socket (the upstream URL then gives only host and path prefix). */
  readonly upstreamSocket?: string | undefined
  readonly meter?: ForwarderMeter | undefined
  /** The largest request body relayed (default MAX_BODY_BYTES). */
  readonly maxBodyBytes?: number | undefined
  /** A metered response that sends nothing for this long is given up (default IDLE_MS). */
  readonly idleMs?: number | undefined
}

/** The metering hooks of a forwarder (see the header; ModelMeter.ts for the meaning). */
export interface ForwarderMeter {
  readonly reserve: (estimate: RequestEstimate) => Effect.Effect<Hold, BudgetExceeded | EventLogError>
  /** The request is over: its usage (null: nothing billed); its cost in USD. */
  readonly settle: (hold: Hold, usage: RequestUsage | null) => Effect.Effect<number>
  /** A request refused at the door (not on the allowlist). */
  readonly refused?: ((request: { readonly method: string; readonly path: string; readonly reason: string }) => Effect.Effect<void>) | undefined
  /** Begin the span of one model request (src/telemetry/Tracing.ts); none: not traced. */
  readonly span?: Effect.Effect<ModelRequestSpan> | undefined
}

/** Anthropic's Messages limit; nothing a client of ours sends is larger. */
export const MAX_BODY_BYTES = 32 * 1024 * 1024
export const IDLE_MS = 10 * 60 * 1000

const untraced: ModelRequestSpan = { annotate: () => undefined, end: () => Effect.void }

/** A decompressing copy of a response body for the usage tap (identity when not encoded). */
const decoded = (encoding: string | undefined): Zlib.Gunzip | Zlib.Inflate | Zlib.BrotliDecompress | null => {
  const e = (encoding ?? "").toLowerCase().trim()
  if (e === "gzip" || e === "x-gzip") return Zlib.createGunzip()
  if (e === "deflate") return Zlib.createInflate()
  if (e === "br") return Zlib.createBrotliDecompress()
  return null
}

export interface Forwarder {
  readonly socketPath: string
  readonly upstream: string
  /** Requests received so far (for `doctor`/status). */
  readonly requests: Effect.Effect<number>
}

/** A model request being metered (and traced). */
interface Metered {
  readonly meter: ForwarderMeter
  readonly hold: Hold
  readonly estimate: RequestEstimate
  /** Null: not a generation (count_tokens): nothing is read off its response. */
  readonly span: ModelRequestSpan | null
}

const hopByHop = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer", "host"])
const credentialHeaders = ["x-api-key", "authorization", "x-goog-api-key"]

const googleStatus: Readonly<Record<number, string>> = {
  400: "INVALID_ARGUMENT",
  403: "PERMISSION_DENIED",
  413: "INVALID_ARGUMENT",
  415: "INVALID_ARGUMENT",
  502: "UNAVAILABLE",
  503: "UNAVAILABLE"
}

/**
 * The forwarder's own error bodies: Anthropic's shape, which OpenAI clients read too
 * (`error.message`); Google's (`error.code`, `message`, `status`) for the Gemini API.
 */
const errorJson = (api: ModelApi, status: number, type: string, message: string, code?: string) =>
  JSON.stringify(
    api === "gemini"
      ? { error: { code: status, message, status: googleStatus[status] ?? "INTERNAL" } }
      : { type: "error", error: { type, ...(code === undefined ? {} : { code }), message } }
  )

const answer = (res: Http.ServerResponse, status: number, body: string) => {
  if (res.headersSent) return void res.destroy()
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
  res.end(body)
}

/** Read a request body whole, at most `max` bytes (null: it was larger, or the client went away). */
const readBody = (req: Http.IncomingMessage, max: number): Promise<Buffer | null> =>
  new Promise((resolve) => {
    const declared = Number(req.headers["content-length"] ?? "0")
    if (Number.isFinite(declared) && declared > max) return resolve(null)
    const parts: Array<Buffer> = []
    let n = 0
    req.on("data", (c: Buffer) => {
      n += c.length
      if (n > max) {
        parts.length = 0
        resolve(null)
        req.pause()
        return
      }
      parts.push(c)
    })
    req.on("end", () => resolve(Buffer.concat(parts)))
    req.on("error", () => resolve(null))
    req.on("close", () => resolve(null))
  })

/** Serve the forwarder until the scope closes (then the socket file is removed). */
export const serve = (o: ForwarderOptions): Effect.Effect<Forwarder, ForwarderError, Scope.Scope> =>
  Effect.gen(function*() {
    const upstream = yield* Effect.try({
      try: () => new URL(o.upstream),
      catch: () => new ForwarderError({ socketPath: o.socketPath, message: `invalid upstream URL ${o.upstream}` })
    })
    const prefix = upstream.pathname.replace(/\/+$/, "")
    const client = o.upstreamSocket !== undefined ? Http : upstream.protocol === "https:" ? Https : Http
    const runtime = yield* Effect.runtime<never>()
    const run = Runtime.runPromise(runtime)
    const fork = Runtime.runFork(runtime)
    const maxBody = o.maxBodyBytes ?? MAX_BODY_BYTES
    const idleMs = o.idleMs ?? IDLE_MS
    const errorBody = (status: number, type: string, message: string) => errorJson(o.api, status, type, `substrat model forwarder: ${message}`)
    /** A request refused by its budget. */
    const refusalBody = (message: string) => errorJson(o.api, 400, "invalid_request_error", `substrat: ${message}`, "substrat_budget")
    let count = 0
    /** Metered upstream requests still open: given up (and settled) when the forwarder closes. */
    const open = new Set<Http.ClientRequest>()

    /** Tap a model response: usage from a (decompressed) copy of its bytes, settled when it is over (then its span ends). */
    const tap = (upRes: Http.IncomingMessage, metered: Metered, over: () => void) => {
      const status = upRes.statusCode ?? 502
      const t = new ResponseTap(upRes.headers["content-type"], metered.estimate.model, metered.estimate.choices)
      const inflate = decoded(upRes.headers["content-encoding"] as string | undefined)
      const source: NodeJS.ReadableStream = inflate === null ? upRes : upRes.pipe(inflate)
      let done = false
      const finish = () => {
        if (done) return
        done = true
        over()
        const u = metered.span === null ? null : t.charge(metered.estimate.input_tokens)
        const span = metered.span ?? untraced
        const failure = status >= 400 ? { type: String(status), message: `HTTP ${status} from the model API` } : undefined
        void run(metered.meter.settle(metered.hold, u)).then(
          (cost) => {
            if (u !== null) span.annotate(usageAttributes(u, cost))
            return run(span.end(failure))
          },
          () => run(span.end(failure))
        ).catch(() => undefined)
      }
      source.on("data", (c: Buffer) => t.write(c))
      source.on("end", finish)
      source.on("error", finish)
      upRes.on("error", finish)
      // A response that ends early (the upstream dropped it, or it was given up) is over too;
      // a complete one waits for its decompressed copy to end.
      upRes.on("close", () => {
        if (inflate === null || !upRes.complete) setImmediate(finish)
      })
    }

    const relay = (req: Http.IncomingMessage, res: Http.ServerResponse, body: Buffer, metered: Metered | null) => {
      const headers: Record<string, string | Array<string>> = {}
      for (const [k, v] of Object.entries(req.headers)) {
        if (v === undefined || hopByHop.has(k) || k === "content-length") continue
        if (o.credential !== null && credentialHeaders.includes(k)) continue
        headers[k] = v
      }
      headers["host"] = upstream.host
      headers["content-length"] = String(body.length)
      if (o.credential !== null) headers[o.credential.header] = o.credential.value
      let response: Http.IncomingMessage | null = null
      // A kept-alive connection the upstream closed just as this request went out fails with
      // ECONNRESET before any response: the upstream never read the request, so it is sent
      // once more on a fresh connection (the retry Node's http documentation gives for
      // `reusedSocket`). Any other failure, or a second one, is the client's 502.
      const send = (retried: boolean): Http.ClientRequest => {
        const up = client.request(
          {
            protocol: o.upstreamSocket !== undefined ? "http:" : upstream.protocol,
            hostname: upstream.hostname,
            port: upstream.port === "" ? undefined : Number(upstream.port),
            ...(o.upstreamSocket !== undefined ? { socketPath: o.upstreamSocket } : {}),
            method: req.method ?? "POST",
            path: `${prefix}${req.url ?? "/"}`,
            headers
          },
          (upRes) => {
            response = upRes
            const out: Record<string, string | Array<string>> = {}
            for (const [k, v] of Object.entries(upRes.headers)) {
              if (v !== undefined && !hopByHop.has(k)) out[k] = v
            }
            if (!res.destroyed) res.writeHead(upRes.statusCode ?? 502, out)
            if (metered !== null) {
              const type = String(upRes.headers["content-type"] ?? "")
              metered.span?.annotate({ "http.response.status_code": upRes.statusCode ?? 502, "substrat.model.streamed": type.includes("text/event-stream") })
              tap(upRes, metered, () => open.delete(up))
            }
            // (A metered request whose client left is read on without it: see `res`'s close below.)
            if (res.destroyed) upRes.resume()
            else upRes.pipe(res)
            upRes.on("error", () => res.destroy())
          }
        )
        if (metered !== null) {
          open.add(up)
          // Given up when the upstream sends nothing for too long (its hold would stall the tree).
          up.setTimeout(idleMs, () => up.destroy(new Error(`no bytes from the upstream for ${idleMs} ms`)))
        }
        up.on("error", (e) => {
          if (!retried && response === null && up.reusedSocket && (e as NodeJS.ErrnoException).code === "ECONNRESET" && !res.destroyed) {
            open.delete(up)
            current = send(true)
            return
          }
          if (metered !== null && response === null) {
            open.delete(up)
            metered.span?.annotate({ "http.response.status_code": 502 })
            const span = metered.span ?? untraced
            void run(metered.meter.settle(metered.hold, null)).then(() => run(span.end({ type: "upstream_unreachable", message: e.message }))).catch(() => undefined)
          }
          if (res.headersSent) {
            res.destroy()
            return
          }
          answer(res, 502, errorBody(502, "api_error", `upstream ${upstream.origin} unreachable: ${e.message}`))
        })
        up.end(body)
        return up
      }
      let current = send(false)
      res.on("close", () => {
        if (res.writableFinished) return
        // Unmetered: the request is dropped with its client. Metered: it is read on to its end,
        // so the meter gets the upstream's own final usage (what it bills for it).
        if (metered === null) current.destroy()
        else if (response !== null) {
          response.unpipe(res)
          response.resume()
        }
      })
    }

    /** Refuse a request at the door: a 403 saying why, never relayed; logged through the meter. */
    const refuse = (req: Http.IncomingMessage, res: Http.ServerResponse, reason: string) => {
      req.resume()
      answer(res, 403, errorJson(o.api, 403, "permission_error", `substrat model forwarder: ${reason}. Only these are relayed: ${allowedText(o.api)}.`, "substrat_forwarder"))
      const m = o.meter?.refused
      if (m !== undefined) void run(m({ method: req.method ?? "", path: req.url ?? "", reason })).catch(() => undefined)
    }

    /** Reserve, then relay; refused with the budget's words; a client that leaves while it waits takes nothing. */
    const admitted = (req: Http.IncomingMessage, res: Http.ServerResponse, body: Buffer, meter: ForwarderMeter, model: boolean, pathModel: string | undefined) => {
      const estimate: RequestEstimate = model ? estimateOf(body, pathModel) : { model: null, input_tokens: 0, output_tokens: 0 }
      const begin = !model ? Effect.succeed(null) : meter.span === undefined ? Effect.succeed(untraced) : meter.span
      const fiber = fork(Effect.flatMap(begin, (span) => {
        span?.annotate({ "http.request.method": req.method ?? "POST", "url.path": (req.url ?? "/").split("?")[0]! })
        return Effect.map(Effect.either(meter.reserve(estimate)), (r) => ({ span, r }))
      }))
      const gone = () => void run(Fiber.interrupt(fiber))
      res.once("close", gone)
      fiber.addObserver((exit) => {
        res.off("close", gone)
        if (!Exit.isSuccess(exit)) return
        const { span, r } = exit.value
        if (r._tag === "Right") {
          if (res.destroyed) {
            void run(meter.settle(r.right, null)).catch(() => undefined)
            if (span !== null) void run(span.end({ type: "cancelled", message: "the client left before its request was relayed" }))
            return
          }
          return relay(req, res, body, { meter, hold: r.right, estimate, span })
        }
        const e = r.left
        if (e._tag === "BudgetExceeded") {
          answer(res, 400, refusalBody(e.message))
          span?.annotate({ "http.response.status_code": 400, "substrat.model.refused": true })
          if (span !== null) void run(span.end({ type: "substrat_budget", message: e.message }))
          return
        }
        answer(res, 503, errorBody(503, "api_error", `the request could not be reserved durably: ${e.message}`))
        if (span !== null) void run(span.end({ type: "substrat_meter", message: e.message }))
      })
    }

    const server = Http.createServer((req, res) => {
      count++
      const verdict = routeOf(o.api, req.method, req.url)
      if (verdict._tag === "refuse") return refuse(req, res, verdict.reason)
      if (verdict.kind === "probe") {
        req.resume()
        res.writeHead(200, { "content-length": "0" })
        return void res.end()
      }
      const encoding = String(req.headers["content-encoding"] ?? "identity").trim().toLowerCase()
      if (encoding !== "identity" && encoding !== "") {
        req.resume()
        return answer(res, 415, errorBody(415, "invalid_request_error", "compressed request bodies are not accepted"))
      }
      void readBody(req, maxBody).then((body) => {
        if (body === null) {
          answer(res, 413, errorBody(413, "request_too_large", `request bodies over ${maxBody} bytes are not relayed`))
          return req.destroy()
        }
        if (o.meter === undefined) return relay(req, res, body, null)
        admitted(req, res, body, o.meter, verdict.kind === "model", verdict.model)
      })
    })

    // Responses still being read are given up: each is settled with what it streamed.
    yield* listenScoped(server, o.socketPath, () => {
      for (const up of open) up.destroy()
    }).pipe(Effect.mapError((e) => new ForwarderError({ socketPath: o.socketPath, message: e.message })))
    const forwarder: Forwarder = { socketPath: o.socketPath, upstream: o.upstream, requests: Effect.sync(() => count) }
    return forwarder
  })

export interface UpstreamConfig {
  readonly anthropic: { readonly upstream: string; readonly credential: Credential | null }
  readonly openai: { readonly upstream: string; readonly credential: Credential | null }
  readonly gemini: { readonly upstream: string; readonly credential: Credential | null }
}

/** Upstreams and keys from the configuration (src/config/Config.ts). */
export const upstreamsOf = (config: Settings): UpstreamConfig => {
  const { anthropicApiKey, anthropicAuthToken, geminiApiKey, openaiApiKey } = config.credentials
  return {
    anthropic: {
      upstream: config.anthropic.upstream,
      credential: Option.isSome(anthropicApiKey)
        ? { header: "x-api-key", value: Redacted.value(anthropicApiKey.value) }
        : Option.isSome(anthropicAuthToken)
        ? { header: "authorization", value: `Bearer ${Redacted.value(anthropicAuthToken.value)}` }
        : null
    },
    openai: {
      upstream: config.openai.upstream,
      credential: Option.isSome(openaiApiKey) ? { header: "authorization", value: `Bearer ${Redacted.value(openaiApiKey.value)}` } : null
    },
    gemini: {
      upstream: config.gemini.upstream,
      credential: Option.isSome(geminiApiKey) ? { header: "x-goog-api-key", value: Redacted.value(geminiApiKey.value) } : null
    }
  }
}
