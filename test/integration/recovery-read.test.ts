// The recovery read pass (src/agent/RecoveryRead.ts) reads exactly what the port-based path
// reads — SessionStore.scan for the records, a Durable read of each log (LogScan.scanLog), a
// Durable stat of each WAL file — on real files covering its branches: orphan directory, absent
// log, torn tail, pending file, a log larger than the whole-file buffer (streamed), a record
// larger than that buffer, non-ASCII bytes, stray entries. And the hand-checked record decode
// (SessionStore.parseRecord) accepts and builds exactly what the Schema decode does.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Option, Schema } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { ScanFold, scanLog, WHOLE_FILE } from "../../src/agent/LogScan.js"
import { readSessions } from "../../src/agent/RecoveryRead.js"
import { makePaths } from "../../src/config/Paths.js"
import { AgentCreatedData } from "../../src/domain/events.js"
import type { SessionId } from "../../src/domain/ids.js"
import { Session } from "../../src/domain/session.js"
import { live as durableLive } from "../../src/storage/Durable.js"
import { SessionStore } from "../../src/storage/SessionStore.js"
import { parseRecord } from "../../src/storage/SessionStore.js"
import { sid, storeLayer } from "../support/logs.js"
import { tmpDir } from "../support/tmp.js"

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
  it.scoped("reads what SessionStore.scan, Durable.size and scanLog read, for every kind of session directory", () =>
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
          expect(r.scan).toBeNull()
          continue
        }
        const reference = yield* scanLog(durable, r.id as SessionId, paths.eventsFile(r.id))
        const pending = Option.isSome(yield* durable.size(paths.pendingFile(r.id)))
        expect(r.scan).toEqual(reference.scan)
        expect(r.needsRepair).toBe(pending || reference.tornTail)
      }
      const byId = new Map(reads.map((r) => [r.id, r]))
      expect(byId.get(plain!)!.scan!.pending).toHaveLength(3)
      expect(byId.get(plain!)!.needsRepair).toBe(false)
      expect(byId.get(torn!)!.needsRepair).toBe(true)
      expect(byId.get(noLog!)!.scan!.lines).toBe(0)
      expect(byId.get(large!)!.scan!.pending.length).toBe(Math.ceil(WHOLE_FILE / 300) + 10)
      expect(byId.get(large!)!.needsRepair).toBe(true)
      expect(byId.get(bigRecord!)!.record!.provider_state.byteLength).toBe(WHOLE_FILE)
      expect(byId.get(bigRecord!)!.record!.provider_state.every((b) => b === 7)).toBe(true)
      expect(byId.get(unicode!)!.record!.model).toBe("módèl-ünï")
      expect((byId.get(unicode!)!.scan!.pending[0]!.raw as { payload: string }).payload).toBe("héllo wörld — ✓")
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

describe("agent.created decode in the log scan", () => {
  const decodeFull = Schema.decodeUnknownEither(AgentCreatedData)
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

  it("keeps what the Schema decode keeps (the same object) and fails the scan where it fails", () => {
    for (const data of variants) {
      const fold = new ScanFold(sid(1), "events.jsonl")
      fold.line(JSON.stringify({ ts: TS, event: "agent.created", data, session_id: sid(1) }))
      const scan = fold.finish()
      const want = decodeFull(data)
      if (Either.isRight(want)) {
        expect(scan.corrupt, JSON.stringify(data)).toBeNull()
        expect(scan.created).toStrictEqual(want.right)
        expect(Object.keys(scan.created!)).toEqual(Object.keys(want.right))
      } else {
        expect(scan.created, JSON.stringify(data)).toBeNull()
        expect(scan.corrupt).toBe(`events.jsonl:1: agent.created: ${want.left.message}`)
      }
    }
  })
})
