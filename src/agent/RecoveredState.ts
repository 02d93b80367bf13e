// What crash recovery hands the agent services: plain data, built from the event logs, plus the
// turns it queues. `StateSeeding` is the one door recovery uses: `seed` fills the (empty) tree,
// mailboxes, pending requests and activity in one step; `queueTurns` queues the turns recovery
// implies; `armTimeouts` starts the reply timers of the pending requests that carry a timeout
// (deadline: the request's timestamp + its timeout; one already past fires at once).
import { Effect } from "effect"
import type { AgentId, MessageId } from "../domain/ids.js"
import type { MessageEnvelope } from "../domain/message.js"
import type { AgentUsage, RecentActivity } from "./Activity.js"
import type { AgentTree } from "./AgentTree.js"
import type { PendingRequest } from "./Requests.js"
import { OrchestratorState } from "./OrchestratorState.js"
import { Router } from "./Router.js"

export interface RecoveredState {
  readonly tree: AgentTree
  /** Pending messages per live agent, in enqueue order (an agent absent here gets an empty inbox). */
  readonly inboxes: ReadonlyMap<AgentId, ReadonlyArray<MessageEnvelope>>
  /** Sync requests still waiting for their reply. */
  readonly requests: ReadonlyArray<PendingRequest>
  readonly usage: ReadonlyMap<AgentId, AgentUsage>
  readonly activity: ReadonlyMap<AgentId, RecentActivity>
  /** Messages live roots sent to USER, oldest first. */
  readonly userOutbox: ReadonlyArray<MessageEnvelope>
}

/** A turn recovery queues: a root's recovery prompt, or a re-injected message that wakes its agent. */
export type RecoveredTurn =
  | { readonly _tag: "prompt"; readonly agent: AgentId; readonly text: string }
  | { readonly _tag: "message"; readonly agent: AgentId; readonly id: MessageId }

export class StateSeeding extends Effect.Service<StateSeeding>()("substrat/StateSeeding", {
  effect: Effect.gen(function*() {
    const s = yield* OrchestratorState
    const router = yield* Router

    /** True while nothing was created or seeded (recovery runs only then). */
    const isEmpty = Effect.sync(() => s.tree.size === 0 && s.inboxes.size === 0)

    const seed = Effect.fn("StateSeeding.seed")(function*(state: RecoveredState) {
      s.tree = state.tree
      for (const n of state.tree.nodes.keys()) s.inboxes.set(n, [...(state.inboxes.get(n) ?? [])])
      for (const r of state.requests) s.requests.set(r.id, r)
      for (const [agent, u] of state.usage) s.usage.set(agent, u)
      for (const [agent, a] of state.activity) s.activity.set(agent, { turns: [...a.turns], messages: [...a.messages] })
      s.userOutbox.push(...state.userOutbox)
    })

    const queueTurns = Effect.fn("StateSeeding.queueTurns")(function*(turns: ReadonlyArray<RecoveredTurn>) {
      for (const t of turns) {
        yield* router.queueTurn(
          t.agent,
          t._tag === "prompt" ? { _tag: "prompt", text: t.text, done: null } : { _tag: "message", id: t.id }
        )
      }
    })

    return { isEmpty, seed, queueTurns, armTimeouts: router.armTimeouts } as const
  })
}) {}
