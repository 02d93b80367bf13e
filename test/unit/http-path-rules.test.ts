// The request-target rules (src/http/PathRules.ts): one spelling per path gets through. Property
// tests over generated spellings: a canonical path always passes; any path with a `;`, a dot
// segment, an empty segment, a backslash or an encoded separator/dot/`%`/control byte (any case)
// is always refused, wherever it sits; the refusal never quotes the input.
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { refusal } from "../../src/http/PathRules.js"

const segment = fc.stringMatching(/^[A-Za-z0-9_~!$&'()*+,=:@-][A-Za-z0-9._~!$&'()*+,=:@-]{0,11}$/).filter((s) => s !== "." && s !== "..")
const canonical = fc.array(segment, { minLength: 1, maxLength: 6 }).map((s) => "/" + s.join("/"))
const query = fc.stringMatching(/^[A-Za-z0-9=&%._~;/?-]{0,20}$/)

const hexCase = (byte: number) => fc.constantFrom(byte.toString(16).padStart(2, "0").toLowerCase(), byte.toString(16).padStart(2, "0").toUpperCase())
/** Something that makes a path ambiguous, as a whole segment or inside one. */
const poison = fc.oneof(
  fc.constantFrom(";", ";x", "\\", "#x"),
  fc.constantFrom(0x2e, 0x2f, 0x5c, 0x3b, 0x25, 0x00, 0x0a, 0x1f, 0x7f).chain((b) => hexCase(b).map((h) => `%${h}`)),
  fc.constantFrom("%zz", "%g0", "%%", "%-1")
)
const dotSegment = fc.constantFrom(".", "..")

describe("HTTP path rules", () => {
  it("canonical paths (with or without a query, one trailing slash) pass", () => {
    fc.assert(fc.property(canonical, query, fc.boolean(), (p, q, slash) => {
      const target = `${p}${slash ? "/" : ""}${q === "" ? "" : `?${q}`}`
      expect(refusal(target)).toBeUndefined()
    }))
    expect(refusal("/")).toBeUndefined()
    expect(refusal("/swarm/agents/.%23dir/schedule")).toBeUndefined()
    expect(refusal("/swarm/agents/x.py%23method%3AK.m/chat")).toBeUndefined()
  })

  it("a poison anywhere in the path is refused", () => {
    fc.assert(fc.property(fc.array(segment, { minLength: 1, maxLength: 5 }), fc.nat(), fc.nat(), poison, query, (segs, at, cut, bad, q) => {
      const i = at % segs.length
      const s = segs[i]!
      const k = cut % (s.length + 1)
      const poisoned = [...segs.slice(0, i), s.slice(0, k) + bad + s.slice(k), ...segs.slice(i + 1)]
      expect(refusal("/" + poisoned.join("/") + (q === "" ? "" : `?${q}`))).toBeDefined()
    }))
  })

  it("a dot segment or an empty segment anywhere is refused", () => {
    fc.assert(fc.property(fc.array(segment, { minLength: 1, maxLength: 5 }), fc.nat(), fc.oneof(dotSegment, fc.constant("")), (segs, at, bad) => {
      const i = at % segs.length
      expect(refusal("/" + [...segs.slice(0, i), bad, ...segs.slice(i)].join("/"))).toBeDefined()
    }))
  })

  it("the reported and related spellings", () => {
    for (
      const t of [
        "/v1/agents;/../../", "/v1/agents;", "//v1/agents", "/v1//agents", "/./v1/agents", "/v1/agents/..", "/v1%2fagents",
        "/v1%2Fagents", "/v1/%2e%2e/agents", "/v1\\agents", "/v1/agents%00", "/v1/agents%252e", "*", "http://127.0.0.1/v1/agents",
        "", "/v1/agents #", "/v1/agénts", "/v1/agents?x#y"
      ]
    ) expect({ t, refused: refusal(t) !== undefined }).toEqual({ t, refused: true })
  })

  it("%2F is data only inside the node id of /swarm/agents/{id}", () => {
    expect(refusal("/swarm/agents/src%2Fa.ts%23function%3Atick/schedule")).toBeUndefined()
    expect(refusal("/swarm/agents/src%2fa.ts%23file")).toBeUndefined()
    expect(refusal("/swarm%2Fagents/x")).toBeDefined()
    expect(refusal("/swarm/agents/x/chat%2F")).toBeDefined()
    expect(refusal("/swarm/agents/x/other/y%2F")).toBeDefined()
    expect(refusal("/swarm/agents/src%2F..%2Fx")).toBeUndefined() // one opaque id (no node has it: 404)
    expect(refusal("/swarm/agents/src%2F%2e%2e/chat")).toBeDefined()
  })

  it("the reason never quotes the input", () => {
    fc.assert(fc.property(fc.string({ minLength: 8, maxLength: 40 }).filter((s) => !s.includes("?")), (s) => {
      const why = refusal(`/v1/${s};${s}`)
      expect(why).toBeDefined()
      expect(why!.includes(s)).toBe(false)
    }))
  })
})
