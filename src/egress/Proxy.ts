// The egress proxy of one agent turn: an HTTP proxy on a Unix socket that the sandbox gets bound
// read-only (at /run/substrat/egress.sock; a relay inside the sandbox gives it a 127.0.0.1 port,
// see src/provider/cli/CliSettings.ts). Two kinds of request:
//   CONNECT host:port   a TCP tunnel, bytes relayed as they are (TLS stays end to end: nothing is
//                       decrypted or re-signed here)
//   GET http://host/…   plain HTTP forwarded (absolute-form request line), Host set from the URL
// Each request is checked before anything leaves the host: the policy (`check`), a connection
// slot (`acquire`), then the name is resolved once (`resolve`, which refuses local addresses) and
// the connection goes to exactly that address. A refusal is an HTTP 403 (429 for a limit) whose
// body says why and how a human allows it. Bytes are counted both ways (`count` may end the
// connection past a limit); when a request ends, `record` gets its summary (the egress.request
// event). Header size, idle time and the number of connections on the socket are bounded.
// node:http rather than @effect/platform's HttpServer: CONNECT (an upgrade to a raw socket) has no
// place in the platform's request/response model.
//
// Over 300 lines because one connection's path (parse, check, resolve, relay, count, record) is
// kept in the order it happens.
import { Effect, type Scope } from "effect"
import * as Http from "node:http"
import * as Net from "node:net"
import type * as Stream from "node:stream"
import { listenScoped } from "../sandbox/SocketServer.js"
import type { Resolved } from "./Resolver.js"

/** A request's summary, as logged (`egress.request`). */
export interface EgressRecord {
  readonly host: string
  readonly port: number
  /** HTTP method, or `CONNECT`. */
  readonly method: string
  readonly allowed: boolean
  /** Why it was refused or ended early (null: allowed and ended normally). */
  readonly reason: string | null
  /** The policy rule that allowed it (a host pattern or `preset npm`), when allowed. */
  readonly rule: string | null
  /** The HTTP status the client got from the proxy or (plain HTTP) the server; null for a tunnel that ended. */
  readonly status: number | null
  readonly bytes_up: number
  readonly bytes_down: number
  readonly duration_ms: number
}

export type Check =
  | { readonly allowed: true; readonly rule: string }
  | { readonly allowed: false; readonly reason: string; readonly message: string }

export interface ProxyHooks {
  readonly check: (host: string, port: number) => Promise<Check>
  readonly resolve: (host: string) => Promise<{ readonly ok: true; readonly to: Resolved } | { readonly ok: false; readonly reason: string }>
  /** Take a connection slot: null, or the refusal message (too many open connections). */
  readonly acquire: () => string | null
  readonly release: () => void
  /** Count transferred bytes: null, or the message of the limit just passed (the connection ends). */
  readonly count: (bytes: number) => string | null
  readonly record: (r: EgressRecord) => void
  /** A request begins (before its checks): what to call with its summary when it ends (its trace span). */
  readonly begin?: (host: string, port: number, method: string) => (r: EgressRecord) => void
}

export interface ProxyOptions {
  readonly socketPath: string
  readonly hooks: ProxyHooks
  /** Longest request head (request line + headers), bytes. */
  readonly maxHeaderBytes?: number
  /** Connections open on the socket at once (the workspace-wide limit is `acquire`'s). */
  readonly maxSocketConnections?: number
  /** Idle time after which a connection is closed (ms). */
  readonly idleMs?: number
}

const hopByHop = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "proxy-authenticate",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
  "host"
])

/** `host:port` of a CONNECT (IPv6 in brackets); null when malformed. */
export const parseAuthority = (s: string): { readonly host: string; readonly port: number } | null => {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$/.exec(s)
  if (m === null) return null
  const port = Number(m[2])
  if (port < 1 || port > 65535) return null
  return { host: m[1]!.toLowerCase(), port }
}

const plain = (status: number, body: string) =>
  `HTTP/1.1 ${status} ${Http.STATUS_CODES[status] ?? ""}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${
    Buffer.byteLength(body)
  }\r\nconnection: close\r\n\r\n${body}`

