// The SpawnQueue in-process (orchestration stack, scripted provider, in-memory logs): the
// max_live cap of a tree, the queue's order and positions, the same spawn asked again, the
// SYSTEM message that wakes the parent, and the human's cancel — asserted on tool results, the
// parent's log and the tree.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { CapsConfig, SpawnQueue } from "../../src/agent/SpawnQueue.js"
import { ToolHandler } from "../../src/agent/ToolHandler.js"
import { dataOf, eventsOf, stack } from "./orchestration.support.js"

const withCaps = (maxLive: number) =>
  stack({ scripts: { "*": { steps: [], after: "echo" } } }).pipe(
    Layer.provide(CapsConfig.layer({ max_depth: null, max_children: null, max_live: maxLive }, "queue"))
  )

describe("spawn queue (tree caps)", () => {
  it.scoped("past max_live: queued in order, started as agents finish their work, cancelled by the human", () =>
    Effect.gen(function*() {
      const o = yield* Orchestrator
      const spawns = yield* SpawnQueue
      const r = yield* o.createRoot({ name: "r", instructions: "", provider: "scripted" })
      const t = (yield* ToolHandler).forAgent(r.id)
      const spawn = (name: string) => t.invoke("spawn_agent", { name, instructions: `be ${name}` })
      // The idle root holds no place; a, b and c (no turn run yet) fill the tree's 3.
      for (const n of ["a", "b", "c"]) expect((yield* spawn(n)).result).toMatchObject({ status: "created", name: n })
      const d = yield* spawn("d")
      const e = yield* spawn("e")
      expect(d.result).toMatchObject({ status: "queued", name: "d", position: 1, reason: "3 of at most 3 live agents in the tree r (max_live)" })
      expect(e.result).toMatchObject({ status: "queued", name: "e", position: 2 })
      // Asked again (a re-run turn): the same place, not a second entry.
      expect((yield* spawn("e")).result).toMatchObject({ status: "queued", queue_id: (e.result as { queue_id: string }).queue_id, position: 2 })
      expect(spawns.inbox().map((i) => [i.kind, i.agent_name, i.text.slice(0, 34)])).toEqual([
        ["queued_spawn", "r", "r's spawn of d waits (position 1 i"],
        ["queued_spawn", "r", "r's spawn of e waits (position 2 i"]
      ])
      expect(dataOf(yield* eventsOf(r.session_id), "spawn.queued").map((q) => [q.name, q.instructions])).toEqual([["d", "be d"], ["e", "be e"]])

      // a works one turn and is done: d starts (e still waits: b, c and d are live).
      yield* o.runTurn((yield* o.findByName("a", r.id)).id, "work")
      yield* o.awaitIdle
      const names = (yield* o.list).map((n) => n.name).sort()
      expect(names).toEqual(["a", "b", "c", "d", "r"])
      const dNode = yield* o.findByName("d", r.id)
      const log = yield* eventsOf(r.session_id)
      expect(dataOf(log, "spawn.started")).toEqual([{ queue_id: (d.result as { queue_id: string }).queue_id, agent_id: dNode.id }])
      // r was woken by the daemon's message.
      expect(dataOf(log, "turn.start").map((s) => s.prompt).join("\n")).toContain("Your queued spawn_agent of \"d\" has started")
      expect(spawns.queued().map((q) => [q.args.name, spawns.inbox()[0]!.text.includes("position 1")])).toEqual([["e", true]])

      // The human cancels e: spawn.failed in r's log, r is told, nothing is made.
      const eid = (e.result as { queue_id: string }).queue_id
      expect((yield* spawns.cancel(eid))?.args.name).toBe("e")
      yield* o.awaitIdle
      const after = yield* eventsOf(r.session_id)
      expect(dataOf(after, "spawn.failed")).toEqual([{ queue_id: eid, message: "spawn_agent of \"e\" was cancelled by the human" }])
      expect(dataOf(after, "turn.start").map((s) => s.prompt).join("\n")).toContain("was cancelled by the human")
      expect(spawns.queued()).toEqual([])
      expect((yield* o.list).map((n) => n.name).sort()).toEqual(["a", "b", "c", "d", "r"])
    }).pipe(Effect.provide(withCaps(3))))

  it.scoped("a termination frees room: the queued spawn starts", () =>
    Effect.gen(function*() {
      const o = yield* Orchestrator
      const r = yield* o.createRoot({ name: "r", instructions: "", provider: "scripted" })
      const t = (yield* ToolHandler).forAgent(r.id)
      expect((yield* t.invoke("spawn_agent", { name: "a", instructions: "" })).result).toMatchObject({ status: "created" })
      expect((yield* t.invoke("spawn_agent", { name: "b", instructions: "" })).result).toMatchObject({ status: "queued", position: 1 })
      yield* o.terminate((yield* o.findByName("a", r.id)).id)
      yield* o.awaitIdle
      expect((yield* o.list).map((n) => n.name).sort()).toEqual(["b", "r"])
      expect(dataOf(yield* eventsOf(r.session_id), "spawn.started")).toHaveLength(1)
    }).pipe(Effect.provide(withCaps(1))))
})
