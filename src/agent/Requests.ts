// Requests: the one owner of the sync requests waiting for their reply, of the ones that timed
// out (their reply still comes, marked late) and of the reply-timeout timers; it answers them.
//  - A sync request may carry a reply timeout (`timeout_s`): a scoped timer per request (a
//    FiberMap keyed by message id, on the Clock). When it fires first, `message.timed_out` is
//    logged in the sender's log, the request is no longer tracked and the sender is woken by a
//    notice (a SYSTEM response, `timed_out`); a reply that still comes is delivered as an
//    ordinary message, marked `late`.
//  - `reply` answers a request (auto-reply with the turn's final text, error replies). It never
//    fails: when the reply cannot be logged the request stays pending (a later termination, or
//    recovery after a restart, answers it).
//  - USER's requests someone waits on (`agent send --wait`, `agent wait`: `watch`): their answer
//    is logged read by USER (`user.read`) in the same durable step as the answer itself.
// Bookkeeping operations are synchronous (atomic within an Effect.sync block).
import { Clock, Duration, Effect, FiberMap, type Scope } from "effect"
import { makeEvent } from "../domain/events.js"
import type { AgentId, MessageId } from "../domain/ids.js"
import type { MessageEnvelope } from "../domain/message.js"
import { USER } from "./AgentTree.js"
import { Delivery } from "./Delivery.js"
import { Tree } from "./Tree.js"

/** A sync request waiting for its reply. */
export interface PendingRequest {
  readonly id: MessageId
  readonly from: AgentId | "USER"
  readonly to: AgentId
  /** The request's reply timeout, seconds; absent: waits indefinitely. */
  readonly timeout_s?: number | undefined
  /**
   * USER's request whose turn ended while its recipient still waited on requests of its own: it
   * is answered by the first later turn of the recipient that ends with none outstanding.
   */
  readonly carried?: boolean | undefined
}

/** A request found by id: pending, or timed out (a reply to it is late). */
export interface Tracked {
  readonly request: PendingRequest
  readonly late: boolean
}

/** A pending request as recovery rebuilds it, with when it was sent (epoch ms; NaN: unknown). */
export interface SeededRequest {
  readonly request: PendingRequest
  readonly sentAt: number
}

