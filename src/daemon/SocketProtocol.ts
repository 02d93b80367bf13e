// The admin socket's @effect/rpc transport: an `RpcServer.Protocol` over a plain Node
// `net.Server`, with the frame guard (FrameGuard.ts, incl. the fast lane) built in.
//
// Why not `NodeSocketServer` + `RpcServer.layerProtocolSocketServer`: that stack runs every
// connection in a fiber of its own and builds, per connection, a FiberSet, three scopes, two
// writers (acquireRelease), a latch, a Deferred, a context merge and a platform `Socket` before
// the data listener is installed, and closes it all again on disconnect — about 0.3–0.5 ms of CPU
// to set a connection up and 1 ms more to tear it down, ten times a raw Node server's whole
// per-connection cost (docs/protocol.md, "Speed"). Every one-shot CLI command opens one
// connection, so it paid that each time. Here a connection is a few listeners and a map entry:
// the data listener is installed in the `connection` callback itself, a fast-lane request is
// answered from that callback, and only the lines that go on to @effect/rpc run in a fiber (one
// per read, in a FiberSet of the server, which @effect/rpc needs anyway to dispatch them).
//
// Same wire behaviour as the stack it replaces: the NDJSON parser (RpcSerialization) decodes the
// forwarded lines and encodes the responses; a connection ends on `end` (held back by the guard
// while requests are answered), `error` or `close`, which ends our side (`destroySoon`) and tells
// @effect/rpc the client is gone (its requests are interrupted); on shutdown the listener closes
// and every connection is ended. Agent sockets (src/mcp/AgentSocket.ts) still use FrameGuard.layer.
import * as SocketServer from "@effect/platform/SocketServer"
import type { FromClientEncoded, FromServerEncoded } from "@effect/rpc/RpcMessage"
import { ResponseDefectEncoded } from "@effect/rpc/RpcMessage"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as RpcServer from "@effect/rpc/RpcServer"
import * as Net from "node:net"
import { Effect, FiberSet, Layer, Mailbox, Predicate } from "effect"
import type { GuardOptions } from "./FrameGuard.js"
import { guardConnection } from "./FrameGuard.js"

export interface SocketProtocolOptions {
  /** Where to listen (a Unix socket path). */
  readonly path: string
  readonly guard: GuardOptions
  /** Open connections, counted for `daemon.status`. */
  readonly counter?: { open: number } | undefined
}

type WriteRequest = (clientId: number, message: FromClientEncoded) => Effect.Effect<void>

/** Listen on `options.path` and serve @effect/rpc over it (guarded); closed with the layer. */
export const layer = (
  options: SocketProtocolOptions
): Layer.Layer<RpcServer.Protocol, SocketServer.SocketServerError, RpcSerialization.RpcSerialization> =>
  Layer.scoped(RpcServer.Protocol, make(options))

const make = (options: SocketProtocolOptions) =>
  Effect.gen(function*() {
    const serialization = yield* RpcSerialization.RpcSerialization
    const counter = options.counter ?? { open: 0 }
    const disconnects = yield* Mailbox.make<number>()
    const clients = new Map<number, (response: FromServerEncoded) => Effect.Effect<void>>()
    const clientIds = new Set<number>()
    const conns = new Set<Net.Socket>()
    let nextId = 0
    let writeRequest: WriteRequest = () => Effect.void
    const protocol = yield* RpcServer.Protocol.make((write) => {
      writeRequest = write
      return Effect.succeed({
        disconnects,
        send: (clientId: number, response: FromServerEncoded) => {
          const send = clients.get(clientId)
          return send === undefined ? Effect.void : send(response)
        },
        end: () => Effect.void,
        clientIds: Effect.sync(() => clientIds),
        initialMessage: Effect.succeedNone,
        // Stream chunks go out without waiting for an `@effect/rpc/Ack` from the client, so a
        // plain JSON-RPC client (socat) can read a stream; admin streams are small and slow.
        supportsAck: false,
        supportsTransferables: false,
        supportsSpanPropagation: true
      })
    })
    // The fibers that hand forwarded lines to @effect/rpc; interrupted when the layer closes.
    const fibers = yield* FiberSet.make()
    const runFork = yield* FiberSet.runtime(fibers)()

    const onConnection = (conn: Net.Socket) => {
      const id = nextId++
      const parser = serialization.unsafeMake()
      const guard = guardConnection(conn, options.guard)
      let open = true
      // Whether @effect/rpc has seen this client; if not (fast-lane answers only, the common
      // one-shot `agent list`), it has nothing to forget when the connection goes.
      let known = false
      /** Write one chunk; done once Node has taken it. A closed connection drops it. */
      const writeRaw = (chunk: string | Uint8Array): Effect.Effect<void> =>
        Effect.async<void>((resume) => {
          if (!conn.writable) return resume(Effect.void)
          conn.write(chunk, (error) => {
            if (error == null && typeof chunk === "string") guard.answered(chunk)
            resume(Effect.void)
          })
        })
      const send = (response: FromServerEncoded): Effect.Effect<void> => {
        try {
          const encoded = parser.encode(response)
          return encoded === undefined ? Effect.void : writeRaw(encoded)
        } catch (cause) {
          const encoded = parser.encode(ResponseDefectEncoded(cause))
          return encoded === undefined ? Effect.void : writeRaw(encoded)
        }
      }
      const finish = () => {
        if (!open) return
        open = false
        conn.off("data", onData)
        conn.off("end", finish)
        conn.off("close", finish)
        conns.delete(conn)
        if (!conn.closed) conn.destroySoon()
        clientIds.delete(id)
        clients.delete(id)
        counter.open--
        if (known) disconnects.unsafeOffer(id)
      }
      const onData = (chunk: Buffer) => {
        const forward = guard.read(chunk)
        if (forward.length === 0) return
        let messages: ReadonlyArray<unknown>
        try {
          messages = parser.decode(forward)
        } catch (cause) {
          if (Predicate.isTagged(cause, "RpcSerializationError")) {
            // What the platform socket does with @effect/rpc's CloseEvent(1009): drop the connection.
            conn.destroy(new Error("closed with code 1009"))
          } else {
            runFork(send(ResponseDefectEncoded(cause)))
          }
          return
        }
        if (messages.length === 0) return
        known = true
        runFork(Effect.forEach(messages, (m) => writeRequest(id, m as FromClientEncoded), { discard: true }))
      }
      counter.open++
      conns.add(conn)
      clientIds.add(id)
      clients.set(id, send)
      // Errors end the connection like `close` does (a reset client is not the daemon's problem);
      // the listener stays so a late error cannot crash the process.
      conn.on("error", finish)
      conn.on("end", finish)
      conn.on("close", finish)
      conn.on("data", onData)
    }

    const server = Net.createServer({ allowHalfOpen: true }, onConnection)
    yield* Effect.async<void, SocketServer.SocketServerError>((resume) => {
      const onError = (cause: Error) => resume(Effect.fail(new SocketServer.SocketServerError({ reason: "Open", cause })))
      server.once("error", onError)
      server.listen(options.path, () => {
        server.off("error", onError)
        // A listener error after start-up (rare: EMFILE on accept) is logged, not fatal.
        server.on("error", (cause) => runFork(Effect.logError("admin socket error", cause)))
        resume(Effect.void)
      })
    })
    // Stop accepting, end every connection, wait until they are closed.
    yield* Effect.addFinalizer(() =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
        for (const conn of conns) conn.destroySoon()
      })
    )
    return protocol
  })
