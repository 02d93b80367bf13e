// What each busy agent is doing right now, for `agent list` and `agent inspect`: when its turn
// began and its current step — waiting for the model, the model streaming text, or a tool call
// (Substrat's tools: while they run; the provider's own tools are reported once done, so they
// show as the last step). Folded from the live output and the event tap; the map is this
// module's own (nothing else writes it). Only turns of this daemon process are known: after a
// restart no turn is running.
import { Effect, Stream, type Scope } from "effect"
import { Orchestrator } from "../agent/Orchestrator.js"
import type { AgentOutput } from "../agent/OutputBus.js"
import type { LogEntry } from "../domain/events.js"
import type { AgentId } from "../domain/ids.js"
import { EventTap } from "../storage/EventTap.js"
import type { AgentActivity } from "../protocol/AdminRpcs.js"

interface Step {
  readonly turn_id: string
  readonly since: string
  readonly step: string
  readonly step_since: string
}

const clip = (s: string, n = 60) => (s.length <= n ? s : `${s.slice(0, n - 1)}…`)

/** A Substrat tool call in words (its arguments are the logged JSON). */
const toolStep = (tool: string, args: unknown): string => {
  const a = typeof args === "object" && args !== null ? (args as Record<string, unknown>) : {}
  const str = (k: string) => (typeof a[k] === "string" ? String(a[k]) : undefined)
  if (tool === "send_message") {
    const to = str("recipient") ?? "?"
    return a["sync"] === false ? `tool send_message → ${to}` : `tool send_message → ${to} (request)`
  }
  if (tool === "spawn_agent") return `tool spawn_agent ${str("name") ?? ""}`.trimEnd()
  if (tool === "inspect_agent") return `tool inspect_agent ${str("name") ?? ""}`.trimEnd()
  return `tool ${tool}`
}

export interface ProgressService {
  /** The agent's running turn and step, when it has one. */
  readonly of: (agent: AgentId) => AgentActivity | undefined
  readonly all: () => ReadonlyArray<AgentActivity>
}

export const makeProgress: Effect.Effect<ProgressService, never, Orchestrator | EventTap | Scope.Scope> = Effect.gen(
  function*() {
    const orchestrator = yield* Orchestrator
    const tap = yield* EventTap
    const steps = new Map<AgentId, Step>()
    const agentOfSession = new Map<string, AgentId>()

    const set = (agent: AgentId, step: string, ts: string) => {
      const cur = steps.get(agent)
      if (cur !== undefined && cur.step !== step) steps.set(agent, { ...cur, step, step_since: ts })
    }

    const onOutput = (o: AgentOutput): void => {
      const now = new Date().toISOString()
      switch (o._tag) {
        case "TurnStarted":
          steps.set(o.agent_id, { turn_id: o.turn_id, since: now, step: "waiting for the model", step_since: now })
          return
        case "Text":
          return set(o.agent_id, "model streaming", now)
        case "ToolCalled":
          return set(o.agent_id, `waiting for the model (after ${o.tool})`, now)
        case "TurnCompleted":
          if (steps.get(o.agent_id)?.turn_id === o.turn_id) steps.delete(o.agent_id)
          return
        case "MessageToUser":
          return
      }
    }

    const onEntry = (e: LogEntry): void => {
      if (e.event === "agent.created") {
        agentOfSession.set(e.session_id, e.data.agent_id)
        return
      }
      const agent = agentOfSession.get(e.session_id)
      if (agent === undefined) return
      if (e.event === "tool_call.invoked" && e.data.source === undefined) set(agent, clip(toolStep(e.data.tool, e.data.arguments)), e.ts)
      else if (e.event === "tool_call.result" && e.data.source === undefined) set(agent, "waiting for the model", e.ts)
      else if (e.event === "agent.terminated") steps.delete(e.data.agent_id)
    }

    for (const n of yield* orchestrator.list) agentOfSession.set(n.session_id, n.id)
    const outputs = yield* orchestrator.subscribe()
    yield* outputs.pipe(Stream.runForEach((o) => Effect.sync(() => onOutput(o))), Effect.forkScoped)
    const entries = yield* tap.subscribe
    yield* Stream.fromQueue(entries).pipe(Stream.runForEach((e) => Effect.sync(() => onEntry(e))), Effect.forkScoped)

    const view = (agent: AgentId, s: Step): AgentActivity => ({
      agent_id: agent,
      turn_id: s.turn_id,
      since: s.since,
      step: s.step,
      step_since: s.step_since
    })
    return {
      of: (agent) => {
        const s = steps.get(agent)
        return s === undefined ? undefined : view(agent, s)
      },
      all: () => [...steps].map(([a, s]) => view(a, s))
    }
  }
)

/**
 * One tracker per daemon, in its runtime: the admin socket's handlers and the HTTP server's (which
 * builds the handlers once more) read the same map instead of each folding the events again.
 */
export class Progress extends Effect.Service<Progress>()("substrat/daemon/Progress", { scoped: makeProgress }) {}
