// HTTP helpers for the daemon's HTTP API tests: requests over http.sock or TCP, and an SSE reader
// that keeps every frame (id + data) it got.
import * as http from "node:http"

export interface Target {
  readonly socketPath?: string
  readonly base?: string
  readonly token?: string
}

export interface Reply {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
  readonly json: <A = Record<string, unknown>>() => A
}

const options = (t: Target, method: string, path: string, headers: Record<string, string>): http.RequestOptions => {
  const h = { ...headers, ...(t.token === undefined ? {} : { authorization: `Bearer ${t.token}` }) }
  if (t.socketPath !== undefined) return { socketPath: t.socketPath, path, method, headers: h }
  const u = new URL(path, t.base)
  return { host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers: h }
}

export const request = (t: Target, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> =>
  new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const req = http.request(options(t, method, path, { ...headers, ...(payload === undefined ? {} : { "content-type": "application/json" }) }), (res) => {
      let data = ""
      res.setEncoding("utf8")
      res.on("data", (d: string) => (data += d))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: data, json: <A>() => JSON.parse(data) as A }))
    })
    req.on("error", reject)
    req.setTimeout(120_000, () => req.destroy(new Error(`${method} ${path}: no answer`)))
    if (payload !== undefined) req.write(payload)
    req.end()
  })

export interface SseFrame {
  readonly id: string | undefined
  readonly event: string
  readonly data: string
}

export interface SseReader {
  readonly status: Promise<number>
  readonly frames: Array<SseFrame>
  /** The body as received, chunk by chunk. */
  readonly raw: Array<string>
  readonly close: () => void
  readonly ended: Promise<void>
}

/** Open an SSE stream; frames accumulate until `close`. */
export const sse = (t: Target, path: string, lastEventId?: string): SseReader => {
  const frames: Array<SseFrame> = []
  const raw: Array<string> = []
  let req: http.ClientRequest | undefined
  let resolveStatus: (n: number) => void = () => {}
  let resolveEnded: () => void = () => {}
  const status = new Promise<number>((r) => (resolveStatus = r))
  const ended = new Promise<void>((r) => (resolveEnded = r))
  req = http.request(options(t, "GET", path, lastEventId === undefined ? {} : { "last-event-id": lastEventId }), (res) => {
    resolveStatus(res.statusCode ?? 0)
    res.setEncoding("utf8")
    let buf = ""
    res.on("data", (d: string) => {
      raw.push(d)
      buf += d
      let i = buf.indexOf("\n\n")
      while (i >= 0) {
        const block = buf.slice(0, i)
        buf = buf.slice(i + 2)
        let id: string | undefined
        let event = "message"
        const data: Array<string> = []
        let any = false
        for (const line of block.split("\n")) {
          if (line.startsWith(":") || line === "") continue
          const c = line.indexOf(":")
          const field = c < 0 ? line : line.slice(0, c)
          const value = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "")
          if (field === "id") id = value
          else if (field === "event") event = value
          else if (field === "data") data.push(value)
          else continue
          any = true
        }
        if (any && data.length > 0) frames.push({ id, event, data: data.join("\n") })
        i = buf.indexOf("\n\n")
      }
    })
    res.on("end", () => resolveEnded())
    res.on("error", () => resolveEnded())
  })
  req.on("error", () => {
    resolveStatus(0)
    resolveEnded()
  })
  req.end()
  return { status, frames, raw, close: () => req?.destroy(), ended }
}
