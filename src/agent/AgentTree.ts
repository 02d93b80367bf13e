// AgentTree (pure, immutable): nodes, parent/children/team/subtree/roots, and the one-hop
// routing rule. No Effect requirements; every operation returns a new tree or a typed error.
import { Either } from "effect"
import type { AgentNode } from "../domain/agent.js"
import { InvalidInputError, RoutingError } from "../domain/errors.js"
import type { AgentId } from "../domain/ids.js"

/** The name the human is addressed by. Reserved: no agent may be called this. */
export const USER = "USER"

export class AgentTree {
  private constructor(
    readonly nodes: ReadonlyMap<AgentId, AgentNode>,
    private readonly kids: ReadonlyMap<AgentId, ReadonlyArray<AgentId>>,
    private readonly rootIds: ReadonlyArray<AgentId>
  ) {}

  static readonly empty = new AgentTree(new Map(), new Map(), [])

  /**
   * Bulk build in O(n) (crash recovery rebuilds thousands of agents; `add` copies the maps).
   * The caller guarantees parents come before children and `add`'s rules hold.
   */
  static fromValidNodes(nodes: Iterable<AgentNode>): AgentTree {
    const map = new Map<AgentId, AgentNode>()
    const kids = new Map<AgentId, Array<AgentId>>()
    const roots: Array<AgentId> = []
    for (const n of nodes) {
      map.set(n.id, n)
      if (n.parent_id === null) roots.push(n.id)
      else {
        const k = kids.get(n.parent_id)
        if (k) k.push(n.id)
        else kids.set(n.parent_id, [n.id])
      }
    }
    return new AgentTree(map, kids, roots)
  }

  get size(): number {
    return this.nodes.size
  }
  get(id: AgentId): AgentNode | undefined {
    return this.nodes.get(id)
  }
  has(id: AgentId): boolean {
    return this.nodes.has(id)
  }
  roots(): ReadonlyArray<AgentNode> {
    return this.rootIds.map((id) => this.nodes.get(id)!)
  }
  children(id: AgentId): ReadonlyArray<AgentNode> {
    return (this.kids.get(id) ?? []).map((c) => this.nodes.get(c)!)
  }
  parent(id: AgentId): AgentNode | undefined {
    const p = this.nodes.get(id)?.parent_id
    return p ? this.nodes.get(p) : undefined
  }
  /** Siblings: the other children of this agent's parent. Roots have no team. */
  team(id: AgentId): ReadonlyArray<AgentNode> {
    const p = this.nodes.get(id)?.parent_id
    return p ? this.children(p).filter((n) => n.id !== id) : []
  }
  /** The agent and all its descendants, parents before children (pre-order). */
  subtree(id: AgentId): ReadonlyArray<AgentNode> {
    const n = this.nodes.get(id)
    return n ? [n, ...(this.kids.get(id) ?? []).flatMap((c) => this.subtree(c))] : []
  }
  /**
   * A page of the tree in pre-order (each agent before its children, siblings in creation order):
   * at most `limit` agents after the agent `after` (from the start when undefined), no deeper than
   * `depth` levels below the roots (undefined: any). Costs the page plus the cursor's ancestors'
   * sibling lookups, not the size of the tree. Left: `after` is not in the tree.
   */
  page(
    after: AgentId | undefined,
    limit: number,
    depth: number | undefined
  ): Either.Either<{ readonly nodes: ReadonlyArray<AgentNode>; readonly more: boolean }, AgentId> {
    const max = depth ?? Number.POSITIVE_INFINITY
    const frames: Array<{ readonly ids: ReadonlyArray<AgentId>; i: number }> = []
    const descend = (id: AgentId) => {
      const kids = this.kids.get(id)
      if (kids !== undefined && kids.length > 0 && frames.length - 1 < max) frames.push({ ids: kids, i: 0 })
    }
    if (after === undefined) frames.push({ ids: this.rootIds, i: 0 })
    else {
      const path: Array<AgentId> = []
      for (let n = this.nodes.get(after); n !== undefined; n = n.parent_id === null ? undefined : this.nodes.get(n.parent_id)) {
        path.unshift(n.id)
      }
      if (path.length === 0 || path.length - 1 > max) return Either.left(after)
      let parent: AgentId | null = null
      for (const id of path) {
        const ids = parent === null ? this.rootIds : (this.kids.get(parent) ?? [])
        frames.push({ ids, i: ids.indexOf(id) + 1 })
        parent = id
      }
      descend(after)
    }
    const out: Array<AgentNode> = []
    while (frames.length > 0 && out.length <= limit) {
      const top = frames[frames.length - 1]!
      if (top.i >= top.ids.length) {
        frames.pop()
        continue
      }
      const id = top.ids[top.i++]!
      out.push(this.nodes.get(id)!)
      descend(id)
    }
    return Either.right(out.length > limit ? { nodes: out.slice(0, limit), more: true } : { nodes: out, more: false })
  }
  /** Children of `parent` (roots when null) with this name. */
  childNamed(parent: AgentId | null, name: string): AgentNode | undefined {
    const ids = parent === null ? this.rootIds : (this.kids.get(parent) ?? [])
    return ids.map((i) => this.nodes.get(i)!).find((n) => n.name === name)
  }
  /** Every node with this name, anywhere. */
  named(name: string): ReadonlyArray<AgentNode> {
    return [...this.nodes.values()].filter((n) => n.name === name)
  }

