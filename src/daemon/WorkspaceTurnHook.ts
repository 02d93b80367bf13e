// The daemon's TurnHooks: after every turn (completed or failed) of an agent that has a
// workspace, record what the turn changed in the workspace's history (WorkspaceHistory.commitTurn,
// attributed to the agent and turn id) and, when something changed, log `workspace.diff` in the
// agent's event log. A failure here (git missing, workspace deleted under the agent, …) is a
// daemon log line and no event: it never breaks the turn or the agent. In cluster mode
// (TreeCarry present, ClusterCarry.ts) the recorded history is pushed to the shared remote and
// the agent's provider state saved, before the turn counts as recorded (its `workspace.diff`).
import { Effect, Layer, Option } from "effect"
import { TurnHooks } from "../agent/TurnHooks.js"
import { makeEvent } from "../domain/events.js"
import type { WorkspaceSpec } from "../domain/workspace.js"
import { EventLog } from "../storage/EventLog.js"
import { syncClone } from "../sandbox/CloneSync.js"
import { Sandbox } from "../sandbox/Sandbox.js"
import { WorkspaceHistory } from "../sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../sandbox/WorkspaceStore.js"
import { TreeCarry } from "./ClusterCarry.js"

export const layer: Layer.Layer<TurnHooks, never, WorkspaceHistory | WorkspaceStore | EventLog> = Layer.effect(
  TurnHooks,
  Effect.gen(function*() {
    const history = yield* WorkspaceHistory
    const store = yield* WorkspaceStore
    // The daemon provides one; without (tests of the hook alone) a repository clone is not synced.
    const sandbox = yield* Effect.serviceOption(Sandbox)
    const carry = yield* Effect.serviceOption(TreeCarry)
    const log = yield* EventLog
    /** The workspace's family: its top-level ancestor first, then every workspace below that. */
    const family = (ws: WorkspaceSpec["id"]) =>
      Effect.gen(function*() {
        const chain = yield* store.chain(ws)
        const top = chain[chain.length - 1]!
        const all = yield* store.list()
        const below = (id: WorkspaceSpec["id"]): Array<WorkspaceSpec> =>
          all.filter((s) => s.parent_id === id).flatMap((c) => [c, ...below(c.id)])
        return [top, ...below(top.id)] as ReadonlyArray<WorkspaceSpec>
      })
    // Workspaces an agent names that this daemon does not have, said once each: in cluster mode a
    // tree that moved without `cluster.workspace_remote` (or before its first recorded turn)
    // leaves its workspace on its old runner (docs/cluster.md "What still stays behind").
    // (Found out by the record itself: its history's location, which WorkspaceHistory keeps once
    // found, names the workspace and its ancestors — no read of the workspace's spec per turn.)
    const missing = new Set<string>()
    const absent = (ws: WorkspaceSpec["id"], agent: { readonly name: string; readonly id: string }): Effect.Effect<void> =>
      missing.has(ws) ? Effect.void : Effect.gen(function*() {
        missing.add(ws)
        yield* Effect.logWarning(
          `workspace ${ws} of ${agent.name} (${agent.id}) is not on this daemon (in cluster mode: its tree moved here without ` +
            `cluster.workspace_remote, or before its first recorded turn): its turns are not recorded in a workspace history here; said once`
        )
      })
    return TurnHooks.of({
      afterTurn: (agent, outcome) => {
        const ws = agent.workspace_id
        const carried = (commit: string | null) =>
          Option.isNone(carry) ? Effect.void : Effect.gen(function*() {
            const specs = ws === null ? [] : yield* family(ws).pipe(Effect.orElseSucceed(() => []))
            yield* carry.value.afterTurn(agent, { turnId: outcome.turn_id, commit, specs })
          })
        if (ws === null) return carried(null)
        return Effect.gen(function*() {
          const recorded = yield* history.commitTurn(ws, {
            agent: agent.name,
            agentId: agent.id,
            turnId: outcome.turn_id,
            summary: `turn ${outcome.turn_id} of ${agent.name} (${agent.id})`
          }).pipe(
            Effect.map(Option.some),
            Effect.catchIf((e) => e._tag === "NotFoundError" && e.kind === "workspace", () => Effect.as(absent(ws, agent), Option.none())),
            Effect.tapErrorCause(() => carried(null))
          )
          if (Option.isNone(recorded)) return yield* carried(null)
          const r = recorded.value
          if (r.commit === null) return yield* carried(null)
          // A repository workspace: its clone follows (src/sandbox/CloneSync.ts).
          const loc = yield* store.historyLocation(ws)
          if (loc.repo !== null && Option.isSome(sandbox)) yield* syncClone(loc).pipe(Effect.provideService(Sandbox, sandbox.value))
          yield* carried(r.commit)
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
