// The daemon-owned model forwarder: a Unix socket that sandboxes get bound in (at
// /run/substrat/llm.sock), relaying HTTP to the configured upstream — streaming, byte for byte.
// The API key lives only in the daemon: the forwarder drops whatever credential the client sent
// (the sandbox only has a placeholder) and injects the real one. Nothing else is rewritten.
// Metering (optional `meter`): before a model request (POST …/messages, …/chat/completions,
// …/responses) is relayed, `admit` may refuse it (a budget is spent: the client gets a 400 whose
// message says why); as its response streams back, usage is read from a copy of the bytes
// (src/meter/RequestUsage.ts) and handed to `record`. The daemon serves one such forwarder per
// agent (its socket is the agent's identity), relaying to the shared forwarder (`upstreamSocket`).
// Tracing (optional `meter.span`): each metered model request is a span, begun before admission
// and ended when its response has been relayed and its usage recorded — HTTP status, streamed or
// not, model, tokens (uncached in, out, cache read, cache write) and cost as attributes; a refused
// request, an upstream error status or an unreachable upstream end it with an error status.
//
//   Anthropic: SUBSTRAT_ANTHROPIC_UPSTREAM (default https://api.anthropic.com), key ANTHROPIC_API_KEY
//              as `x-api-key` (or ANTHROPIC_AUTH_TOKEN as `Authorization: Bearer`)
//   OpenAI:    SUBSTRAT_OPENAI_UPSTREAM (default https://api.openai.com), key OPENAI_API_KEY as
//              `Authorization: Bearer`
// Without a key the client's own credential header passes through unchanged (scripted endpoints).
import { Data, Effect, Option, Redacted, Runtime, type Scope } from "effect"
import * as Fs from "node:fs"
import * as Zlib from "node:zlib"
import { isModelRequest, type RequestUsage, ResponseTap } from "../../meter/RequestUsage.js"
import * as Http from "node:http"
import * as Https from "node:https"
import * as Path from "node:path"
import type { Settings } from "../../config/Config.js"
import { type ModelRequestSpan, usageAttributes } from "../../telemetry/Tracing.js"

export class ForwarderError extends Data.TaggedError("ForwarderError")<{
  readonly socketPath: string
  readonly message: string
}> {}

export interface Credential {
  /** Lower-case header name: `x-api-key` or `authorization`. */
  readonly header: string
  readonly value: string
}

export interface ForwarderOptions {
  readonly socketPath: string
  /** Origin plus optional path prefix, e.g. `https://api.anthropic.com` or `http://127.0.0.1:4000/base`. */
  readonly upstream: string
  /** Injected in place of any client credential; null: pass the client's through. */
  readonly credential: Credential | null
  /** Reach the upstream through this Unix socket (the upstream URL then gives only host and path prefix). */
  readonly upstreamSocket?: string | undefined
  readonly meter?: ForwarderMeter | undefined
}

/** The metering hooks of a forwarder (see the header). */
export interface ForwarderMeter {
  /** Null: relay the model request; else the reason it is refused. */
  readonly admit: Effect.Effect<string | null>
  /** The usage read from a model response (not called when it carried none); its cost in USD. */
  readonly record: (usage: RequestUsage) => Effect.Effect<number>
  /** Begin the span of one model request (src/telemetry/Tracing.ts); none: not traced. */
  readonly span?: Effect.Effect<ModelRequestSpan> | undefined
}

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
  /** Requests relayed so far (for `doctor`/status; metering will grow from here). */
  readonly requests: Effect.Effect<number>
}

/** A model request being metered (and traced). */
interface Metered {
  readonly meter: ForwarderMeter
  readonly span: ModelRequestSpan
}

const hopByHop = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer", "host"])
const credentialHeaders = ["x-api-key", "authorization"]

const errorBody = (message: string) =>
  JSON.stringify({ type: "error", error: { type: "api_error", message: `substrat model forwarder: ${message}` } })
