// `find:<symbol>` routing (docs/swarm.md, "find:"): the pure next-hop rule and recovery's choice
// of which in-transit searches to resume (FindRoute.ts), and whole searches over the in-memory
// stack: hop messages in each path agent's log, the found copy, the answer back to the searcher.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Schedule } from "effect"
import { AgentTree } from "../../src/agent/AgentTree.js"
import { type HeldHop, nextHop, resumableFinds } from "../../src/agent/FindRoute.js"
import { Finder } from "../../src/agent/Finder.js"
import { Mailbox } from "../../src/agent/Mailbox.js"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { Router } from "../../src/agent/Router.js"
import { Tree } from "../../src/agent/Tree.js"
import { AgentNode } from "../../src/domain/agent.js"
import { AgentId, type MessageId, newMessageId, SessionId } from "../../src/domain/ids.js"
import { MessageEnvelope } from "../../src/domain/message.js"
import { dataOf, eventsOf, stack } from "../integration/orchestration.support.js"

const id = (n: number) => AgentId.make(`00000000-0000-4000-8000-${String(n).padStart(12, "0")}`)
const node = (n: number, name: string, parent: number | null) =>
  new AgentNode({
    id: id(n),
    name,
    session_id: SessionId.make(`10000000-0000-4000-8000-${String(n).padStart(12, "0")}`),
    parent_id: parent === null ? null : id(parent),
    instructions: "",
    role: "worker",
    provider: "scripted",
    workspace_id: null,
    state: "idle"
  })

//        1 root
//      /        \
//    2 a         3 b
//    |          /   \
//   4 a1      5 b1   6 b2
//              |
//            7 deep
const tree = Either.getOrThrow(AgentTree.empty.addAll([
  node(1, "root", null),
  node(2, "a", 1),
  node(3, "b", 1),
  node(4, "a1", 2),
  node(5, "b1", 3),
  node(6, "b2", 3),
  node(7, "deep", 5)
]))

describe("find: next hop (pure)", () => {
  it("goes up to the common ancestor, then down the matching subtree", () => {
    expect(nextHop(tree, id(4), [id(7)])).toEqual({ _tag: "hop", next: id(2), target: id(7) })
    expect(nextHop(tree, id(2), [id(7)])).toEqual({ _tag: "hop", next: id(1), target: id(7) })
    expect(nextHop(tree, id(1), [id(7)])).toEqual({ _tag: "hop", next: id(3), target: id(7) })
    expect(nextHop(tree, id(3), [id(7)])).toEqual({ _tag: "hop", next: id(5), target: id(7) })
    expect(nextHop(tree, id(5), [id(7)])).toEqual({ _tag: "found", target: id(7) })
  })
  it("a match one hop away (parent, child) is found at once; a match up the tree is reached going up", () => {
    expect(nextHop(tree, id(4), [id(2)])).toEqual({ _tag: "found", target: id(2) })
    expect(nextHop(tree, id(1), [id(3)])).toEqual({ _tag: "found", target: id(3) })
    expect(nextHop(tree, id(7), [id(1)])).toEqual({ _tag: "hop", next: id(5), target: id(1) })
  })
  it("the nearest of several matches wins; ties go to the earlier candidate; none: not found", () => {
    expect(nextHop(tree, id(6), [id(4), id(7)])).toEqual({ _tag: "hop", next: id(3), target: id(7) })
    expect(nextHop(tree, id(5), [id(4), id(6)])).toEqual({ _tag: "hop", next: id(3), target: id(6) })
    expect(nextHop(tree, id(4), [])).toEqual({ _tag: "not-found" })
    expect(nextHop(tree, id(4), [id(99)])).toEqual({ _tag: "not-found" })
  })
})

const hop = (agent: number, origin: MessageId, hops: number): HeldHop => ({
  agent: id(agent),
  envelope: new MessageEnvelope({
    id: newMessageId(),
    timestamp: "2026-01-01T00:00:00.000Z",
    sender: id(agent),
    recipient: id(agent),
    reply_to: null,
    kind: "notification",
    payload: "x",
    find: { symbol: "deep", origin, origin_sender: id(4), sync: true, hops, state: "hop", path: [] }
  })
})

