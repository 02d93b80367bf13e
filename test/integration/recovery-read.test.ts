// The recovery read pass (src/recovery/Read.ts) reads exactly what the port-based path
// reads — SessionStore.scan for the records, a Durable read of each log (Read.readLog), a
// Durable stat of each WAL file — on real files covering its branches: orphan directory, absent
// log, torn tail, pending file, a log larger than the whole-file buffer (streamed), a record
// larger than that buffer, non-ASCII bytes, stray entries. The record decode
// (SessionStore.parseRecord) accepts and builds exactly what the Schema decode does. The log
// fold (src/recovery/Fold.ts) decodes every line with its event's Schema: it accepts exactly
// the lines EventLog.read accepts and keeps the envelopes EventLog.read decodes.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Option, Schema } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { SessionFold } from "../../src/recovery/Fold.js"
import { readLog, readSessions, WHOLE_FILE } from "../../src/recovery/Read.js"
import { makePaths } from "../../src/config/Paths.js"
import { AgentCreatedData, LogEntry } from "../../src/domain/events.js"
import type { SessionId } from "../../src/domain/ids.js"
import { Session } from "../../src/domain/session.js"
import { live as durableLive } from "../../src/storage/Durable.js"
import { SessionStore } from "../../src/storage/SessionStore.js"
import { parseRecord } from "../../src/storage/SessionStore.js"
import { fileLayers, readAll, sid, storeLayer } from "../support/logs.js"
import { tmpDir } from "../support/tmpDir.js"

const TS = "2026-01-01T00:00:00.000Z"
const durable = durableLive

const record = (id: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    id,
    state: "suspended",
    provider_name: "scripted",
    model: null,
    created_at: TS,
    suspended_at: null,
    provider_state: "",
    ...extra
  }) + "\n"

const line = (id: string, event: string, data: unknown) => JSON.stringify({ ts: TS, event, data, session_id: id })

const logOf = (id: string, name: string, messages: number, payload = "hello") => {
  const lines = [
    line(id, "agent.created", {
      agent_id: id.replace(/^0/, "a"),
      name,
      parent_session_id: null,
      instructions: "x",
      role: "worker",
      provider: "scripted",
      workspace: null
    })
  ]
  for (let i = 0; i < messages; i++) {
    lines.push(line(id, "message.enqueued", {
      id: `10000000-0000-4000-8000-${i.toString(16).padStart(12, "0")}`,
      timestamp: TS,
      sender: "USER",
      recipient: id.replace(/^0/, "a"),
      reply_to: null,
      kind: "notification",
      payload,
      metadata: {}
    }))
  }
  return lines.join("\n") + "\n"
}

