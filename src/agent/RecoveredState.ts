// What crash recovery hands the agent services: plain data, built from the event logs, plus the
// turns it queues. `StateSeeding` is the one door recovery uses: `seed` fills the (empty) tree,
// mailboxes, pending requests and activity in one step; `queueTurns` queues the turns recovery
// implies; `armTimeouts` starts the reply timers of the pending requests that carry a timeout
// (deadline: the request's timestamp + its timeout; one already past fires at once).
import { Effect } from "effect"
import type { AgentId, MessageId } from "../domain/ids.js"
import type { MessageEnvelope } from "../domain/message.js"
import type { AgentUsage, SeededActivity } from "./Activity.js"
import type { AgentTree } from "./AgentTree.js"
import { Activity } from "./Activity.js"
import { Finder } from "./Finder.js"
import type { RecoveredFinds } from "./FindRoute.js"
import { Mailbox } from "./Mailbox.js"
import { type PendingRequest, Requests } from "./Requests.js"
import { Tree } from "./Tree.js"

export interface RecoveredState {
  readonly tree: AgentTree
  /** Pending messages per live agent, in enqueue order (an agent absent here gets an empty inbox). */
  readonly inboxes: ReadonlyMap<AgentId, ReadonlyArray<MessageEnvelope>>
  /** Sync requests still waiting for their reply. */
  readonly requests: ReadonlyArray<PendingRequest>
  readonly usage: ReadonlyMap<AgentId, AgentUsage>
  /** Rings a fold checkpoint kept may stay encoded until the agent's activity is asked for. */
  readonly activity: ReadonlyMap<AgentId, SeededActivity>
  /** Messages live roots sent to USER, oldest first. */
  readonly userOutbox: ReadonlyArray<MessageEnvelope>
  /** `find:` searches in transit at the crash (Finder resumes them once the daemon is up). */
  readonly finds?: RecoveredFinds | undefined
}

/**
 * A turn recovery queues: a root's recovery note alone (its interrupted turn consumed no waking
 * message), or a re-injected message that wakes its agent — with the recovery note first in its
 * prompt when it is the message the interrupted turn was handling.
 */
export type RecoveredTurn =
  | { readonly _tag: "prompt"; readonly agent: AgentId; readonly text: string }
  | { readonly _tag: "message"; readonly agent: AgentId; readonly id: MessageId; readonly note?: string }

export class StateSeeding extends Effect.Service<StateSeeding>()("substrat/StateSeeding", {
  effect: Effect.gen(function*() {
    const tree = yield* Tree
    const mailbox = yield* Mailbox
    const requests = yield* Requests
    const activity = yield* Activity
    const finder = yield* Finder

    /** True while nothing was created or seeded (recovery runs only then). */
    const isEmpty = Effect.sync(() => tree.current().size === 0 && mailbox.isEmpty() && requests.isEmpty())

    const seed = Effect.fn("StateSeeding.seed")(function*(state: RecoveredState) {
      yield* Effect.sync(() => {
        tree.seed(state.tree)
        mailbox.seed(state.tree.nodes.keys(), state.inboxes, state.userOutbox)
        // A request's timeout and sending time are in its envelope, in the recipient's inbox.
        requests.seed(state.requests.map((r) => {
          const env = (state.inboxes.get(r.to) ?? []).find((e) => e.id === r.id)
          const timeout_s = r.timeout_s ?? env?.timeout_s
          return {
            request: { ...r, ...(timeout_s !== undefined ? { timeout_s } : {}) },
            sentAt: env === undefined ? Number.NaN : Date.parse(env.timestamp)
          }
        }))
        activity.seed(state.usage, state.activity)
        if (state.finds !== undefined) finder.seed(state.finds)
      })
    })

    const queueTurns = Effect.fn("StateSeeding.queueTurns")(function*(turns: ReadonlyArray<RecoveredTurn>) {
      for (const t of turns) {
        yield* mailbox.queueTurn(
          t.agent,
          t._tag === "prompt"
            ? { _tag: "prompt", text: "", note: t.text, done: null }
            : t.note === undefined
            ? { _tag: "message", id: t.id }
            : { _tag: "message", id: t.id, note: t.note }
        )
      }
    })

    /** Quarantined agents (a crash loop): their turns queue but do not start until resumed. */
    const park = (agents: ReadonlyArray<AgentId>) => Effect.sync(() => agents.forEach((a) => mailbox.park(a)))

    return { isEmpty, seed, park, queueTurns, armTimeouts: requests.armTimeouts } as const
  })
}) {}
