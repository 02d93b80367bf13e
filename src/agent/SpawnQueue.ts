// SpawnQueue: the caps on a tree's shape (docs/budgets.md, "Caps") and the one owner of the
// spawns that wait for room. `spawn_agent` goes through `spawn`:
//   - deeper than max_depth: refused (depth never frees up);
//   - past max_children (live children of the parent) or max_live (live agents of the tree, the
//     root included): queued — `spawn.queued` in the parent's log, the tool result says
//     "queued" with its position — or refused (`caps.policy = refuse`);
//   - otherwise (and nothing of the tree queued before it): spawned at once (Lifecycle.spawn).
// An agent is LIVE while it has work: not born yet, a turn running or queued (parked ones too),
// or — a spawned child — no turn run yet (its parent is about to give it a task). An agent that
// finished its work (idle after at least one turn) holds no place; a message wakes it again
// without asking the caps. Room is looked for (`pump`) after every turn's end, after a
// termination and at start-up: the queue is served oldest first; a queued spawn whose parent is
// mid-turn waits for that turn's end (so its child is born, durably, before `spawn.started`).
// The parent gets a SYSTEM message when its queued child starts (or cannot be made).
// Durable: `caps.set` (a root's own caps) and `spawn.queued` / `spawn.started` / `spawn.failed`;
// recovery seeds both back (`seed`).
// Over 300 lines because the queue, the cap checks and the inbox view of the queue share the
// queue's private state, which has this one owner.
import { Context, Effect, Layer, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import type { AgentNode } from "../domain/agent.js"
import type { InboxItem } from "../domain/budget.js"
import { type CapHit, capsInForce, type CapsPolicy, noCaps, type TreeCaps } from "../domain/caps.js"
import { InvalidInputError, NotFoundError } from "../domain/errors.js"
import { makeEvent } from "../domain/events.js"
import type { AgentId } from "../domain/ids.js"
import { EventLog } from "../storage/EventLog.js"
import { Activity } from "./Activity.js"
import { Delivery } from "./Delivery.js"
import { Lifecycle, type SpawnArgs } from "./Lifecycle.js"
import { Mailbox } from "./Mailbox.js"
import { Tree } from "./Tree.js"
import { Turns } from "./Turns.js"

/** The daemon's caps (config `caps.*`): the defaults of every tree, and the policy. */
export class CapsConfig extends Context.Tag("substrat/CapsConfig")<CapsConfig, {
  readonly caps: TreeCaps
  readonly policy: CapsPolicy
}>() {
  static readonly layer = (caps: TreeCaps, policy: CapsPolicy): Layer.Layer<CapsConfig> => Layer.succeed(CapsConfig, { caps, policy })
}

/** A spawn past a cap that the policy refuses (or any spawn past max_depth). */
export class CapError extends Schema.TaggedError<CapError>()("CapError", {
  cap: Schema.Literal("max_depth", "max_children", "max_live"),
  message: Schema.String
}) {}

/** One spawn waiting for room. */
export interface QueuedSpawn {
  readonly queue_id: string
  readonly parent: AgentId
  readonly args: SpawnArgs
  readonly reason: string
  readonly ts: string
}

/** What `spawn_agent` answers. */
export type SpawnOutcome =
  | { readonly status: "created"; readonly agent_id: AgentId; readonly name: string }
  | {
    readonly status: "queued"
    readonly name: string
    readonly queue_id: string
    readonly position: number
    readonly reason: string
    readonly note: string
  }

/** What recovery rebuilt: roots' own caps, and the queued spawns of live parents (oldest first). */
export interface SpawnQueueSeed {
  readonly caps: ReadonlyMap<AgentId, TreeCaps>
  readonly queued: ReadonlyArray<QueuedSpawn>
}

const describe = (hit: CapHit, tree: string): string =>
  hit.cap === "max_depth"
    ? `the tree ${tree} may be at most ${hit.limit} level(s) deep (max_depth)`
    : hit.cap === "max_children"
    ? `${hit.live} of at most ${hit.limit} live children (max_children)`
    : `${hit.live} of at most ${hit.limit} live agents in the tree ${tree} (max_live)`

export class SpawnQueue extends Effect.Service<SpawnQueue>()("substrat/SpawnQueue", {
  effect: Effect.gen(function*() {
    const tree = yield* Tree
    const turns = yield* Turns
    const mailbox = yield* Mailbox
    const activity = yield* Activity
    const lifecycle = yield* Lifecycle
    const delivery = yield* Delivery
    const log = yield* EventLog
    const config = Option.getOrElse(yield* Effect.serviceOption(CapsConfig), () => ({ caps: noCaps, policy: "queue" as const }))

    /** Roots' own caps (`caps.set`). */
    const rootCaps = new Map<AgentId, TreeCaps>()
    /** Oldest first. */
    const queue: Array<QueuedSpawn> = []
    /**
     * Started spawns whose child is not born yet: its parent began a turn between the queue's
     * check and the spawn, so the birth waits for that turn's end (deferred spawn). Their
     * `spawn.started` is logged only once the child is durable, so a crash before the birth
     * leaves the spawn queued in the log and recovery queues it again.
     */
    const awaitingBirth: Array<{ readonly q: QueuedSpawn; readonly child: AgentId }> = []
    const lock = yield* Effect.makeSemaphore(1)

    const rootOf = (n: AgentNode): AgentNode => {
      let cur = n
      while (cur.parent_id !== null) {
        const p = tree.get(cur.parent_id)
        if (p === undefined) break
        cur = p
      }
      return cur
    }
    const depthOf = (n: AgentNode): number => {
      let d = 0
      for (let cur = n; cur.parent_id !== null;) {
        const p = tree.get(cur.parent_id)
        if (p === undefined) break
        d++
        cur = p
      }
      return d
    }
    const isLive = (n: AgentNode): boolean =>
      tree.isLive(n.id) && !tree.isDormant(n.id) &&
      (mailbox.isUnborn(n.id) || turns.isBusy(n.id) || mailbox.queuedTurns(n.id) > 0 ||
        (n.parent_id !== null && activity.usageOf(n.id, []).own.turns === 0))

    const capsOf = (root: AgentNode) => capsInForce(rootCaps.get(root.id) ?? noCaps, config.caps)

    /** The first cap a new child of `parent` would exceed now, or null. */
    const hitOf = (parent: AgentNode): CapHit | null => {
      const root = rootOf(parent)
      const caps = capsOf(root)
      if (caps.max_depth > 0 && depthOf(parent) + 1 > caps.max_depth) return { cap: "max_depth", limit: caps.max_depth }
      if (caps.max_children > 0) {
        const live = tree.current().children(parent.id).filter(isLive).length
        if (live >= caps.max_children) return { cap: "max_children", limit: caps.max_children, live }
      }
      if (caps.max_live > 0) {
        const live = tree.current().subtree(root.id).filter(isLive).length
        if (live >= caps.max_live) return { cap: "max_live", limit: caps.max_live, live }
      }
      return null
    }

    const rootIdOf = (q: QueuedSpawn): AgentId | null => {
      const p = tree.get(q.parent)
      return p === undefined ? null : rootOf(p).id
    }
    /** 1-based place among the queued spawns of the same tree. */
    const positionOf = (q: QueuedSpawn): number => {
      const root = rootIdOf(q)
      return queue.filter((x) => rootIdOf(x) === root).indexOf(q) + 1
    }

    /** A SYSTEM message to the parent (it wakes it); best effort — the log keeps what happened. */
    const tell = (parent: AgentId, text: string) =>
      delivery.deliver(delivery.envelope({ sender: "SYSTEM", recipient: parent, kind: "notification", text })).pipe(
        Effect.catchAll((e) => Effect.logWarning(`notice to ${parent} not delivered: ${e.message}`)),
        Effect.asVoid
      )

    const logTo = (agent: AgentId, event: Parameters<typeof log.append>[1]) =>
      Effect.suspend(() => {
        const n = tree.get(agent)
        return n === undefined ? Effect.void : Effect.asVoid(log.append(n.session_id, event))
      })

    /** Start what fits, oldest first (the caller holds the lock). */
    const pumpLocked = Effect.gen(function*() {
      let i = 0
      while (i < queue.length) {
        const q = queue[i]!
        const p = tree.get(q.parent)
        // Its parent is gone: the spawn went with it (a terminated parent's log is not recovered).
        if (p === undefined || !tree.isLive(q.parent)) {
          queue.splice(i, 1)
          continue
        }
        if (turns.isBusy(q.parent) || hitOf(p) !== null) {
          i++
          continue
        }
        queue.splice(i, 1)
        const made = yield* Effect.either(lifecycle.spawn(q.parent, q.args))
        if (made._tag === "Left") {
          yield* fail(q, `spawn_agent of "${q.args.name}" failed when room freed: ${made.left.message}`)
        } else if (mailbox.isUnborn(made.right.id)) {
          awaitingBirth.push({ q, child: made.right.id })
        } else {
          yield* started(q, made.right.id)
        }
      }
    })

    const started = (q: QueuedSpawn, child: AgentId) =>
      Effect.gen(function*() {
        yield* logTo(q.parent, makeEvent("spawn.started", { queue_id: q.queue_id, agent_id: child })).pipe(
          Effect.catchAll((e) => Effect.logWarning(`spawn.started of ${q.args.name} not logged: ${e.message}`))
        )
        yield* tell(
          q.parent,
          `Your queued spawn_agent of "${q.args.name}" has started (it waited: ${q.reason}). ${q.args.name} exists now; send it its task.`
        )
      })

    /** Settle the started spawns whose child's birth has happened (or was given up) since. */
    const settleBirths = Effect.gen(function*() {
      let i = 0
      while (i < awaitingBirth.length) {
        const { q, child } = awaitingBirth[i]!
        if (mailbox.isUnborn(child)) {
          i++
          continue
        }
        awaitingBirth.splice(i, 1)
        if (tree.get(child) !== undefined) yield* started(q, child)
        else yield* fail(q, `spawn_agent of "${q.args.name}" failed: the child could not be created`)
      }
    })

    const fail = (q: QueuedSpawn, message: string) =>
      Effect.gen(function*() {
        yield* logTo(q.parent, makeEvent("spawn.failed", { queue_id: q.queue_id, message })).pipe(
          Effect.catchAll((e) => Effect.logWarning(`spawn.failed of ${q.args.name} not logged: ${e.message}`))
        )
        yield* tell(q.parent, `Your queued ${message}`)
      })

    const pumpTraced = Effect.fn("SpawnQueue.pump")(function*() {
      yield* lock.withPermits(1)(Effect.zipRight(settleBirths, pumpLocked))
    })
    /**
     * Start the queued spawns that fit now (after a turn's end, a termination, start-up). Nothing
     * queued (every turn's end, mostly): nothing done, no span.
     */
    const pump = (): Effect.Effect<void> =>
      Effect.suspend(() => queue.length === 0 && awaitingBirth.length === 0 ? Effect.void : pumpTraced())

    const queuedOutcome = (q: QueuedSpawn): SpawnOutcome => ({
      status: "queued",
      name: q.args.name,
      queue_id: q.queue_id,
      position: positionOf(q),
      reason: q.reason,
      note:
        `${q.args.name} is queued (position ${positionOf(q)}): ${q.reason}. It starts by itself when room frees (a live agent finishes its work or is terminated); you get a message then. Do not spawn it again.`
    })

    /** `spawn_agent`: spawned now, queued for room, or refused (CapError). */
    const spawn = Effect.fn("SpawnQueue.spawn")(function*(parent: AgentId, args: SpawnArgs) {
      const out = yield* lock.withPermits(1)(Effect.gen(function*() {
        const p = tree.get(parent)
        if (p === undefined || !tree.isLive(parent)) {
          return yield* new NotFoundError({ kind: "agent", id: parent, message: `no live agent ${parent}` })
        }
        const root = rootOf(p)
        const hit = hitOf(p)
        if (hit?.cap === "max_depth") {
          return yield* new CapError({ cap: hit.cap, message: `spawn refused: ${describe(hit, root.name)}; ${p.name} is at level ${depthOf(p)}` })
        }
        const ahead = queue.filter((q) => rootIdOf(q) === root.id).length
        if (hit === null && ahead === 0) {
          const n = yield* lifecycle.spawn(parent, args)
          return { status: "created", agent_id: n.id, name: n.name } satisfies SpawnOutcome
        }
        const reason = hit === null ? `${ahead} earlier spawn(s) of this tree wait for room` : describe(hit, root.name)
        if (config.policy === "refuse") {
          return yield* new CapError({
            cap: hit?.cap ?? "max_live",
            message: `spawn refused: ${reason} (caps.policy = refuse). Wait for a child to finish its work, or terminate one.`
          })
        }
        // The same spawn again (a turn re-run after a restart): it keeps its place.
        const same = queue.find((q) => q.parent === parent && q.args.name === args.name && q.args.instructions === args.instructions)
        if (same !== undefined) return queuedOutcome(same)
        const name = yield* lifecycle.checkSpawn(parent, args)
        if (queue.some((q) => q.parent === parent && q.args.name === name)) {
          return yield* new InvalidInputError({ field: "name", code: "name_taken", message: `name "${name}" is taken among your queued children` })
        }
        const q: QueuedSpawn = { queue_id: randomUUID(), parent, args: { ...args, name }, reason, ts: new Date().toISOString() }
        yield* log.append(
          p.session_id,
          makeEvent("spawn.queued", {
            queue_id: q.queue_id,
            name,
            instructions: args.instructions,
            role: args.role ?? "worker",
            workspace_subdir: args.workspace_subdir ?? null,
            ...(args.workspace === undefined ? {} : { workspace: args.workspace }),
            provider: args.provider ?? null,
            budget: args.budget ?? null,
            reason
          })
        )
        queue.push(q)
        return queuedOutcome(q)
      }))
      // Queued behind others although there is room: they (and maybe it) start now.
      if (out.status === "queued") yield* pump()
      return out
    })

    /**
     * A root's own caps (`agent create --max-*`, `caps set`), durable in its log. A raise starts
     * what fits now; a lowered cap stops no live agent (it holds new spawns back).
     */
    const setCaps = Effect.fn("SpawnQueue.setCaps")(function*(root: AgentId, caps: TreeCaps) {
      const n = tree.get(root)
      if (n === undefined) return yield* new NotFoundError({ kind: "agent", id: root, message: `no agent ${root}` })
      yield* log.append(n.session_id, makeEvent("caps.set", caps))
      rootCaps.set(root, caps)
      yield* pump()
    })

    /** The human drops a queued spawn (`inbox answer <id> cancel`); false: no such queued spawn. */
    const cancel = Effect.fn("SpawnQueue.cancel")(function*(queue_id: string) {
      return yield* lock.withPermits(1)(Effect.gen(function*() {
        const i = queue.findIndex((q) => q.queue_id === queue_id)
        if (i < 0) return null
        const q = queue.splice(i, 1)[0]!
        yield* fail(q, `spawn_agent of "${q.args.name}" was cancelled by the human`)
        return q
      }))
    })

    /** The queued spawns as inbox items, oldest first. */
    const inbox = (): ReadonlyArray<InboxItem> =>
      queue.flatMap((q) => {
        const p = tree.get(q.parent)
        if (p === undefined) return []
        return [{
          id: q.queue_id,
          kind: "queued_spawn" as const,
          agent_id: p.id,
          agent_name: p.name,
          text:
            `${p.name}'s spawn of ${q.args.name} waits (position ${positionOf(q)} in ${rootOf(p).name}'s tree): ${q.reason}. It starts when room frees; cancel it with substrat inbox answer ${q.queue_id} cancel.`,
          ts: q.ts
        }]
      })

    const seed = (s: SpawnQueueSeed): void => {
      for (const [k, v] of s.caps) rootCaps.set(k, v)
      queue.push(...s.queued)
    }

    return {
      spawn,
      pump,
      setCaps,
      cancel,
      inbox,
      seed,
      /** The queued spawns now, oldest first (tests, inspection). */
      queued: (): ReadonlyArray<QueuedSpawn> => [...queue],
      capsOf: (root: AgentId): TreeCaps => rootCaps.get(root) ?? noCaps,
      /** The caps in force for the tree of `root` now (0: none), and the policy. */
      inForce: (root: AgentId) => capsInForce(rootCaps.get(root) ?? noCaps, config.caps),
      policy: config.policy,
      /** The root of `agent`'s tree (undefined: no such agent). */
      rootOf: (agent: AgentId): AgentNode | undefined => {
        const n = tree.get(agent)
        return n === undefined ? undefined : rootOf(n)
      },
      /** How many spawns of the tree of `root` wait for room. */
      queuedIn: (root: AgentId): number => queue.filter((q) => rootIdOf(q) === root).length
    } as const
  })
}) {}
