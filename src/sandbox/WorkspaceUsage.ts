// Who is using a workspace right now. The WorkspaceStore asks before deleting; the orchestrator
// tells it by holding a scoped `use(id)` while an agent is bound to the workspace.
import { Context, Effect, Layer, Ref, type Scope } from "effect"
import type { WorkspaceId } from "../domain/ids.js"

export interface WorkspaceUsageService {
  readonly inUse: (id: WorkspaceId) => Effect.Effect<boolean>
  /** Who uses `id` (e.g. `agent alpha (<uuid>)`), for error messages; undefined when nobody does. */
  readonly user: (id: WorkspaceId) => Effect.Effect<string | undefined>
  /** Mark `id` in use until the scope closes. */
  readonly use: (id: WorkspaceId) => Effect.Effect<void, never, Scope.Scope>
}

export class WorkspaceUsage extends Context.Tag("substrat/WorkspaceUsage")<WorkspaceUsage, WorkspaceUsageService>() {
  /** A reference-counting registry (the daemon's). */
  static readonly layerRegistry: Layer.Layer<WorkspaceUsage> = Layer.effect(
    WorkspaceUsage,
    Effect.gen(function*() {
      const counts = yield* Ref.make(new Map<string, number>())
      const bump = (id: WorkspaceId, d: number) =>
        Ref.update(counts, (m) => {
          const next = new Map(m)
          const n = (next.get(id) ?? 0) + d
          if (n <= 0) next.delete(id)
          else next.set(id, n)
          return next
        })
      return {
        inUse: (id) => Ref.get(counts).pipe(Effect.map((m) => (m.get(id) ?? 0) > 0)),
        user: (id) => Ref.get(counts).pipe(Effect.map((m) => ((m.get(id) ?? 0) > 0 ? "a running command" : undefined))),
        use: (id) => Effect.acquireRelease(bump(id, 1), () => bump(id, -1))
      }
    })
  )
  /** Nobody uses anything (CLI-only tools, tests). */
  static readonly layerNone: Layer.Layer<WorkspaceUsage> = Layer.succeed(WorkspaceUsage, {
    inUse: () => Effect.succeed(false),
    user: () => Effect.succeed(undefined),
    use: () => Effect.void
  })
}
