// The logs encode each line through one Schema per event (`encodeEntryLine`, storage/internal/
// eventLine.ts). These properties pin its bytes, for every event of the catalog: the same line as
// the `LogLine` schema, and the same line as the string-building encoder the file log used before
// (kept below, frozen, as the reference for logs already on disk); the same verdict on entries
// the schema rejects; and each line decodes back to its entry.
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Either, Schema } from "effect"
import fc from "fast-check"
import { type LogEntry, LogEvent, LogLine, makeEvent } from "../../src/domain/events.js"
import { MessageId, SessionId } from "../../src/domain/ids.js"
import { MessageEnvelope } from "../../src/domain/message.js"
import { encodeEntryLine } from "../../src/storage/EventLog.js"
import { fuzzParams } from "../support/fuzz.js"

const encodeLine = Schema.encodeEither(LogLine)
const decodeLine = Schema.decodeUnknownEither(LogLine)
const S = SessionId.make("00000000-0000-4000-8000-00000000000a")
const envelope = {
  id: MessageId.make("00000000-0000-4000-8000-00000000000b"),
  timestamp: "2026-11-29T10:00:00.000Z",
  sender: "USER" as const,
  recipient: null,
  reply_to: null,
  kind: "notification" as const,
  payload: "p"
}

/** The encoder before lines went through one Schema: `data` through its schema, the rest by concatenation. */
const dataEncoders = new Map(
  LogEvent.members.map((m) => [m.fields.event.literals[0], Schema.encodeUnknownEither(m.fields.data as Schema.Schema<unknown>)])
)
const oldEncodeEntryLine = (event: LogEvent, ts: string, session: SessionId): Either.Either<string, string> => {
  const encode = dataEncoders.get(event.event)
  if (encode === undefined) return Either.left(`unknown event ${JSON.stringify(event.event)}`)
  const data = encode(event.data)
  if (Either.isLeft(data)) return Either.left(data.left.message)
  const id = Schema.encodeEither(SessionId)(session)
  if (Either.isLeft(id)) return Either.left(id.left.message)
  return Either.right(
    `{"event":${JSON.stringify(event.event)},"data":${JSON.stringify(data.right)},"ts":${JSON.stringify(ts)},"session_id":${
      JSON.stringify(id.right)
    }}\n`
  )
}

/** What the logs write, what the `LogLine` schema writes and what the old encoder wrote (with the newline), for one entry. */
const all = (event: LogEvent, ts: string, session: SessionId) => ({
  line: encodeEntryLine(event, ts, session),
  schema: Either.map(encodeLine({ ...event, ts, session_id: session } as LogEntry), (l) => `${l}\n`),
  old: oldEncodeEntryLine(event, ts, session)
})

describe("EventLog line encoding", () => {
  for (const member of LogEvent.members) {
    const name = member.fields.event.literals[0]
    it(`${name}: the same bytes as the LogLine schema and as the old encoder`, () => {
      fc.assert(
        fc.property(Arbitrary.make(member as Schema.Schema<LogEvent>), Arbitrary.make(SessionId), fc.string(), (event, session, ts) => {
          const { line, old, schema } = all(event, ts, session)
          expect(Either.isRight(schema)).toBe(true)
          expect(line).toEqual(schema)
          expect(line).toEqual(old)
          // one line, and it decodes back to the entry's fields
          const text = Either.getOrThrow(line)
          expect(text.endsWith("\n") && !text.slice(0, -1).includes("\n")).toBe(true)
          const decoded = decodeLine(text.slice(0, -1))
          expect(Either.isRight(decoded)).toBe(true)
          expect(Either.map(decoded, (e) => [e.event, e.ts, e.session_id])).toEqual(Either.right([name, ts, session]))
        }),
        fuzzParams(40)
      )
    })
  }

  it("drops excess keys and ignores the caller's key order, like the schema", () => {
    const data = { prompt: "p", extra: 1, turn_id: "00000000-0000-4000-8000-000000000001" }
    const event = { event: "turn.start", data, more: true } as unknown as LogEvent
    const { line, old, schema } = all(event, "t", S)
    expect(line).toEqual(schema)
    expect(line).toEqual(old)
    expect(Either.getOrThrow(line)).toBe(
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
      ["bad session id", makeEvent("suspend.result", { state_size: 1 }), "x" as SessionId],
      // An envelope built without validation: the line's encode is where it is checked.
      ["envelope with a bad id", makeEvent("message.enqueued", new MessageEnvelope({ ...envelope, id: "nope" as MessageId }, true)), S]
    ]
    for (const [what, event, session] of bad) {
      const { line, old, schema } = all(event, "t", session)
      expect(Either.isLeft(schema), what).toBe(true)
      expect(Either.isLeft(old), what).toBe(true)
      expect(Either.isLeft(line), what).toBe(true)
    }
  })
})
