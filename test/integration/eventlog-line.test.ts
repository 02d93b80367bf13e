// The append hot path builds each line itself (`encodeEntryLine`: the event's `data` schema, then
// the fixed key order) instead of running the whole `LogLine` schema. These properties pin the two
// together: byte for byte the same line for every valid entry of the catalog (arbitraries derived
// from the schemas), and the same verdict on entries the schema rejects.
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Either, Schema } from "effect"
import fc from "fast-check"
import { LogEntry, LogEvent, LogLine, makeEvent } from "../../src/domain/events.js"
import { SessionId } from "../../src/domain/ids.js"
import { encodeEntryLine } from "../../src/storage/EventLog.js"
import { fuzzParams } from "../support/fuzz.js"

const encodeLine = Schema.encodeEither(LogLine)
const decodeLine = Schema.decodeUnknownEither(LogLine)
const S = SessionId.make("00000000-0000-4000-8000-00000000000a")

/** What `append` writes vs what the `LogLine` schema writes (with the newline), for one entry. */
const both = (event: LogEvent, ts: string, session: SessionId) => ({
  fast: encodeEntryLine(event, ts, session),
  schema: Either.map(encodeLine({ ...event, ts, session_id: session } as LogEntry), (l) => `${l}\n`)
})

describe("EventLog line encoding", () => {
  it("equals the LogLine schema's line for every event of the catalog", () => {
    fc.assert(
      fc.property(Arbitrary.make(LogEvent), Arbitrary.make(SessionId), fc.string(), (event, session, ts) => {
        const { fast, schema } = both(event, ts, session)
        expect(Either.isRight(schema)).toBe(true)
        expect(fast).toEqual(schema)
        // and it decodes back to the entry's fields
        const text = Either.getOrThrow(fast)
        expect(text.endsWith("\n") && !text.slice(0, -1).includes("\n")).toBe(true)
        expect(Either.isRight(decodeLine(text.slice(0, -1)))).toBe(true)
      }),
      fuzzParams(400)
    )
  })

  it("drops excess keys and ignores the caller's key order, like the schema", () => {
    const data = { prompt: "p", extra: 1, turn_id: "00000000-0000-4000-8000-000000000001" }
    const event = { event: "turn.start", data, more: true } as unknown as LogEvent
    const { fast, schema } = both(event, "t", S)
    expect(fast).toEqual(schema)
    expect(Either.getOrThrow(fast)).toBe(
      `{"event":"turn.start","data":{"turn_id":"00000000-0000-4000-8000-000000000001","prompt":"p"},"ts":"t","session_id":"${S}"}\n`
    )
  })

  it("rejects what the schema rejects", () => {
    const bad: ReadonlyArray<readonly [string, LogEvent, SessionId]> = [
      ["NaN number", makeEvent("usage", { turn_id: null, input_tokens: 1, output_tokens: 2, cost_usd: Number.NaN }), S],
      ["undefined in a JSON value", makeEvent("tool_call.result", { call_id: "c", tool: "t", result: [undefined], is_error: false }), S],
      ["function in a JSON value", makeEvent("tool_call.invoked", { call_id: "c", tool: "t", arguments: { f: () => 1 } }), S],
      ["not a uuid", { event: "agent.terminated", data: { agent_id: "nope" } } as unknown as LogEvent, S],
      ["missing field", { event: "turn.start", data: { prompt: "p" } } as unknown as LogEvent, S],
      ["unknown event", { event: "no.such", data: {} } as unknown as LogEvent, S],
      ["bad session id", makeEvent("suspend.result", { state_size: 1 }), "x" as SessionId]
    ]
    for (const [what, event, session] of bad) {
      const { fast, schema } = both(event, "t", session)
      expect(Either.isLeft(schema), what).toBe(true)
      expect(Either.isLeft(fast), what).toBe(true)
    }
  })
})
