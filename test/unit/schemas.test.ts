// Schema round-trips as properties: value → encode → JSON text → parse → decode equals value.
// The arbitraries come from the Schemas themselves (Arbitrary.make), so a field added to a
// Schema is covered without touching this file.
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Schema } from "effect"
import fc from "fast-check"
import { AgentNode } from "../../src/domain/agent.js"
import { LogEntry, LogEvent, LogLine } from "../../src/domain/events.js"
import { AgentId, MessageId, SessionId, TurnId, WorkspaceId } from "../../src/domain/ids.js"
import { MessageEnvelope } from "../../src/domain/message.js"
import { Session } from "../../src/domain/session.js"
import { ResourceLimits, SymlinkSpec, WorkspaceSpec } from "../../src/domain/workspace.js"
import { fuzzParams } from "../support/fuzz.js"

/** Structural equality that understands Uint8Array and class instances. */
const plain = (u: unknown): unknown =>
  u instanceof Uint8Array
    ? { bytes: [...u] }
    : Array.isArray(u)
    ? u.map(plain)
    : Object.is(u, -0) // JSON has no -0: 0 is the faithful round-trip
    ? 0
    : typeof u === "object" && u !== null
    ? Object.fromEntries(Object.entries(u).map(([k, v]) => [k, plain(v)]))
    : u

const roundTrip = <A, I>(name: string, schema: Schema.Schema<A, I>, runs = 200) =>
  it(`${name}: encode → JSON → decode is the identity`, () => {
    const json = Schema.parseJson(schema)
    const encode = Schema.encodeSync(json)
    const decode = Schema.decodeUnknownSync(json)
    fc.assert(
      fc.property(Arbitrary.make(schema), (a) => {
        const text = encode(a)
        expect(typeof text).toBe("string")
        const back = decode(text)
        expect(plain(back)).toEqual(plain(a))
        // and the JSON text is stable under a second trip
        expect(encode(back)).toBe(text)
      }),
      fuzzParams(runs)
    )
  })

describe("schema round-trips", () => {
  roundTrip("SessionId", SessionId, 50)
  roundTrip("AgentId / MessageId / WorkspaceId / TurnId", Schema.Tuple(AgentId, MessageId, WorkspaceId, TurnId), 50)
  roundTrip("Session (provider_state base64)", Session)
  roundTrip("AgentNode", AgentNode)
  roundTrip("MessageEnvelope", MessageEnvelope)
  roundTrip("SymlinkSpec", SymlinkSpec)
  roundTrip("ResourceLimits", ResourceLimits)
  roundTrip("WorkspaceSpec", WorkspaceSpec)
  roundTrip("LogEvent (every event of the catalog)", LogEvent, 400)
  roundTrip("LogEntry", LogEntry, 400)

  it("LogLine decodes exactly what it encodes, one line, no newline inside", () => {
    const encode = Schema.encodeSync(LogLine)
    const decode = Schema.decodeSync(LogLine)
    fc.assert(
      fc.property(Arbitrary.make(LogEntry), (entry) => {
        const line = encode(entry)
        expect(line.includes("\n")).toBe(false)
        expect(Object.keys(JSON.parse(line)).sort()).toEqual(["data", "event", "session_id", "ts"])
        expect(plain(decode(line))).toEqual(plain(entry))
      }),
      fuzzParams(300)
    )
  })

  it("the catalog's arbitrary reaches every event name", () => {
    const names = new Set(fc.sample(Arbitrary.make(LogEvent), { numRuns: 2000, seed: 1 }).map((e) => e.event))
    expect(names.size).toBe(LogEvent.members.length)
  })

  it("Session provider_state is base64 text in JSON", () => {
    const s = Schema.decodeSync(Session)({
      id: "00000000-0000-4000-8000-000000000001",
      state: "suspended",
      provider_name: "x",
      model: null,
      created_at: "t",
      suspended_at: "t",
      provider_state: "AAEC+v8="
    })
    expect([...s.provider_state]).toEqual([0, 1, 2, 250, 255])
    expect(JSON.parse(Schema.encodeSync(Schema.parseJson(Session))(s)).provider_state).toBe("AAEC+v8=")
  })
})
