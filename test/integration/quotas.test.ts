// Per-agent quotas (src/agent/Quotas.ts, docs/tools.md "Quotas"): an agent that floods a tool
// gets `quota_exceeded` with the quota, the limit and a retry-after once past the limit — a
// scripted agent (the in-process tool loop) and one through the real MCP server over its
// agent.sock; the refused calls are not logged (the log stays bounded); refusals that keep
// coming park the agent with an inbox item, and resuming it runs its held turn.
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Layer, Queue, Stream } from "effect"
import { Mailbox } from "../../src/agent/Mailbox.js"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { OutputBus } from "../../src/agent/OutputBus.js"
import { QuotaConfig, Quotas } from "../../src/agent/Quotas.js"
import { HumanDesk } from "../../src/agent/TurnGate.js"
import { makePaths } from "../../src/config/Paths.js"
import type { AgentId } from "../../src/domain/ids.js"
import type { QuotaLimits } from "../../src/domain/quota.js"
import * as AgentSocket from "../../src/mcp/AgentSocket.js"
import type { Scripts } from "../../src/provider/scripted/Script.js"
import { tmpDir } from "../support/tmpDir.js"
import { connectMcp, makeGate, stackWith } from "./mcp.support.js"
import { eventsOf, stack } from "./orchestration.support.js"

const limits = (l: Partial<QuotaLimits>): QuotaLimits => ({
  messages_per_minute: 0,
  message_bytes_per_hour: 0,
  open_questions: 0,
  spawns_per_minute: 0,
  tool_calls_per_turn: 0,
  log_bytes_per_hour: 0,
  ...l
})

/** A human inbox that only counts questions (the Meter's is tested elsewhere). */
const deskLayer = Layer.sync(HumanDesk, () => {
  const open = new Map<AgentId, number>()
  return {
    ask: (node) => Effect.sync(() => (open.set(node.id, (open.get(node.id) ?? 0) + 1), { item_id: `q${open.get(node.id)}` })),
    asking: () => false,
    openQuestions: (agent) => open.get(agent) ?? 0
  }
})

const quotaLayer = (l: Partial<QuotaLimits>, parkAfter = 0) => Layer.succeed(QuotaConfig, { limits: limits(l), parkAfter })

interface Called {
  readonly tool: string
  readonly is_error: boolean
  readonly result: unknown
}
type Refusal = { readonly error: { readonly type: string; readonly quota: string; readonly limit: number; readonly retry_after_s: number | null } }
const refusal = (c: Called) => (c.result as Refusal).error

/** Run one turn of `agent` (woken by `text`) and collect its tool calls as the provider saw them. */
const turnCalls = (agent: AgentId, text: string) =>
  Effect.gen(function*() {
    const o = yield* Orchestrator
    const live = yield* Effect.flatMap(OutputBus, (b) => b.subscribe)
    yield* o.send({ agent, text, sync: false })
    yield* o.awaitIdle
    const seen = yield* live.pipe(
      Stream.filter((x) => x.agent_id === agent),
      Stream.takeUntil((x) => x._tag === "TurnCompleted"),
      Stream.runCollect
    )
    return Chunk.toReadonlyArray(seen).flatMap((x): Array<Called> =>
      x._tag === "ToolCalled" ? [{ tool: x.tool, is_error: x.is_error, result: x.result }] : []
    )
  })

const times = <A>(n: number, a: A): Array<A> => Array.from({ length: n }, () => a)

const scripts: Scripts = {
  flood: {
    steps: [{
      tools: [
        ...[0, 1, 2, 3].map((i) => ({ tool: "spawn_agent", args: { name: `kid${i}`, instructions: "x" } })),
        ...times(5, { tool: "send_message", args: { recipient: "kid0", text: "hi", sync: false } }),
        ...times(4, { tool: "ask_human", args: { question: "may I?" } })
      ],
      text: "flooded"
    }]
  },
  big: { steps: [{ tools: times(3, { tool: "broadcast", args: { text: "x".repeat(600) } }), text: "big" }] },
  busy: { steps: [{ tools: times(45, { tool: "check_inbox", args: {} }), text: "busy" }], after: "repeat-last" },
  parkme: {
    steps: [{ tools: times(6, { tool: "send_message", args: { recipient: "USER", text: "look", sync: false } }), text: "spammed" }],
    after: "echo"
  }
}

