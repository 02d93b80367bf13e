// Handlers of the budget, caps and inbox methods (src/protocol/admin/budget.ts). Thin adapters to the Meter
// (src/meter/Meter.ts); answering a question delivers the answer to the asker as a message from
// USER, its next turn's prompt; "stop" on a spent budget terminates that subtree; "cancel" on a
// queued spawn (src/agent/SpawnQueue.ts) drops it; any answer to an answer-to-USER item marks it
// read (`substrat inbox read <id>`); "resume" on an agent parked by its quotas (src/agent/Quotas.ts)
// lifts the park, "stop" terminates it; allow|allow-always|reject answers an ACP agent's permission
// request (src/provider/acp/Asks.ts).
import { Effect } from "effect"
import { Orchestrator } from "../../agent/Orchestrator.js"
import { answerPrompt } from "../../agent/Prompt.js"
import { Quotas } from "../../agent/Quotas.js"
import { SpawnQueue } from "../../agent/SpawnQueue.js"
import type { AgentNode } from "../../domain/agent.js"
import { InvalidInputError } from "../../domain/errors.js"
import type { AgentId, MessageId } from "../../domain/ids.js"
import { Egress } from "../../egress/Egress.js"
import { Meter } from "../../meter/Meter.js"
import { AcpAsks } from "../../provider/acp/Asks.js"
import { makeResolver } from "../Resolver.js"
import { BudgetGroup, type BudgetView, type CapsView } from "../../protocol/AdminRpcs.js"
import { handlersOf, served } from "./Middleware.js"

