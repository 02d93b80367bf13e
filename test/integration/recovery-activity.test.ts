// `inspect_agent`'s recent activity (last turns, last messages) survives a restart: recovery
// rebuilds it from the logs (the log fold's rings, the plan, Recovery: src/recovery). One daemon life runs a
// scripted tree through every kind of message and turn and inspects every agent; a fresh life
// recovers from the same $SUBSTRAT_HOME and must show the same recent activity.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import type { AgentInspection } from "../../src/domain/inspection.js"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { makePaths } from "../../src/config/Paths.js"
import type { AgentId } from "../../src/domain/ids.js"
import { Durable } from "../../src/storage/Durable.js"
import type { Scripts } from "../../src/provider/scripted/Script.js"
import { withTmp } from "../support/tmp.js"
import { readLogEvents, recoverLife, startLife, trackedScripted } from "./recovery.support.js"

const registryOf = (scripts: Scripts) => trackedScripted(scripts, { messages: [] }, () => true)

const long = (tag: string) => `${tag} ${"x".repeat(300)}`

const scripts: Scripts = {
  boss: {
    steps: [
      {
        tools: [
          { tool: "spawn_agent", args: { name: "w1", instructions: "work" } },
          { tool: "spawn_agent", args: { name: "w2", instructions: "work" } }
        ],
        text: "spawned"
      },
      {
        tools: [
          { tool: "send_message", args: { recipient: "w1", text: long("please do it"), sync: true } },
          { tool: "send_message", args: { recipient: "w2", text: "fyi", sync: false } },
          { tool: "send_message", args: { recipient: "nobody", text: "lost" } }
        ],
        text: long("asked")
      },
      { tools: [{ tool: "send_message", args: { recipient: "USER", text: "report: {{prompt}}" } }], text: "thanks" },
      { text: "all good" },
      { error: "boom" }
    ],
    after: "echo"
  },
  w1: {
    steps: [{
      tools: [
        { tool: "broadcast", args: { text: "team note" } },
        { tool: "send_message", args: { recipient: "boss", text: "explicit answer", reply_to: "{{last_message_id}}" } }
      ],
      text: "done"
    }],
    after: "silent"
  },
  w2: {
    steps: [{ tools: [{ tool: "send_message", args: { recipient: "w1", text: "peer note", sync: false } }], text: "ok" }],
    after: "silent"
  }
}

type Recent = Pick<AgentInspection, "name" | "recent_turns" | "recent_messages">
const recent = (i: AgentInspection): Recent => ({
  name: i.name,
  recent_turns: i.recent_turns,
  recent_messages: i.recent_messages
})

const inspectAll = (o: Orchestrator, ids: ReadonlyArray<AgentId>) =>
  Effect.forEach(ids, (id) => Effect.map(o.inspect(id), recent))

