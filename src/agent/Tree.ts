// Tree: the one owner of the live agent tree (the pure, immutable AgentTree) and of the set of
// agents being terminated. Others read the current tree (a value: it never changes under them)
// and change it through these operations. They are synchronous, so a caller's check and its
// update in one Effect.sync block are atomic with respect to other fibers.
import { Effect, Either } from "effect"
import type { AgentNode } from "../domain/agent.js"
import type { InvalidInputError } from "../domain/errors.js"
import type { AgentId } from "../domain/ids.js"
import { AgentTree } from "./AgentTree.js"

export class Tree extends Effect.Service<Tree>()("substrat/Tree", {
  sync: () => {
    let tree = AgentTree.empty
    const terminating = new Set<AgentId>()
    return {
      /** The tree now (immutable). */
      current: (): AgentTree => tree,
      get: (id: AgentId): AgentNode | undefined => tree.get(id),
      has: (id: AgentId): boolean => tree.has(id),
      /** In the tree and not being terminated. */
      isLive: (id: AgentId): boolean => tree.has(id) && !terminating.has(id),
      add: (node: AgentNode): Either.Either<void, InvalidInputError> => {
        const added = tree.add(node)
        if (Either.isRight(added)) tree = added.right
        return Either.map(added, () => undefined)
      },
      remove: (id: AgentId): void => {
        const removed = tree.remove(id)
        if (Either.isRight(removed)) tree = removed.right
      },
      markTerminating: (ids: Iterable<AgentId>): void => {
        for (const id of ids) terminating.add(id)
      },
      unmarkTerminating: (ids: Iterable<AgentId>): void => {
        for (const id of ids) terminating.delete(id)
      },
      /** Agents being terminated now (tests check that none is left over). */
      terminating: (): ReadonlySet<AgentId> => new Set(terminating),
      /** Recovery: the rebuilt tree, on an empty one. */
      seed: (t: AgentTree): void => {
        tree = t
      }
    } as const
  }
}) {}