/** Serve the proxy until the scope closes (then the socket file is removed). */
export const serve = (o: ProxyOptions): Effect.Effect<void, Error, Scope.Scope> =>
  Effect.gen(function*() {
    const h = o.hooks
    const idleMs = o.idleMs ?? 120_000
    /** Tunnels leave the server's bookkeeping once upgraded: closed here with the scope. */
    const tunnels = new Set<Stream.Duplex | Net.Socket>()

    /** Run the checks shared by both kinds; null when refused (the refusal is already sent and recorded). */
    const admit = async (
      host: string,
      port: number,
      method: string,
      refuse: (status: number, body: string) => void
    ): Promise<{ readonly rule: string; readonly to: Resolved; readonly record: (r: EgressRecord) => void } | null> => {
      const started = Date.now()
      const traced = h.begin?.(host, port, method)
      const record = (r: EgressRecord) => {
        h.record(r)
        traced?.(r)
      }
      const deny = (status: number, reason: string, body: string) => {
        refuse(status, body)
        record({ host, port, method, allowed: false, reason, rule: null, status, bytes_up: 0, bytes_down: 0, duration_ms: Date.now() - started })
        return null
      }
      const c = await h.check(host, port)
      if (!c.allowed) return deny(403, c.reason, c.message)
      const slot = h.acquire()
      if (slot !== null) return deny(429, "connections", `substrat egress: ${slot}\n`)
      const r = await h.resolve(host)
      if (!r.ok) {
        h.release()
        return deny(403, r.reason, `substrat egress: ${host} refused: ${r.reason}\n`)
      }
      return { rule: c.rule, to: r.to, record }
    }

    /**
     * Relay both ways between two sockets, counting, with backpressure; a side that ends is
     * ended on the other (its buffered bytes flushed first); an error or a limit destroys both.
     * `onEnd` once, when both have closed.
     */
    const tunnel = (
      client: Stream.Duplex,
      upstream: Net.Socket,
      onEnd: (up: number, down: number, reason: string | null) => void
    ) => {
      let up = 0
      let down = 0
      let reason: string | null = null
      let closed = 0
      tunnels.add(client)
      tunnels.add(upstream)
      const kill = () => {
        client.destroy()
        upstream.destroy()
      }
      const over = (n: number) => {
        const m = h.count(n)
        if (m !== null && reason === null) {
          reason = m
          kill()
          return true
        }
        return false
      }
      const pump = (from: Stream.Duplex, to: Stream.Duplex, add: (n: number) => void) => {
        from.on("data", (b: Buffer) => {
          add(b.length)
          if (over(b.length)) return
          if (!to.write(b)) {
            from.pause()
            to.once("drain", () => from.resume())
          }
        })
        from.on("end", () => to.end())
      }
      pump(client, upstream, (n) => (up += n))
      pump(upstream, client, (n) => (down += n))
      for (const s of [client, upstream]) {
        s.on("error", kill)
        s.on("close", () => {
          tunnels.delete(s)
          if (++closed === 2) onEnd(up, down, reason)
          else if (s === upstream) client.end()
        })
      }
      upstream.setTimeout(idleMs, kill)
    }

    const server = Http.createServer({ maxHeaderSize: o.maxHeaderBytes ?? 16 * 1024, requestTimeout: 60_000, headersTimeout: 30_000 })
    server.maxConnections = o.maxSocketConnections ?? 64
    server.timeout = idleMs

    server.on("connect", (req: Http.IncomingMessage, client: Stream.Duplex, head: Buffer) => {
      client.on("error", () => client.destroy())
      const target = parseAuthority(req.url ?? "")
      if (target === null) {
        client.end(plain(400, `substrat egress: CONNECT needs host:port, got ${JSON.stringify((req.url ?? "").slice(0, 200))}\n`))
        return
      }
      const { host, port } = target
      const refuse = (status: number, body: string) => client.end(plain(status, body))
      void admit(host, port, "CONNECT", refuse).then((ok) => {
        if (ok === null) return
        const started = Date.now()
        const upstream = Net.connect({ host: ok.to.address, port, family: ok.to.family })
        let connected = false
        const finish = (up: number, down: number, reason: string | null) => {
          h.release()
          ok.record({
            host,
            port,
            method: "CONNECT",
            allowed: true,
            reason,
            rule: ok.rule,
            status: connected ? 200 : 502,
            bytes_up: up,
            bytes_down: down,
            duration_ms: Date.now() - started
          })
        }
        upstream.once("error", (e) => {
          if (connected) return
          connected = false
          client.end(plain(502, `substrat egress: cannot reach ${host}:${port}: ${e.message}\n`))
          upstream.destroy()
          finish(0, 0, `unreachable: ${e.message}`)
        })
        upstream.once("connect", () => {
          connected = true
          client.write("HTTP/1.1 200 Connection Established\r\n\r\n")
          if (head.length > 0) client.unshift(head)
          tunnel(client, upstream, finish)
        })
      }, () => client.destroy())
    })

    server.on("request", (req: Http.IncomingMessage, res: Http.ServerResponse) => {
      let url: URL | null = null
      try {
        url = new URL(req.url ?? "")
      } catch {
        url = null
      }
      const refuse = (status: number, body: string) => {
        if (res.headersSent) return res.destroy()
        res.writeHead(status, { "content-type": "text/plain; charset=utf-8", connection: "close" })
        res.end(body)
      }
      if (url === null || url.protocol !== "http:" || url.hostname === "") {
        req.resume()
        refuse(400, "substrat egress: send absolute http:// URLs to this proxy, or CONNECT host:port for TLS\n")
        return
      }
      const host = url.hostname.toLowerCase()
      const port = url.port === "" ? 80 : Number(url.port)
      const method = req.method ?? "GET"
      req.pause()
      void admit(host, port, method, (status, body) => {
        req.resume()
        refuse(status, body)
      }).then((ok) => {
        if (ok === null) return
        const started = Date.now()
        let up = 0
        let down = 0
        let reason: string | null = null
        let status: number | null = null
        let done = false
        const finish = () => {
          if (done) return
          done = true
          h.release()
          ok.record({ host, port, method, allowed: true, reason, rule: ok.rule, status, bytes_up: up, bytes_down: down, duration_ms: Date.now() - started })
        }
        const headers: Record<string, string | Array<string>> = {}
        for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !hopByHop.has(k)) headers[k] = v
        headers["host"] = url.port === "" ? url.hostname : `${url.hostname}:${url.port}`
        const upReq = Http.request({
          host: ok.to.address,
          family: ok.to.family,
          port,
          method,
          path: `${url.pathname}${url.search}`,
          headers,
          agent: false,
          timeout: idleMs
        }, (upRes) => {
          status = upRes.statusCode ?? 502
          const out: Record<string, string | Array<string>> = {}
          for (const [k, v] of Object.entries(upRes.headers)) if (v !== undefined && !hopByHop.has(k)) out[k] = v
          res.writeHead(status, out)
          upRes.on("data", (b: Buffer) => {
            down += b.length
            const m = h.count(b.length)
            if (m !== null) {
              reason = m
              upRes.destroy()
              res.destroy()
              finish()
              return
            }
            if (!res.write(b)) {
              upRes.pause()
              res.once("drain", () => upRes.resume())
            }
          })
          upRes.on("end", () => {
            res.end()
            finish()
          })
          upRes.on("error", () => {
            res.destroy()
            finish()
          })
        })
        upReq.on("timeout", () => upReq.destroy(new Error("idle")))
        upReq.on("error", (e) => {
          if (reason === null) reason = `unreachable: ${e.message}`
          if (status === null) {
            status = 502
            refuse(502, `substrat egress: cannot reach ${host}:${port}: ${e.message}\n`)
          } else res.destroy()
          finish()
        })
        req.on("data", (b: Buffer) => {
          up += b.length
          const m = h.count(b.length)
          if (m !== null) {
            reason = m
            upReq.destroy()
            refuse(429, `substrat egress: ${m}\n`)
            finish()
            return
          }
          if (!upReq.write(b)) {
            req.pause()
            upReq.once("drain", () => req.resume())
          }
        })
        req.on("end", () => upReq.end())
        req.on("error", () => upReq.destroy())
        res.on("close", () => {
          if (!res.writableFinished) {
            upReq.destroy()
            finish()
          }
        })
        req.resume()
      }, () => res.destroy())
    })
    server.on("clientError", (_e, socket) => {
      if (socket.writable) socket.end(plain(400, "substrat egress: bad request (malformed, or its head is too long)\n"))
      else socket.destroy()
    })

    yield* listenScoped(server, o.socketPath, () => {
      for (const t of tunnels) t.destroy()
    })
  })