describe("find: what recovery resumes (pure)", () => {
  it("one hop per search: the furthest; none once the found copy is logged", () => {
    const s1 = newMessageId()
    const s2 = newMessageId()
    const s3 = newMessageId()
    const a = hop(2, s1, 1)
    const b = hop(1, s1, 2) // logged in root's log before a's `message.forwarded`: the crash came between
    const c = hop(3, s2, 3)
    const d = hop(5, s3, 4) // its found copy is in deep's log already
    const r = resumableFinds([a, b, c, d], new Map([[s3, id(7)]]))
    expect(r.resume.map((h) => h.envelope.id).sort()).toEqual([b.envelope.id, c.envelope.id].sort())
    expect(r.superseded.map((h) => [h.envelope.id, h.to, h.next])).toEqual(
      expect.arrayContaining([[a.envelope.id, id(1), b.envelope.id], [d.envelope.id, id(7), s3]])
    )
    expect(r.superseded).toHaveLength(2)
  })
})

const poll = <A, E, R>(what: Effect.Effect<A | undefined, E, R>) =>
  what.pipe(
    Effect.flatMap((a) => a === undefined ? Effect.fail("not yet" as const) : Effect.succeed(a)),
    Effect.retry(Schedule.spaced("10 millis").pipe(Schedule.upTo("10 seconds")))
  )