describe("quotas on what an agent sends", () => {
  it.scoped("a scripted agent flooding each tool gets quota_exceeded with retry-after past each limit; refused calls are not logged", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("substrat-quota-")
      const layer = stack({ home, scripts }).pipe(
        Layer.provide(Layer.mergeAll(
          quotaLayer({ spawns_per_minute: 2, messages_per_minute: 3, open_questions: 2, message_bytes_per_hour: 1000, tool_calls_per_turn: 40 }),
          deskLayer
        ))
      )
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const flood = yield* o.createRoot({ name: "flood", instructions: "", provider: "scripted" })
        const calls = yield* turnCalls(flood.id, "go")
        const by = (tool: string) => calls.filter((c) => c.tool === tool)

        const spawns = by("spawn_agent")
        expect(spawns.map((c) => c.is_error)).toEqual([false, false, true, true])
        expect(refusal(spawns[2]!)).toMatchObject({ type: "quota_exceeded", quota: "spawns_per_minute", limit: 2 })
        expect(refusal(spawns[2]!).retry_after_s).toBeGreaterThan(0)
        expect(refusal(spawns[2]!).retry_after_s).toBeLessThanOrEqual(60)

        const sends = by("send_message")
        expect(sends.map((c) => c.is_error)).toEqual([false, false, false, true, true])
        expect(refusal(sends[3]!)).toMatchObject({ type: "quota_exceeded", quota: "messages_per_minute", limit: 3 })
        expect(refusal(sends[3]!).retry_after_s).toBeGreaterThan(0)

        const asks = by("ask_human")
        expect(asks.map((c) => c.is_error)).toEqual([false, false, true, true])
        // Waiting does not close a question: no retry-after.
        expect(refusal(asks[2]!)).toMatchObject({ type: "quota_exceeded", quota: "open_questions", limit: 2, retry_after_s: null })

        // The log holds the admitted calls only: 2 + 3 + 2 invoked, as many results.
        const log = yield* eventsOf(flood.session_id)
        expect(log.filter((e) => e.event === "tool_call.invoked")).toHaveLength(7)
        expect(log.filter((e) => e.event === "tool_call.result")).toHaveLength(7)

        const big = yield* o.createRoot({ name: "big", instructions: "", provider: "scripted" })
        const casts = yield* turnCalls(big.id, "go")
        expect(casts.map((c) => c.is_error)).toEqual([false, true, true])
        expect(refusal(casts[1]!)).toMatchObject({ quota: "message_bytes_per_hour", limit: 1000 })
        expect(refusal(casts[1]!).retry_after_s).toBeGreaterThan(3000)

        const busy = yield* o.createRoot({ name: "busy", instructions: "", provider: "scripted" })
        const inbox = yield* turnCalls(busy.id, "go")
        expect(inbox.filter((c) => !c.is_error)).toHaveLength(40)
        expect(refusal(inbox[40]!)).toMatchObject({ quota: "tool_calls_per_turn", limit: 40, retry_after_s: null })
        // A new turn starts a new count.
        const again = yield* turnCalls(busy.id, "again")
        expect(again.filter((c) => !c.is_error)).toHaveLength(40)
        const log2 = yield* eventsOf(busy.session_id)
        expect(log2.filter((e) => e.event === "tool_call.invoked")).toHaveLength(80)
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("refusals that keep coming park the agent with an inbox item; resuming runs its held turn", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("substrat-quota-park-")
      const layer = stack({ home, scripts }).pipe(Layer.provide(Layer.mergeAll(quotaLayer({ messages_per_minute: 1 }, 3), deskLayer)))
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const quotas = yield* Quotas
        const mailbox = yield* Mailbox
        const agent = yield* o.createRoot({ name: "parkme", instructions: "", provider: "scripted" })
        const calls = yield* turnCalls(agent.id, "go")
        expect(calls.map((c) => c.is_error)).toEqual([false, true, true, true, true, true])
        // The third refusal parks it; from then on every call is refused as parked.
        expect(calls.slice(1, 4).map((c) => refusal(c).quota)).toEqual(["messages_per_minute", "messages_per_minute", "messages_per_minute"])
        expect(calls.slice(4).map((c) => refusal(c).quota)).toEqual(["parked", "parked"])
        const view = quotas.view(agent.id)
        expect(view.parked).not.toBeNull()
        const items = quotas.inbox()
        expect(items).toHaveLength(1)
        expect(items[0]).toMatchObject({ kind: "quota", agent_id: agent.id, id: view.parked?.item_id })

        // Parked: a new message queues a turn that does not start.
        yield* o.send({ agent: agent.id, text: "more", sync: false })
        yield* o.awaitIdle
        expect(mailbox.queuedTurns(agent.id)).toBe(1)
        const before = (yield* eventsOf(agent.session_id)).filter((e) => e.event === "turn.complete").length
        expect(before).toBe(1)

        // The human resumes it: the held turn runs, the item is gone.
        expect(quotas.parkedBy(items[0]!.id)).toBe(agent.id)
        expect(yield* quotas.release(agent.id)).toBe(1)
        yield* o.awaitIdle
        expect((yield* eventsOf(agent.session_id)).filter((e) => e.event === "turn.complete")).toHaveLength(2)
        expect(quotas.inbox()).toEqual([])
        expect(quotas.view(agent.id).parked).toBeNull()
      }).pipe(Effect.provide(layer))
    }))

  it.scoped("through the real MCP server over agent.sock: quota_exceeded with retry-after, refused calls not logged", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("substrat-quota-mcp-")
      const gate = yield* makeGate
      const ctx = yield* Layer.build(stackWith(home, gate.factory).pipe(Layer.provide(Layer.mergeAll(quotaLayer({ messages_per_minute: 3 }), deskLayer))))
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const boss = yield* o.createRoot({ name: "boss", instructions: "", provider: "gated" })
        const sock = makePaths(home).agentSocket(boss.session_id)
        yield* AgentSocket.serve({ path: sock, agent: boss.id })
        const { client } = yield* connectMcp(sock)
        yield* Effect.fork(o.runTurn(boss.id, "flood"))
        const turn = yield* Queue.take(gate.turns)
        const results: Array<{ readonly isError: boolean; readonly json: unknown }> = []
        for (let i = 0; i < 6; i++) {
          const r = (yield* Effect.promise(() =>
            client.callTool({ name: "send_message", arguments: { recipient: "USER", text: `m${i}`, sync: false } })
          )) as { isError?: boolean; content: ReadonlyArray<{ text?: string }> }
          results.push({ isError: r.isError === true, json: JSON.parse(r.content[0]?.text ?? "null") })
        }
        yield* turn.finish("done")
        yield* o.awaitIdle
        expect(results.map((r) => r.isError)).toEqual([false, false, false, true, true, true])
        const err = (results[3]!.json as Refusal).error
        expect(err).toMatchObject({ type: "quota_exceeded", quota: "messages_per_minute", limit: 3 })
        expect(err.retry_after_s).toBeGreaterThan(0)
        expect(err.retry_after_s).toBeLessThanOrEqual(60)
        const log = yield* eventsOf(boss.session_id)
        expect(log.filter((e) => e.event === "tool_call.invoked")).toHaveLength(3)
      }).pipe(Effect.provide(ctx))
    }), 60_000)
})
