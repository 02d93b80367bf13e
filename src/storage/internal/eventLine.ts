// One line of `events.jsonl`, encoded through Schema: per event name, the Schema of the whole
// line — `Schema.parseJson` of a Struct of the event's fields (`event`, `data`) then `ts` and
// `session_id`, the keys in that order, excess keys dropped — compiled once when the module loads.
// It is `LogLine` (domain/events.ts) with the union's dispatch done by a table lookup of the
// event's name, so the bytes are LogLine's (test/integration/eventlog-line.test.ts checks it for
// every event of the catalog). Used by the file log, the Postgres log and recovery's checkpoints.
import { Either, type ParseResult, Schema } from "effect"
import { type LogEvent, LogEvent as LogEventSchema } from "../../domain/events.js"
import { SessionId } from "../../domain/ids.js"

type Encode = (line: unknown) => Either.Either<string, ParseResult.ParseError>

/** Per event name, the encoder of its whole line (without the newline). */
const lineEncoders: ReadonlyMap<string, Encode> = new Map(
  LogEventSchema.members.map((member): readonly [string, Encode] => {
    const fields: Schema.Struct.Fields = member.fields
    const line = Schema.parseJson(Schema.Struct({ ...fields, ts: Schema.String, session_id: SessionId }))
    return [member.fields.event.literals[0], Schema.encodeUnknownEither(line)]
  })
)

/** The whole line (with its newline) of an entry, as the logs write it; Left(message) when it does not encode. */
export const encodeEntryLine = (event: LogEvent, ts: string, session: SessionId): Either.Either<string, string> => {
  const encode = lineEncoders.get(event.event)
  if (encode === undefined) return Either.left(`unknown event ${JSON.stringify(event.event)}`)
  const line = encode({ event: event.event, data: event.data, ts, session_id: session })
  return Either.isLeft(line) ? Either.left(line.left.message) : Either.right(`${line.right}\n`)
}
