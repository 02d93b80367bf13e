import { describe, expect, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { ToolHandler } from "../../src/agent/ToolHandler.js"
import type { ScriptInput, Scripts } from "../../src/provider/scripted/Script.js"
import { SessionStore } from "../../src/storage/SessionStore.js"
import { tmpDir } from "../support/tmpDir.js"
import { dataOf, eventsOf, names, stack } from "./orchestration.support.js"

describe("messaging scenarios (scripted provider, file EventLog)", () => {
  it.scoped("a worker's sync request to its parent is answered; the reply is the worker's next prompt", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      const scripts: Scripts = {
        boss: (i: ScriptInput) =>
          i.prompt.includes("Message from w (") && i.prompt.includes("reply expected")
            ? { text: "the answer is 42" }
            : i.turn === 0
            ? {
              tools: [
                { tool: "spawn_agent", args: { name: "w", instructions: "work" } },
                { tool: "send_message", args: { recipient: "w", text: "start working", sync: true } }
              ],
              text: "started w"
            }
            : { text: "ok" },
        w: {
          steps: [
            { tools: [{ tool: "send_message", args: { recipient: "boss", text: "what is the answer?" } }], text: "asked" },
            { text: "thanks: {{prompt}}" }
          ]
        }
      }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "scripted" })
        yield* o.send({ agent: boss.id, text: "go" })
        yield* o.awaitIdle
        const w = yield* o.findByName("w", boss.id)
        const wlog = yield* eventsOf(w.session_id)
        const sent = dataOf(wlog, "tool_call.result")[0]!
        expect(sent.is_error).toBe(false)
        const questionId = (sent.result as { message_id: string }).message_id
        // The question is logged in the recipient's (boss's) log, then delivered.
        const blog = yield* eventsOf(boss.session_id)
        const enq = dataOf(blog, "message.enqueued").find((m) => m.id === questionId)!
        expect(enq.kind).toBe("request")
        expect(enq.payload).toBe("what is the answer?")
        const iEnq = blog.findIndex((e) => e.event === "message.enqueued" && e.data.id === questionId)
        const iDel = blog.findIndex((e) => e.event === "message.delivered" && e.data.message_id === questionId)
        expect(iEnq).toBeGreaterThanOrEqual(0)
        expect(iDel).toBeGreaterThan(iEnq)
        // w's second turn is the reply.
        const prompts = dataOf(wlog, "turn.start").map((t) => t.prompt)
        expect(prompts).toHaveLength(2)
        expect(prompts[1]).toBe(`Reply from boss (to message ${questionId}): the answer is 42`)
        const reply = dataOf(wlog, "message.enqueued").find((m) => m.reply_to === questionId)!
        expect(reply.kind).toBe("response")
        expect(names(wlog).filter((n) => n === "message.delivered").length).toBe(2)
        // boss's request to w was answered by w's first turn's final text.
        const bossPrompts = dataOf(blog, "turn.start").map((t) => t.prompt)
        expect(bossPrompts.some((p) => p.startsWith("Reply from w (to message ") && p.endsWith(": asked"))).toBe(true)
        expect(dataOf(wlog, "turn.complete").map((t) => t.response)).toEqual(["asked", `thanks: ${prompts[1]}`])
      }).pipe(Effect.provide(stack({ home, scripts })))
    }))

  it.scoped("a multicast reaches exactly the siblings, waits in their inboxes, and is prepended to the next turn", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      const scripts: Scripts = {
        r: {
          steps: [{
            tools: [
              ...["a", "b", "c"].map((n) => ({ tool: "spawn_agent", args: { name: n, instructions: n } })),
              { tool: "send_message", args: { recipient: "a", text: "go" } }
            ]
          }]
        },
        a: {
          steps: [{
            tools: [
              { tool: "spawn_agent", args: { name: "a1", instructions: "nephew" } },
              { tool: "broadcast", args: { text: "hello team" } }
            ],
            text: "broadcast sent"
          }]
        },
      }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const r = yield* o.createRoot({ name: "r", instructions: "root", provider: "scripted" })
        yield* o.send({ agent: r.id, text: "go", sync: false })
        yield* o.awaitIdle
        const byName = Object.fromEntries((yield* o.list).map((n) => [n.name, n]))
        const aLog = yield* eventsOf(byName["a"]!.session_id)
        const result = dataOf(aLog, "tool_call.result").find((t) => t.tool === "broadcast")!
        expect(result.result).toMatchObject({ status: "sent", recipient_count: 2 })
        const multicastId = (result.result as { message_id: string }).message_id
        for (const name of ["r", "a", "a1", "b", "c"]) {
          const log = yield* eventsOf(byName[name]!.session_id)
          const copies = dataOf(log, "message.enqueued").filter((m) => m.kind === "multicast")
          if (name === "b" || name === "c") {
            expect(copies).toHaveLength(1)
            expect(copies[0]!.payload).toBe("hello team")
            expect(copies[0]!.multicast_id).toBe(multicastId)
            expect(copies[0]!.recipient).toBe(byName[name]!.id)
          } else {
            expect(copies).toHaveLength(0)
          }
        }
        // Nobody woke b: the copy waits in its inbox.
        expect((yield* o.inspect(byName["b"]!.id)).pending_inbox).toBe(1)
        expect(dataOf(yield* eventsOf(byName["b"]!.session_id), "turn.start")).toHaveLength(0)
        // c calls check_inbox (as through its MCP server, between turns) and sees it, once.
        const tools = (yield* ToolHandler).forAgent(byName["c"]!.id)
        const inbox = yield* tools.invoke("check_inbox", {})
        expect(inbox).toMatchObject({
          is_error: false,
          result: { messages: [{ from: "a", kind: "multicast", text: "hello team" }] }
        })
        expect((yield* tools.invoke("check_inbox", {})).result).toEqual({ messages: [] })
        const cLog = yield* eventsOf(byName["c"]!.session_id)
        const cCopy = dataOf(cLog, "message.enqueued")[0]!
        expect(dataOf(cLog, "message.delivered").map((d) => d.message_id)).toEqual([cCopy.id])
        // b's next turn gets it prepended to the prompt; then it is delivered.
        const out = yield* o.runTurn(byName["b"]!.id, "what now?")
        expect(Option.getOrThrow(out).prompt).toMatch(/^Broadcast from a \(message [0-9a-f-]+\):\nhello team\n\nwhat now\?$/)
        const bLog = yield* eventsOf(byName["b"]!.session_id)
        const copy = dataOf(bLog, "message.enqueued")[0]!
        expect(dataOf(bLog, "message.delivered").map((d) => d.message_id)).toEqual([copy.id])
        expect((yield* o.inspect(byName["b"]!.id)).pending_inbox).toBe(0)
      }).pipe(Effect.provide(stack({ home, scripts })))
    }))

  it.scopedLive("a chain of sync requests deeper than the slot count completes with slots=2", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      const depth = 6
      // Agent n<k>, woken by a request, spawns n<k+1> and sends it a sync request.
      const scripts: Scripts = {
        "*": (i: ScriptInput) => {
          const k = Number(i.agent.slice(1))
          if (i.prompt.includes("reply expected") && k < depth) {
            const child = `n${k + 1}`
            return {
              delay_ms: 2,
              tools: [
                { tool: "spawn_agent", args: { name: child, instructions: "link" } },
                { tool: "send_message", args: { recipient: child, text: `request ${k + 1}` } }
              ],
              text: `${i.agent} forwarded`
            }
          }
          return { text: `${i.agent} done` }
        }
      }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const n0 = yield* o.createRoot({ name: "n0", instructions: "head", provider: "scripted" })
        yield* o.send({ agent: n0.id, text: "start the chain" })
        yield* o.awaitIdle
        const all = yield* o.list
        expect(all).toHaveLength(depth + 1)
        let evictions = 0
        for (const n of all) {
          const log = yield* eventsOf(n.session_id)
          evictions += dataOf(log, "suspend.result").length
          const k = Number(n.name.slice(1))
          const prompts = dataOf(log, "turn.start").map((t) => t.prompt)
          // Each link got the request; every link but the last got its child's reply.
          expect(prompts[0]).toContain(k === 0 ? "start the chain" : `request ${k}`)
          if (k < depth) {
            expect(prompts[1]).toMatch(new RegExp(`^Reply from n${k + 1} \\(to message [0-9a-f-]+\\): n${k + 1} `))
          }
          expect(dataOf(log, "turn.complete").length).toBe(prompts.length)
          expect(n.state).toBe("idle")
        }
        expect(evictions).toBeGreaterThan(0)
        // The answer rule: the first turn left a request outstanding (progress); the reply's turn answers.
        const toUser = yield* o.userMessages(n0.id)
        expect(toUser.map((m) => [m.payload, m.kind, m.progress ?? false])).toEqual([
          ["n0 forwarded", "notification", true],
          ["n0 done", "response", false]
        ])
      }).pipe(Effect.provide(stack({ home, scripts, slots: 2 })))
    }))

  it.scoped("an evicted agent resumes with its script state (slots=1)", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      const scripts: Scripts = {
        a: { steps: [{ text: "a-1" }, { text: "a-2" }, { text: "a-3" }] },
        b: { steps: [{ text: "b-1" }] }
      }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const store = yield* SessionStore
        const a = yield* o.createRoot({ name: "a", instructions: "A", provider: "scripted" })
        const b = yield* o.createRoot({ name: "b", instructions: "B", provider: "scripted" })
        yield* o.runTurn(a.id, "one")
        yield* o.runTurn(b.id, "one")
        // a was evicted to make room for b: blob in session.json, suspend.result logged.
        const rec = yield* store.load(a.session_id)
        expect(rec.state).toBe("suspended")
        const blob = Schema.decodeUnknownSync(Schema.parseJson(Schema.Struct({ turn: Schema.Number })))(
          new TextDecoder().decode(rec.provider_state)
        )
        expect(blob.turn).toBe(1)
        const t2 = yield* o.runTurn(a.id, "two")
        expect(Option.getOrThrow(t2).response).toBe("a-2")
        const alog = yield* eventsOf(a.session_id)
        expect(names(alog)).toEqual([
          "session.created",
          "agent.created",
          "turn.start",
          "usage",
          "turn.complete",
          "suspend.result",
          "session.restored",
          "turn.start",
          "usage",
          "turn.complete"
        ])
        expect(dataOf(alog, "suspend.result")[0]!.state_size).toBe(rec.provider_state.byteLength)
        expect(dataOf(alog, "turn.complete").map((t) => t.response)).toEqual(["a-1", "a-2"])
        expect((yield* store.load(b.session_id)).state).toBe("suspended")
        expect((yield* store.load(a.session_id)).state).toBe("active")
      }).pipe(Effect.provide(stack({ home, scripts, slots: 1 })))
    }))
})
