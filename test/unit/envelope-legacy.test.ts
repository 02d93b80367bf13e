// Log lines written before the envelope had typed fields (they carried `sender_name`, `timeout`,
// `timed_out`, `late`, `multicast_id` as strings in `metadata`) still decode, with the typed
// fields filled in; re-encoding writes the typed form, which decodes to the same envelope.
// The fixture lines are copied from logs the previous code wrote (orchestration-timeouts and
// orchestration-messaging scenarios).
import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import { LogLine } from "../../src/domain/events.js"
import { MessageEnvelope } from "../../src/domain/message.js"

const fixture = fileURLToPath(new URL("../fixtures/logs/envelopes-metadata.jsonl", import.meta.url))
const lines = fs.readFileSync(fixture, "utf8").split("\n").filter((l) => l.length > 0)

const envelopeOf = (line: string): MessageEnvelope => {
  const entry = Schema.decodeUnknownSync(LogLine)(line)
  if (entry.event !== "message.enqueued") throw new Error(`not an envelope: ${entry.event}`)
  return entry.data
}

describe("message envelopes in logs written with `metadata`", () => {
  const envs = lines.map(envelopeOf)

  it("decode with their typed fields", () => {
    const [request, notice, late, multicast, fromUser, reply] = envs
    expect(request).toBeInstanceOf(MessageEnvelope)
    expect(request).toMatchObject({ kind: "request", payload: "q?", sender_name: "boss", timeout_s: 10 })
    expect(request!.timed_out).toBeUndefined()
    expect(notice).toMatchObject({
      sender: "SYSTEM",
      kind: "response",
      sender_name: "SYSTEM",
      timed_out: true,
      timeout_s: 10,
      reply_to: request!.id
    })
    expect(late).toMatchObject({ kind: "response", sender_name: "w", late: true, reply_to: request!.id, payload: "slow answer" })
    expect(late!.timeout_s).toBeUndefined()
    expect(multicast).toMatchObject({
      kind: "multicast",
      sender_name: "a",
      multicast_id: "5353c5a4-8461-45e5-9be7-f51fd7757b1d"
    })
    expect(fromUser).toMatchObject({ sender: "USER", sender_name: "USER", kind: "request", payload: "go" })
    expect(reply).toMatchObject({ kind: "response", sender_name: "boss", payload: "the answer is 42" })
    for (const e of [fromUser!, reply!, multicast!]) {
      expect([e.late, e.timed_out, e.timeout_s, e.recovered]).toEqual([undefined, undefined, undefined, undefined])
    }
  })

  it("re-encode in the typed form (no metadata) and decode back to the same envelopes", () => {
    for (const line of lines) {
      const entry = Schema.decodeUnknownSync(LogLine)(line)
      const again = Schema.encodeSync(LogLine)(entry)
      const data = (JSON.parse(again) as { data: Record<string, unknown> }).data
      expect(data["metadata"]).toBeUndefined()
      const old = (JSON.parse(line) as { data: { metadata: Record<string, string> } }).data.metadata
      expect(data["sender_name"]).toBe(old["sender_name"])
      expect(Schema.decodeUnknownSync(LogLine)(again)).toEqual(entry)
    }
  })

  it("an unparsable legacy timeout is dropped, not a decoding failure", () => {
    const line = lines[0]!.replace('"timeout":"10"', '"timeout":"soon"')
    expect(envelopeOf(line).timeout_s).toBeUndefined()
  })
})
