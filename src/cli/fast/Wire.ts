// One JSON-RPC call on the admin socket over plain node:net (docs/protocol.md): one request
// line, then its reply line — or, for a stream, chunk lines and a final line. Every way it can
// end is classified, so the caller prints what the full CLI (@effect/rpc client, Client.ts)
// would print, or hands the command over to the full CLI when it cannot be sure.
import * as net from "node:net"
import { isNotRunningCode, kindOfRpcError, type CliErrorKind } from "../Exit.js"

export type Outcome =
  /** The result (for a stream: its end, after every item went to `onItem`). */
  | { readonly _tag: "Success"; readonly value: unknown }
  /** A typed error the daemon answered with (`NotFound`, …). */
  | { readonly _tag: "Failure"; readonly kind: CliErrorKind; readonly message: string }
  /** No daemon on the socket: nothing was sent. */
  | { readonly _tag: "NotRunning" }
  /** The connection broke (or the reply was not JSON) after the request was sent. */
  | { readonly _tag: "Lost"; readonly detail: string }
  /**
   * Anything else: a connect error of another kind, a reply of another shape (a defect, an
   * interruption). `sent`: whether the daemon may have acted on the request.
   */
  | { readonly _tag: "Unexpected"; readonly sent: boolean; readonly detail: string }

const isRecord = (u: unknown): u is Readonly<Record<string, unknown>> => typeof u === "object" && u !== null

/** The error part of a reply: a typed failure, or undefined when it is something else. */
const typedFailure = (error: unknown): Outcome | undefined => {
  if (!isRecord(error) || !isRecord(error["data"]) || error["data"]["_tag"] !== "Fail") return undefined
  const e = error["data"]["error"]
  if (!isRecord(e) || typeof e["_tag"] !== "string" || typeof e["message"] !== "string") return undefined
  const kind = kindOfRpcError(e["_tag"])
  return kind === undefined ? undefined : { _tag: "Failure", kind, message: e["message"] }
}

/** A defect the daemon answered with: what @effect/rpc's `Cause.pretty` shows for a string defect. */
const defectText = (error: unknown): string => {
  const data = isRecord(error) ? error["data"] : undefined
  if (isRecord(data) && data["_tag"] === "Die" && typeof data["defect"] === "string") return `Error: ${data["defect"]}`
  return JSON.stringify(error)
}

const id = 0

/** Send `method(params)` on `socket` and settle with how it ended; stream items go to `onItem`. */
export const call = (
  socket: string,
  method: string,
  params: Readonly<Record<string, unknown>>,
  onItem: (item: unknown) => void
): Promise<Outcome> =>
  new Promise((resolve) => {
    let sent = false
    let settled = false
    let buffered = ""
    const conn = net.createConnection({ path: socket })
    const settle = (o: Outcome) => {
      if (settled) return
      settled = true
      conn.destroy()
      resolve(o)
    }
    const onLine = (line: string) => {
      let msg: unknown
      try {
        msg = JSON.parse(line)
      } catch {
        // @effect/rpc's client fails the call with this message (RpcClientError).
        return settle({ _tag: "Lost", detail: "Error decoding message" })
      }
      if (!isRecord(msg) || msg["id"] !== id) return // not ours (nothing else is in flight)
      if (msg["chunk"] === true) {
        const items = msg["result"]
        if (!Array.isArray(items)) return settle({ _tag: "Unexpected", sent, detail: line })
        for (const item of items) onItem(item)
        return
      }
      if ("error" in msg) {
        return settle(typedFailure(msg["error"]) ?? { _tag: "Unexpected", sent, detail: defectText(msg["error"]) })
      }
      return settle({ _tag: "Success", value: msg["result"] })
    }
    conn.setEncoding("utf8")
    conn.on("connect", () => {
      sent = true
      conn.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`)
    })
    conn.on("data", (chunk: string) => {
      buffered += chunk
      let nl: number
      while (!settled && (nl = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, nl)
        buffered = buffered.slice(nl + 1)
        onLine(line)
      }
    })
    conn.on("error", (e: NodeJS.ErrnoException) => {
      if (!sent && isNotRunningCode(e.code)) return settle({ _tag: "NotRunning" })
      // @effect/rpc reports any socket failure after connecting as "Error in socket".
      settle(sent ? { _tag: "Lost", detail: "Error in socket" } : { _tag: "Unexpected", sent, detail: e.message })
    })
    conn.on("close", () => settle({ _tag: "Lost", detail: "Error in socket" }))
  })
