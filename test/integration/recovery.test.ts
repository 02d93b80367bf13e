// Crash recovery, one behaviour per test: the disk state a crash leaves is produced by running
// the real orchestrator on a temp $SUBSTRAT_HOME and cutting what the crash would not have
// written (logs are append-only, so a crash = a suffix missing), then recovering in a new life.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as fs from "node:fs"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { formatMessage } from "../../src/agent/Prompt.js"
import { agentState } from "../support/agentState.js"
import { Recovery } from "../../src/recovery/Recovery.js"
import { layerStartupRecovery } from "../../src/recovery/Startup.js"
import { makePaths } from "../../src/config/Paths.js"
import { makeEvent } from "../../src/domain/events.js"
import { type AgentId, newSessionId, newTurnId, type SessionId } from "../../src/domain/ids.js"
import { makeSession } from "../../src/domain/session.js"
import { makeCrashing } from "../../src/storage/DurableCrash.js"
import { Durable } from "../../src/storage/Durable.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { StartupRecovery } from "../../src/recovery/StartupRecovery.js"
import type { Scripts } from "../../src/provider/scripted/Script.js"
import { SessionStore } from "../../src/storage/SessionStore.js"
import { withTmp } from "../support/tmp.js"
import {
  askScripts,
  checkOracle,
  lifeLayer,
  readLogEvents,
  records,
  recoverLife,
  snapshotDisk,
  startLife,
  syncPrimitives,
  trackedScripted
} from "./recovery.support.js"

const registryOf = (scripts: Scripts) => trackedScripted(scripts, { messages: [] }, () => true)

/** Run `f` in one daemon life on `home` (real layers), wait for idle, drop the life. */
const life = async <A>(home: string, scripts: Scripts, f: (o: Orchestrator) => Effect.Effect<A, unknown>) => {
  const rt = startLife(home, Durable.layer, registryOf(scripts))
  try {
    return await rt.runPromise(Effect.flatMap(Orchestrator, (o) => Effect.zipLeft(f(o), o.awaitIdle)))
  } finally {
    await rt.dispose()
  }
}

/** Drop every line of a session's log from the first one matching `pred` (a crash before it). */
const cutFrom = (home: string, session: string, pred: (e: { event: string; data: Record<string, unknown> }) => boolean) => {
  const file = makePaths(home).eventsFile(session)
  const lines = fs.readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0)
  const i = lines.findIndex((l) => pred(JSON.parse(l) as { event: string; data: Record<string, unknown> }))
  expect(i, "cut point present").toBeGreaterThanOrEqual(0)
  fs.writeFileSync(file, lines.slice(0, i).map((l) => l + "\n").join(""))
  return lines.length - i
}


/** boss spawns w1, then asks it (sync) "do it" (`request`: that message's id); w1 answers "done". */
const bossAskedW1 = async (home: string) => {
  const ids = await life(home, askScripts, (o) =>
    Effect.gen(function*() {
      const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "scripted" })
      yield* o.send({ agent: boss.id, text: "spawn" })
      yield* o.awaitIdle
      yield* o.send({ agent: boss.id, text: "ask" })
      yield* o.awaitIdle
      return { boss, w1: yield* o.findByName("w1", boss.id) }
    }))
  const request = readLogEvents(home, ids.w1.session_id).find((e) =>
    e.event === "message.enqueued" && e.data["kind"] === "request"
  )!.data["id"] as string
  return { ...ids, request }
}