export const BudgetHandlers = served(BudgetGroup, Effect.gen(function*() {
  const meter = yield* Meter
  const egress = yield* Egress
  const asks = yield* AcpAsks
  const spawns = yield* SpawnQueue
  const quotas = yield* Quotas
  const orchestrator = yield* Orchestrator
  const resolver = yield* makeResolver
  const resolve = (ref: string) => resolver.liveAgent(ref)
  /** Everything waiting for the human, oldest first. */
  const items = Effect.map(
    Effect.zip(egress.inbox, asks.inbox),
    ([hosts, permissions]) => [...meter.inbox(), ...spawns.inbox(), ...quotas.inbox(), ...hosts, ...permissions].sort((a, b) => a.ts.localeCompare(b.ts))
  )
  /**
   * An item's full id from its id or a unique prefix, like every other id (src/daemon/Refs.ts);
   * a prefix of several: InvalidInput naming them, nothing answered. An unknown id is passed on
   * (each kind's own "not found").
   */
  const itemId = (ref: string) =>
    Effect.flatMap(items, (all) => {
      const r = ref.trim().toLowerCase()
      if (r.length === 0 || all.some((i) => i.id.toLowerCase() === r)) return Effect.succeed(ref.trim())
      const hits = all.filter((i) => i.id.toLowerCase().startsWith(r))
      if (hits.length === 1) return Effect.succeed(hits[0]!.id)
      if (hits.length === 0) return Effect.succeed(ref.trim())
      const named = hits.slice(0, 10).map((i) => `${i.id.slice(0, 12)} (${i.kind}, ${i.agent_name})`).join(", ")
      return Effect.fail(new InvalidInputError({
        field: "id",
        message: `inbox item "${ref.trim()}" is ambiguous: ${hits.length} item ids start with it: ${named}${hits.length > 10 ? ", …" : ""}; use more of the id`
      }))
    })
  const view = (node: AgentNode): BudgetView => ({ ...meter.report(node.id), agent_name: node.name })
  const capsView = (root: AgentNode): CapsView => ({
    root_id: root.id,
    root_name: root.name,
    own: spawns.capsOf(root.id),
    in_force: spawns.inForce(root.id),
    policy: spawns.policy,
    queued: spawns.queuedIn(root.id)
  })
  return handlersOf(BudgetGroup)({
    "caps.set": (p) =>
      Effect.gen(function*() {
        const node = yield* resolve(p.agent)
        if (node.parent_id !== null) {
          const root = spawns.rootOf(node.id)
          return yield* new InvalidInputError({
            field: "agent",
            message: `caps belong to a tree's root, and ${node.name} is not one${root === undefined ? "" : `: set them on ${root.name}`}`
          })
        }
        const { agent: _, ...patch } = p
        if (patch.max_depth === undefined && patch.max_children === undefined && patch.max_live === undefined) {
          return yield* new InvalidInputError({ field: "caps", message: "give at least one of max_depth, max_children, max_live" })
        }
        const own = spawns.capsOf(node.id)
        yield* spawns.setCaps(node.id, {
          max_depth: patch.max_depth !== undefined ? patch.max_depth : own.max_depth,
          max_children: patch.max_children !== undefined ? patch.max_children : own.max_children,
          max_live: patch.max_live !== undefined ? patch.max_live : own.max_live,
          ...(own.quotas === undefined ? {} : { quotas: own.quotas })
        })
        return capsView(node)
      }),

    "caps.show": (p) => Effect.map(resolve(p.agent), (node) => capsView(spawns.rootOf(node.id) ?? node)),

    "budget.set": (p) =>
      Effect.gen(function*() {
        const node = yield* resolve(p.agent)
        const { agent: _, ...patch } = p
        yield* meter.setBudget(node.id, patch)
        return view(node)
      }),

    "budget.show": (p) => Effect.map(resolve(p.agent), view),

    "inbox.list": () => Effect.map(items, (items) => ({ items })),

    "inbox.answer": (q) =>
      Effect.gen(function*() {
        const id = yield* itemId(q.id)
        const p = { id, text: q.text }
        const queued = spawns.queued().find((q) => q.queue_id === p.id)
        if (queued !== undefined) {
          if (p.text.trim().toLowerCase() !== "cancel") {
            return yield* new InvalidInputError({
              field: "answer",
              message: `item ${p.id} is a queued spawn of ${queued.args.name}: it starts by itself when room frees; answer "cancel" to drop it`
            })
          }
          const parent = yield* resolve(queued.parent)
          yield* spawns.cancel(p.id)
          return { id: p.id, kind: "cancel" as const, agent_id: parent.id, agent_name: parent.name }
        }
        const parked = quotas.parkedBy(p.id)
        if (parked !== undefined) {
          const node = yield* resolve(parked)
          const word = p.text.trim().toLowerCase()
          if (word !== "resume" && word !== "stop") {
            return yield* new InvalidInputError({
              field: "answer",
              message: `item ${p.id}: ${node.name} is parked by its quotas: answer "resume" to let it go on, or "stop" to terminate it`
            })
          }
          if (word === "stop") yield* orchestrator.terminate(node.id)
          else yield* quotas.release(node.id)
          return { id: p.id, kind: word === "stop" ? "stop" as const : "resume" as const, agent_id: node.id, agent_name: node.name }
        }
        // An egress request (a refused host, a reached limit): approve adds the host to the workspace's allowlist.
        const egressAnswer = yield* egress.answer(p.id, p.text)
        if (egressAnswer !== null) return { ...egressAnswer, agent_id: egressAnswer.agent_id as AgentId }
        // An ACP agent's permission request (acp.approve = ask): its turn waits on the answer.
        const permission = yield* asks.answer(p.id, p.text)
        if (permission !== null) return { ...permission, agent_id: permission.agent_id as AgentId }
        const unread = meter.inbox().find((i) => i.kind === "answer" && i.id === p.id)
        if (unread !== undefined) {
          yield* meter.markRead([p.id as MessageId])
          const root = yield* resolve(unread.agent_id)
          return { id: p.id, kind: "read" as const, agent_id: root.id, agent_name: root.name }
        }
        const a = yield* meter.answer(p.id, p.text)
        if (a.kind === "question") {
          const sent = yield* orchestrator.send({ agent: a.agent.id, text: answerPrompt(p.id, a.question, p.text), sync: false })
          yield* meter.promote(a.agent.id, sent.message_id)
          yield* meter.unpark(a.agent.id)
        } else {
          yield* orchestrator.terminate(a.agent.id)
        }
        return { id: p.id, kind: a.kind, agent_id: a.agent.id, agent_name: a.agent.name }
      })
  })
}))
