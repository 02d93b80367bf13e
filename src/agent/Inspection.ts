// What `inspect_agent` / `Orchestrator.inspect` return, and the usage totals per agent and
// subtree, read through the services that own each part. "Recent activity" is kept in memory
// (Activity: noted as turns end and messages go) and rebuilt from the logs by recovery after a restart
// (the recovery fold's rings, docs/messaging.md): the last 3 turns (prompt/response excerpts of 200 chars),
// the last 5 messages sent or received; plus how many messages wait in the inbox, how many sync
// requests the agent is still waiting on.
import { Effect } from "effect"
import { type AgentBrief, type AgentInspection, RecentMessage, RecentTurn } from "../domain/inspection.js"
import type { AgentState } from "../domain/agent.js"
import type { AgentId } from "../domain/ids.js"
import { totalTokens, type UsageReport } from "../domain/usage.js"
import { Activity } from "./Activity.js"
import { Mailbox } from "./Mailbox.js"
import { Requests } from "./Requests.js"
import { Tree } from "./Tree.js"
import { Turns } from "./Turns.js"

export { UsageReport } from "../domain/usage.js"

export { type AgentInspection, RecentMessage, RecentTurn }


export const EXCERPT = 200
export const excerpt = (s: string): string => s.length <= EXCERPT ? s : `${s.slice(0, EXCERPT - 1)}…`

export class Inspection extends Effect.Service<Inspection>()("substrat/Inspection", {
  effect: Effect.gen(function*() {
    const tree = yield* Tree
    const mailbox = yield* Mailbox
    const requests = yield* Requests
    const turns = yield* Turns
    const activity = yield* Activity

    /** idle | busy (mid-turn) | waiting (sent a sync request, no reply yet) | quarantined (crash loop). */
    const stateOf = (id: AgentId): AgentState =>
      !tree.has(id)
        ? "terminated"
        : turns.isBusy(id)
        ? "busy"
        : mailbox.isParked(id)
        ? "quarantined"
        : requests.waitingOn(id) > 0
        ? "waiting"
        : "idle"

    const usageOf = (id: AgentId): UsageReport => activity.usageOf(id, tree.current().subtree(id).map((n) => n.id))

    const inspect = (id: AgentId): AgentInspection | null => {
      const t = tree.current()
      const n = t.get(id)
      if (!n) return null
      const a = activity.recentOf(id)
      return {
        agent_id: n.id,
        name: n.name,
        role: n.role,
        provider: n.provider,
        session_id: n.session_id,
        parent: t.parent(id)?.name ?? null,
        state: stateOf(id),
        children: t.children(id).map((c) => c.name),
        pending_inbox: mailbox.pendingCount(id),
        queued_turns: mailbox.queuedTurns(id),
        waiting_for_replies: requests.waitingOn(id),
        recent_turns: a.turns.map((x) => ({ ...x, prompt: excerpt(x.prompt), response: excerpt(x.response) })),
        recent_messages: a.messages.map((m) => ({ ...m, text: excerpt(m.text) })),
        usage: usageOf(id)
      }
    }

    /**
     * What `agent list` adds to each live agent's row, only where there is something to say: a
     * dormant swarm node agent (no session yet), a turn waiting to start, what it used itself.
     * `ids`: only those agents (a page of the list: costs the page, not the tree); else every live agent.
     */
    const briefs = (ids?: Iterable<AgentId>): ReadonlyArray<AgentBrief> => {
      const out: Array<AgentBrief> = []
      const t = tree.current()
      for (const id of ids ?? t.nodes.keys()) {
        if (!t.has(id)) continue
        if (tree.isDormant(id)) {
          out.push({ agent_id: id, dormant: true })
          continue
        }
        // A turn waits to start: queued, or taken but not started (waiting for a provider slot).
        const queued = turns.isBusy(id) ? turns.turnIdOf(id) === null : mailbox.queuedTurns(id) > 0
        const own = activity.ownUsage(id)
        const tokens = own === undefined ? 0 : totalTokens(own)
        const cost = own?.cost_usd ?? 0
        if (!queued && tokens === 0 && cost === 0) continue
        out.push({
          agent_id: id,
          ...(queued ? { queued: true } : {}),
          ...(tokens === 0 && cost === 0 ? {} : { tokens, cost_usd: cost })
        })
      }
      return out
    }

    return { stateOf, usageOf, inspect, briefs } as const
  })
}) {}