describe("recovery read pass", () => {
  it.scoped("reads what SessionStore.scan, Durable.size and readLog read, for every kind of session directory", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const paths = makePaths(home)
      const put = (id: string, files: Record<string, string | Buffer>) => {
        fs.mkdirSync(paths.sessionDir(id), { recursive: true })
        for (const [name, body] of Object.entries(files)) fs.writeFileSync(join(paths.sessionDir(id), name), body)
      }
      const [plain, torn, noLog, orphan, large, bigRecord, unicode, pendingOnly] = [1, 2, 3, 4, 5, 6, 7, 8].map(sid)
      put(plain!, { "session.json": record(plain!), "events.jsonl": logOf(plain!, "plain", 3) })
      put(torn!, {
        "session.json": record(torn!, { provider_state: Buffer.from([1, 2, 3]).toString("base64"), state: "active" }),
        "events.jsonl": logOf(torn!, "torn", 2) + `{"ts":"${TS}","event":"message.deliv`
      })
      put(noLog!, { "session.json": record(noLog!) })
      put(orphan!, { "events.jsonl": logOf(orphan!, "orphan", 1) })
      // Bigger than the whole-file buffer: streamed through Durable; with a pending WAL file.
      const bigLog = logOf(large!, "large", Math.ceil(WHOLE_FILE / 300) + 10, "p".repeat(200))
      expect(bigLog.length).toBeGreaterThan(WHOLE_FILE)
      put(large!, { "session.json": record(large!), "events.jsonl": bigLog, "events.pending": "{}\n" })
      // A record bigger than the buffer (a large provider blob).
      put(bigRecord!, {
        "session.json": record(bigRecord!, { provider_state: Buffer.alloc(WHOLE_FILE, 7).toString("base64") }),
        "events.jsonl": logOf(bigRecord!, "bigrec", 1)
      })
      put(unicode!, {
        "session.json": record(unicode!, { model: "módèl-ünï", extra_key: [1, 2] }),
        "events.jsonl": logOf(unicode!, "uni", 2, "héllo wörld — ✓")
      })
      put(pendingOnly!, {
        "session.json": record(pendingOnly!),
        "events.jsonl": logOf(pendingOnly!, "pend", 1),
        "events.pending": "torn"
      })
      // Stray entries: not session directories.
      fs.mkdirSync(join(paths.agentsDir, "not-a-session"))
      fs.writeFileSync(join(paths.agentsDir, sid(99)), "a file, not a directory")

      const reads = yield* readSessions(durable, paths)
      const records = yield* Effect.flatMap(SessionStore, (s) => s.scan).pipe(Effect.provide(storeLayer(home)))

      expect(reads.map((r) => r.id)).toEqual([plain, torn, noLog, orphan, large, bigRecord, unicode, pendingOnly])
      // (Blobs compared as base64: a deep compare of a 4 MB Uint8Array is slow.)
      const flat = (s: Session) => ({ ...s, provider_state: Buffer.from(s.provider_state).toString("base64") })
      expect(reads.flatMap((r) => r.record === null ? [] : [flat(r.record)])).toEqual(records.map(flat))
      expect(reads.every((r) => r.record === null || r.record instanceof Session)).toBe(true)
      for (const r of reads) {
        if (r.record === null) {
          expect(r.id).toBe(orphan)
          expect(r.log).toBeNull()
          continue
        }
        const reference = yield* readLog(durable, r.id as SessionId, paths.eventsFile(r.id))
        const pending = Option.getOrElse(yield* durable.size(paths.pendingFile(r.id)), () => 0) > 0
        expect(r.log).toEqual(reference.log)
        expect(r.needsRepair).toBe(pending || reference.tornTail)
      }
      const byId = new Map(reads.map((r) => [r.id, r]))
      expect(byId.get(plain!)!.log!.pending).toHaveLength(3)
      expect(byId.get(plain!)!.needsRepair).toBe(false)
      expect(byId.get(torn!)!.needsRepair).toBe(true)
      expect(byId.get(noLog!)!.log!.lines).toBe(0)
      expect(byId.get(large!)!.log!.pending.length).toBe(Math.ceil(WHOLE_FILE / 300) + 10)
      expect(byId.get(large!)!.needsRepair).toBe(true)
      expect(byId.get(bigRecord!)!.record!.provider_state.byteLength).toBe(WHOLE_FILE)
      expect(byId.get(bigRecord!)!.record!.provider_state.every((b) => b === 7)).toBe(true)
      expect(byId.get(unicode!)!.record!.model).toBe("módèl-ünï")
      expect(byId.get(unicode!)!.log!.pending[0]!.envelope.payload).toBe("héllo wörld — ✓")
      // Every complete line folded; the torn one is left for the EventLog's repair.
      expect(byId.get(torn!)!.log!.lines).toBe(3)
      expect(byId.get(torn!)!.log!.corrupt).toBeNull()
      expect(byId.get(pendingOnly!)!.needsRepair).toBe(true)
    }))

  it.scoped("a record that does not decode fails the pass with SessionStore.scan's error (the first by id)", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const paths = makePaths(home)
      for (const [n, body] of [[3, "{not json"], [1, record(sid(1))], [2, record(sid(2), { state: "asleep" })]] as const) {
        fs.mkdirSync(paths.sessionDir(sid(n)), { recursive: true })
        fs.writeFileSync(paths.sessionFile(sid(n)), body)
      }
      const ours = yield* Effect.flip(readSessions(durable, paths))
      const theirs = yield* Effect.flip(Effect.flatMap(SessionStore, (s) => s.scan).pipe(Effect.provide(storeLayer(home))))
      expect(ours).toEqual(theirs)
      expect(ours._tag).toBe("SessionStoreError")
      expect(ours.message).toContain(sid(2))
    }))
})