  /**
   * Add a node. Its parent must exist; its name must be unique among its siblings (roots: among
   * roots) and must not be `USER`. A collision is rejected, never renamed.
   */
  add(node: AgentNode): Either.Either<AgentTree, InvalidInputError> {
    if (this.nodes.has(node.id)) {
      return Either.left(new InvalidInputError({ field: "id", message: `agent ${node.id} already exists` }))
    }
    if (node.name === USER) {
      return Either.left(new InvalidInputError({ field: "name", message: `"${USER}" is reserved for the human` }))
    }
    if (node.parent_id !== null && !this.nodes.has(node.parent_id)) {
      return Either.left(new InvalidInputError({ field: "parent_id", message: `no parent agent ${node.parent_id}` }))
    }
    if (this.childNamed(node.parent_id, node.name)) {
      const where = node.parent_id === null ? "among root agents" : `under ${this.nodes.get(node.parent_id)!.name}`
      return Either.left(new InvalidInputError({ field: "name", code: "name_taken", message: `the name "${node.name}" is taken ${where}` }))
    }
    const nodes = new Map(this.nodes).set(node.id, node)
    const kids = new Map(this.kids)
    if (node.parent_id !== null) kids.set(node.parent_id, [...(kids.get(node.parent_id) ?? []), node.id])
    const roots = node.parent_id === null ? [...this.rootIds, node.id] : this.rootIds
    return Either.right(new AgentTree(nodes, kids, roots))
  }

  /**
   * Add many nodes at once with `add`'s rules, in O(n + new) (`add` copies the maps each time):
   * parents come before their children (a parent may be among `nodes`). All or nothing.
   */
  addAll(nodes: Iterable<AgentNode>): Either.Either<AgentTree, InvalidInputError> {
    const map = new Map(this.nodes)
    const kids = new Map(this.kids)
    const roots = [...this.rootIds]
    const copied = new Map<AgentId, Array<AgentId>>()
    const namesOf = new Map<AgentId | null, Set<string>>()
    const taken = (parent: AgentId | null): Set<string> => {
      let s = namesOf.get(parent)
      if (s === undefined) {
        const ids = parent === null ? roots : (kids.get(parent) ?? [])
        s = new Set(ids.map((i) => map.get(i)!.name))
        namesOf.set(parent, s)
      }
      return s
    }
    const fail = (field: string, message: string, code?: "name_taken") =>
      Either.left(new InvalidInputError({ field, ...(code === undefined ? {} : { code }), message }))
    for (const node of nodes) {
      if (map.has(node.id)) return fail("id", `agent ${node.id} already exists`)
      if (node.name === USER) return fail("name", `"${USER}" is reserved for the human`)
      const p = node.parent_id
      if (p !== null && !map.has(p)) return fail("parent_id", `no parent agent ${p}`)
      const names = taken(p)
      if (names.has(node.name)) {
        return fail("name", `the name "${node.name}" is taken ${p === null ? "among root agents" : `under ${map.get(p)!.name}`}`, "name_taken")
      }
      names.add(node.name)
      map.set(node.id, node)
      if (p === null) roots.push(node.id)
      else {
        let k = copied.get(p)
        if (k === undefined) {
          k = [...(kids.get(p) ?? [])]
          kids.set(p, k)
          copied.set(p, k)
        }
        k.push(node.id)
      }
    }
    return Either.right(new AgentTree(map, kids, roots))
  }

