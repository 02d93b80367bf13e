import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { tmpDir } from "../support/tmpDir.js"
import { dataOf, eventsOf, names, stack } from "./orchestration.support.js"

describe("orchestration scenarios (scripted provider, file EventLog)", () => {
  it.scoped("a manager spawns 3 workers; each is created after the manager's turn", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir()
      const scripts = {
        boss: {
          steps: [{
            tools: ["w1", "w2", "w3"].map((n) => ({
              tool: "spawn_agent",
              args: { name: n, instructions: `you are ${n}`, role: "worker" }
            })),
            text: "spawned three"
          }]
        }
      }
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "scripted" })
        yield* o.send({ agent: boss.id, text: "build a team" })
        yield* o.awaitIdle
        const all = yield* o.list
        expect(all.map((n) => n.name).sort()).toEqual(["boss", "w1", "w2", "w3"])
        const workers = all.filter((n) => n.parent_id === boss.id)
        expect(workers).toHaveLength(3)
        for (const w of workers) {
          const log = yield* eventsOf(w.session_id)
          expect(names(log)).toEqual(["session.created", "agent.created"])
          const created = dataOf(log, "agent.created")[0]!
          expect(created.parent_session_id).toBe(boss.session_id)
          expect(created.name).toBe(w.name)
        }
        const bossLog = yield* eventsOf(boss.session_id)
        expect(names(bossLog).slice(0, 2)).toEqual(["session.created", "agent.created"])
        expect(dataOf(bossLog, "tool_call.result").map((r) => r.is_error)).toEqual([false, false, false])
        expect(dataOf(bossLog, "turn.complete").map((t) => t.response)).toEqual(["spawned three"])
        const replies = yield* o.userMessages(boss.id)
        expect(replies.map((m) => m.payload)).toEqual(["spawned three"])
      }).pipe(Effect.provide(stack({ home, scripts })))
    }))
})
