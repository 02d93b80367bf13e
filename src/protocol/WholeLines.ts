// A framing layer in front of @effect/rpc's newline-delimited JSON-RPC serialization. Why a module
// of our own: the library's ndjson parser appends every chunk it is given to one string and searches
// that string for a newline from its start, so one long line (an `agent.list` or `session.list`
// answer of thousands of entries arrives in dozens of socket chunks) costs the square of its chunks
// in copying and searching. Here the chunks wait as bytes until one holds a newline; the library's
// parser then gets every complete line at once, and only complete lines. Splitting at a newline
// byte never splits a UTF-8 character. The library's limit on a line's size still applies.
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import { Layer } from "effect"

const NEWLINE = 10
const MAX_LINE = 16 * 1024 * 1024

/** `inner` (a newline-framed serialization) given complete lines only. */
export const wholeLines = (inner: RpcSerialization.RpcSerialization["Type"]): RpcSerialization.RpcSerialization["Type"] =>
  RpcSerialization.RpcSerialization.of({
    contentType: inner.contentType,
    includesFraming: inner.includesFraming,
    unsafeMake: () => {
      const parser = inner.unsafeMake()
      let pending: Array<Uint8Array> = []
      let pendingSize = 0
      return {
        decode: (data) => {
          if (typeof data === "string") return parser.decode(data)
          const nl = data.lastIndexOf(NEWLINE)
          if (nl < 0) {
            pendingSize += data.length
            if (pendingSize > MAX_LINE) {
              const bufferSize = pendingSize
              pending = []
              pendingSize = 0
              throw new RpcSerialization.RpcSerializationError({ reason: "BufferSizeExceeded", maxBufferSize: MAX_LINE, bufferSize })
            }
            // Socket chunks may be reused by their reader: keep a copy.
            pending.push(data.slice())
            return []
          }
          const head = pending.length === 0
            ? data.subarray(0, nl + 1)
            : Buffer.concat([...pending, data.subarray(0, nl + 1)], pendingSize + nl + 1)
          const rest = data.subarray(nl + 1)
          pending = rest.length === 0 ? [] : [rest.slice()]
          pendingSize = rest.length
          return parser.decode(head)
        },
        encode: parser.encode
      }
    }
  })

/** The admin protocol's serialization (newline-delimited JSON-RPC), fed whole lines. */
export const layerNdJsonRpc: Layer.Layer<RpcSerialization.RpcSerialization> = Layer.succeed(
  RpcSerialization.RpcSerialization,
  wholeLines(RpcSerialization.ndJsonRpc())
)
