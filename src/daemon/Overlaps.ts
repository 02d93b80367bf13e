// Overlap detection in shared workspaces (docs/sandbox.md, "Overlaps"): when two agents' turns
// that ran at the same time in one workspace both recorded a change to the same path, each of the
// two agents and their nearest common ancestor get one SYSTEM note naming the paths and the other
// agent, and `workspace.overlap` is logged (in the session of the agent whose record found it).
// The source is the per-turn attribution WorkspaceHistory records (`onRecorded`); turn start times
// come from the orchestrator's live output. Only turns of this daemon process are compared.
import { Effect, Layer, Stream } from "effect"
import { Delivery } from "../agent/Delivery.js"
import { Orchestrator } from "../agent/Orchestrator.js"
import type { AgentNode } from "../domain/agent.js"
import { makeEvent } from "../domain/events.js"
import type { AgentId, WorkspaceId } from "../domain/ids.js"
import { WorkspaceHistory } from "../sandbox/WorkspaceHistory.js"
import { EventLog } from "../storage/EventLog.js"

interface RecordedTurn {
  readonly agent: AgentId
  readonly name: string
  readonly turnId: string
  readonly start: number
  readonly end: number
  readonly paths: ReadonlySet<string>
}

/** Records older than this (ended before every running turn started) are dropped. */
const KEEP = 200

/** The nearest common ancestor of a and b (one of them when it is the other's ancestor); null: none. */
export const nearestCommonAncestor = (nodes: ReadonlyArray<AgentNode>, a: AgentId, b: AgentId): AgentId | null => {
  const byId = new Map(nodes.map((n) => [n.id, n]))
  const chain = (id: AgentId): Array<AgentId> => {
    const out: Array<AgentId> = []
    for (let cur = byId.get(id); cur !== undefined; cur = cur.parent_id === null ? undefined : byId.get(cur.parent_id)) out.push(cur.id)
    return out
  }
  const above = new Set(chain(a))
  for (const id of chain(b)) if (above.has(id)) return id
  return null
}

export const layer: Layer.Layer<never, never, WorkspaceHistory | Orchestrator | Delivery | EventLog> = Layer.scopedDiscard(
  Effect.gen(function*() {
    const history = yield* WorkspaceHistory
    const orchestrator = yield* Orchestrator
    const delivery = yield* Delivery
    const log = yield* EventLog
    const started = new Map<string, number>()
    const recent = new Map<WorkspaceId, Array<RecordedTurn>>()
    const notified = new Set<string>()
    const scope = yield* Effect.scope

    const outputs = yield* orchestrator.subscribe()
    yield* outputs.pipe(
      Stream.runForEach((o) =>
        Effect.sync(() => {
          if (o._tag !== "TurnStarted") return
          started.set(o.turn_id, Date.now())
          // Turns that recorded nothing leave their start here: keep the newest only.
          if (started.size > 10_000) started.delete(started.keys().next().value!)
        })
      ),
      Effect.forkScoped
    )

    const tell = (to: AgentId, text: string) =>
      delivery.deliver(delivery.envelope({ sender: "SYSTEM", recipient: to, kind: "notification", text })).pipe(
        Effect.catchAll((e) => Effect.logWarning(`overlap note to ${to} not delivered: ${e.message}`)),
        Effect.asVoid
      )

    yield* history.onRecorded((r) =>
      Effect.gen(function*() {
        if (r.agentId === null) return
        const now = Date.now()
        const start = started.get(r.turnId) ?? now
        started.delete(r.turnId)
        const mine: RecordedTurn = { agent: r.agentId, name: r.agent, turnId: r.turnId, start, end: now, paths: new Set(r.paths.map((p) => p.path)) }
        const list = recent.get(r.workspace) ?? []
        const hits: Array<{ other: RecordedTurn; paths: Array<string> }> = []
        for (const q of list) {
          if (q.agent === mine.agent || q.end < mine.start) continue
          const key = [q.turnId, mine.turnId].sort().join("|")
          if (notified.has(key)) continue
          const shared = [...mine.paths].filter((p) => q.paths.has(p)).sort()
          if (shared.length === 0) continue
          notified.add(key)
          hits.push({ other: q, paths: shared })
        }
        list.push(mine)
        const oldestRunning = Math.min(now, ...started.values())
        recent.set(r.workspace, list.filter((q) => q.end >= oldestRunning).slice(-KEEP))
        if (hits.length === 0) return
        // Told after the record, not in it: the recording agent is still in its turn's hook, and
        // a note to it (or a wake-up of another agent) must not wait on that.
        yield* Effect.forkIn(notify(r.workspace, mine, hits), scope)
      }).pipe(Effect.catchAllCause((c) => Effect.logWarning("overlap detection failed", c)))
    )

    function notify(workspace: WorkspaceId, mine: RecordedTurn, hits: ReadonlyArray<{ other: RecordedTurn; paths: Array<string> }>) {
      return Effect.gen(function*() {
        const r = { workspace }
        const nodes = yield* orchestrator.list
        const self = nodes.find((n) => n.id === mine.agent)
        for (const { other, paths } of hits) {
          const names = paths.join(", ")
          const ancestor = nearestCommonAncestor(nodes, mine.agent, other.agent)
          const hint = `Check that neither overwrote the other's work (substrat workspace diff --turn <turn> ${r.workspace}); coordinate before editing these again.`
          yield* tell(mine.agent, `Overlap in workspace ${r.workspace}: you and ${other.name} changed ${names} in turns that ran at the same time (yours ${mine.turnId}, theirs ${other.turnId}). ${hint}`)
          yield* tell(other.agent, `Overlap in workspace ${r.workspace}: you and ${mine.name} changed ${names} in turns that ran at the same time (yours ${other.turnId}, theirs ${mine.turnId}). ${hint}`)
          if (ancestor !== null && ancestor !== mine.agent && ancestor !== other.agent) {
            yield* tell(ancestor, `Overlap in workspace ${r.workspace}: ${other.name} and ${mine.name} changed ${names} in turns that ran at the same time (turns ${other.turnId} and ${mine.turnId}). ${hint}`)
          }
          if (self !== undefined) {
            yield* log.append(self.session_id, makeEvent("workspace.overlap", {
              workspace_id: r.workspace,
              paths,
              turns: [
                { agent_id: other.agent, agent: other.name, turn_id: other.turnId },
                { agent_id: mine.agent, agent: mine.name, turn_id: mine.turnId }
              ],
              notified: [other.agent, mine.agent, ...(ancestor !== null && ancestor !== mine.agent && ancestor !== other.agent ? [ancestor] : [])]
            })).pipe(Effect.catchAll((e) => Effect.logWarning(`workspace.overlap not logged: ${e.message}`)))
          }
        }
      }).pipe(Effect.catchAllCause((c) => Effect.logWarning("overlap notes failed", c)))
    }
  })
)
