// The daemon's WorkspaceUsage: a workspace is in use while a live agent of the tree has it as its
// workspace (roots created with `--workspace`, children that inherited it or got a child
// workspace through `workspace_subdir`, unborn children included), or while something holds a
// scoped `use(id)` on it. Reading the tree at the moment of the question covers agent creation,
// termination and start-up recovery (which seeds the same Tree) without any bookkeeping that
// could drift from the tree.
import { Effect, Layer } from "effect"
import { Tree } from "../agent/Tree.js"
import { WorkspaceUsage } from "../sandbox/WorkspaceUsage.js"

export const layer: Layer.Layer<WorkspaceUsage, never, Tree> = Layer.effect(
  WorkspaceUsage,
  Effect.gen(function*() {
    const tree = yield* Tree
    const held = yield* Effect.provide(WorkspaceUsage, WorkspaceUsage.layerRegistry)
    const usedByAgent = (id: string) =>
      Effect.sync(() => {
        for (const n of tree.current().nodes.values()) if (n.workspace_id === id) return `agent ${n.name} (${n.id})`
        return undefined
      })
    return WorkspaceUsage.of({
      inUse: (id) => Effect.flatMap(usedByAgent(id), (agent) => (agent !== undefined ? Effect.succeed(true) : held.inUse(id))),
      user: (id) => Effect.flatMap(usedByAgent(id), (agent) => (agent !== undefined ? Effect.succeed(agent) : held.user(id))),
      use: held.use
    })
  })
)
