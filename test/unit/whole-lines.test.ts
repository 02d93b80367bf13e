// WholeLines (src/protocol/WholeLines.ts): the admin client's JSON-RPC serialization fed whole
// lines. Whatever the chunking of the bytes (a long line in many chunks, a UTF-8 character split
// between chunks, several lines in one chunk, a line's end with the next one's start), the messages
// decoded are those of the library's own parser given the whole text at once.
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import { describe, expect, it } from "vitest"
import { wholeLines } from "../../src/protocol/WholeLines.js"

const utf8 = new TextEncoder()

const lines = [
  { jsonrpc: "2.0", id: 1, result: { agents: Array.from({ length: 1000 }, (_, i) => ({ name: `a${i}`, note: "héllo ✓ 𝄞" })) } },
  { jsonrpc: "2.0", id: 2, result: { ok: true } },
  { jsonrpc: "2.0", id: 3, result: "€" }
]
const bytes = utf8.encode(lines.map((l) => JSON.stringify(l) + "\n").join(""))

const decodeIn = (chunks: ReadonlyArray<Uint8Array>) => {
  const parser = wholeLines(RpcSerialization.ndJsonRpc()).unsafeMake()
  return chunks.flatMap((c) => [...parser.decode(c)])
}

const chunked = (size: number): Array<Uint8Array> => {
  const out: Array<Uint8Array> = []
  for (let at = 0; at < bytes.length; at += size) out.push(bytes.slice(at, at + size))
  return out
}

describe("WholeLines", () => {
  const whole = RpcSerialization.ndJsonRpc().unsafeMake().decode(bytes)

  it("decodes the same messages as the library's parser, whatever the chunk size", () => {
    expect(whole.length).toBe(3)
    for (const size of [5, 1000, 65_536, bytes.length]) expect(decodeIn(chunked(size))).toEqual(whole)
  })

  it("a chunk that ends inside a multi-byte character, and one holding a line's end and the next's start", () => {
    const at = bytes.indexOf(0xf0) + 2 // inside the four bytes of 𝄞
    const nl = bytes.indexOf(10)
    expect(decodeIn([bytes.slice(0, at), bytes.slice(at, nl + 5), bytes.slice(nl + 5)])).toEqual(whole)
  })

  it("keeps its own copy of a chunk that ends without a newline (a reader may reuse its buffer)", () => {
    const parser = wholeLines(RpcSerialization.ndJsonRpc()).unsafeMake()
    const nl = bytes.indexOf(10)
    const first = bytes.slice(0, 100)
    expect(parser.decode(first)).toEqual([])
    first.fill(32)
    const got = [...parser.decode(bytes.slice(100, nl + 1))]
    expect(got).toEqual(whole.slice(0, 1))
  })
})
