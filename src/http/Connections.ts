// Connection limits of one HTTP listener (docs/http.md "Limits"): a flood of connections must not
// take the daemon's file handles (the admin socket, the event logs and the sandboxes need them).
//   - total: `server.maxConnections` (Node closes a connection past it as soon as it is accepted);
//   - TCP connections that have not yet shown the token (or the dashboard's cookie) are
//     "unauthenticated": at most `maxUnauthenticated` of them stay open — a new one closes the
//     oldest — and each is closed after `idleTimeoutMs` without traffic. The first request with
//     valid credentials makes its connection authenticated: no longer counted, no idle timer (a
//     `wait: true` request or an SSE stream may be silent for minutes).
//   - every connection: its request headers within `headersTimeoutMs`.
// Node's http server has the total cap and the header timeout; the unauthenticated pool (a set in
// arrival order) is this module's.
import type * as http from "node:http"
import type * as net from "node:net"

export interface Limits {
  readonly maxConnections: number
  readonly maxUnauthenticated: number
  readonly headersTimeoutMs: number
  readonly idleTimeoutMs: number
}

export interface Gate {
  /** A request on `socket` showed valid credentials. */
  readonly authenticated: (socket: net.Socket) => void
  /** Unauthenticated connections open now. */
  readonly unauthenticated: () => number
}

/** Apply `limits` to `server`; `authRequired`: a TCP listener (http.sock has no unauthenticated pool). */
export const install = (server: http.Server, limits: Limits, authRequired: boolean): Gate => {
  server.maxConnections = limits.maxConnections
  server.headersTimeout = limits.headersTimeoutMs
  // Node requires requestTimeout ≥ headersTimeout (0 = none).
  if (server.requestTimeout !== 0 && server.requestTimeout < limits.headersTimeoutMs) server.requestTimeout = limits.headersTimeoutMs
  const pending = new Set<net.Socket>()
  if (authRequired) {
    server.on("connection", (socket: net.Socket) => {
      pending.add(socket)
      socket.setTimeout(limits.idleTimeoutMs, () => {
        if (pending.has(socket)) socket.destroy()
      })
      socket.once("close", () => pending.delete(socket))
      while (pending.size > limits.maxUnauthenticated) {
        const oldest = pending.values().next().value
        if (oldest === undefined) break
        pending.delete(oldest)
        oldest.destroy()
      }
    })
  }
  return {
    authenticated: (socket) => {
      if (pending.delete(socket)) socket.setTimeout(0)
    },
    unauthenticated: () => pending.size
  }
}
