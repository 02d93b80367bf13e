// The daemon's TurnHooks: after every turn (completed or failed) of an agent that has a
// workspace, record what the turn changed in the workspace's history (WorkspaceHistory.commitTurn,
// attributed to the agent and turn id) and, when something changed, log `workspace.diff` in the
// agent's event log. A failure here (git missing, workspace deleted under the agent, …) is a
// daemon log line and no event: it never breaks the turn or the agent.
import { Effect, Layer, Option } from "effect"
import { TurnHooks } from "../agent/TurnHooks.js"
import { makeEvent } from "../domain/events.js"
import { EventLog } from "../storage/EventLog.js"
import { syncClone } from "../sandbox/CloneSync.js"
import { Sandbox } from "../sandbox/Sandbox.js"
import { WorkspaceHistory } from "../sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../sandbox/WorkspaceStore.js"

export const layer: Layer.Layer<TurnHooks, never, WorkspaceHistory | WorkspaceStore | EventLog> = Layer.effect(
  TurnHooks,
  Effect.gen(function*() {
    const history = yield* WorkspaceHistory
    const store = yield* WorkspaceStore
    // The daemon provides one; without (tests of the hook alone) a repository clone is not synced.
    const sandbox = yield* Effect.serviceOption(Sandbox)
    const log = yield* EventLog
    return TurnHooks.of({
      afterTurn: (agent, outcome) => {
        const ws = agent.workspace_id
        if (ws === null) return Effect.void
        return Effect.gen(function*() {
          const r = yield* history.commitTurn(ws, {
            agent: agent.name,
            agentId: agent.id,
            turnId: outcome.turn_id,
            summary: `turn ${outcome.turn_id} of ${agent.name} (${agent.id})`
          })
          if (r.commit === null) return
          // A repository workspace: its clone follows (src/sandbox/CloneSync.ts).
          const loc = yield* store.historyLocation(ws)
          if (loc.repo !== null && Option.isSome(sandbox)) yield* syncClone(loc).pipe(Effect.provideService(Sandbox, sandbox.value))
          yield* log.append(
            agent.session_id,
            makeEvent("workspace.diff", { workspace_id: ws, turn_id: outcome.turn_id, commit: r.commit, paths: r.paths })
          )
        }).pipe(
          Effect.catchAllCause((cause) =>
            Effect.logWarning(`workspace history: turn ${outcome.turn_id} of ${agent.name} in workspace ${ws} not recorded`, cause)
          ),
          Effect.withSpan("WorkspaceTurnHook.afterTurn")
        )
      }
    })
  })
)
