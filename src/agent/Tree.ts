// Tree: the one owner of the live agent tree (the pure, immutable AgentTree) and of the set of
// agents being terminated. Others read the current tree (a value: it never changes under them)
// and change it through these operations. They are synchronous, so a caller's check and its
// update in one Effect.sync block are atomic with respect to other fibers.
// Dormant agents (swarm node agents, docs/swarm.md) are in the tree but have no session, inbox or
// process yet: Sessions.materialize gives them one when something first reaches them. A dormant
// agent's record holds no instructions of its own (a shared placeholder): its owner (the swarm)
// derives them from the agent's node when it materializes (`describeDormant`).
// Lookups by session and by name are kept as indexes, updated by each operation here, so a
// request that names one agent costs the same with 100 agents as with 100,000.
import { Effect, Either } from "effect"
import { AgentNode } from "../domain/agent.js"
import type { InvalidInputError } from "../domain/errors.js"
import type { AgentId } from "../domain/ids.js"
import { AgentTree } from "./AgentTree.js"

export class Tree extends Effect.Service<Tree>()("substrat/Tree", {
  sync: () => {
    let tree = AgentTree.empty
    const terminating = new Set<AgentId>()
    const dormant = new Set<AgentId>()
    let describe: (node: AgentNode) => string | undefined = () => undefined
    const bySession = new Map<string, AgentId>()
    const byName = new Map<string, Array<AgentId>>()
    const index = (n: AgentNode) => {
      bySession.set(n.session_id, n.id)
      const named = byName.get(n.name)
      if (named === undefined) byName.set(n.name, [n.id])
      else named.push(n.id)
    }
    const unindex = (n: AgentNode | undefined) => {
      if (n === undefined) return
      if (bySession.get(n.session_id) === n.id) bySession.delete(n.session_id)
      const named = byName.get(n.name)
      if (named === undefined) return
      const rest = named.filter((id) => id !== n.id)
      if (rest.length === 0) byName.delete(n.name)
      else byName.set(n.name, rest)
    }
    const reindex = (t: AgentTree) => {
      bySession.clear()
      byName.clear()
      for (const n of t.nodes.values()) index(n)
    }
    return {
      /** The tree now (immutable). */
      current: (): AgentTree => tree,
      get: (id: AgentId): AgentNode | undefined => tree.get(id),
      has: (id: AgentId): boolean => tree.has(id),
      /** The agent whose session this is. */
      bySession: (session: string): AgentNode | undefined => {
        const id = bySession.get(session)
        return id === undefined ? undefined : tree.get(id)
      },
      /** Every agent with this name, anywhere in the tree. */
      named: (name: string): ReadonlyArray<AgentNode> => (byName.get(name) ?? []).map((id) => tree.get(id)!),
      /** In the tree and not being terminated. */
      isLive: (id: AgentId): boolean => tree.has(id) && !terminating.has(id),
      add: (node: AgentNode): Either.Either<void, InvalidInputError> => {
        const added = tree.add(node)
        if (Either.isRight(added)) {
          tree = added.right
          index(node)
        }
        return Either.map(added, () => undefined)
      },
      remove: (id: AgentId): void => {
        const node = tree.get(id)
        const removed = tree.remove(id)
        if (Either.isRight(removed)) {
          tree = removed.right
          dormant.delete(id)
          unindex(node)
        }
      },
      /** Add dormant agents in bulk (parents before children; a parent may be among them). */
      addDormant: (nodes: ReadonlyArray<AgentNode>): Either.Either<void, InvalidInputError> => {
        const added = tree.addAll(nodes)
        if (Either.isRight(added)) {
          tree = added.right
          for (const n of nodes) {
            dormant.add(n.id)
            index(n)
          }
        }
        return Either.map(added, () => undefined)
      },
      /** Remove agents in bulk (each one's children among them or gone); for dormant ones only. */
      removeAll: (ids: ReadonlyArray<AgentId>): Either.Either<void, InvalidInputError> => {
        const before = tree
        const removed = tree.removeAll(ids)
        if (Either.isRight(removed)) {
          tree = removed.right
          for (const id of ids) {
            dormant.delete(id)
            if (!tree.has(id)) unindex(before.get(id))
          }
        }
        return Either.map(removed, () => undefined)
      },
      /** In the tree without a session yet. */
      isDormant: (id: AgentId): boolean => dormant.has(id),
      /**
       * The owner of dormant agents (the swarm) derives their instructions when they materialize
       * (undefined: the record's own), so a dormant record need not carry them.
       */
      describeDormant: (f: (node: AgentNode) => string | undefined): void => {
        describe = f
      },
      /** A dormant agent's full record: its derived instructions in place of the placeholder. */
      complete: (node: AgentNode): AgentNode => {
        const instructions = dormant.has(node.id) ? describe(node) : undefined
        return instructions === undefined || instructions === node.instructions
          ? node
          : new AgentNode({ ...node, instructions }, { disableValidation: true })
      },
      /** Sessions.materialize only: the agent has its session now (its full record replaces the dormant one). */
      awaken: (node: AgentNode): void => {
        const old = tree.get(node.id)
        if (old !== node && old !== undefined) {
          tree = tree.update(node)
          unindex(old)
          index(node)
        }
        dormant.delete(node.id)
      },
      dormantCount: (): number => dormant.size,
      markTerminating: (ids: Iterable<AgentId>): void => {
        for (const id of ids) terminating.add(id)
      },
      unmarkTerminating: (ids: Iterable<AgentId>): void => {
        for (const id of ids) terminating.delete(id)
      },
      /** Agents being terminated now (tests check that none is left over). */
      terminating: (): ReadonlySet<AgentId> => new Set(terminating),
      /**
       * Recovery: the rebuilt tree, on an empty one; or (cluster mode, a runner taking over
       * trees) grafted next to the trees already here.
       */
      seed: (t: AgentTree): void => {
        if (tree.size === 0) {
          tree = t
          dormant.clear()
        } else {
          tree = AgentTree.fromValidNodes([...tree.nodes.values(), ...t.nodes.values()])
        }
        reindex(tree)
      }
    } as const
  }
}) {}