describe("find: over the agent tree (in-memory stack)", () => {
  it.scoped("a sync find travels hop by hop (each hop logged, then forwarded); the found agent's answer reaches the searcher", () =>
    Effect.gen(function*() {
      const o = yield* Orchestrator
      const router = yield* Router
      const mailbox = yield* Mailbox
      const t = yield* Tree
      const root = yield* o.createRoot({ name: "root", instructions: "", provider: "scripted" })
      const a = yield* o.spawn(root.id, { name: "a", instructions: "" })
      const b = yield* o.spawn(root.id, { name: "b", instructions: "" })
      const a1 = yield* o.spawn(a.id, { name: "a1", instructions: "" })
      const b1 = yield* o.spawn(b.id, { name: "b1", instructions: "" })
      const deep = yield* o.spawn(b1.id, { name: "deep", instructions: "" })
      // Spawns are born when their parent's turn ends; here they are created outside turns.
      yield* poll(Effect.sync(() => t.has(deep.id) ? true : undefined))

      const sent = yield* router.sendFrom(a1.id, { recipient: "find:deep", text: "where is the date?", sync: true })
      expect(sent.waiting_for_reply).toBe(true)
      // The found copy: the search's id, from the searcher, in deep's log.
      const found = yield* poll(Effect.map(eventsOf(deep.session_id), (es) =>
        dataOf(es, "message.enqueued").find((e) => e.id === sent.message_id)))
      expect(found).toMatchObject({ sender: a1.id, recipient: deep.id, kind: "request", payload: "where is the date?" })
      expect(found.find).toMatchObject({ symbol: "deep", state: "found", hops: 5, path: [a1.id, a.id, root.id, b.id, b1.id, deep.id] })

      // Each path agent's log: the hop enqueued (from the previous agent), then forwarded to the next.
      const path = [a, root, b, b1]
      const next = [root, b, b1, deep]
      let from = a1.id
      for (let i = 0; i < path.length; i++) {
        const es = yield* eventsOf(path[i]!.session_id)
        const hops = dataOf(es, "message.enqueued").filter((e) => e.find?.state === "hop")
        expect(hops).toHaveLength(1)
        expect(hops[0]).toMatchObject({ sender: from, recipient: path[i]!.id, find: { hops: i + 1, origin: sent.message_id } })
        const fw = dataOf(es, "message.forwarded")
        expect(fw).toEqual([{ message_id: hops[0]!.id, to: next[i]!.id, next_message_id: i === path.length - 1 ? sent.message_id : expect.any(String) }])
        // No turn on the way: the daemon carried it.
        expect(es.filter((e) => e.event === "turn.start")).toHaveLength(0)
        expect(mailbox.snapshot().inboxes.get(path[i]!.id) ?? []).toEqual([])
        from = path[i]!.id
      }
      // deep's turn answers; the answer is a response to the search's id in the searcher's log.
      const reply = yield* poll(Effect.map(eventsOf(a1.session_id), (es) =>
        dataOf(es, "message.enqueued").find((e) => e.kind === "response" && e.reply_to === sent.message_id)))
      expect(reply.sender).toBe(deep.id)
    }).pipe(Effect.provide(stack({ scripts: { deep: { steps: [{ text: "here I am" }] } } }))))

  it.scoped("no match: the send fails at once, nothing logged; bad forms are refused", () =>
    Effect.gen(function*() {
      const o = yield* Orchestrator
      const router = yield* Router
      const root = yield* o.createRoot({ name: "root", instructions: "", provider: "scripted" })
      const e = yield* Effect.flip(router.sendFrom(root.id, { recipient: "find:nobody", text: "x", sync: false }))
      expect(e._tag).toBe("RoutingError")
      expect(e.message).toContain(`no agent in your tree matches "nobody"`)
      const empty = yield* Effect.flip(router.sendFrom(root.id, { recipient: "find:", text: "x", sync: false }))
      expect(empty._tag).toBe("InvalidInputError")
      const timed = yield* Effect.flip(router.sendFrom(root.id, { recipient: "find:root", text: "x", sync: true, timeout_seconds: 3 }))
      expect(timed._tag).toBe("InvalidInputError")
      // An agent does not find itself.
      const self = yield* Effect.flip(router.sendFrom(root.id, { recipient: "find:root", text: "x", sync: false }))
      expect(self._tag).toBe("RoutingError")
      const es = yield* eventsOf(root.session_id)
      expect(dataOf(es, "message.enqueued")).toEqual([])
    }).pipe(Effect.provide(stack())))

  // Live clock: `poll` sleeps between attempts.
  it.scopedLive("a search whose target flips sides while it travels stops at its first revisit, not at the hop limit", () =>
    Effect.gen(function*() {
      //        root
      //      /   |   \
      //    l1    s    r1
      //    |          |
      //    l2         r2
      //    |          |
      //    l3         r3
      // The symbol's match changes under the search (the tree changed mid-search): l3, r3, l3, …
      // s → root (toward l3) → r1 (toward r3) → root again (toward l3): a revisit.
      const o = yield* Orchestrator
      const router = yield* Router
      const finder = yield* Finder
      const t = yield* Tree
      const root = yield* o.createRoot({ name: "root", instructions: "", provider: "scripted" })
      const chain = function*(first: string) {
        const n1 = yield* o.spawn(root.id, { name: `${first}1`, instructions: "" })
        const n2 = yield* o.spawn(n1.id, { name: `${first}2`, instructions: "" })
        return [n1, n2, yield* o.spawn(n2.id, { name: `${first}3`, instructions: "" })] as const
      }
      const [, , l3] = yield* chain("l")
      const [r1, , r3] = yield* chain("r")
      const s = yield* o.spawn(root.id, { name: "s", instructions: "" })
      yield* poll(Effect.sync(() => [l3, r3, s].every((n) => t.has(n.id)) ? true : undefined))
      let lookups = 0
      finder.setIndex((symbol) => symbol === "moving" ? [lookups++ % 2 === 0 ? l3.id : r3.id] : [])

      const sent = yield* router.sendFrom(s.id, { recipient: "find:moving", text: "where are you?", sync: true })
      const failed = yield* poll(Effect.map(eventsOf(s.session_id), (es) =>
        dataOf(es, "message.enqueued").find((e) => e.kind === "response" && e.reply_to === sent.message_id)))
      expect(failed.sender).toBe("SYSTEM")
      // Stopped by the revisit check after 2 hops (the hop limit would stop it at 256).
      expect(/went (\d+) hops/.exec(failed.payload)?.[1]).toBe("2")
      expect(failed.payload).toBe(
        `[error] find:moving: the search went 2 hops without reaching it (the tree changed under it); message ${sent.message_id} was not delivered`
      )
      // Two hops, each logged once: into root, into r1; r1 forwarded its hop to nobody.
      const hopsIn = (session: SessionId) =>
        Effect.map(eventsOf(session), (es) => dataOf(es, "message.enqueued").filter((e) => e.find?.origin === sent.message_id))
      expect((yield* hopsIn(root.session_id)).map((e) => e.find?.hops)).toEqual([1])
      expect((yield* hopsIn(r1.session_id)).map((e) => e.find?.hops)).toEqual([2])
      expect(dataOf(yield* eventsOf(r1.session_id), "message.forwarded")).toMatchObject([{ to: null, next_message_id: null }])
      expect(lookups).toBe(3)
    }).pipe(Effect.provide(stack())))
})