describe("session record decode", () => {
  const decodeFull = Schema.decodeUnknownEither(Schema.parseJson(Session))
  /** The Schema-only decode parseRecord did before the hand-checked path. */
  const reference = (id: string, text: string): Either.Either<Session, string> => {
    const d = decodeFull(text)
    if (Either.isLeft(d)) return Either.left("invalid")
    return d.right.id === id ? Either.right(d.right) : Either.left("other id")
  }
  const id = sid(42)
  const base = JSON.parse(record(id)) as Record<string, unknown>
  const variants: Array<unknown> = [
    base,
    ...["created", "active", "suspended", "terminated", "asleep", 3, null].map((state) => ({ ...base, state })),
    ...[null, "m", 5, undefined].map((model) => ({ ...base, model })),
    ...[null, TS, 1].map((suspended_at) => ({ ...base, suspended_at })),
    ...["", "AAEC", "AAE=", "!!", null, 7].map((provider_state) => ({ ...base, provider_state })),
    ...[id, id.toUpperCase(), sid(43), "not-a-uuid", 5].map((rid) => ({ ...base, id: rid })),
    ...[null, 3].map((provider_name) => ({ ...base, provider_name })),
    ...[null, 3].map((created_at) => ({ ...base, created_at })),
    { ...base, extra: { nested: true } },
    Object.fromEntries(Object.entries(base).filter(([k]) => k !== "model")),
    Object.fromEntries(Object.entries(base).filter(([k]) => k !== "provider_state")),
    [base],
    null,
    "a string"
  ]

  it("the hand-checked common case builds the Session the Schema decode builds, and rejects what it rejects", () => {
    for (const v of variants) {
      const text = JSON.stringify(v)
      const got = parseRecord(id, "session.json", Buffer.from(text))
      const want = reference(id, text)
      expect(Either.isRight(got), text).toBe(Either.isRight(want))
      if (Either.isRight(got) && Either.isRight(want)) {
        expect(got.right).toBeInstanceOf(Session)
        expect(got.right).toEqual(want.right)
        expect([...got.right.provider_state]).toEqual([...want.right.provider_state])
      }
    }
    // Not UTF-8, a BOM, non-ASCII text: the same outcome as before.
    expect(Either.isLeft(parseRecord(id, "f", Buffer.from([0x7b, 0xff, 0x7d])))).toBe(true)
    const bom = parseRecord(id, "f", Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(record(id))]))
    expect(Either.isRight(bom)).toBe(true)
    const uni = parseRecord(id, "f", Buffer.from(record(id, { provider_name: "prövider" })))
    expect(Either.map(uni, (s) => s.provider_name)).toEqual(Either.right("prövider"))
  })
})