describe("recovery: recent activity", () => {
  it("inspect shows the same recent turns and messages after a restart (and after a second one)", async () => {
    await withTmp(async (home) => {
      const life = startLife(home, Durable.layer, registryOf(scripts))
      let ids: ReadonlyArray<AgentId>
      let before: ReadonlyArray<Recent>
      try {
        const r = await life.runPromise(Effect.flatMap(Orchestrator, (o) =>
          Effect.gen(function*() {
            const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "scripted" })
            yield* o.send({ agent: boss.id, text: "start", sync: false })
            yield* o.awaitIdle
            yield* o.send({ agent: boss.id, text: "ask", sync: false })
            yield* o.awaitIdle
            const w1 = yield* o.findByName("w1", boss.id)
            const w2 = yield* o.findByName("w2", boss.id)
            yield* o.send({ agent: w2.id, text: "hi w2", sync: false })
            yield* o.awaitIdle
            yield* o.send({ agent: boss.id, text: "status?", sync: true })
            yield* o.awaitIdle
            yield* o.send({ agent: boss.id, text: "fail now", sync: false })
            yield* o.awaitIdle
            const all = [boss.id, w1.id, w2.id]
            return { ids: all, before: yield* inspectAll(o, all) }
          })))
        ids = r.ids
        before = r.before
      } finally {
        await life.dispose()
      }

      // The scenario covers what recovery has to rebuild (so the comparison below means something).
      const [boss, w1, w2] = before
      expect(boss!.recent_turns.map((t) => t.error === null)).toEqual([true, true, false])
      expect(boss!.recent_turns[2]!.error).toContain("boom")
      expect(boss!.recent_turns[0]!.response).toBe("thanks")
      // w1's answer can be logged before or after boss's own "fyi" to w2 (w1's turn runs while boss's
      // continues), so the last five start with one or the other.
      const bossMessages = boss!.recent_messages.map((m) => `${m.direction}:${m.peer}:${m.kind}`)
      expect(["in:w1:response", "out:w2:notification"]).toContain(bossMessages[0])
      expect(bossMessages.slice(1)).toEqual([
        "out:USER:notification",
        "in:USER:request",
        "out:USER:response",
        "in:USER:notification"
      ])
      expect(w1!.recent_messages.map((m) => `${m.direction}:${m.peer}:${m.kind}:${m.text}`)).toEqual([
        expect.stringMatching(/^in:boss:request:please do it x+…$/),
        "out:w2:multicast:team note",
        "out:boss:response:explicit answer",
        "in:w2:notification:peer note"
      ])
      // boss's "fyi" and w1's broadcast reach w2 from two turns running at once: either comes first
      // (the restarts below must then show the order this life logged).
      const w2Messages = w2!.recent_messages.map((m) => `${m.direction}:${m.peer}:${m.kind}`)
      expect([...w2Messages.slice(0, 2)].sort()).toEqual(["in:boss:notification", "in:w1:multicast"])
      expect(w2Messages.slice(2)).toEqual(["in:USER:notification", "out:w1:notification"])
      expect(w2!.recent_turns).toHaveLength(1)

      for (let restart = 1; restart <= 2; restart++) {
        const r = await recoverLife(home, registryOf(scripts))
        try {
          const after = await r.life.runPromise(Effect.flatMap(Orchestrator, (o) => inspectAll(o, ids)))
          expect(after, `restart ${restart}`).toEqual(before)
        } finally {
          await r.life.dispose()
        }
      }
    })
  })

  it("a reply recovery re-delivers is noted like a delivery, and the next restart reads the same back", async () => {
    await withTmp(async (home) => {
      const ask: Scripts = {
        boss: {
          steps: [
            { tools: [{ tool: "spawn_agent", args: { name: "w1", instructions: "work" } }], text: "spawned" },
            { tools: [{ tool: "send_message", args: { recipient: "w1", text: "do it", sync: true } }], text: "asked" }
          ],
          after: "silent"
        },
        w1: { steps: [{ text: "done" }], after: "silent" }
      }
      const life = startLife(home, Durable.layer, registryOf(ask))
      const ids = await life.runPromise(Effect.flatMap(Orchestrator, (o) =>
        Effect.gen(function*() {
          const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "scripted" })
          yield* o.send({ agent: boss.id, text: "spawn", sync: false })
          yield* o.awaitIdle
          yield* o.send({ agent: boss.id, text: "ask", sync: false })
          yield* o.awaitIdle
          return { boss, w1: yield* o.findByName("w1", boss.id) }
        }))).finally(() => life.dispose())
      // A crash after w1's turn ended, before its auto-reply was enqueued to boss.
      const request = readLogEvents(home, ids.w1.session_id).find((e) =>
        e.event === "message.enqueued" && e.data["kind"] === "request"
      )!.data["id"] as string
      const file = makePaths(home).eventsFile(ids.boss.session_id)
      const lines = fs.readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0)
      const cut = lines.findIndex((l) => {
        const e = JSON.parse(l) as { event: string; data: Record<string, unknown> }
        return e.event === "message.enqueued" && e.data["reply_to"] === request
      })
      expect(cut).toBeGreaterThan(0)
      fs.writeFileSync(file, lines.slice(0, cut).map((l) => `${l}\n`).join(""))

      const seen: Array<ReadonlyArray<Recent>> = []
      for (let restart = 1; restart <= 2; restart++) {
        const r = await recoverLife(home, registryOf(ask))
        try {
          if (restart === 1) expect(r.report.repliesRedelivered).toBe(1)
          seen.push(await r.life.runPromise(Effect.flatMap(Orchestrator, (o) => inspectAll(o, [ids.boss.id, ids.w1.id]))))
        } finally {
          await r.life.dispose()
        }
      }
      expect(seen[0]![0]!.recent_messages.map((m) => `${m.direction}:${m.peer}:${m.kind}:${m.text}`)).toEqual([
        "in:USER:notification:spawn",
        "in:USER:notification:ask",
        "out:w1:request:do it",
        "in:w1:response:done"
      ])
      expect(seen[1]).toEqual(seen[0])
    })
  })
})