export class Requests extends Effect.Service<Requests>()("substrat/Requests", {
  scoped: Effect.gen(function*() {
    const tree = yield* Tree
    const delivery = yield* Delivery
    const pending = new Map<MessageId, PendingRequest>()
    /**
     * Requests that timed out: their sender no longer waits, but the recipient's reply is still
     * delivered, marked `late`. In memory only: after a restart a timed-out request is answered
     * (recovery), so a reply to it is not sent.
     */
    const late = new Map<MessageId, PendingRequest>()
    /**
     * Requests being answered whose answer is not durable yet (taken, reply being logged): their
     * sender still counts as waiting, so it never looks idle between its request's end and the
     * reply's turn being queued.
     */
    const answeringNow = new Map<MessageId, PendingRequest>()
    /** USER's requests with someone waiting for their answer (`watch`): how many waiters. */
    const watched = new Map<MessageId, number>()
    /** When seeded requests were sent (recovery), for re-arming their timers. */
    const sentAt = new Map<MessageId, number>()
    /** Reply-timeout timers by request id (scoped: interrupted at shutdown). */
    const timers = yield* FiberMap.make<MessageId>()

    const find = (id: MessageId): Tracked | undefined => {
      const live = pending.get(id)
      if (live) return { request: live, late: false }
      const gone = late.get(id)
      return gone ? { request: gone, late: true } : undefined
    }
    /** Stop tracking `id` (it is being answered); what it was. */
    const take = (id: MessageId): Tracked | undefined => {
      const t = find(id)
      pending.delete(id)
      late.delete(id)
      if (t !== undefined && !t.late) answeringNow.set(id, t.request)
      return t
    }
    /** After `take`: the answer is durable (or failed and was restored); the sender no longer waits on it. */
    const settle = (id: MessageId): void => {
      answeringNow.delete(id)
    }
    /** Undo `take`: the answer was not durable. */
    const restore = (t: Tracked): void => {
      answeringNow.delete(t.request.id)
      if (t.late) late.set(t.request.id, t.request)
      else if (!pending.has(t.request.id)) pending.set(t.request.id, t.request)
    }

    const cancelTimer = (id: MessageId) => FiberMap.remove(timers, id)

    /** Arm `p`'s timer to fire in `remainingMs` (0 or less: at once). */
    const armTimer = (p: PendingRequest, remainingMs: number): Effect.Effect<void> =>
      p.timeout_s === undefined || p.from === USER
        ? Effect.void
        : FiberMap.run(
          timers,
          p.id,
          Effect.sleep(Duration.millis(Math.max(0, remainingMs))).pipe(Effect.zipRight(Effect.uninterruptible(timeOut(p.id))))
        ).pipe(Effect.asVoid)

    /**
     * A request's timer fired: `message.timed_out` in the sender's log first (when that append
     * fails nothing changes: the sender keeps waiting, and recovery re-arms the request after a
     * restart), then the request is no longer tracked and the sender gets the notice, a SYSTEM
     * response that wakes it like a reply.
     */
    const timeOut = (id: MessageId): Effect.Effect<void> =>
      Effect.suspend(() => {
        const p = pending.get(id)
        if (p === undefined || p.from === USER || p.timeout_s === undefined) return Effect.void
        const from = p.from
        const timeout_s = p.timeout_s
        const name = tree.get(p.to)?.name ?? String(p.to)
        const timedOut = makeEvent("message.timed_out", { message_id: id, recipient: p.to, recipient_name: name, timeout_s })
        return delivery.logFor(from, timedOut).pipe(
          Effect.zipRight(Effect.suspend(() => {
            // Answered while the event was being written: the reply went through as usual.
            if (pending.get(id) !== p) return Effect.void
            pending.delete(id)
            late.set(id, p)
            return delivery.deliver(delivery.envelope({
              sender: "SYSTEM",
              recipient: from,
              kind: "response",
              text: `no reply from ${name} to message ${id} within ${timeout_s} s`,
              reply_to: id,
              extra: { timed_out: true, timeout_s }
            }))
          })),
          Effect.catchAll((e) => Effect.logWarning(`timeout of request ${id} not recorded or not delivered: ${e.message}`)),
          Effect.asVoid
        )
      })

    /** Answer a pending (or timed-out: late) request. No-op when already answered. Never fails. */
    const reply = (requestId: MessageId, text: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const t = take(requestId)
        if (!t) return Effect.void
        const p = t.request
        const env = delivery.envelope({
          sender: p.to,
          recipient: p.from,
          kind: "response",
          text,
          reply_to: requestId,
          ...(t.late ? { extra: { late: true } } : {})
        })
        const send = p.from === USER
          ? delivery.toUser(p.to, env, (watched.get(requestId) ?? 0) > 0)
          : tree.has(p.from)
          ? delivery.deliver(env).pipe(Effect.asVoid)
          : Effect.void
        return send.pipe(
          Effect.zipRight(cancelTimer(requestId)),
          Effect.catchAll((e) =>
            Effect.sync(() => restore(t)).pipe(
              Effect.zipRight(Effect.logWarning(`reply to request ${requestId} not delivered: ${e.message}`))
            )
          ),
          Effect.ensuring(Effect.sync(() => settle(requestId)))
        )
      })

    /** A message that could not be delivered (recipient gone): a sync request among them is answered with an error. */
    const dropped = (env: MessageEnvelope): Effect.Effect<void> =>
      env.kind === "request" && pending.has(env.id) && env.recipient !== null && env.recipient !== USER
        ? reply(env.id, `[error] the recipient is gone; message ${env.id} was not delivered`)
        : Effect.void

    /** `agent` is terminated: requests waiting on it are answered with an error, its own stop. */
    const failPending = Effect.fn("Requests.failPending")(function*(agent: AgentId, why: string) {
      const mine = [...pending.values()].filter((r) => r.to === agent)
      for (const r of mine) yield* reply(r.id, `[error] ${why}; request ${r.id} will not be answered`)
      // Requests this agent is waiting on: their replies would have nowhere to go.
      for (const r of [...pending.values()]) {
        if (r.from !== agent) continue
        pending.delete(r.id)
        yield* cancelTimer(r.id)
      }
      for (const [id, r] of [...late]) if (r.from === agent || r.to === agent) late.delete(id)
    })

    /**
     * After recovery: arm the timers of the pending requests that carry a timeout. The deadline
     * is the time the request was sent + its timeout; one already past (or unknown) fires at once.
     */
    const armTimeouts = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      for (const p of [...pending.values()]) {
        if (p.from === USER || p.timeout_s === undefined) continue
        const sent = sentAt.get(p.id) ?? Number.NaN
        yield* armTimer(p, Number.isFinite(sent) ? sent + p.timeout_s * 1000 - now : 0)
      }
    })

    return {
      register: (p: PendingRequest): void => {
        pending.set(p.id, p)
      },
      /** Forget a request whose sending failed (not durable, not acknowledged). */
      unregister: (id: MessageId): void => {
        pending.delete(id)
      },
      isPending: (id: MessageId): boolean => pending.has(id),
      /** Someone waits for the answer to USER's request `id` while the scope lasts (it is logged read with it). */
      watch: (id: MessageId): Effect.Effect<void, never, Scope.Scope> =>
        Effect.acquireRelease(
          Effect.sync(() => void watched.set(id, (watched.get(id) ?? 0) + 1)),
          () =>
            Effect.sync(() => {
              const n = (watched.get(id) ?? 0) - 1
              if (n > 0) watched.set(id, n)
              else watched.delete(id)
            })
        ),
      /**
       * Cluster mode: the agents' tree moved to another runner. Their requests (to or from them)
       * are no longer tracked here and their timers are cancelled; nothing is logged (the runner
       * the tree goes to recovers them from the log).
       */
      forget: (agents: ReadonlySet<AgentId>): Effect.Effect<void> =>
        Effect.suspend(() => {
          const ids: Array<MessageId> = []
          const mine = (r: PendingRequest) => agents.has(r.to) || (r.from !== USER && agents.has(r.from))
          for (const m of [pending, late, answeringNow]) {
            for (const [id, r] of m) {
              if (mine(r)) {
                m.delete(id)
                sentAt.delete(id)
                ids.push(id)
              }
            }
          }
          return Effect.forEach(ids, cancelTimer, { discard: true })
        }),
      /** USER's request `id` was read by a turn that left work outstanding: keep it open (see PendingRequest.carried). */
      carry: (id: MessageId): void => {
        const p = pending.get(id)
        if (p !== undefined && p.from === USER) pending.set(id, { ...p, carried: true })
      },
      /**
       * USER's requests to `agent` not answered yet (pending, or being answered right now), in
       * the order they were registered.
       */
      openFromUser: (agent: AgentId): ReadonlyArray<MessageId> =>
        [...pending.values(), ...answeringNow.values()].filter((r) => r.from === USER && r.to === agent).map((r) => r.id),
      /** USER's requests to `agent` that it has read and not answered yet, oldest first. */
      carriedFor: (agent: AgentId): ReadonlyArray<PendingRequest> =>
        [...pending.values()].filter((r) => r.from === USER && r.to === agent && r.carried === true),
      find,
      take,
      settle,
      restore,
      armTimer,
      cancelTimer,
      reply,
      dropped,
      failPending,
      armTimeouts,
      /** Whether the turn that took request `id` owes it a reply (pending, or timed out: late). */
      awaitsReply: (id: MessageId, agent: AgentId): boolean => find(id)?.request.to === agent,
      /** How many sync requests `agent` waits on. */
      waitingOn: (agent: AgentId): number => {
        let n = 0
        for (const r of pending.values()) if (r.from === agent) n++
        for (const r of answeringNow.values()) if (r.from === agent) n++
        return n
      },
      addressedTo: (agent: AgentId): ReadonlyArray<PendingRequest> => [...pending.values()].filter((r) => r.to === agent),
      isEmpty: (): boolean => pending.size === 0,
      /** Recovery: the requests still waiting, with when each was sent. */
      seed: (requests: ReadonlyArray<SeededRequest>): void => {
        for (const r of requests) {
          pending.set(r.request.id, r.request)
          sentAt.set(r.request.id, r.sentAt)
        }
      },
      snapshot: (): ReadonlyArray<PendingRequest> => [...pending.values()]
    } as const
  })
}) {}