describe("recovery", () => {
  it("rebuilds the tree (roots first, children through parent_session_id) and the usage", async () => {
    await withTmp(async (home) => {
      const ids = await life(home, askScripts, (o) =>
        Effect.gen(function*() {
          const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "scripted" })
          yield* o.send({ agent: boss.id, text: "spawn" })
          yield* o.awaitIdle
          const w1 = yield* o.findByName("w1", boss.id)
          const w2 = yield* o.spawn(w1.id, { name: "w2", instructions: "sub" })
          const other = yield* o.createRoot({ name: "other", instructions: "x", provider: "scripted" })
          return { boss: boss.id, w1: w1.id, w2: w2.id, other: other.id, usage: yield* o.usage(boss.id) }
        }))
      const r = await recoverLife(home, registryOf(askScripts))
      try {
        expect(r.report.agents).toBe(4)
        expect(r.report.roots).toBe(2)
        expect(r.report.orphansCleaned).toBe(0)
        const s = await r.life.runPromise(agentState)
        expect(s.tree.get(ids.w1)?.parent_id).toBe(ids.boss)
        expect(s.tree.get(ids.w2)?.parent_id).toBe(ids.w1)
        expect(s.tree.roots().map((n) => n.id).sort()).toEqual([ids.boss, ids.other].sort())
        const o = await r.life.runPromise(Orchestrator)
        const u = await r.life.runPromise(o.usage(ids.boss))
        expect(u).toEqual(ids.usage)
        expect(records(home).filter((x) => x.state === "active")).toEqual([])
      } finally {
        await r.life.dispose()
      }
    })
  })

  it("a reply in the responder's log that never reached the requester is enqueued again and wakes it", async () => {
    await withTmp(async (home) => {
      const ids = await bossAskedW1(home)
      // Crash after w1 logged its response, before the reply was enqueued to boss.
      const request = ids.request
      cutFrom(home, ids.boss.session_id, (e) => e.event === "message.enqueued" && e.data["reply_to"] === request)
      const rt = startLife(home, Durable.layer, registryOf(askScripts))
      try {
        const report = await rt.runPromise(Effect.flatMap(Recovery, (r) => r.run()))
        expect(report.repliesRedelivered).toBeGreaterThanOrEqual(1)
        await rt.runPromise(Effect.flatMap(Orchestrator, (o) => o.awaitIdle))
        const boss = readLogEvents(home, ids.boss.session_id)
        const reply = boss.filter((e) => e.event === "message.enqueued" && e.data["reply_to"] === request)
        expect(reply.map((e) => e.data["payload"])).toEqual(["done"])
        // The scripted boss resumed at its third step (its blob caught up with the log).
        const last = boss.filter((e) => e.event === "turn.complete").at(-1)!
        expect(String(last.data["response"])).toContain(`thanks: Reply from w1 (to message ${request}): done`)
      } finally {
        await rt.dispose()
      }
    })
  })

  it("a sync request to a child whose birth the crash prevented (mid-turn) is answered with an error", async () => {
    await withTmp(async (home) => {
      const scripts: Scripts = {
        boss: {
          steps: [{
            tools: [
              { tool: "spawn_agent", args: { name: "kid", instructions: "work" } },
              { tool: "send_message", args: { recipient: "kid", text: "hello?", sync: true } }
            ],
            text: "started"
          }],
          after: "silent"
        },
        kid: { steps: [{ text: "hi" }], after: "silent" }
      }
      const ids = await life(home, scripts, (o) =>
        Effect.gen(function*() {
          const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "scripted" })
          yield* o.send({ agent: boss.id, text: "go", sync: false })
          yield* o.awaitIdle
          return { boss, kid: yield* o.findByName("kid", boss.id) }
        }))
      // Crash mid-turn, after the tool results, before the deferred birth (births are durable
      // before the turn's end, so the turn is interrupted): no kid session, no turn end. The
      // tool result acknowledged the request to the boss (the provider saw it).
      fs.rmSync(makePaths(home).sessionDir(ids.kid.session_id), { recursive: true })
      cutFrom(home, ids.boss.session_id, (e) => e.event === "turn.complete")
      const sent = readLogEvents(home, ids.boss.session_id).find((e) => e.event === "tool_call.result" && e.data["tool"] === "send_message")!
      const request = (sent.data["result"] as { message_id: string }).message_id
      const r = await recoverLife(home, registryOf(scripts))
      try {
        expect(r.report.requestsFailed).toBe(1)
        expect(r.report.interruptedTurns).toBe(1)
        expect(r.report.agents).toBe(1)
        const s = await r.life.runPromise(agentState)
        const inbox = s.inboxes.get(ids.boss.id) ?? []
        // The interrupted turn's message (USER's "go") is back, then the error reply: from
        // SYSTEM, naming the lost request (not a "Reply from kid" a new kid could be taken for).
        expect(inbox.map((e) => [e.kind, e.reply_to])).toEqual([["notification", null], ["response", request]])
        expect([inbox[1]!.sender, inbox[1]!.sender_name]).toEqual(["SYSTEM", "SYSTEM"])
        expect(inbox[1]!.payload).toBe(
          `[error] your request ${request} to kid will not be answered: kid is gone (lost in a daemon crash or terminated)`
        )
        expect(formatMessage(inbox[1]!)).toMatch(new RegExp(`^Error from SYSTEM \\(about your message ${request}\\): \\[error\\]`))
        const bad = await checkOracle({
          home,
          life: r.life,
          ackedMessages: [],
          ackedRequests: [{ id: request, from: ids.boss.id }],
          mustLive: [ids.boss.id],
          mustBeGone: [],
          mayExist: null
        })
        expect(bad).toEqual([])
      } finally {
        await r.life.dispose()
      }
    })
  })

  it("a root whose turn was interrupted gets the recovery prompt and resumes its script where it was", async () => {
    await withTmp(async (home) => {
      const scripts: Scripts = {
        solo: { steps: [{ text: "one" }, { text: "two" }, { text: "three: {{prompt}}" }], after: "silent" }
      }
      const solo = await life(home, scripts, (o) =>
        Effect.gen(function*() {
          const n = yield* o.createRoot({ name: "solo", instructions: "x", provider: "scripted" })
          yield* o.runTurn(n.id, "first")
          yield* o.runTurn(n.id, "second")
          return n
        }))
      // Crash mid-turn: turn.start of a third turn is durable, nothing after it.
      const rt0 = startLife(home, Durable.layer, registryOf(scripts))
      await rt0.runPromise(Effect.flatMap(EventLog, (log) =>
        log.append(solo.session_id, makeEvent("turn.start", { turn_id: newTurnId(), prompt: "write the report" }))))
      await rt0.dispose()
      const rt = startLife(home, Durable.layer, registryOf(scripts))
      try {
        const report = await rt.runPromise(Effect.flatMap(Recovery, (r) => r.run()))
        expect(report.interruptedTurns).toBe(1)
        expect(report.recoveryPrompts).toBe(1)
        await rt.runPromise(Effect.flatMap(Orchestrator, (o) => o.awaitIdle))
        const log = readLogEvents(home, solo.session_id)
        const starts = log.filter((e) => e.event === "turn.start").map((e) => String(e.data["prompt"]))
        expect(starts).toHaveLength(4)
        expect(starts[3]).toMatch(/^\[substrat\] The Substrat daemon stopped unexpectedly/)
        expect(starts[3]).toContain("<<<\nwrite the report\n>>>")
        const done = log.filter((e) => e.event === "turn.complete").map((e) => String(e.data["response"]))
        expect(done.at(-1)).toMatch(/^three: \[substrat\]/)
      } finally {
        await rt.dispose()
      }
    })
  })

  it("a root's recovery note and the message its interrupted turn was handling arrive in one turn", async () => {
    await withTmp(async (home) => {
      const scripts: Scripts = { boss: { steps: [{ text: "one" }, { text: "again: {{prompt}}" }], after: "silent" } }
      const boss = await life(home, scripts, (o) =>
        Effect.gen(function*() {
          const boss = yield* o.createRoot({ name: "boss", instructions: "x", provider: "scripted" })
          yield* o.send({ agent: boss.id, text: "build the parser", sync: false })
          return boss
        }))
      // The turn that consumed USER's message was interrupted.
      cutFrom(home, boss.session_id, (e) => e.event === "turn.complete")
      const rt = startLife(home, Durable.layer, registryOf(scripts))
      try {
        const report = await rt.runPromise(Effect.flatMap(Recovery, (r) => r.run()))
        expect([report.interruptedTurns, report.recoveryPrompts, report.turnsQueued]).toEqual([1, 1, 1])
        await rt.runPromise(Effect.flatMap(Orchestrator, (o) => o.awaitIdle))
        const starts = readLogEvents(home, boss.session_id).filter((e) => e.event === "turn.start").map((e) =>
          String(e.data["prompt"])
        )
        // One new turn: the note first, then the message it says follows.
        expect(starts).toHaveLength(2)
        expect(starts[1]).toMatch(/^\[substrat\] The Substrat daemon stopped unexpectedly/)
        expect(starts[1]).toContain("The messages that turn was handling are queued for you again and follow this note.")
        expect(starts[1]).toMatch(/follow this note\.[^]*\n\nMessage from USER \(message [0-9a-f-]+\):\nbuild the parser$/)
      } finally {
        await rt.dispose()
      }
    })
  })

  it("a child whose turn was interrupted is told so, in the turn that re-runs its request", async () => {
    await withTmp(async (home) => {
      const ids = await bossAskedW1(home)
      // Crash in w1's turn: its end and its reply to boss are not durable.
      const request = ids.request
      cutFrom(home, ids.w1.session_id, (e) => e.event === "turn.complete")
      cutFrom(home, ids.boss.session_id, (e) => e.event === "message.enqueued" && e.data["reply_to"] === request)
      const rt = startLife(home, Durable.layer, registryOf(askScripts))
      try {
        const report = await rt.runPromise(Effect.flatMap(Recovery, (r) => r.run()))
        expect([report.interruptedTurns, report.recoveryPrompts]).toEqual([1, 1])
        await rt.runPromise(Effect.flatMap(Orchestrator, (o) => o.awaitIdle))
        const starts = readLogEvents(home, ids.w1.session_id).filter((e) => e.event === "turn.start").map((e) =>
          String(e.data["prompt"])
        )
        expect(starts).toHaveLength(2)
        expect(starts[1]).toMatch(/^\[substrat\] The Substrat daemon stopped unexpectedly/)
        expect(starts[1]).toContain(`\n\nMessage from boss (message ${request}, reply expected):\ndo it`)
        // The re-run answered the request once.
        const boss = readLogEvents(home, ids.boss.session_id)
        expect(boss.filter((e) => e.event === "message.enqueued" && e.data["reply_to"] === request).map((e) => e.data["payload"]))
          .toEqual(["done"])
      } finally {
        await rt.dispose()
      }
    })
  })

  it("re-injects enqueued-but-undelivered messages without logging, and un-delivers an interrupted turn's", async () => {
    await withTmp(async (home) => {
      const scripts: Scripts = { boss: { steps: [], after: "silent" } }
      const { boss, a } = await life(home, scripts, (o) =>
        Effect.gen(function*() {
          const boss = yield* o.createRoot({ name: "boss", instructions: "x", provider: "scripted" })
          // A notification from USER wakes the boss; its turn consumes (delivers) it.
          const a = yield* o.send({ agent: boss.id, text: "note a", sync: false })
          return { boss, a }
        }))
      // Simulate: the turn that consumed `a` was interrupted (cut from its turn.complete).
      cutFrom(home, boss.session_id, (e) => e.event === "turn.complete")
      const rt1 = startLife(home, Durable.layer, registryOf(scripts))
      const bId = await rt1.runPromise(Effect.flatMap(EventLog, (log) =>
        Effect.gen(function*() {
          const env = {
            id: "11111111-1111-4111-8111-111111111111",
            timestamp: new Date().toISOString(),
            sender: "USER",
            recipient: boss.id,
            reply_to: null,
            kind: "notification",
            payload: "note b",
            metadata: { sender_name: "USER" }
          } as const
          yield* log.append(boss.session_id, makeEvent("message.enqueued", env as never))
          return env.id
        })))
      await rt1.dispose()
      const before = fs.readFileSync(makePaths(home).eventsFile(boss.session_id), "utf8")
      const r = await recoverLife(home, registryOf(scripts))
      try {
        expect(r.report.messagesReinjected).toBe(2)
        expect(r.report.interruptedTurns).toBe(1)
        const s = await r.life.runPromise(agentState)
        expect((s.inboxes.get(boss.id) ?? []).map((e) => e.id)).toEqual([a.message_id, bId])
        expect(fs.readFileSync(makePaths(home).eventsFile(boss.session_id), "utf8")).toBe(before)
      } finally {
        await r.life.dispose()
      }
    })
  })

  it("orphans are removed, children of a gone parent terminated, corrupt logs quarantined", async () => {
    await withTmp(async (home) => {
      const scripts: Scripts = {}
      const ids = await life(home, scripts, (o) =>
        Effect.gen(function*() {
          const a = yield* o.createRoot({ name: "a", instructions: "x", provider: "scripted" })
          const kid = yield* o.spawn(a.id, { name: "kid", instructions: "y" })
          const c = yield* o.createRoot({ name: "c", instructions: "x", provider: "scripted" })
          const ckid = yield* o.spawn(c.id, { name: "ckid", instructions: "y" })
          const d = yield* o.createRoot({ name: "d", instructions: "x", provider: "scripted" })
          return { a, kid, c, ckid, d }
        }))
      const paths = makePaths(home)
      // Orphan 1: a record and session.created, no agent.created (crash at P2).
      const orphan = newSessionId()
      const rt0 = startLife(home, Durable.layer, registryOf(scripts))
      await rt0.runPromise(Effect.gen(function*() {
        const st = yield* SessionStore
        yield* st.save(makeSession({ id: orphan, provider_name: "scripted", now: new Date().toISOString() }))
        yield* Effect.flatMap(EventLog, (log) =>
          log.append(orphan, makeEvent("session.created", { provider: "scripted", model: null, system_prompt: "" })))
      }))
      await rt0.dispose()
      // Orphan 2: a directory with a half-written record only (crash at P1).
      const orphan2 = newSessionId()
      fs.mkdirSync(paths.sessionDir(orphan2))
      fs.writeFileSync(`${paths.sessionFile(orphan2)}.tmp`, "{\"id\":")
      // Dangling: a's log says terminated (its record not yet), kid's does not.
      fs.appendFileSync(
        paths.eventsFile(ids.a.session_id),
        JSON.stringify({ ts: new Date().toISOString(), event: "agent.terminated", data: { agent_id: ids.a.id }, session_id: ids.a.session_id }) + "\n"
      )
      // Corrupt: a garbage line in the middle of c's log.
      const cFile = paths.eventsFile(ids.c.session_id)
      const lines = fs.readFileSync(cFile, "utf8").split("\n")
      lines.splice(1, 0, "{not json")
      fs.writeFileSync(cFile, lines.join("\n"))
      const cBefore = fs.readFileSync(cFile, "utf8")
      const r = await recoverLife(home, registryOf(scripts))
      try {
        expect(r.report.orphansCleaned).toBe(2)
        expect(r.report.danglingTerminated).toBe(1)
        expect(r.report.terminatedSkipped).toBe(1)
        expect(r.report.quarantined.map((q) => q.session).sort()).toEqual([ids.c.session_id, ids.ckid.session_id].sort())
        expect(r.report.agents).toBe(1)
        expect(fs.existsSync(paths.sessionDir(orphan))).toBe(false)
        expect(fs.existsSync(paths.sessionDir(orphan2))).toBe(false)
        const recs = new Map(records(home).map((x) => [x.id, x.state] as const))
        expect(recs.get(ids.a.session_id)).toBe("terminated")
        expect(recs.get(ids.kid.session_id)).toBe("terminated")
        expect(readLogEvents(home, ids.kid.session_id).map((e) => e.event)).toContain("agent.terminated")
        expect(fs.readFileSync(cFile, "utf8")).toBe(cBefore)
        const s = await r.life.runPromise(agentState)
        expect([...s.tree.nodes.keys()]).toEqual([ids.d.id])
      } finally {
        await r.life.dispose()
      }
    })
  })

  it("repairs a torn tail and replays a pending entry before reading", async () => {
    await withTmp(async (home) => {
      const boss = await life(home, {}, (o) => o.createRoot({ name: "boss", instructions: "x", provider: "scripted" }))
      const paths = makePaths(home)
      const env = {
        id: "22222222-2222-4222-8222-222222222222",
        timestamp: new Date().toISOString(),
        sender: "USER",
        recipient: boss.id,
        reply_to: null,
        kind: "notification",
        payload: "from the WAL",
        metadata: {}
      }
      const line = JSON.stringify({ ts: new Date().toISOString(), event: "message.enqueued", data: env, session_id: boss.session_id })
      fs.appendFileSync(paths.eventsFile(boss.session_id), line.slice(0, 20)) // torn append
      fs.writeFileSync(paths.pendingFile(boss.session_id), line + "\n")
      const r = await recoverLife(home, registryOf({}))
      try {
        expect(r.report.logsRepaired).toBe(1)
        expect(r.report.messagesReinjected).toBe(1)
        expect(r.state.inboxes[boss.id]).toEqual([`notification:${env.id}::from the WAL`])
        expect(fs.existsSync(paths.pendingFile(boss.session_id))).toBe(false)
      } finally {
        await r.life.dispose()
      }
    })
  })

  it("a crash at any I/O step during recovery, then recovery again, gives the state one clean recovery gives", async () => {
    await withTmp(async (home) => {
      // A state needing every kind of recovery write: a lost reply, a dangling child, an orphan, an ACTIVE record.
      const ids = await life(home, askScripts, (o) =>
        Effect.gen(function*() {
          const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "scripted" })
          yield* o.send({ agent: boss.id, text: "spawn" })
          yield* o.awaitIdle
          yield* o.send({ agent: boss.id, text: "ask" })
          yield* o.awaitIdle
          const w1 = yield* o.findByName("w1", boss.id)
          const lonely = yield* o.createRoot({ name: "lonely", instructions: "x", provider: "scripted" })
          const sub = yield* o.spawn(lonely.id, { name: "sub", instructions: "y" })
          return { boss, w1, lonely, sub }
        }))
      const request = readLogEvents(home, ids.w1.session_id).find((e) =>
        e.event === "message.enqueued" && e.data["kind"] === "request"
      )!.data["id"] as string
      cutFrom(home, ids.boss.session_id, (e) => e.event === "message.enqueued" && e.data["reply_to"] === request)
      const paths = makePaths(home)
      fs.appendFileSync(
        paths.eventsFile(ids.lonely.session_id),
        JSON.stringify({ ts: new Date().toISOString(), event: "agent.terminated", data: { agent_id: ids.lonely.id }, session_id: ids.lonely.session_id }) + "\n"
      )
      fs.mkdirSync(paths.sessionDir(newSessionId()))
      const rec = JSON.parse(fs.readFileSync(paths.sessionFile(ids.boss.session_id), "utf8")) as Record<string, unknown>
      fs.writeFileSync(paths.sessionFile(ids.boss.session_id), JSON.stringify({ ...rec, state: "active", suspended_at: null }))

      const pristine = `${home}-pristine`
      fs.cpSync(home, pristine, { recursive: true })
      try {
        const registry = registryOf(askScripts)
        const clean = async (dir: string) => {
          const r = await recoverLife(dir, registry)
          await r.life.dispose()
          return { state: JSON.stringify(r.state), disk: JSON.stringify(snapshotDisk(dir)), report: r.report }
        }
        const probeDir = `${home}-probe`
        fs.cpSync(pristine, probeDir, { recursive: true })
        const probe = makeCrashing({}, syncPrimitives)
        const pr = await recoverLife(probeDir, registry, { resume: false }, probe.layer)
        await pr.life.dispose()
        fs.rmSync(probeDir, { recursive: true, force: true })
        const steps = probe.control.stepCount()
        expect(pr.report.repliesRedelivered).toBeGreaterThanOrEqual(1)
        expect(pr.report.danglingTerminated).toBe(1)
        expect(pr.report.orphansCleaned).toBe(1)
        expect(pr.report.suspended).toBeGreaterThanOrEqual(1)
        expect(steps).toBeGreaterThan(10)
        const refDir = `${home}-ref`
        fs.cpSync(pristine, refDir, { recursive: true })
        const ref = await clean(refDir)
        fs.rmSync(refDir, { recursive: true, force: true })
        let crashes = 0
        for (let k = 1; k <= steps; k++) {
          const dir = `${home}-k${k}`
          fs.cpSync(pristine, dir, { recursive: true })
          try {
            const c = makeCrashing({ crashAt: k }, syncPrimitives)
            const rt = ManagedRuntime.make(lifeLayer(dir, c.layer, registry))
            // (A crash while the layers start — the agents/ mkdir — fails the build: also a crash.)
            await rt.runPromise(Effect.either(Effect.flatMap(Recovery, (r) => r.run({ resume: false })))).catch(() => undefined)
            await rt.dispose().catch(() => undefined)
            if (c.control.crashed()) crashes++
            const after = await clean(dir)
            expect(after.state, `crash at recovery step ${k}`).toBe(ref.state)
            expect(after.disk, `crash at recovery step ${k}`).toBe(ref.disk)
          } finally {
            fs.rmSync(dir, { recursive: true, force: true })
          }
        }
        expect(crashes).toBe(steps)
        console.log(`recovery idempotence: crashed recovery at each of ${steps} I/O steps, then recovered cleanly`)
      } finally {
        fs.rmSync(pristine, { recursive: true, force: true })
      }
    })
  })

  it("the daemon's StartupRecovery hook runs the full recovery", async () => {
    await withTmp(async (home) => {
      await life(home, {}, (o) =>
        Effect.gen(function*() {
          const a = yield* o.createRoot({ name: "a", instructions: "x", provider: "scripted" })
          yield* o.spawn(a.id, { name: "b", instructions: "y" })
        }))
      const rt = ManagedRuntime.make(
        layerStartupRecovery.pipe(Layer.provideMerge(lifeLayer(home, Durable.layer, registryOf({}))))
      )
      try {
        const report = await rt.runPromise(Effect.flatMap(StartupRecovery, (r) => r.run))
        expect(report.agents).toBe(2)
        expect(report.sessions).toBe(2)
        const names = await rt.runPromise(Effect.flatMap(Orchestrator, (o) => o.list))
        expect(names.map((n) => n.name).sort()).toEqual(["a", "b"])
      } finally {
        await rt.dispose()
      }
    })
  })
})

export type { AgentId, SessionId }
