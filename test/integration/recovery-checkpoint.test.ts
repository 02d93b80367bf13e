// Fold checkpoints (src/recovery/Checkpoint.ts, docs/recovery.md "Start-up time and history"):
// a start-up reads a long log only from where the previous recovery's fold stood. What is
// asserted: the fold continued from a checkpoint equals the fold of the whole log (also after a
// Schema round trip of the checkpoint file); a checkpoint the log no longer matches is not
// used; and over many restarts of a growing history, the lines recovery reads per start stay
// bounded by what was appended since the previous start (plus one checkpoint interval), while
// the recovered state is the one a recovery without any checkpoint builds.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { makePaths } from "../../src/config/Paths.js"
import type { SessionId } from "../../src/domain/ids.js"
import { decodeRings } from "../../src/agent/Activity.js"
import type { SessionLog } from "../../src/recovery/Fold.js"
import { CHECKPOINT_LINES, type CheckpointEntry, decodeCheckpoints, encodeCheckpoints, FOLD_VERSION } from "../../src/recovery/Checkpoint.js"
import { readSessions, WHOLE_FILE } from "../../src/recovery/Read.js"
import { Durable, live as durableLive } from "../../src/storage/Durable.js"
import { sid } from "../support/logs.js"
import { withTmp } from "../support/tmp.js"
import { askScripts, recoverLife, startLife, trackedScripted } from "./recovery.support.js"

/**
 * The log with its recent-activity rings decoded, as a fold of the whole log has them (a fold
 * that used a checkpoint unchanged keeps them encoded, for the Activity service to decode).
 */
const withRings = (log: SessionLog | null): SessionLog | null => {
  if (log === null || log.recentEncoded === null) return log
  const rings = decodeRings(log.recentEncoded.json)
  if (rings._tag === "Left") throw new Error(`rings do not decode: ${log.recentEncoded.json}`)
  return { ...log, recentTurns: rings.right.turns ?? [], recentMessages: rings.right.messages ?? [], recentEncoded: null }
}

const registry = () => trackedScripted(askScripts, { messages: [] }, () => true)

/** boss spawns w1 and asks it (sync); w1 answers: logs with tool calls, requests and replies. */
const team = async (home: string) => {
  const rt = startLife(home, Durable.layer, registry())
  try {
    return await rt.runPromise(Effect.flatMap(Orchestrator, (o) =>
      Effect.gen(function*() {
        const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "scripted" })
        yield* o.send({ agent: boss.id, text: "spawn" })
        yield* o.awaitIdle
        yield* o.send({ agent: boss.id, text: "ask" })
        yield* o.awaitIdle
        return boss
      })))
  } finally {
    await rt.dispose()
  }
}

const TS = "2026-01-01T00:00:00.000Z"

/**
 * Append `turns` USER turns to a log as the daemon writes them (a request or a notification
 * enqueued, delivered, a turn with usage), then optionally leave the last request pending and a
 * turn interrupted. Returns the number of lines appended.
 */
const grow = (home: string, session: string, agent: string, turns: number, open = false, hop = false): number => {
  const lines: Array<string> = []
  const line = (event: string, data: unknown) => lines.push(JSON.stringify({ event, data, ts: TS, session_id: session }))
  for (let k = 0; k < turns; k++) {
    const id = randomUUID()
    const turn = randomUUID()
    line("message.enqueued", { id, timestamp: TS, sender: "USER", recipient: agent, reply_to: null, kind: k % 3 === 0 ? "request" : "notification", payload: `item ${k}` })
    line("message.delivered", { message_id: id })
    line("turn.start", { turn_id: turn, prompt: `Message from USER: item ${k}` })
    line("usage", { turn_id: turn, input_tokens: 10 + k, output_tokens: 3, cost_usd: 0.001 })
    line("turn.complete", { turn_id: turn, response: `done ${k}` })
  }
  if (hop) {
    // A find: search in transit (a hop not forwarded) and another one's found copy.
    const search = randomUUID()
    const find = { symbol: "deep", origin: search, origin_sender: agent, sync: false, hops: 2, state: "hop", path: [agent, agent] }
    line("message.enqueued", { id: randomUUID(), timestamp: TS, sender: agent, recipient: agent, reply_to: null, kind: "notification", payload: "hop", find })
    const other = randomUUID()
    line("message.enqueued", { id: other, timestamp: TS, sender: agent, recipient: agent, reply_to: null, kind: "notification", payload: "found", find: { ...find, origin: other, state: "found" } })
  }
  if (open) {
    const id = randomUUID()
    const pending = randomUUID()
    line("message.enqueued", { id, timestamp: TS, sender: "USER", recipient: agent, reply_to: null, kind: "request", payload: "interrupted" })
    line("message.delivered", { message_id: id })
    line("turn.start", { turn_id: randomUUID(), prompt: "Message from USER: interrupted" })
    line("message.enqueued", { id: pending, timestamp: TS, sender: "USER", recipient: agent, reply_to: null, kind: "request", payload: "waiting" })
  }
  fs.appendFileSync(makePaths(home).eventsFile(session), lines.map((l) => l + "\n").join(""))
  return lines.length
}

