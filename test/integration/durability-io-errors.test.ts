// Plain I/O errors (ENOSPC, EIO — not a crash: the process lives on and later I/O works) on a
// chosen log append. Nothing may be acknowledged that is not durable: a failed
// `message.enqueued` fails the send (a JSON error to the calling agent, an error to USER) and
// leaves no in-memory delivery; a failed `agent.terminated` fails the termination; a child whose
// birth fails at the end of its parent's turn is dropped and the turn fails. After each case the
// life is dropped and recovery (real layers) must agree with what was acknowledged.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { agentState, type AgentStateServices } from "../support/agentState.js"
import { toRpcError } from "../../src/protocol/WireErrors.js"
import { DurableError } from "../../src/domain/errors.js"
import type { AgentId } from "../../src/domain/ids.js"
import { Durable } from "../../src/storage/Durable.js"
import { makeDurable, nodePrimitives, type Primitives } from "../../src/storage/Durable.js"
import type { Scripts } from "../../src/provider/scripted/Script.js"
import { withTmp } from "../support/tmp.js"
import { checkOracle, type Life, readLogEvents, records, recoverLife, startLife, trackedScripted } from "./recovery.support.js"

type Kind = "write" | "fsync" | "rename"

/**
 * The real Durable, except that the next I/O step matching the armed predicate fails once with a
 * plain I/O error (ENOSPC, as the real primitives report it: `fault: "disk_full"`); everything before and after works (unlike DurableCrash, which
 * refuses all I/O after its crash).
 */
const faultyDurable = () => {
  let armed: ((kind: Kind, path: string, bytes: Uint8Array | null) => boolean) | null = null
  let fired: Array<string> = []
  const gate = <A>(kind: Kind, path: string, eff: Effect.Effect<A, DurableError>, bytes: Uint8Array | null = null) =>
    Effect.suspend(() => {
      if (armed !== null && armed(kind, path, bytes)) {
        armed = null
        fired.push(`${kind} ${path}`)
        return Effect.fail(
          new DurableError({ op: kind, path, fault: "disk_full", message: `ENOSPC: no space left on device, ${kind} '${path}'` })
        )
      }
      return eff
    })
  const p: Primitives = {
    ...nodePrimitives,
    write: (fd, path, bytes) => gate("write", path, nodePrimitives.write(fd, path, bytes), bytes),
    fsync: (fd, path) => gate("fsync", path, nodePrimitives.fsync(fd, path)),
    rename: (from, to) => gate("rename", to, nodePrimitives.rename(from, to))
  }
  return {
    layer: Layer.succeed(Durable, makeDurable(p)),
    /** Fail the next step that matches. */
    arm: (pred: (kind: Kind, path: string, bytes: Uint8Array | null) => boolean) => {
      armed = pred
      fired = []
    },
    fired: () => fired
  }
}

/** The first write of the append of `event` (containing `text`) to `session`'s log: the journal write carrying its record. */
const appendOf = (session: string, event: string, text = "") => (kind: Kind, path: string, bytes: Uint8Array | null) => {
  if (kind !== "write" || !path.endsWith("events.journal") || bytes === null) return false
  const line = Buffer.from(bytes).toString("utf8")
  return line.includes(`"session_id":"${session}"`) && line.includes(`"event":"${event}"`) && line.includes(text)
}

const scripts: Scripts = {
  boss: {
    steps: [
      { tools: [{ tool: "spawn_agent", args: { name: "w1", instructions: "work" } }], text: "spawned" },
      { tools: [{ tool: "send_message", args: { recipient: "w1", text: "do it", sync: true } }], text: "asked" },
      { tools: [{ tool: "send_message", args: { recipient: "USER", text: "status: fine" } }], text: "told" }
    ],
    after: "silent"
  },
  w1: { steps: [{ text: "done" }], after: "silent" }
}

const run = <A, E>(life: Life, eff: Effect.Effect<A, E, Orchestrator | AgentStateServices>) =>
  life.runPromise(Effect.either(eff))

const setup = async (home: string, s: Scripts = scripts) => {
  const d = faultyDurable()
  const life = startLife(home, d.layer, trackedScripted(s, { messages: [] }, () => true))
  const o = await life.runPromise(Orchestrator)
  const boss = await life.runPromise(o.createRoot({ name: "boss", instructions: "manage", provider: "scripted" }))
  return { d, life, o, boss }
}

const idle = (life: Life) => life.runPromise(Effect.flatMap(Orchestrator, (o) => o.awaitIdle))

