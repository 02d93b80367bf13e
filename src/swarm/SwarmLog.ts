// `substrat swarm log [<node>]` (docs/swarm.md, "Versioning: swarm log"): per node agent, its
// turns and what each changed. Read from the node agents' own event logs — the per-turn history
// the daemon keeps for every agent: `turn.start`, its end (`turn.complete` / `provider.error`) and,
// for an agent working in a workspace, the `workspace.diff` its turn recorded (the commit in the
// workspace history, `substrat workspace diff <ws> --turn <turn>` shows it, and the changed paths). Dormant
// agents have no log (no turn yet); orphaned ones keep theirs.
import { Effect, Stream } from "effect"
import { forPeople } from "../agent/Prompt.js"
import type { LogEntry } from "../domain/events.js"
import type { AgentId } from "../domain/ids.js"
import { EventLog } from "../storage/EventLog.js"
import { Swarm, type SwarmAgentView } from "./Swarm.js"

export interface SwarmLogTurn {
  readonly turn_id: string
  readonly started: string
  /** null: still running (or interrupted by a crash and not re-run yet). */
  readonly ended: string | null
  readonly outcome: "complete" | "failed" | "running"
  /** Excerpts: the prompt for people (Prompt.ts's `forPeople`) and as the agent read it. */
  readonly prompt: string
  readonly raw_prompt: string
  readonly response: string
  readonly workspace_id: string | null
  /** The turn's commit in the workspace history; null: it changed nothing (or has no workspace). */
  readonly commit: string | null
  readonly changes: ReadonlyArray<{ readonly path: string; readonly change: "added" | "modified" | "deleted" }>
}

export interface SwarmLogNode {
  readonly node_id: string
  readonly agent_id: AgentId
  readonly name: string
  readonly status: SwarmAgentView["status"]
  readonly turns: ReadonlyArray<SwarmLogTurn>
}

const EXCERPT = 160
const cut = (s: string) => {
  const one = s.replace(/\s+/g, " ").trim()
  return one.length <= EXCERPT ? one : `${one.slice(0, EXCERPT - 1)}…`
}

/** One agent's turns, oldest first, from its log entries. */
export const turnsOf = (entries: Iterable<LogEntry>): Array<SwarmLogTurn> => {
  const turns = new Map<string, { -readonly [K in keyof SwarmLogTurn]: SwarmLogTurn[K] }>()
  for (const e of entries) {
    switch (e.event) {
      case "turn.start":
        turns.set(e.data.turn_id, {
          turn_id: e.data.turn_id,
          started: e.ts,
          ended: null,
          outcome: "running",
          prompt: cut(forPeople(e.data.prompt)),
          raw_prompt: cut(e.data.prompt),
          response: "",
          workspace_id: null,
          commit: null,
          changes: []
        })
        break
      case "turn.complete": {
        const t = turns.get(e.data.turn_id)
        if (t !== undefined) Object.assign(t, { ended: e.ts, outcome: "complete", response: cut(e.data.response) })
        break
      }
      case "provider.error": {
        const t = e.data.turn_id === null ? undefined : turns.get(e.data.turn_id)
        if (t !== undefined) Object.assign(t, { ended: e.ts, outcome: "failed", response: cut(`[error] ${e.data.reason}: ${e.data.message}`) })
        break
      }
      case "workspace.diff": {
        const t = turns.get(e.data.turn_id)
        if (t !== undefined) Object.assign(t, { workspace_id: e.data.workspace_id, commit: e.data.commit, changes: e.data.paths })
        break
      }
      default:
        break
    }
  }
  return [...turns.values()]
}

/** Per node agent with a history (or the one node asked for), its turns; nodes in `swarm agents` order. */
export const swarmLog = (node?: string) =>
  Effect.gen(function*() {
    const swarm = yield* Swarm
    const log = yield* EventLog
    const agents = node === undefined ? yield* swarm.agents({}) : yield* Effect.catchAll(
      Effect.map(swarm.agent(node), (a) => [a]),
      // An orphaned node (its code is gone) still has its history.
      (e) => Effect.flatMap(swarm.agents({ status: ["orphaned"] }), (all) => {
        const gone = all.filter((x) => x.node_id === node || x.agent_id === node)
        return gone.length > 0 ? Effect.succeed(gone) : Effect.fail(e)
      })
    )
    const out: Array<SwarmLogNode> = []
    for (const a of agents) {
      if (a.status === "dormant") {
        if (node !== undefined) out.push({ node_id: a.node_id, agent_id: a.agent_id, name: a.name, status: a.status, turns: [] })
        continue
      }
      const entries = yield* Stream.runCollect(log.read(a.session_id)).pipe(
        Effect.catchAll(() => Effect.succeed([] as Iterable<LogEntry>))
      )
      const turns = turnsOf(entries)
      if (node !== undefined || turns.length > 0) out.push({ node_id: a.node_id, agent_id: a.agent_id, name: a.name, status: a.status, turns })
    }
    return out
  })
