// HTTP/1.1 over a raw TCP socket, for attacks on the daemon's HTTP listener: the request target is
// sent byte for byte as written (fetch and node:http normalise or refuse odd spellings). Used by the
// HTTP security tests and the chaos `security` experiment (scripts/chaos-security/http.ts).
import * as net from "node:net"

export interface RawReply {
  readonly status: number
  readonly head: string
  readonly body: string
  /** bytes received in all (head and body) */
  readonly bytes: number
}

const parse = (data: Buffer): RawReply => {
  const text = data.toString("latin1")
  const end = text.indexOf("\r\n\r\n")
  const head = end < 0 ? text : text.slice(0, end)
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(head)
  return { status: m === null ? 0 : Number(m[1]), head, body: end < 0 ? "" : data.subarray(end + 4).toString("utf8"), bytes: data.length }
}

/**
 * Send `request` (the whole request, head and body, as written) to host:port, read until the
 * server closes or `limitBytes` arrived (then the first bytes only), at most `timeoutMs`.
 * Status 0: no HTTP answer (connection refused, reset before a status line, or timed out).
 */
export const rawRequest = (
  port: number,
  request: string | Buffer,
  options: { readonly host?: string; readonly timeoutMs?: number; readonly limitBytes?: number } = {}
): Promise<RawReply> =>
  new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    let size = 0
    let done = false
    const socket = net.connect({ host: options.host ?? "127.0.0.1", port })
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.destroy()
      resolve(parse(Buffer.concat(chunks)))
    }
    const timer = setTimeout(finish, options.timeoutMs ?? 30_000)
    socket.on("data", (d: Buffer) => {
      chunks.push(d)
      size += d.length
      if (options.limitBytes !== undefined && size >= options.limitBytes) finish()
    })
    socket.on("end", finish)
    socket.on("close", finish)
    socket.on("error", finish)
    socket.write(request)
  })

/** One GET/POST/… with `Connection: close`, the target exactly as given. */
export const rawHttp = (
  port: number,
  method: string,
  target: string,
  options: { readonly token?: string; readonly body?: string; readonly headers?: Readonly<Record<string, string>>; readonly timeoutMs?: number } = {}
): Promise<RawReply> => {
  const headers: Record<string, string> = {
    host: `127.0.0.1:${port}`,
    connection: "close",
    ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
    ...(options.body === undefined ? {} : { "content-type": "application/json", "content-length": String(Buffer.byteLength(options.body)) }),
    ...options.headers
  }
  const head = `${method} ${target} HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("")}\r\n`
  return rawRequest(port, head + (options.body ?? ""), options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs })
}

/**
 * Send a request head, then a generated body of `totalBytes` ('a' repeated from one reused buffer,
 * nothing allocated per chunk), chunked or with Content-Length, honouring back-pressure; stop
 * writing once the server answers or closes. Returns the answer and how many body bytes went out.
 */
export const streamBody = (
  port: number,
  target: string,
  options: { readonly token?: string; readonly totalBytes: number; readonly chunked: boolean; readonly timeoutMs?: number }
): Promise<RawReply & { readonly sent: number }> =>
  new Promise((resolve) => {
    const chunk = Buffer.alloc(1024 * 1024, "a")
    const chunks: Array<Buffer> = []
    let sent = 0
    let done = false
    let answered = false
    const socket = net.connect({ host: "127.0.0.1", port })
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.destroy()
      resolve({ ...parse(Buffer.concat(chunks)), sent })
    }
    const timer = setTimeout(finish, options.timeoutMs ?? 120_000)
    socket.on("data", (d: Buffer) => {
      answered = true
      chunks.push(d)
    })
    socket.on("end", finish)
    socket.on("close", finish)
    socket.on("error", () => {
      // The server closed while we were writing: what it answered is what counts.
      if (!answered) finish()
    })
    const head = [
      `POST ${target} HTTP/1.1`,
      `host: 127.0.0.1:${port}`,
      "content-type: application/json",
      options.chunked ? "transfer-encoding: chunked" : `content-length: ${options.totalBytes}`,
      ...(options.token === undefined ? [] : [`authorization: Bearer ${options.token}`]),
      "",
      ""
    ].join("\r\n")
    socket.write(head)
    const pump = () => {
      while (!answered && !done && sent < options.totalBytes) {
        const n = Math.min(chunk.length, options.totalBytes - sent)
        const piece = n === chunk.length ? chunk : chunk.subarray(0, n)
        if (options.chunked) socket.write(`${n.toString(16)}\r\n`)
        const ok = options.chunked ? [socket.write(piece), socket.write("\r\n")].every(Boolean) : socket.write(piece)
        sent += n
        if (!ok) {
          socket.once("drain", pump)
          return
        }
      }
      if (!answered && !done && options.chunked) socket.write("0\r\n\r\n")
    }
    pump()
  })
