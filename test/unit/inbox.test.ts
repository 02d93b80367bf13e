// Inbox semantics through the real Router/Orchestrator over in-memory storage.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { ToolHandler } from "../../src/agent/ToolHandler.js"
import type { ScriptInput, Scripts } from "../../src/provider/scripted/Script.js"
import { dataOf, eventsOf, names, stack } from "../integration/orchestration.support.js"

const family = Effect.gen(function*() {
  const o = yield* Orchestrator
  const p = yield* o.createRoot({ name: "p", instructions: "parent", provider: "scripted" })
  const a = yield* o.spawn(p.id, { name: "a", instructions: "child a" })
  const b = yield* o.spawn(p.id, { name: "b", instructions: "child b" })
  const tools = yield* ToolHandler
  return { o, p, a, b, as: (id: typeof p.id) => tools.forAgent(id) }
})

const echo: Scripts = { "*": { steps: [], after: "echo" } }

describe("inbox semantics", () => {
  it.scoped("a notification does not wake; it waits, then is prepended to the next turn and delivered", () =>
    Effect.gen(function*() {
      const { o, a, b, as } = yield* family
      const sent = yield* as(a.id).invoke("send_message", { recipient: "b", text: "fyi", sync: false })
      expect(sent.result).toMatchObject({ status: "sent", waiting_for_reply: false })
      yield* o.awaitIdle
      const before = yield* eventsOf(b.session_id)
      expect(names(before)).toEqual(["session.created", "agent.created", "message.enqueued"])
      expect((yield* o.inspect(b.id)).pending_inbox).toBe(1)
      const turn = Option.getOrThrow(yield* o.runTurn(b.id, "hello"))
      expect(turn.prompt).toMatch(/^Message from a \(message [0-9a-f-]+\):\nfyi\n\nhello$/)
      const after = yield* eventsOf(b.session_id)
      expect(names(after).slice(3, 5)).toEqual(["message.delivered", "turn.start"])
      expect((yield* o.inspect(b.id)).pending_inbox).toBe(0)
    }).pipe(Effect.provide(stack({ scripts: echo }))))

  it.scoped("each sync request wakes the recipient for its own turn, in order, and the final text is the reply", () =>
    Effect.gen(function*() {
      const { o, a, b, as } = yield* family
      const r1 = (yield* as(a.id).invoke("send_message", { recipient: "b", text: "one" })).result as { message_id: string }
      const r2 = (yield* as(a.id).invoke("send_message", { recipient: "b", text: "two" })).result as { message_id: string }
      yield* o.awaitIdle
      const bPrompts = dataOf(yield* eventsOf(b.session_id), "turn.start").map((t) => t.prompt)
      expect(bPrompts).toEqual([
        `Message from a (message ${r1.message_id}, reply expected):\none`,
        `Message from a (message ${r2.message_id}, reply expected):\ntwo`
      ])
      const aPrompts = dataOf(yield* eventsOf(a.session_id), "turn.start").map((t) => t.prompt)
      expect(aPrompts).toEqual([
        `Reply from b (to message ${r1.message_id}): echo: a: one`,
        `Reply from b (to message ${r2.message_id}): echo: a: two`
      ])
      expect((yield* o.inspect(a.id)).waiting_for_replies).toBe(0)
    }).pipe(Effect.provide(stack({ scripts: echo }))))

  it.scoped("an explicit send_message(reply_to) answers the request; no second (automatic) reply is sent", () =>
    Effect.gen(function*() {
      const scripts: Scripts = {
        b: (i: ScriptInput) => ({
          tools: [{ tool: "send_message", args: { recipient: "a", text: "explicit answer", reply_to: "{{last_message_id}}" } }],
          text: `final text of turn ${i.turn}`
        })
      }
      yield* Effect.gen(function*() {
        const { o, a, b, as } = yield* family
        const r = (yield* as(a.id).invoke("send_message", { recipient: "b", text: "q?" })).result as { message_id: string }
        yield* o.awaitIdle
        const aLog = yield* eventsOf(a.session_id)
        const replies = dataOf(aLog, "message.enqueued").filter((m) => m.kind === "response")
        expect(replies.map((m) => [m.payload, m.reply_to])).toEqual([["explicit answer", r.message_id]])
        expect(dataOf(aLog, "turn.start").map((t) => t.prompt)).toEqual([
          `Reply from b (to message ${r.message_id}): explicit answer`
        ])
        expect(dataOf(yield* eventsOf(b.session_id), "tool_call.result")[0]!.is_error).toBe(false)
      }).pipe(Effect.provide(stack({ scripts })))
    }))

  it.scoped("messages to a child spawned mid-turn are held until it is born, then delivered", () =>
    Effect.gen(function*() {
      const scripts: Scripts = {
        p: {
          steps: [{
            tools: [
              { tool: "spawn_agent", args: { name: "kid", instructions: "k" } },
              { tool: "send_message", args: { recipient: "kid", text: "welcome", sync: false } },
              { tool: "inspect_agent", args: { name: "kid" } }
            ],
            text: "done"
          }]
        }
      }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const p = yield* o.createRoot({ name: "p", instructions: "", provider: "scripted" })
        yield* o.runTurn(p.id, "spawn")
        yield* o.awaitIdle
        const kid = yield* o.findByName("kid", p.id)
        expect(names(yield* eventsOf(kid.session_id))).toEqual(["session.created", "agent.created", "message.enqueued"])
        const pLog = yield* eventsOf(p.session_id)
        const inspected = dataOf(pLog, "tool_call.result").find((r) => r.tool === "inspect_agent")!
        expect(inspected.result).toMatchObject({ name: "kid", pending_inbox: 1, parent: "p" })
        expect((yield* o.inspect(kid.id)).pending_inbox).toBe(1)
      }).pipe(Effect.provide(stack({ scripts })))
    }))

  it.scoped("USER: a sync message is answered by the turn's final text; only roots may send_message(USER)", () =>
    Effect.gen(function*() {
      const { o, p, a, as } = yield* family
      const { message_id } = yield* o.send({ agent: p.id, text: "status?" })
      yield* o.awaitIdle
      const toUser = yield* o.userMessages(p.id)
      expect(toUser.map((m) => [m.kind, m.reply_to, m.payload])).toEqual([
        ["response", message_id, "echo: USER: status?"]
      ])
      const pLog = yield* eventsOf(p.session_id)
      expect(dataOf(pLog, "message.enqueued").map((m) => m.recipient)).toEqual([p.id, "USER"])
      const denied = yield* as(a.id).invoke("send_message", { recipient: "USER", text: "hi" })
      expect(denied).toMatchObject({ is_error: true, result: { error: { type: "routing_error", reason: "not-one-hop" } } })
      const ok = yield* as(p.id).invoke("send_message", { recipient: "USER", text: "hi", sync: true })
      expect(ok.result).toMatchObject({ status: "sent", waiting_for_reply: false })
      expect((yield* o.userMessages()).map((m) => m.payload).slice(-1)).toEqual(["hi"])
    }).pipe(Effect.provide(stack({ scripts: echo }))))
})