/** Recover `home` in a fresh life (resume off) and check seed 001's oracle. */
const recoverAndCheck = async (home: string, mustLive: ReadonlyArray<AgentId>) => {
  const r = await recoverLife(home, trackedScripted(scripts, { messages: [] }, () => true))
  try {
    const bad = await checkOracle({
      home,
      life: r.life,
      ackedMessages: [],
      ackedRequests: [],
      mustLive,
      mustBeGone: [],
      mayExist: null
    })
    expect(bad).toEqual([])
    return await r.life.runPromise(agentState)
  } finally {
    await r.life.dispose()
  }
}

describe("durability under plain I/O errors (not a crash)", () => {
  it("USER's send fails when its message.enqueued is not durable: error to the client, no delivery, no turn", async () => {
    await withTmp(async (home) => {
      const { boss, d, life, o } = await setup(home)
      try {
        const before = readLogEvents(home, boss.session_id).length
        d.arm(appendOf(boss.session_id, "message.enqueued"))
        const r = await run(life, o.send({ agent: boss.id, text: "spawn", sync: true }))
        await idle(life)
        expect(d.fired()).toHaveLength(1)
        expect(Either.isLeft(r)).toBe(true)
        if (Either.isLeft(r)) {
          expect(r.left).toMatchObject({ _tag: "EventLogError" })
          // The admin socket answers it as an error (never "ok"): a full disk is Unavailable
          // (exit 5, nothing acknowledged), naming the cause.
          expect(toRpcError(r.left)._tag).toBe("Unavailable")
          expect(toRpcError(r.left).message).toMatch(/nothing was acknowledged.*ENOSPC/)
        }
        const s = await life.runPromise(agentState)
        expect(s.inboxes.get(boss.id)).toEqual([])
        expect([...s.requests.values()]).toEqual([])
        expect(s.userOutbox).toEqual([])
        const after = readLogEvents(home, boss.session_id).slice(before)
        expect(after.filter((e) => e.event === "message.enqueued" || e.event === "turn.start")).toEqual([])
        // The disk still works: the same send now succeeds, runs a turn and is answered.
        const ok = await run(life, o.send({ agent: boss.id, text: "spawn", sync: true }))
        expect(Either.isRight(ok)).toBe(true)
        await idle(life)
        expect((await life.runPromise(agentState)).userOutbox.map((m) => m.payload)).toEqual(["spawned"])
      } finally {
        await life.dispose()
      }
      await recoverAndCheck(home, [boss.id])
    })
  })

  it("send_message fails as a JSON tool error when the recipient's log append fails; nothing delivered, nobody woken", async () => {
    await withTmp(async (home) => {
      const { boss, d, life, o } = await setup(home)
      let w1: AgentId
      try {
        await life.runPromise(o.send({ agent: boss.id, text: "spawn", sync: false }))
        await idle(life)
        const worker = await life.runPromise(o.findByName("w1", boss.id))
        w1 = worker.id
        d.arm(appendOf(worker.session_id, "message.enqueued"))
        await life.runPromise(o.send({ agent: boss.id, text: "ask", sync: false }))
        await idle(life)
        expect(d.fired()).toHaveLength(1)
        // The boss's tool call got an error, as JSON, and its turn went on.
        const result = readLogEvents(home, boss.session_id).find((e) =>
          e.event === "tool_call.result" && e.data["tool"] === "send_message"
        )!
        expect(result.data["is_error"]).toBe(true)
        expect(JSON.stringify(result.data["result"])).toMatch(/"error".*ENOSPC/)
        expect(readLogEvents(home, boss.session_id).filter((e) => e.event === "turn.complete")).toHaveLength(2)
        // No delivery: not in w1's log, not in its inbox, no pending request, w1 never woken.
        const wlog = readLogEvents(home, worker.session_id)
        expect(wlog.filter((e) => e.event === "message.enqueued" || e.event === "turn.start")).toEqual([])
        const s = await life.runPromise(agentState)
        expect(s.inboxes.get(w1)).toEqual([])
        expect([...s.requests.values()]).toEqual([])
      } finally {
        await life.dispose()
      }
      const s = await recoverAndCheck(home, [boss.id, w1])
      expect(s.inboxes.get(w1) ?? []).toEqual([])
      expect([...s.requests.values()]).toEqual([])
    })
  })

  it("a root's send_message to USER fails when its log append fails; nothing in the user outbox", async () => {
    await withTmp(async (home) => {
      const three: Scripts = {
        boss: { steps: [{ tools: [{ tool: "send_message", args: { recipient: "USER", text: "status: fine" } }], text: "told" }], after: "silent" }
      }
      const { boss, d, life, o } = await setup(home, three)
      try {
        // The tool's message to USER is logged (enqueued) in the boss's own log: that append fails.
        d.arm(appendOf(boss.session_id, "message.enqueued", `"recipient":"USER"`))
        await life.runPromise(o.send({ agent: boss.id, text: "report", sync: false }))
        await idle(life)
        expect(d.fired()).toHaveLength(1)
        const result = readLogEvents(home, boss.session_id).find((e) => e.event === "tool_call.result")!
        expect(result.data["is_error"]).toBe(true)
        const s = await life.runPromise(agentState)
        expect(s.userOutbox).toEqual([])
        expect(
          readLogEvents(home, boss.session_id).filter((e) => e.event === "message.enqueued" && e.data["recipient"] === "USER")
        ).toEqual([])
      } finally {
        await life.dispose()
      }
      const s = await recoverAndCheck(home, [boss.id])
      expect(s.userOutbox).toEqual([])
    })
  })

  it("terminate fails when agent.terminated is not durable: the agent stays, alive and usable", async () => {
    await withTmp(async (home) => {
      const { boss, d, life, o } = await setup(home)
      let w1: AgentId
      try {
        await life.runPromise(o.send({ agent: boss.id, text: "spawn", sync: false }))
        await idle(life)
        const worker = await life.runPromise(o.findByName("w1", boss.id))
        w1 = worker.id
        d.arm(appendOf(worker.session_id, "agent.terminated"))
        const r = await run(life, o.terminate(w1))
        expect(Either.isLeft(r)).toBe(true)
        const s = await life.runPromise(agentState)
        expect(s.tree.has(w1)).toBe(true)
        expect(s.terminating.has(w1)).toBe(false)
        expect(records(home).find((x) => x.id === worker.session_id)?.state).not.toBe("terminated")
        // Still usable: the boss's request reaches it and is answered.
        await life.runPromise(o.send({ agent: boss.id, text: "ask", sync: false }))
        await idle(life)
        expect(readLogEvents(home, worker.session_id).some((e) => e.event === "turn.complete")).toBe(true)
      } finally {
        await life.dispose()
      }
      const s = await recoverAndCheck(home, [boss.id, w1])
      expect(s.tree.has(w1)).toBe(true)
    })
  })

  it("a child whose birth fails at the end of its parent's turn is dropped, its held request answered, the turn failed", async () => {
    await withTmp(async (home) => {
      const kid: Scripts = {
        boss: {
          steps: [
            {
              tools: [
                { tool: "spawn_agent", args: { name: "kid", instructions: "work" } },
                { tool: "send_message", args: { recipient: "kid", text: "hello?", sync: true } }
              ],
              text: "started"
            },
            { text: "noted" }
          ],
          after: "silent"
        },
        kid: { steps: [{ text: "hi" }], after: "silent" }
      }
      const { boss, d, life, o } = await setup(home, kid)
      try {
        // The kid's session record (its first write outside the boss's directory) fails.
        d.arm((kind, path) => kind === "write" && path.endsWith("session.json.tmp") && !path.includes(boss.session_id))
        await life.runPromise(o.send({ agent: boss.id, text: "go", sync: false }))
        await idle(life)
        expect(d.fired()).toHaveLength(1)
        const s = await life.runPromise(agentState)
        expect([...s.tree.nodes.values()].map((n) => n.name)).toEqual(["boss"])
        expect([...s.requests.values()]).toEqual([])
        const log = readLogEvents(home, boss.session_id)
        // The turn did not complete: its end is a provider.error naming the birth.
        const first = log.findIndex((e) => e.event === "provider.error")
        expect(first).toBeGreaterThan(0)
        expect(log[first]!.data["reason"]).toBe("BirthError")
        expect(log.slice(0, first).some((e) => e.event === "turn.complete")).toBe(false)
        // The held request was answered with an error (logged in the boss's log), which woke it.
        const reply = log.find((e) => e.event === "message.enqueued" && e.data["kind"] === "response")!
        expect(String(reply.data["payload"])).toMatch(/^\[error\] kid could not be created/)
        expect(log.filter((e) => e.event === "turn.complete").map((e) => e.data["response"])).toEqual(["noted"])
      } finally {
        await life.dispose()
      }
      const s = await recoverAndCheck(home, [boss.id])
      expect([...s.tree.nodes.values()].map((n) => n.name)).toEqual(["boss"])
    })
  })
})