  /** Remove many nodes at once; each one's children must be among `ids` or already gone. */
  removeAll(ids: Iterable<AgentId>): Either.Either<AgentTree, InvalidInputError> {
    const gone = new Set<AgentId>()
    for (const id of ids) if (this.nodes.has(id)) gone.add(id)
    if (gone.size === 0) return Either.right(this)
    for (const id of gone) {
      const left = (this.kids.get(id) ?? []).find((c) => !gone.has(c))
      if (left !== undefined) {
        return Either.left(new InvalidInputError({ field: "id", message: `agent ${this.nodes.get(id)!.name} still has children` }))
      }
    }
    const nodes = new Map(this.nodes)
    const kids = new Map(this.kids)
    for (const id of gone) {
      const parent = nodes.get(id)!.parent_id
      nodes.delete(id)
      kids.delete(id)
      if (parent !== null && !gone.has(parent)) kids.set(parent, (kids.get(parent) ?? []).filter((c) => !gone.has(c)))
    }
    return Either.right(new AgentTree(nodes, kids, this.rootIds.filter((r) => !gone.has(r))))
  }

  /** Remove a leaf. Removing an agent that still has children is an error (remove them first). */
  remove(id: AgentId): Either.Either<AgentTree, InvalidInputError> {
    const node = this.nodes.get(id)
    if (!node) return Either.left(new InvalidInputError({ field: "id", message: `no agent ${id}` }))
    if ((this.kids.get(id) ?? []).length > 0) {
      return Either.left(new InvalidInputError({ field: "id", message: `agent ${node.name} still has children` }))
    }
    const nodes = new Map(this.nodes)
    nodes.delete(id)
    const kids = new Map(this.kids)
    kids.delete(id)
    if (node.parent_id !== null) kids.set(node.parent_id, (kids.get(node.parent_id) ?? []).filter((c) => c !== id))
    return Either.right(new AgentTree(nodes, kids, this.rootIds.filter((r) => r !== id)))
  }

  /** Replace a node's record (same id, same parent). */
  update(node: AgentNode): AgentTree {
    return this.nodes.has(node.id) ? new AgentTree(new Map(this.nodes).set(node.id, node), this.kids, this.rootIds) : this
  }

  /** The agents `from` may address: parent, children, siblings. */
  oneHop(from: AgentId): ReadonlyArray<AgentNode> {
    const p = this.parent(from)
    return [...(p ? [p] : []), ...this.children(from), ...this.team(from)]
  }

  /**
   * Resolve a recipient name for `from` under the one-hop rule. `USER` is handled by the caller.
   * Errors: unknown-sender, self, ambiguous (a parent and a child share the name),
   * not-one-hop (the name exists elsewhere), unknown-recipient.
   */
  resolve(from: AgentId, name: string): Either.Either<AgentNode, RoutingError> {
    const sender = this.nodes.get(from)
    const err = (reason: RoutingError["reason"], message: string) =>
      Either.left(new RoutingError({ from: sender?.name ?? from, to: name, reason, message }))
    if (!sender) return err("unknown-sender", `no agent ${from}`)
    const hits = this.oneHop(from).filter((n) => n.name === name)
    if (hits.length === 1) return Either.right(hits[0]!)
    if (hits.length > 1) {
      return err("ambiguous", `"${name}" names both your parent and one of your children; it cannot be addressed`)
    }
    if (sender.name === name) return err("self", "you cannot send a message to yourself")
    if (this.named(name).length > 0) {
      return err(
        "not-one-hop",
        `"${name}" is not your parent, child or sibling; messages go one hop (parent, children, siblings)`
      )
    }
    return err("unknown-recipient", `no agent named "${name}"`)
  }
}
