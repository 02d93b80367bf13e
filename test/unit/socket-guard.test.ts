// The transport guard's pure parts (src/protocol/SocketGuard.ts): the depth scan agrees with the
// real nesting of any JSON value (strings with brackets and escapes included), and the framer
// turns any byte stream, cut anywhere, into exactly one forwarded line or one error reply per
// complete line — never an exception.
import { Either } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { checkLine, type GuardOptions, jsonDepthExceeds, makeFramer } from "../../src/protocol/SocketGuard.js"
import { fuzzParams } from "../support/fuzz.js"

const depthOf = (v: unknown): number =>
  Array.isArray(v)
    ? 1 + Math.max(0, ...v.map(depthOf))
    : typeof v === "object" && v !== null
    ? 1 + Math.max(0, ...Object.values(v).map(depthOf))
    : 0

const options: GuardOptions = {
  maxLineBytes: 4096,
  maxDepth: 8,
  methods: new Map([["echo", (u: unknown) => (typeof u === "object" && u !== null ? Either.right(u) : Either.right({}))]])
}

describe("SocketGuard", () => {
  it("jsonDepthExceeds(text, n) ⇔ the parsed value nests deeper than n", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 12 }), fc.integer({ min: 0, max: 12 }), (v, limit) => {
        const text = JSON.stringify(v)
        expect(jsonDepthExceeds(text, limit)).toBe(depthOf(v) > limit)
      }),
      fuzzParams(300)
    )
  })

  it("a million-deep line is refused without parsing; a deep string is just a string", () => {
    const deep = `{"jsonrpc":"2.0","id":1,"method":"echo","params":${"[".repeat(1_000_000)}${"]".repeat(1_000_000)}}`
    const r = checkLine(deep, options)
    expect(r._tag).toBe("Refuse")
    expect(r._tag === "Refuse" && JSON.parse(r.reply)).toMatchObject({ id: null, error: { code: -32600 } })
    const inString = checkLine(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "echo", params: { s: "[[[[[[[[[[[[\\\"{{{{{{{{" } }), options)
    expect(inString).toMatchObject({ _tag: "Forward", id: 2, method: "echo" })
  })

  it("any byte stream, cut anywhere: one forward or one reply per complete non-blank line, never a throw", () => {
    const line = fc.oneof(
      fc.constant(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "echo", params: {} })),
      fc.constant(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "nope" })),
      fc.jsonValue({ maxDepth: 10 }).map((v) => JSON.stringify(v)),
      fc.string({ maxLength: 50 }),
      fc.constant("x".repeat(5000))
    ).map((l) => l.replace(/[\r\n]/g, " "))
    fc.assert(
      fc.property(fc.array(line, { maxLength: 20 }), fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 10 }), (lines, cuts) => {
        const bytes = Buffer.from(lines.map((l) => l + "\n").join(""), "utf8")
        const framer = makeFramer(options)
        let forwarded = 0
        let replies = 0
        let at = 0
        let k = 0
        while (at < bytes.length) {
          const n = cuts[k++ % cuts.length]!
          const out = framer(bytes.subarray(at, at + n))
          forwarded += out.forward.split("\n").filter((l) => l.length > 0).length
          replies += out.replies.split("\n").filter((l) => l.length > 0).length
          at += n
        }
        expect(forwarded + replies).toBe(lines.filter((l) => l.trim().length > 0).length)
      }),
      fuzzParams(200)
    )
  })

  it("valid lines, LF or CRLF, cut anywhere, as Buffers or plain Uint8Arrays: forwarded byte for byte, CR dropped", () => {
    const request = fc.record({ id: fc.nat(), text: fc.fullUnicodeString({ maxLength: 40 }) }).map(({ id, text }) =>
      JSON.stringify({ jsonrpc: "2.0", id, method: "echo", params: { text } })
    )
    fc.assert(
      fc.property(
        fc.array(fc.tuple(request, fc.boolean()), { minLength: 1, maxLength: 12 }),
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 8 }),
        fc.boolean(),
        (lines, cuts, plain) => {
          const bytes = Buffer.from(lines.map(([l, crlf]) => l + (crlf ? "\r\n" : "\n")).join(""), "utf8")
          const framer = makeFramer(options)
          let forward = ""
          let at = 0
          let k = 0
          while (at < bytes.length) {
            const piece = bytes.subarray(at, at + cuts[k++ % cuts.length]!)
            const out = framer(plain ? new Uint8Array(piece) : piece)
            expect(out.replies).toBe("")
            forward += out.forward
            at += piece.length
          }
          expect(forward).toBe(lines.map(([l]) => l + "\n").join(""))
        }
      ),
      fuzzParams(200)
    )
  })
})