/** A refused request: Anthropic's error shape, which OpenAI clients read too (`error.message`). */
const refusalBody = (message: string) =>
  JSON.stringify({ type: "error", error: { type: "invalid_request_error", code: "substrat_budget", message: `substrat: ${message}` } })

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
    let count = 0
    /** Usage still being recorded: the next model request is admitted only after it. */
    let recording: Promise<unknown> = Promise.resolve()

    /** Tap a model response: usage from a (decompressed) copy of its bytes, recorded at its end (then its span ends). */
    const tap = (upRes: Http.IncomingMessage, res: Http.ServerResponse, metered: Metered) => {
      const status = upRes.statusCode ?? 502
      const t = new ResponseTap(upRes.headers["content-type"], null)
      const inflate = decoded(upRes.headers["content-encoding"] as string | undefined)
      const source: NodeJS.ReadableStream = inflate === null ? upRes : upRes.pipe(inflate)
      let done = false
      const finish = () => {
        if (done) return
        done = true
        const u = t.end()
        const { meter, span } = metered
        const failure = status >= 400 ? { type: String(status), message: `HTTP ${status} from the model API` } : undefined
        if (u === null) {
          void run(span.end(failure))
          return
        }
        recording = recording.then(() => run(meter.record(u))).then(
          (cost) => {
            span.annotate(usageAttributes(u, cost))
            return run(span.end(failure))
          },
          () => run(span.end(failure))
        ).catch(() => undefined)
      }
      source.on("data", (c: Buffer) => t.write(c))
      source.on("end", finish)
      source.on("error", finish)
      if (inflate === null) upRes.on("close", finish)
      // The client went away before the response ended: what was read is all there is. (A
      // finished response waits for its decompressed copy to end.)
      res.on("close", () => {
        if (!res.writableFinished) setImmediate(finish)
      })
    }

    const relay = (req: Http.IncomingMessage, res: Http.ServerResponse, metered: Metered | null) => {
      const headers: Record<string, string | Array<string>> = {}
      for (const [k, v] of Object.entries(req.headers)) {
        if (v === undefined || hopByHop.has(k)) continue
        if (o.credential !== null && credentialHeaders.includes(k)) continue
        headers[k] = v
      }
      headers["host"] = upstream.host
      if (o.credential !== null) headers[o.credential.header] = o.credential.value
      const up = client.request(
        {
          protocol: o.upstreamSocket !== undefined ? "http:" : upstream.protocol,
          hostname: upstream.hostname,
          port: upstream.port === "" ? undefined : Number(upstream.port),
          ...(o.upstreamSocket !== undefined ? { socketPath: o.upstreamSocket } : {}),
          method: req.method ?? "GET",
          path: `${prefix}${req.url ?? "/"}`,
          headers
        },
        (upRes) => {
          const out: Record<string, string | Array<string>> = {}
          for (const [k, v] of Object.entries(upRes.headers)) {
            if (v !== undefined && !hopByHop.has(k)) out[k] = v
          }
          res.writeHead(upRes.statusCode ?? 502, out)
          if (metered !== null) {
            const type = String(upRes.headers["content-type"] ?? "")
            metered.span.annotate({ "http.response.status_code": upRes.statusCode ?? 502, "substrat.model.streamed": type.includes("text/event-stream") })
            tap(upRes, res, metered)
          }
          upRes.pipe(res)
          upRes.on("error", () => res.destroy())
        }
      )
      up.on("error", (e) => {
        if (metered !== null && !res.headersSent) {
          metered.span.annotate({ "http.response.status_code": 502 })
          void run(metered.span.end({ type: "upstream_unreachable", message: e.message }))
        }
        if (res.headersSent) {
          res.destroy()
          return
        }
        res.writeHead(502, { "content-type": "application/json" })
        res.end(errorBody(`upstream ${upstream.origin} unreachable: ${e.message}`))
      })
      req.pipe(up)
      req.on("error", () => up.destroy())
      res.on("close", () => {
        if (!res.writableFinished) up.destroy()
      })
    }

    const server = Http.createServer((req, res) => {
      count++
      const meter = o.meter
      if (meter === undefined || !isModelRequest(req.method, req.url)) return relay(req, res, null)
      req.pause()
      void (meter.span === undefined ? Promise.resolve(untraced) : run(meter.span)).then((span) => {
        span.annotate({ "http.request.method": req.method ?? "POST", "url.path": (req.url ?? "/").split("?")[0]! })
        const metered: Metered = { meter, span }
        return recording.then(() => run(meter.admit)).then(
          (refusal) => {
            if (refusal === null) return relay(req, res, metered)
            req.resume()
            res.writeHead(400, { "content-type": "application/json" })
            res.end(refusalBody(refusal))
            span.annotate({ "http.response.status_code": 400, "substrat.model.refused": true })
            void run(span.end({ type: "substrat_budget", message: refusal }))
          },
          () => relay(req, res, metered)
        )
      })
    })

    yield* Effect.acquireRelease(
      Effect.async<void, ForwarderError>((resume) => {
        try {
          Fs.mkdirSync(Path.dirname(o.socketPath), { recursive: true, mode: 0o700 })
          const st = Fs.lstatSync(o.socketPath, { throwIfNoEntry: false })
          if (st !== undefined) {
            if (!st.isSocket()) throw new Error(`${o.socketPath} exists and is not a socket`)
            Fs.rmSync(o.socketPath, { force: true })
          }
        } catch (e) {
          resume(Effect.fail(new ForwarderError({ socketPath: o.socketPath, message: e instanceof Error ? e.message : String(e) })))
          return
        }
        server.once("error", (e) => resume(Effect.fail(new ForwarderError({ socketPath: o.socketPath, message: e.message }))))
        server.listen(o.socketPath, () => {
          try {
            Fs.chmodSync(o.socketPath, 0o600)
          } catch {
            // best effort: the directory is 0700 anyway
          }
          resume(Effect.void)
        })
      }),
      () =>
        Effect.async<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        }).pipe(Effect.ensuring(Effect.sync(() => Fs.rmSync(o.socketPath, { force: true }))))
    )
    const forwarder: Forwarder = { socketPath: o.socketPath, upstream: o.upstream, requests: Effect.sync(() => count) }
    return forwarder
  })

export interface UpstreamConfig {
  readonly anthropic: { readonly upstream: string; readonly credential: Credential | null }
  readonly openai: { readonly upstream: string; readonly credential: Credential | null }
}

/** Upstreams and keys from the configuration (src/config/Config.ts). */
export const upstreamsOf = (config: Settings): UpstreamConfig => {
  const { anthropicApiKey, anthropicAuthToken, openaiApiKey } = config.credentials
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
    }
  }
}