const readAll = (home: string, checkpoints?: ReadonlyMap<SessionId, CheckpointEntry>) =>
  Effect.runPromise(readSessions(durableLive, makePaths(home), checkpoints))

/** A kill -9 in the middle of an append: its WAL entry left pending (a notification to `agent`). */
const pendingEntry = (home: string, session: string, agent: string) =>
  fs.writeFileSync(makePaths(home).pendingFile(session as SessionId), JSON.stringify({
    event: "message.enqueued",
    data: { id: randomUUID(), timestamp: TS, sender: "USER", recipient: agent, reply_to: null, kind: "notification", payload: "in flight" },
    ts: TS,
    session_id: session
  }) + "\n")

describe("fold checkpoints", () => {
  it("a fold continued from a checkpoint equals the fold of the whole log; a stale checkpoint is not used", async () => {
    await withTmp(async (home) => {
      const boss = await team(home)
      grow(home, boss.session_id, boss.id, 150, true, true)
      const first = await readAll(home)
      const all = first.flatMap((r) => (r.checkpoint === null ? [] : [r.checkpoint]))
      // Every log gets one, w1's short one too; boss's is the one this test continues from.
      expect(all.map((c) => c.session_id)).toEqual(first.map((r) => r.id))
      expect(first).toHaveLength(2)
      const cps = all.filter((c) => c.session_id === boss.session_id)
      expect(cps[0]!.lines).toBe(first.find((r) => r.id === boss.session_id)!.log!.lines)
      // Through the file format (Schema encode + decode), as the next start reads it.
      const decoded = decodeCheckpoints(encodeCheckpoints(cps))
      expect(decoded.size).toBe(1)

      // More history: the interrupted turn ends, more turns, and a new interrupted one.
      grow(home, boss.session_id, boss.id, 20, true)
      const resumed = await readAll(home, decoded)
      const whole = await readAll(home)
      expect(resumed.map((r) => r.log)).toEqual(whole.map((r) => r.log))
      const r = resumed.find((x) => x.id === boss.session_id)!
      expect(r.skipped).toBe(cps[0]!.lines)
      expect(r.log!.lines).toBe(whole.find((x) => x.id === boss.session_id)!.log!.lines)
      // The first interrupted request was answered by the turns after it; both "waiting" and the
      // last interrupted one are pending (and the found copy of a find: search, a notification).
      expect(r.log!.pending.map((p) => p.envelope.payload)).toEqual(["found", "waiting", "interrupted", "waiting"])
      expect(r.log!.turns.interrupted?.prompt).toBe("Message from USER: interrupted")
      // The find: hop in transit and the found copy, folded before the checkpoint, are kept.
      expect(r.log!.findHops.map((e) => e.payload)).toEqual(["hop"])
      expect(r.log!.found).toHaveLength(1)

      // The log changed under the checkpoint (its last line rewritten): the whole log is read.
      const file = makePaths(home).eventsFile(boss.session_id)
      const text = fs.readFileSync(file, "utf8")
      const at = cps[0]!.offset - 4
      fs.writeFileSync(file, text.slice(0, at) + (text[at] === "0" ? "1" : "0") + text.slice(at + 1))
      const stale = await readAll(home, decoded)
      expect(stale.find((x) => x.id === boss.session_id)!.skipped).toBe(0)
      expect(stale.map((x) => x.log)).toEqual((await readAll(home)).map((x) => x.log))
      // Shorter than the checkpoint's offset (a lost tail): the whole log is read.
      fs.writeFileSync(file, text.slice(0, cps[0]!.offset - 10))
      const short = await readAll(home, decoded)
      expect(short.find((x) => x.id === boss.session_id)!.skipped).toBe(0)
      // A file that does not decode, or of another fold version, gives no checkpoints; an entry
      // that does not decode is left out alone.
      const encoded = Buffer.from(encodeCheckpoints(cps)).toString("utf8")
      expect(decodeCheckpoints(Buffer.from("not json")).size).toBe(0)
      expect(encoded.startsWith(`{"version":${FOLD_VERSION}}\n`)).toBe(true)
      expect(decodeCheckpoints(Buffer.from(encoded.replace(`{"version":${FOLD_VERSION}}`, `{"version":${FOLD_VERSION - 1}}`))).size).toBe(0)
      const other = { ...cps[0]!, session_id: sid(77) }
      const twoLines = Buffer.from(encodeCheckpoints([cps[0]!, other])).toString("utf8").split("\n")
      twoLines[1] = twoLines[1]!.replace("\"offset\":", "\"offset\":\"x\",\"was\":")
      expect([...decodeCheckpoints(Buffer.from(twoLines.join("\n"))).keys()]).toEqual([sid(77)])
    })
  }, 60_000)

  it("start-up reads the lines appended since the last start, not the whole history; the state is the same", async () => {
    await withTmp(async (home) => {
      const boss = await team(home)
      const paths = makePaths(home)
      const perCycle = 60 // turns → 300 lines a cycle
      const cycles = 8
      const read: Array<number> = []
      let total = 0
      for (let c = 0; c < cycles; c++) {
        let appended = grow(home, boss.session_id, boss.id, perCycle, c === cycles - 1)
        if (c % 2 === 1) {
          // A kill -9 in the middle of an append: its WAL entry is pending, the log is repaired
          // first (the entry appended) and still folded from its checkpoint.
          pendingEntry(home, boss.session_id, boss.id)
          appended++
        }
        const { life, report } = await recoverLife(home, registry())
        await life.dispose()
        read.push(report.logLines)
        expect(report.logsRepaired).toBe(c % 2)
        total = fs.readFileSync(paths.eventsFile(boss.session_id), "utf8").split("\n").length - 1
        if (c > 0) {
          // What was appended since — plus the lines the last start had not yet checkpointed, the
          // replies that start logged and w1's short log — never the whole history.
          expect(read[c]!, `cycle ${c}: ${read.join(" ")}`).toBeLessThanOrEqual(appended + CHECKPOINT_LINES + 100)
        }
      }
      expect(total).toBeGreaterThan(2000)
      expect(Math.max(...read.slice(1))).toBeLessThan(total / 2)
      expect(fs.existsSync(paths.foldCheckpoint)).toBe(true)

      // The state recovered through checkpoints is the state of a recovery that reads every line.
      const withCp = await recoverLife(home, registry())
      await withCp.life.dispose()
      fs.rmSync(paths.foldCheckpoint)
      const without = await recoverLife(home, registry())
      await without.life.dispose()
      expect(without.report.logLines).toBeGreaterThan(total)
      expect(withCp.report.logLines).toBeLessThanOrEqual(CHECKPOINT_LINES + 100)
      expect(withCp.state).toEqual(without.state)
      expect({ ...withCp.report, logLines: 0 }).toEqual({ ...without.report, logLines: 0 })
      expect(withCp.state.inboxes[boss.id]?.map((m) => m.split(":").at(-1))).toEqual(
        ["in flight", "in flight", "in flight", "interrupted", "waiting", "in flight"]
      )
    })
  }, 120_000)

  it("an unchanged log and record are not opened again; any change (same size included) is noticed", async () => {
    await withTmp(async (home) => {
      const boss = await team(home)
      const paths = makePaths(home)
      const u0 = (await readAll(home)).find((r) => r.id === boss.session_id)!.log!.usage.input_tokens
      // caps, a queued spawn and a read mark before the checkpoint: part of the state it keeps;
      // a turn metered per request (its turn-level usage not counted again).
      const metered = randomUUID()
      const extra = [
        { event: "turn.start", data: { turn_id: metered, prompt: "metered" } },
        { event: "usage", data: { turn_id: metered, input_tokens: 100, output_tokens: 1, cost_usd: 0.01, source: "request" } },
        { event: "usage", data: { turn_id: metered, input_tokens: 999, output_tokens: 9, cost_usd: 0.09 } },
        { event: "turn.complete", data: { turn_id: metered, response: "metered done" } },
        { event: "caps.set", data: { max_depth: 2, max_children: null, max_live: 5 } },
        { event: "spawn.queued", data: { queue_id: "q1", name: "later", instructions: "wait", role: "worker", workspace_subdir: null, provider: null, budget: null, reason: "max_live 5" } },
        { event: "user.read", data: { message_ids: [randomUUID()] } }
      ]
      fs.appendFileSync(paths.eventsFile(boss.session_id), extra.map((l) => JSON.stringify({ ...l, ts: TS, session_id: boss.session_id }) + "\n").join(""))
      grow(home, boss.session_id, boss.id, 3, true)
      const first = await readAll(home)
      const decoded = decodeCheckpoints(encodeCheckpoints(first.flatMap((r) => (r.checkpoint === null ? [] : [r.checkpoint]))))
      expect(decoded.size).toBe(2)

      // Nothing changed: neither log is read, the records are the checkpoint's copies, the folds
      // equal whole-log folds, and the entries kept are the ones read (nothing to rewrite).
      const again = await readAll(home, decoded)
      expect(again.map((r) => r.unchanged)).toEqual([true, true])
      expect(again.map((r) => r.skipped)).toEqual(again.map((r) => r.log!.lines))
      // The rings stay encoded (not decoded at start-up) and decode to the whole-log fold's.
      expect(again.map((r) => r.log!.recentEncoded !== null)).toEqual([true, true])
      expect(again.map((r) => withRings(r.log))).toEqual(first.map((r) => r.log))
      expect(again.map((r) => r.record)).toEqual(first.map((r) => r.record))
      // On disk, each entry's line is its head, then its rings behind a tab; the head holds no ring.
      const lines = Buffer.from(encodeCheckpoints(decoded.values())).toString("utf8").split("\n").slice(1, -1)
      expect(lines.map((l) => l.split("\t").length)).toEqual([2, 2])
      for (const l of lines) {
        const [head, rings] = l.split("\t")
        expect(JSON.parse(head!).state).not.toHaveProperty("turns")
        expect(JSON.parse(head!).state).not.toHaveProperty("messages")
        expect(JSON.parse(rings!).turns.length).toBeGreaterThan(0)
      }
      expect(again.map((r) => r.checkpoint)).toEqual([...decoded.values()])
      const bossLog = again.find((r) => r.id === boss.session_id)!.log!
      expect(bossLog.caps).toEqual({ max_depth: 2, max_children: null, max_live: 5 })
      expect(bossLog.queuedSpawns.map((q) => q.data.name)).toEqual(["later"])
      expect(bossLog.userRead.size).toBe(1)
      // grow's 3 turns: 10 + 11 + 12 input tokens; the metered turn: its request's 100 only.
      expect(bossLog.usage.input_tokens).toBe(u0 + 100 + 33)
      // Once the turn ended, the checkpoint no longer carries it as metered (no growth with history).
      expect(first.find((r) => r.id === boss.session_id)!.checkpoint!.state.metered).toBeUndefined()
      expect(bossLog.turns.interrupted?.prompt).toBe("Message from USER: interrupted")

      // A pending WAL entry next to an unchanged log: still seen (the log is repaired first).
      fs.writeFileSync(paths.pendingFile(boss.session_id), "{}\n")
      const pending = (await readAll(home, decoded)).find((r) => r.id === boss.session_id)!
      expect(pending.unchanged).toBe(true)
      expect(pending.needsRepair).toBe(true)
      fs.rmSync(paths.pendingFile(boss.session_id))

      // The last line rewritten at the same size, its modification time put back: refolded.
      const file = paths.eventsFile(boss.session_id)
      const before = fs.statSync(file)
      const text = fs.readFileSync(file, "utf8")
      const at = text.lastIndexOf("waiting")
      fs.writeFileSync(file, text.slice(0, at) + "Waiting" + text.slice(at + 7))
      fs.utimesSync(file, before.atime, before.mtime)
      expect(fs.statSync(file).size).toBe(before.size)
      const changed = (await readAll(home, decoded)).find((r) => r.id === boss.session_id)!
      expect(changed.unchanged).toBe(false)
      expect(changed.skipped).toBe(0)
      expect(changed.log).toEqual((await readAll(home)).find((r) => r.id === boss.session_id)!.log)
      expect(changed.log!.pending.at(-1)?.envelope.payload).toBe("Waiting")

      // A record rewritten in place: read from the file, and the entry kept carries the new copy.
      const recFile = paths.sessionFile(boss.session_id)
      const rec = JSON.parse(fs.readFileSync(recFile, "utf8")) as { state: string }
      const state = rec.state === "terminated" ? "suspended" : "terminated"
      fs.writeFileSync(recFile, JSON.stringify({ ...rec, state }))
      const reread = (await readAll(home, decoded)).find((r) => r.id === boss.session_id)!
      expect(reread.record!.state).toBe(state)
      expect(reread.checkpoint).not.toBe(decoded.get(boss.session_id))
      const next = (await readAll(home, decodeCheckpoints(encodeCheckpoints([reread.checkpoint!])))).find((r) => r.id === boss.session_id)!
      expect(next.record!.state).toBe(state)
      expect(next.unchanged).toBe(true)
    })
  }, 60_000)

  it("a log repaired at a start with no checkpoint to continue gets one: the next start reads only what is new", async () => {
    await withTmp(async (home) => {
      const boss = await team(home)
      const paths = makePaths(home)
      grow(home, boss.session_id, boss.id, 100, false)
      // Every start finds a kill -9's pending WAL entry (the chaos load's case), the first with no
      // checkpoint file at all.
      fs.rmSync(paths.foldCheckpoint, { force: true })
      const reads: Array<number> = []
      let bossLines = 0
      for (let c = 0; c < 3; c++) {
        pendingEntry(home, boss.session_id, boss.id)
        if (c === 0) bossLines = fs.readFileSync(paths.eventsFile(boss.session_id), "utf8").split("\n").length - 1
        const { life, report } = await recoverLife(home, registry())
        await life.dispose()
        expect(report.logsRepaired).toBe(1)
        reads.push(report.logLines)
        if (c < 2) grow(home, boss.session_id, boss.id, 2, false)
      }
      // The first start reads everything; the next ones only the lines appended since (2 turns
      // and the repaired entry) and the short logs of w1, not boss's whole history again.
      expect(bossLines).toBeGreaterThan(500)
      expect(reads[0]!).toBeGreaterThanOrEqual(bossLines)
      expect(reads[1]!, reads.join(" ")).toBeLessThan(bossLines / 4)
      expect(reads[2]!, reads.join(" ")).toBeLessThan(bossLines / 4)

      const withCp = await recoverLife(home, registry())
      await withCp.life.dispose()
      fs.rmSync(paths.foldCheckpoint)
      const without = await recoverLife(home, registry())
      await without.life.dispose()
      expect(withCp.state).toEqual(without.state)
    })
  }, 60_000)

  it("a recovery from unchanged logs equals one without checkpoints", async () => {
    await withTmp(async (home) => {
      const boss = await team(home)
      grow(home, boss.session_id, boss.id, 5, true, true)
      const paths = makePaths(home)
      const first = await recoverLife(home, registry())
      await first.life.dispose()
      const second = await recoverLife(home, registry())
      await second.life.dispose()
      const third = await recoverLife(home, registry())
      await third.life.dispose()
      // The third start found every log as the second left it: no line read.
      expect(third.report.logLines).toBe(0)
      fs.rmSync(paths.foldCheckpoint)
      const without = await recoverLife(home, registry())
      await without.life.dispose()
      expect(without.report.logLines).toBeGreaterThan(20)
      expect(third.state).toEqual(without.state)
      expect({ ...third.report, logLines: 0 }).toEqual({ ...without.report, logLines: 0 })
    })
  }, 60_000)

  it("a log too large to read in one piece is streamed, checkpointed, and then not read again", async () => {
    await withTmp(async (home) => {
      const boss = await team(home)
      const file = makePaths(home).eventsFile(boss.session_id)
      while (fs.statSync(file).size <= WHOLE_FILE) grow(home, boss.session_id, boss.id, 500)
      grow(home, boss.session_id, boss.id, 2, true)
      const first = (await readAll(home)).find((r) => r.id === boss.session_id)!
      const cp = first.checkpoint!
      expect(cp.offset).toBe(fs.statSync(file).size)
      expect(cp.lines).toBe(first.log!.lines)
      const decoded = decodeCheckpoints(encodeCheckpoints([cp]))
      const again = (await readAll(home, decoded)).find((r) => r.id === boss.session_id)!
      expect(again.unchanged).toBe(true)
      expect(again.log!.recentEncoded).not.toBeNull()
      expect(withRings(again.log)).toEqual(first.log)
      // Grown: only the new lines are read, and the fold equals the whole log's.
      grow(home, boss.session_id, boss.id, 3)
      const grown = (await readAll(home, decoded)).find((r) => r.id === boss.session_id)!
      expect(grown.unchanged).toBe(false)
      expect(grown.skipped).toBe(cp.lines)
      expect(grown.log).toEqual((await readAll(home)).find((r) => r.id === boss.session_id)!.log)
    })
  }, 120_000)
})
