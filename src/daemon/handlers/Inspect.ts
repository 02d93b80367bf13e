// `agent.inspect`: a live agent from the orchestrator; an agent no longer in the tree from what
// its event log says (usage, its last turns and messages).
import { Effect, Option, Stream } from "effect"
import { Orchestrator } from "../../agent/Orchestrator.js"
import { Quotas } from "../../agent/Quotas.js"
import type { AgentNode } from "../../domain/agent.js"
import { addUsage, zeroWithTurns } from "../../domain/usage.js"
import { EventLog } from "../../storage/EventLog.js"
import { Progress } from "../Progress.js"
import type { Resolver } from "../Resolver.js"
import type { InspectResult } from "../../protocol/AdminRpcs.js"
import { clip, makeSessions } from "./Shared.js"

export const makeInspect = (resolver: Resolver) => Effect.gen(function*() {
  const orchestrator = yield* Orchestrator
  const log = yield* EventLog
  const progress = yield* Progress
  const quotas = yield* Quotas
  const sessions = yield* makeSessions

  const gone = (node: AgentNode) =>
    Effect.gen(function*() {
      const nameOf = yield* resolver.names
      const entries = yield* log.read(node.session_id).pipe(Stream.runCollect)
      let usage = zeroWithTurns
      const turns = new Map<string, { prompt: string; response: string; error: string | null }>()
      const messages: Array<InspectResult["recent_messages"][number]> = []
      for (const e of entries) {
        if (e.event === "usage") usage = { ...addUsage(usage, e.data), turns: usage.turns }
        else if (e.event === "turn.start") turns.set(e.data.turn_id, { prompt: clip(e.data.prompt), response: "", error: null })
        else if (e.event === "turn.complete") {
          usage = { ...usage, turns: usage.turns + 1 }
          const t = turns.get(e.data.turn_id)
          if (t) t.response = clip(e.data.response)
        } else if (e.event === "provider.error" && e.data.turn_id !== null) {
          const t = turns.get(e.data.turn_id)
          if (t) t.error = clip(e.data.message)
        } else if (e.event === "message.enqueued" && e.data.recipient === node.id) {
          const peer = e.data.sender === "USER" || e.data.sender === "SYSTEM" ? e.data.sender : e.data.sender_name ?? nameOf(e.data.sender)
          messages.push({ direction: "in", peer, kind: e.data.kind, message_id: e.data.id, text: clip(e.data.payload) })
        }
      }
      const session = yield* sessions.infoOf(node.session_id)
      const children = yield* resolver.goneChildren(node)
      const result: InspectResult = {
        agent: node,
        session: Option.getOrNull(session),
        parent: node.parent_id === null ? null : nameOf(node.parent_id),
        children,
        inbox: 0,
        queued_turns: 0,
        waiting_for_replies: 0,
        usage: { own: usage, subtree: usage },
        recent_turns: [...turns].slice(-3).map(([turn_id, t]) => ({ turn_id, ...t })),
        recent_messages: messages.slice(-5)
      }
      return result
    })

  return {
    "agent.inspect": (p: { readonly agent: string }) =>
      Effect.gen(function*() {
        const { live, node } = yield* resolver.agent(p.agent, { terminated: true })
        if (!live) return yield* gone(node)
        const i = yield* orchestrator.inspect(node.id)
        const session = yield* sessions.infoOf(node.session_id)
        const result: InspectResult = {
          agent: node,
          session: Option.getOrNull(session),
          parent: i.parent,
          children: orchestrator.lookup.children(node.id),
          inbox: i.pending_inbox,
          queued_turns: i.queued_turns,
          waiting_for_replies: i.waiting_for_replies,
          usage: { own: i.usage.own, subtree: i.usage.subtree },
          recent_turns: i.recent_turns,
          recent_messages: i.recent_messages,
          activity: progress.of(node.id) ?? null,
          ...(quotas.enabled ? { quotas: quotas.view(node.id) } : {})
        }
        return result
      })
  }
})