describe("the log fold decodes every line with its event's Schema", () => {
  const decodeCreated = Schema.decodeUnknownEither(AgentCreatedData)
  const base = {
    agent_id: sid(7),
    name: "worker-1",
    parent_session_id: sid(8),
    instructions: "be brief",
    role: "worker",
    provider: "scripted",
    workspace: null
  }
  const variants: Array<unknown> = [
    base,
    { ...base, parent_session_id: null, workspace: sid(9) },
    { ...base, agent_id: sid(7).toUpperCase() },
    { ...base, extra: 1, name: "" },
    ...["nope", 5, null].map((agent_id) => ({ ...base, agent_id })),
    ...["nope", 5].map((parent_session_id) => ({ ...base, parent_session_id })),
    ...["nope", 5].map((workspace) => ({ ...base, workspace })),
    ...[null, 5].map((name) => ({ ...base, name })),
    ...[null, 5].map((role) => ({ ...base, role })),
    { ...base, instructions: null },
    { ...base, provider: 3 },
    Object.fromEntries(Object.entries(base).filter(([k]) => k !== "workspace"))
  ]
  const foldOf = (lines: ReadonlyArray<string>) => {
    const fold = new SessionFold(sid(1), "events.jsonl")
    for (const l of lines) fold.entry(JSON.parse(l))
    return fold.finish()
  }

  it("keeps the agent.created data the Schema decode builds, and stops where it fails", () => {
    for (const data of variants) {
      const log = foldOf([JSON.stringify({ ts: TS, event: "agent.created", data, session_id: sid(1) })])
      const want = decodeCreated(data)
      if (Either.isRight(want)) {
        expect(log.corrupt, JSON.stringify(data)).toBeNull()
        expect(log.created).toStrictEqual(want.right)
      } else {
        expect(log.created, JSON.stringify(data)).toBeNull()
        expect(log.corrupt).toMatch(/^events\.jsonl:1: agent\.created: /)
      }
    }
  })

  const envelope = (over: Record<string, unknown> = {}) => ({
    id: sid(20),
    timestamp: TS,
    sender: "USER",
    recipient: sid(7),
    reply_to: null,
    kind: "request",
    payload: "p",
    metadata: { sender_name: "USER" },
    ...over
  })
  /** Lines EventLog.read accepts (the first) and lines it refuses (the rest). */
  const good = line(sid(1), "message.enqueued", envelope())
  const bad: ReadonlyArray<[string, string]> = [
    ["unknown event", line(sid(1), "message.teleported", { id: sid(20) })],
    ["an envelope with a bad sender", line(sid(1), "message.enqueued", envelope({ sender: "nobody" }))],
    ["an envelope without a kind", line(sid(1), "message.enqueued", envelope({ kind: undefined }))],
    ["usage with a string count", line(sid(1), "usage", { turn_id: null, input_tokens: "9", output_tokens: 1, cost_usd: 0 })],
    ["a delivery without a message id", line(sid(1), "message.delivered", {})],
    ["no ts", JSON.stringify({ event: "agent.terminated", data: { agent_id: sid(7) }, session_id: sid(1) })],
    ["a tool call without a tool", line(sid(1), "tool_call.invoked", { call_id: "c", arguments: {} })]
  ]

  it.effect("accepts the lines EventLog.read accepts and refuses the ones it refuses", () =>
    Effect.gen(function*() {
      const home = join(yield* tmpDir(), "home")
      const paths = makePaths(home)
      const write = (id: SessionId, lines: ReadonlyArray<string>) => {
        fs.mkdirSync(paths.sessionDir(id), { recursive: true })
        fs.writeFileSync(paths.eventsFile(id), lines.join("\n") + "\n")
      }
      write(sid(1), [good])
      const ok = yield* readLog(durable, sid(1), paths.eventsFile(sid(1)))
      const read = yield* readAll(sid(1)).pipe(Effect.provide(fileLayers(home)))
      expect(ok.log.corrupt).toBeNull()
      // The envelope the fold keeps is the one EventLog.read decodes (a MessageEnvelope).
      expect(ok.log.pending.map((p) => p.envelope)).toEqual(read.flatMap((e) => e.event === "message.enqueued" ? [e.data] : []))
      for (const [n, [why, text]] of bad.entries()) {
        const id = sid(100 + n)
        write(id, [good, text, good])
        const r = yield* readLog(durable, id, paths.eventsFile(id))
        expect(r.log.corrupt, why).toMatch(/^.*events\.jsonl:2: /)
        const theirs = yield* Effect.either(readAll(id).pipe(Effect.provide(fileLayers(home))))
        expect(Either.isLeft(theirs), why).toBe(true)
        // Schema.decodeUnknownEither(LogEntry) agrees line by line.
        expect(Either.isLeft(Schema.decodeUnknownEither(LogEntry)(JSON.parse(text))), why).toBe(true)
      }
    }).pipe(Effect.scoped))
})
