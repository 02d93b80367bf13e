// Mailbox: the one owner of every agent's inbox, of the messages held for children not born yet
// (deferred spawn), of the queued turn triggers and the wake queue the turn runner reads, and of
// the user outbox (what roots said to USER, and which of it the human has read). Nobody else
// touches them. In-memory operations are
// synchronous (a check and its update in one Effect.sync block are atomic); the ones that wake
// the turn runner are Effects.
//  - An inbox holds what was delivered (logged `message.enqueued`) and not yet consumed: a
//    turn's prompt takes its waking message plus every notification/multicast waiting there;
//    `check_inbox` drains the ones no queued turn is about.
//  - Wakes of an agent can be held (a child born at the end of its parent's turn must not start
//    before the parent's turn is recorded) and released.
//  - A quarantined agent (a crash loop, docs/recovery.md) is parked: its triggers queue but
//    count as no outstanding work and wake nobody until `unpark` (`agent resume`).
import { Effect, Queue } from "effect"
import type { AgentId, MessageId } from "../domain/ids.js"
import type { MessageEnvelope } from "../domain/message.js"
import { type Trigger, Turns } from "./Turns.js"

export class Mailbox extends Effect.Service<Mailbox>()("substrat/Mailbox", {
  effect: Effect.gen(function*() {
    const turns = yield* Turns
    const inboxes = new Map<AgentId, Array<MessageEnvelope>>()
    const unborn = new Map<AgentId, Array<MessageEnvelope>>()
    const triggers = new Map<AgentId, Array<Trigger>>()
    const heldWakes = new Map<AgentId, number>()
    const parked = new Set<AgentId>()
    /** Wakes of parked agents (a budget or a question to the human stops them): not outstanding work. */
    const parkedWakes = new Map<AgentId, number>()
    const userOutbox: Array<MessageEnvelope> = []
    /** Messages in the user outbox the human has read (`user.read`): out of the human's inbox. */
    const readByUser = new Set<MessageId>()
    const wakes = yield* Queue.unbounded<AgentId>()

    const triggeredIds = (agent: AgentId) =>
      new Set((triggers.get(agent) ?? []).flatMap((t) => t._tag === "message" ? [t.id] : []))

    return {
      /** A new agent's empty inbox; `unborn`: its messages are held until `takeHeld` (its birth). */
      open: (agent: AgentId, opts: { readonly unborn: boolean }): void => {
        inboxes.set(agent, [])
        if (opts.unborn) unborn.set(agent, [])
      },
      isUnborn: (agent: AgentId): boolean => unborn.has(agent),
      /** Hold a message for an unborn recipient; false when the recipient is not unborn. */
      hold: (agent: AgentId, env: MessageEnvelope): boolean => {
        const held = unborn.get(agent)
        held?.push(env)
        return held !== undefined
      },
      /** The agent is born: what was held for it (to deliver now), in order. */
      takeHeld: (agent: AgentId): ReadonlyArray<MessageEnvelope> => {
        const held = unborn.get(agent) ?? []
        unborn.delete(agent)
        return held
      },
      /** The agent is gone: its inbox, held messages and queued triggers (returned, to settle) go. */
      close: (agent: AgentId): ReadonlyArray<Trigger> => {
        const queued = triggers.get(agent) ?? []
        inboxes.delete(agent)
        unborn.delete(agent)
        triggers.delete(agent)
        parked.delete(agent)
        parkedWakes.delete(agent)
        return queued
      },
      /**
       * Cluster mode: the agents' tree moved to another runner. Like `close` for each, and their
       * messages to USER leave the outbox too (the runner the tree goes to recovers them).
       */
      unload: (agents: ReadonlySet<AgentId>): ReadonlyArray<Trigger> => {
        const queued: Array<Trigger> = []
        for (const a of agents) {
          queued.push(...(triggers.get(a) ?? []))
          inboxes.delete(a)
          unborn.delete(a)
          triggers.delete(a)
          parked.delete(a)
          parkedWakes.delete(a)
          heldWakes.delete(a)
        }
        const gone: ReadonlySet<string> = agents
        const kept = userOutbox.filter((m) => !gone.has(m.sender))
        userOutbox.length = 0
        userOutbox.push(...kept)
        return queued
      },
      /** Put a delivered message into the agent's inbox; false when it has none (gone). */
      put: (agent: AgentId, env: MessageEnvelope): boolean => {
        const inbox = inboxes.get(agent)
        inbox?.push(env)
        return inbox !== undefined
      },
      /** Replies (responses) delivered to the agent that no turn of it has read yet. */
      unreadReplies: (agent: AgentId): number => (inboxes.get(agent) ?? []).filter((e) => e.kind === "response").length,
      inboxIds: (agent: AgentId): ReadonlySet<MessageId> => new Set((inboxes.get(agent) ?? []).map((e) => e.id)),
      /** Messages waiting for the agent: in its inbox, or held for its birth. */
      pendingCount: (agent: AgentId): number => (inboxes.get(agent) ?? []).length + (unborn.get(agent) ?? []).length,
      queuedTurns: (agent: AgentId): number => (triggers.get(agent) ?? []).length,

      /** Queue a turn of `agent` and wake the turn runner for it (unless its wakes are held). */
      queueTurn: (agent: AgentId, trigger: Trigger): Effect.Effect<void> =>
        Effect.suspend(() => {
          const list = triggers.get(agent) ?? []
          list.push(trigger)
          triggers.set(agent, list)
          if (parked.has(agent)) return Effect.void
          const held = heldWakes.get(agent)
          if (held !== undefined) heldWakes.set(agent, held + 1)
          return turns.addWork(1).pipe(Effect.zipRight(held === undefined ? Queue.offer(wakes, agent) : Effect.void))
        }),
      /** Hold `agent`'s wakes (its triggers queue, its turns do not start) until `releaseWakes`. */
      holdWakes: (agent: AgentId): void => {
        if (!heldWakes.has(agent)) heldWakes.set(agent, 0)
      },
      releaseWakes: (agent: AgentId): Effect.Effect<void> =>
        Effect.suspend(() => {
          const n = heldWakes.get(agent)
          heldWakes.delete(agent)
          return n ? Queue.offerAll(wakes, Array.from({ length: n }, () => agent)) : Effect.void
        }),
      /** Park `agent` (quarantine): its triggers queue from now on, its turns do not start. */
      park: (agent: AgentId): void => {
        parked.add(agent)
      },
      isParked: (agent: AgentId): boolean => parked.has(agent),
      parkedAgents: (): ReadonlyArray<AgentId> => [...parked],
      /** Lift the quarantine: the triggers that queued meanwhile run (returns how many). */
      unpark: (agent: AgentId): Effect.Effect<number> =>
        Effect.suspend(() => {
          if (!parked.delete(agent)) return Effect.succeed(0)
          const n = (triggers.get(agent) ?? []).length
          if (n === 0) return Effect.succeed(0)
          return turns.addWork(n).pipe(
            Effect.zipRight(Queue.offerAll(wakes, Array.from({ length: n }, () => agent))),
            Effect.as(n)
          )
        }),
      /**
       * The wake just taken for `agent` is parked by the turn gate (a spent budget, a question to
       * the human: src/agent/TurnGate.ts); its trigger stays queued and the taker still counts the
       * wake as done. `ungate` wakes it again. (Apart from the quarantine's `park`.)
       */
      gateWake: (agent: AgentId): void => {
        parkedWakes.set(agent, (parkedWakes.get(agent) ?? 0) + 1)
      },
      /** Agents with wakes parked by the gate. */
      gated: (): ReadonlyArray<AgentId> => [...parkedWakes.keys()],
      isGated: (agent: AgentId): boolean => parkedWakes.has(agent),
      ungate: (agent: AgentId): Effect.Effect<void> =>
        Effect.suspend(() => {
          const n = parkedWakes.get(agent)
          parkedWakes.delete(agent)
          if (!n) return Effect.void
          return turns.addWork(n).pipe(Effect.zipRight(Queue.offerAll(wakes, Array.from({ length: n }, () => agent))))
        }),
      /**
       * A turn parked mid-way (its budget ran out, TurnRunner): the messages it read go back to
       * the front of the inbox, its trigger to the front of the queue, and its wake is parked by
       * the gate (`ungate` — a raise — runs it again). False when the agent has no inbox (gone).
       */
      requeue: (agent: AgentId, consumed: ReadonlyArray<MessageEnvelope>, trigger: Trigger): boolean => {
        const inbox = inboxes.get(agent)
        if (inbox === undefined) return false
        inbox.unshift(...consumed)
        const list = triggers.get(agent) ?? []
        list.unshift(trigger)
        triggers.set(agent, list)
        parkedWakes.set(agent, (parkedWakes.get(agent) ?? 0) + 1)
        return true
      },
      /** Move the turn `message` wakes to the front of `agent`'s queued turns (the human's answer comes first). */
      promote: (agent: AgentId, message: MessageId): void => {
        const list = triggers.get(agent)
        const i = list?.findIndex((t) => t._tag === "message" && t.id === message) ?? -1
        if (list !== undefined && i > 0) list.unshift(...list.splice(i, 1))
      },
      /** The next agent to run one turn of (waits). */
      nextWake: Queue.take(wakes),
      /** The agent's oldest trigger, taken off its queue. */
      shiftTrigger: (agent: AgentId): Trigger | undefined => triggers.get(agent)?.shift(),

      /** `check_inbox`: take what waits without waking the agent (no queued turn is about it). */
      drainWaiting: (agent: AgentId): ReadonlyArray<MessageEnvelope> => {
        const inbox = inboxes.get(agent) ?? []
        const keep = triggeredIds(agent)
        inboxes.set(agent, inbox.filter((e) => keep.has(e.id)))
        return inbox.filter((e) => !keep.has(e.id))
      },
      /**
       * A turn starts: take its waking message (for a message trigger) and every other message no
       * queued turn is about; those stay for their own turns.
       */
      takeForTurn: (agent: AgentId, trigger: Trigger): {
        readonly main: MessageEnvelope | null
        readonly rest: ReadonlyArray<MessageEnvelope>
      } => {
        const inbox = inboxes.get(agent) ?? []
        const main = trigger._tag === "message" ? inbox.find((e) => e.id === trigger.id) ?? null : null
        const keep = triggeredIds(agent)
        inboxes.set(agent, inbox.filter((e) => e !== main && keep.has(e.id)))
        return { main, rest: inbox.filter((e) => e !== main && !keep.has(e.id)) }
      },

      /** `read`: its `user.read` was logged with it (USER was waiting for this answer). */
      toUser: (env: MessageEnvelope, read = false): void => {
        userOutbox.push(env)
        if (read) readByUser.add(env.id)
      },
      /** The human has read this message to USER (`user.read` is logged). */
      isReadByUser: (id: MessageId): boolean => readByUser.has(id),
      /** After `user.read` is durable (or, in recovery, was logged). */
      markReadByUser: (ids: Iterable<MessageId>): void => {
        for (const id of ids) readByUser.add(id)
      },
      /** Messages agents sent to USER, oldest first (one agent's, or all). */
      userMessages: (agent?: AgentId): ReadonlyArray<MessageEnvelope> =>
        userOutbox.filter((m) => agent === undefined || m.sender === agent),

      /** True while no agent has an inbox (nothing created or seeded yet). */
      isEmpty: (): boolean => inboxes.size === 0,
      /** Recovery: one inbox per live agent (re-injected messages in order), the user outbox. */
      seed: (
        agents: Iterable<AgentId>,
        seeded: ReadonlyMap<AgentId, ReadonlyArray<MessageEnvelope>>,
        outbox: ReadonlyArray<MessageEnvelope>
      ): void => {
        for (const a of agents) inboxes.set(a, [...(seeded.get(a) ?? [])])
        userOutbox.push(...outbox)
      },
      /** A copy of the state, for tests and invariants. */
      snapshot: () => ({
        inboxes: new Map([...inboxes].map(([k, v]) => [k, [...v]] as const)) as ReadonlyMap<AgentId, ReadonlyArray<MessageEnvelope>>,
        unborn: new Set(unborn.keys()) as ReadonlySet<AgentId>,
        triggers: new Map([...triggers].map(([k, v]) => [k, [...v]] as const)) as ReadonlyMap<AgentId, ReadonlyArray<Trigger>>,
        userOutbox: [...userOutbox] as ReadonlyArray<MessageEnvelope>
      })
    } as const
  }),
  dependencies: [Turns.Default]
}) {}
