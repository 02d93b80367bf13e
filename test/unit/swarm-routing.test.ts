// Routing forms beside names (docs/swarm.md): `parent`, `broadcast:children`, `broadcast:siblings`,
// through the Router over the in-memory stack: who gets a copy (in its log and inbox), who does not.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { Router } from "../../src/agent/Router.js"
import { Mailbox } from "../../src/agent/Mailbox.js"
import { stack } from "../integration/orchestration.support.js"

const inboxTexts = (mailbox: Mailbox, id: Parameters<Mailbox["inboxIds"]>[0]) =>
  (mailbox.snapshot().inboxes.get(id) ?? []).map((e) => e.payload)

describe("swarm routing forms", () => {
  it.scoped("parent, broadcast:children and broadcast:siblings reach exactly their one-hop agents", () =>
    Effect.gen(function*() {
      const o = yield* Orchestrator
      const router = yield* Router
      const mailbox = yield* Mailbox
      const root = yield* o.createRoot({ name: "root", instructions: "", provider: "scripted" })
      const a = yield* o.spawn(root.id, { name: "a", instructions: "" })
      const b = yield* o.spawn(root.id, { name: "b", instructions: "" })
      const c = yield* o.spawn(root.id, { name: "c", instructions: "" })
      const a1 = yield* o.spawn(a.id, { name: "a1", instructions: "" })
      const a2 = yield* o.spawn(a.id, { name: "a2", instructions: "" })

      yield* router.sendFrom(a1.id, { recipient: "parent", text: "to my parent", sync: false })
      expect(inboxTexts(mailbox, a.id)).toEqual(["to my parent"])

      const kids = yield* router.sendFrom(a.id, { recipient: "broadcast:children", text: "to my children", sync: false })
      expect(kids.waiting_for_reply).toBe(false)
      expect(inboxTexts(mailbox, a1.id)).toEqual(["to my children"])
      expect(inboxTexts(mailbox, a2.id)).toEqual(["to my children"])
      expect(inboxTexts(mailbox, b.id)).toEqual([])

      yield* router.sendFrom(b.id, { recipient: "broadcast:siblings", text: "to my siblings", sync: false })
      expect(inboxTexts(mailbox, a.id)).toEqual(["to my parent", "to my siblings"])
      expect(inboxTexts(mailbox, c.id)).toEqual(["to my siblings"])
      expect(inboxTexts(mailbox, b.id)).toEqual([])
      expect(inboxTexts(mailbox, root.id)).toEqual([])

      const noParent = yield* Effect.flip(router.sendFrom(root.id, { recipient: "parent", text: "x", sync: false }))
      expect(noParent._tag).toBe("RoutingError")
      const badReply = yield* Effect.flip(router.sendFrom(a.id, { recipient: "broadcast:children", text: "x", sync: true, timeout_seconds: 5 }))
      expect(badReply._tag).toBe("InvalidInputError")
    }).pipe(Effect.provide(stack())))
})
