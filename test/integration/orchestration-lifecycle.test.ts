import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Fiber, Option, Stream } from "effect"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { ToolHandler } from "../../src/agent/ToolHandler.js"
import { ProviderRegistry } from "../../src/provider/ProviderRegistry.js"
import type { Scripts } from "../../src/provider/scripted/Script.js"
import { Multiplexer } from "../../src/session/Multiplexer.js"
import { SessionStore } from "../../src/storage/SessionStore.js"
import { dataOf, eventsOf, names, stack } from "./orchestration.support.js"

describe("lifecycle, tools and errors", () => {
  it.scoped("terminate takes the subtree (children first), logs agent.terminated, stops providers, answers pending requests", () =>
    Effect.gen(function*() {
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const mux = yield* Multiplexer
        const store = yield* SessionStore
        const tools = yield* ToolHandler
        const r = yield* o.createRoot({ name: "r", instructions: "", provider: "scripted" })
        const a = yield* o.spawn(r.id, { name: "a", instructions: "" })
        const x = yield* o.spawn(a.id, { name: "x", instructions: "" })
        const b = yield* o.spawn(r.id, { name: "b", instructions: "" })
        yield* o.runTurn(a.id, "warm up")
        yield* o.runTurn(x.id, "warm up")
        expect((yield* mux.info).map((i) => i.session_id)).toContain(a.session_id)
        // b asks a something, and a is terminated before its turn can run (in-memory storage:
        // nothing between the two yields to the dispatcher).
        const [req, ids] = yield* Effect.all([
          tools.forAgent(b.id).invoke("send_message", { recipient: "a", text: "are you there?" }),
          o.terminate(a.id)
        ])
        const reqId = (req.result as { message_id: string }).message_id
        expect(ids).toEqual([a.id, x.id])
        yield* o.awaitIdle
        expect((yield* o.list).map((n) => n.name).sort()).toEqual(["b", "r"])
        for (const n of [a, x]) {
          const log = yield* eventsOf(n.session_id)
          expect(names(log).at(-1)).toBe("agent.terminated")
          expect((yield* store.load(n.session_id)).state).toBe("terminated")
        }
        const live = (yield* mux.info).map((i) => i.session_id)
        expect(live).not.toContain(a.session_id)
        expect(live).not.toContain(x.session_id)
        const bPrompts = dataOf(yield* eventsOf(b.session_id), "turn.start").map((t) => t.prompt)
        expect(bPrompts).toHaveLength(1)
        expect(bPrompts[0]).toMatch(new RegExp(`^Reply from a \\(to message ${reqId}\\): \\[error\\] a was terminated`))
        expect((yield* o.inspect(b.id)).waiting_for_replies).toBe(0)
        expect(Either.isLeft(yield* Effect.either(o.get(a.id)))).toBe(true)
      }).pipe(Effect.provide(stack({ scripts: { "*": { steps: [], after: "echo" } } })))
    }))

  it.scoped("tools answer with JSON errors: bad arguments, unknown tool, routing error, name collision", () =>
    Effect.gen(function*() {
      const o = yield* Orchestrator
      const r = yield* o.createRoot({ name: "r", instructions: "", provider: "scripted" })
      const a = yield* o.spawn(r.id, { name: "a", instructions: "" })
      const t = (yield* ToolHandler).forAgent(r.id)
      expect(yield* t.invoke("send_message", { recipient: "a" })).toMatchObject({
        is_error: true,
        result: { error: { type: "invalid_arguments" } }
      })
      expect(yield* t.invoke("send_message", { recipient: "a", text: "x", sync: "yes" })).toMatchObject({
        is_error: true,
        result: { error: { type: "invalid_arguments" } }
      })
      expect(yield* t.invoke("check_inbox", { surprise: 1 })).toMatchObject({ is_error: true })
      expect(yield* t.invoke("rm_rf", {})).toMatchObject({ result: { error: { type: "unknown_tool" } } })
      expect(yield* t.invoke("send_message", { recipient: "ghost", text: "x" })).toMatchObject({
        result: { error: { type: "routing_error", reason: "unknown-recipient" } }
      })
      expect(yield* t.invoke("spawn_agent", { name: "a", instructions: "dup" })).toMatchObject({
        result: { error: { type: "name_taken" } }
      })
      expect(yield* t.invoke("spawn_agent", { name: "bad name!", instructions: "" })).toMatchObject({
        result: { error: { type: "invalid_arguments", field: "name" } }
      })
      expect(yield* t.invoke("spawn_agent", { name: "USER", instructions: "" })).toMatchObject({ is_error: true })
      const ok = yield* t.invoke("spawn_agent", { name: "c", instructions: "", role: "reviewer" })
      expect(ok).toMatchObject({ is_error: false, result: { status: "created", name: "c" } })
      expect((yield* o.findByName("c", r.id)).role).toBe("reviewer")
      // every call is logged, errors included
      const log = yield* eventsOf(r.session_id)
      expect(dataOf(log, "tool_call.invoked")).toHaveLength(9)
      expect(dataOf(log, "tool_call.result").filter((x) => x.is_error)).toHaveLength(8)
      expect(a.parent_id).toBe(r.id)
    }).pipe(Effect.provide(stack())))

  it.scoped("a provider error logs provider.error, answers the request with an error, and the session stays usable", () =>
    Effect.gen(function*() {
      const scripts: Scripts = { w: { steps: [{ error: "model overloaded" }, { text: "back" }] } }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const r = yield* o.createRoot({ name: "r", instructions: "", provider: "scripted" })
        const w = yield* o.spawn(r.id, { name: "w", instructions: "" })
        const req = yield* (yield* ToolHandler).forAgent(r.id).invoke("send_message", { recipient: "w", text: "go" })
        const reqId = (req.result as { message_id: string }).message_id
        yield* o.awaitIdle
        const wlog = yield* eventsOf(w.session_id)
        expect(dataOf(wlog, "provider.error")).toMatchObject([{ reason: "turn", message: "model overloaded" }])
        expect(dataOf(wlog, "turn.complete")).toHaveLength(0)
        const rPrompts = dataOf(yield* eventsOf(r.session_id), "turn.start").map((t) => t.prompt)
        expect(rPrompts).toEqual([`Reply from w (to message ${reqId}): [error] w failed to answer: model overloaded`])
        const again = Option.getOrThrow(yield* o.runTurn(w.id, "retry"))
        expect(again).toMatchObject({ response: "back", error: null })
        expect((yield* o.inspect(w.id)).recent_turns.map((t) => t.error)).toEqual(["turn: model overloaded", null])
      }).pipe(Effect.provide(stack({ scripts })))
    }))

  it.scoped("an unknown provider is a typed ProviderError; a turn on it logs provider.error", () =>
    Effect.gen(function*() {
      const reg = yield* ProviderRegistry
      const e = yield* Effect.flip(reg.get("nope:x"))
      expect(e).toMatchObject({ _tag: "ProviderError", reason: "unknown-provider" })
      const o = yield* Orchestrator
      const r = yield* o.createRoot({ name: "r", instructions: "", provider: "nope" })
      const out = Option.getOrThrow(yield* o.runTurn(r.id, "hi"))
      expect(out.error?.reason).toBe("unknown-provider")
      expect(dataOf(yield* eventsOf(r.session_id), "provider.error")[0]!.reason).toBe("unknown-provider")
    }).pipe(Effect.provide(stack())))

  it.scoped("usage totals per agent and per subtree survive termination of descendants", () =>
    Effect.gen(function*() {
      const u = (n: number) => ({ input_tokens: n, output_tokens: 2 * n, cache_read_tokens: 0, cache_write_tokens: 0, cost_usd: n / 100 })
      const scripts: Scripts = {
        r: { steps: [{ text: "r", usage: u(10) }] },
        a: { steps: [{ text: "a", usage: u(1) }] },
        x: { steps: [{ text: "x", usage: u(100) }] }
      }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const r = yield* o.createRoot({ name: "r", instructions: "", provider: "scripted" })
        const a = yield* o.spawn(r.id, { name: "a", instructions: "" })
        const x = yield* o.spawn(a.id, { name: "x", instructions: "" })
        for (const n of [r, a, x]) yield* o.runTurn(n.id, "go")
        const usageEvents = dataOf(yield* eventsOf(x.session_id), "usage")
        expect(usageEvents).toMatchObject([{ input_tokens: 100, output_tokens: 200, cost_usd: 1 }])
        expect((yield* o.usage(r.id)).own).toEqual({ ...u(10), turns: 1 })
        expect((yield* o.usage(r.id)).subtree).toEqual({ ...u(111), turns: 3 })
        expect((yield* o.usage(a.id)).subtree).toEqual({ ...u(101), turns: 2 })
        yield* o.terminate(x.id)
        expect((yield* o.usage(a.id)).subtree).toEqual({ ...u(101), turns: 2 })
        yield* o.terminate(a.id)
        expect((yield* o.usage(r.id)).subtree).toEqual({ ...u(111), turns: 3 })
      }).pipe(Effect.provide(stack({ scripts })))
    }))

  it.scoped("the demo script: a root spawns two workers, asks both, they broadcast/check inbox, USER gets a summary", () =>
    Effect.gen(function*() {
      const o = yield* Orchestrator
      const lead = yield* o.createRoot({ name: "lead", instructions: "lead", provider: "scripted:demo" })
      yield* o.send({ agent: lead.id, text: "run the demo" })
      yield* o.awaitIdle
      expect((yield* o.list).map((n) => n.name).sort()).toEqual(["alice", "bob", "lead"])
      const toUser = (yield* o.userMessages(lead.id)).map((m) => m.payload)
      expect(toUser[0]).toMatch(/spawned alice and bob/)
      expect(toUser).toContain("Both workers answered; the team is done.")
      const bob = yield* o.findByName("bob", lead.id)
      const bobLog = yield* eventsOf(bob.session_id)
      expect(dataOf(bobLog, "message.enqueued").some((m) => m.kind === "multicast")).toBe(true)
    }).pipe(Effect.provide(stack())))

  it.scoped("output: an attached client sees the turn, its chunks, tool calls and the message to USER", () =>
    Effect.gen(function*() {
      const scripts: Scripts = {
        r: { steps: [{ tools: [{ tool: "check_inbox", args: {} }], text: "two words" }] }
      }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const r = yield* o.createRoot({ name: "r", instructions: "", provider: "scripted" })
        const out = yield* o.subscribe(r.id)
        const collected = yield* Effect.fork(
          out.pipe(Stream.takeUntil((e) => e._tag === "TurnCompleted"), Stream.runCollect)
        )
        yield* o.send({ agent: r.id, text: "hi" })
        const events = [...(yield* Fiber.join(collected))]
        expect(events.map((e) => e._tag)).toEqual(["TurnStarted", "ToolCalled", "Text", "Text", "MessageToUser", "TurnCompleted"])
        expect(events.filter((e) => e._tag === "Text").map((e) => e.text).join("")).toBe("two words")
        yield* o.awaitIdle
        expect((yield* o.userMessages(r.id)).map((m) => m.payload)).toEqual(["two words"])
        yield* o.suspendAll()
        expect((yield* (yield* SessionStore).load(r.session_id)).state).toBe("suspended")
      }).pipe(Effect.provide(stack({ scripts })))
    }))

  it.scoped("session suspend / resume / delete", () =>
    Effect.gen(function*() {
      const o = yield* Orchestrator
      const store = yield* SessionStore
      const r = yield* o.createRoot({ name: "r", instructions: "", provider: "scripted" })
      yield* o.runTurn(r.id, "hi")
      expect(yield* o.suspend(r.session_id)).toBe(true)
      expect((yield* store.load(r.session_id)).state).toBe("suspended")
      yield* o.resume(r.session_id)
      expect((yield* store.load(r.session_id)).state).toBe("active")
      expect(names(yield* eventsOf(r.session_id)).slice(-2)).toEqual(["suspend.result", "session.restored"])
      expect((yield* o.sessions).map((s) => s.id)).toContain(r.session_id)
      yield* o.deleteSession(r.session_id)
      expect((yield* o.sessions).map((s) => s.id)).not.toContain(r.session_id)
      expect(yield* o.list).toEqual([])
    }).pipe(Effect.provide(stack())))
})
