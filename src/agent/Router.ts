// Router: one-hop messaging, inboxes, sync request/reply tracking, multicast fan-out and waking
// idle agents. See docs/messaging.md for the semantics as built.
//  - Every message to an agent is logged as `message.enqueued` in the RECIPIENT's log, then put
//    in its inbox. Requests, replies and anything from USER also queue a turn (wake).
//  - A turn's prompt takes its waking message out of the inbox plus every notification /
//    multicast waiting there (prepended); `message.delivered` is logged for each once drained.
//  - Messages to a child whose session does not exist yet (deferred spawn) are held and
//    replayed when it is born.
//  - Nothing is acknowledged that is not durable: a `message.enqueued` append that fails fails
//    the send (the tool / RPC returns the error) and leaves no in-memory delivery. Only
//    `message.delivered` (a lost one means a duplicate after a crash, never a loss) is
//    best-effort: a failure is a warning.
//  - A sync request may carry a reply timeout (`timeout_s`, seconds): a scoped timer per
//    request (FiberMap keyed by message id, on the Clock). When it fires first, the daemon logs
//    `message.timed_out` in the sender's log, stops tracking the request and wakes the sender
//    with a notice (a SYSTEM response, `timed_out`); a reply that still comes is
//    delivered as an ordinary message, marked `late`.
import { Clock, Duration, Effect, Either, FiberMap, Option, Queue } from "effect"
import { type EventLogError, InvalidInputError, NotFoundError, RoutingError } from "../domain/errors.js"
import { type LogEvent, makeEvent } from "../domain/events.js"
import { type AgentId, type MessageId, newMessageId } from "../domain/ids.js"
import { MessageEnvelope, type MessageKind } from "../domain/message.js"
import { EventLog } from "../storage/EventLog.js"
import { USER } from "./AgentTree.js"
import { formatMessage, senderName } from "./Prompt.js"
import { addWork, noteMessage, OrchestratorState, type PendingRequest, type Trigger } from "./OrchestratorState.js"
import { OutputBus } from "./OutputBus.js"

export interface SendArgs {
  readonly recipient: string
  readonly text: string
  readonly sync: boolean
  readonly reply_to?: MessageId | undefined
  /** Sync requests only: stop waiting after this many seconds (positive). */
  readonly timeout_seconds?: number | undefined
}
export interface SendResult {
  readonly message_id: MessageId
  readonly waiting_for_reply: boolean
}

const wakes = (env: MessageEnvelope) => env.kind === "request" || env.kind === "response" || env.sender === USER

export class Router extends Effect.Service<Router>()("substrat/Router", {
  scoped: Effect.gen(function*() {
    const s = yield* OrchestratorState
    const log = yield* EventLog
    const bus = yield* OutputBus

    const envelope = (args: {
      sender: AgentId | "USER" | "SYSTEM"
      recipient: AgentId | "USER"
      kind: MessageKind
      text: string
      reply_to?: MessageId | null
      extra?: Pick<MessageEnvelope, "timeout_s" | "timed_out" | "late" | "multicast_id">
    }) =>
      new MessageEnvelope({
        id: newMessageId(),
        timestamp: new Date().toISOString(),
        sender: args.sender,
        recipient: args.recipient,
        reply_to: args.reply_to ?? null,
        kind: args.kind,
        payload: args.text,
        sender_name: args.sender === USER || args.sender === "SYSTEM" ? args.sender : s.tree.get(args.sender)?.name ?? args.sender,
        ...args.extra
      })

    /**
     * Append to an agent's session log; fails when the append fails (the caller must not
     * acknowledge). An agent already gone from the tree has no log to write.
     */
    const logFor = (agent: AgentId, event: LogEvent): Effect.Effect<void, EventLogError> => {
      const node = s.tree.get(agent)
      return node ? Effect.asVoid(log.append(node.session_id, event)) : Effect.void
    }

    /** For events whose loss costs at most a duplicate after a crash (`message.delivered`). */
    const logBestEffort = (agent: AgentId, event: LogEvent): Effect.Effect<void> =>
      logFor(agent, event).pipe(
        Effect.catchAll((e) => Effect.logWarning(`${event.event} not logged for agent ${agent}: ${e.message}`))
      )

    /**
     * Agents whose wakes are held back (a child born at the end of its parent's turn: it must
     * not start before the parent's turn is fully recorded), with the wakes held.
     */
    const heldWakes = new Map<AgentId, number>()

    const queueTurn = (agent: AgentId, trigger: Trigger) =>
      Effect.gen(function*() {
        const list = s.triggers.get(agent) ?? []
        list.push(trigger)
        s.triggers.set(agent, list)
        yield* addWork(s, 1)
        const held = heldWakes.get(agent)
        if (held !== undefined) heldWakes.set(agent, held + 1)
        else yield* Queue.offer(s.wakes, agent)
      })

    /** Hold `agent`'s wakes (its triggers queue, its turns do not start) until `releaseWakes`. */
    const holdWakes = (agent: AgentId) =>
      Effect.sync(() => {
        if (!heldWakes.has(agent)) heldWakes.set(agent, 0)
      })

    const releaseWakes = (agent: AgentId) =>
      Effect.suspend(() => {
        const n = heldWakes.get(agent)
        heldWakes.delete(agent)
        return n ? Queue.offerAll(s.wakes, Array.from({ length: n }, () => agent)) : Effect.void
      })

    /**
     * A message from a root to the human: logged in the root's own log (`message.enqueued` is
     * what recovery rebuilds the outbox from: it must be durable), kept in the outbox.
     */
    const toUser = (from: AgentId, env: MessageEnvelope) =>
      Effect.gen(function*() {
        yield* logFor(from, makeEvent("message.enqueued", env))
        yield* logBestEffort(from, makeEvent("message.delivered", { message_id: env.id }))
        s.userOutbox.push(env)
        noteMessage(s, from, { direction: "out", peer: USER, kind: env.kind, message_id: env.id, text: env.payload })
        yield* bus.publish({ _tag: "MessageToUser", agent_id: from, message: env })
      })

    /** Put an envelope addressed to an agent into its log + inbox (or hold it if unborn). */
    const deliver: (env: MessageEnvelope) => Effect.Effect<boolean, EventLogError> = Effect.fnUntraced(function*(
      env: MessageEnvelope
    ) {
      const to = env.recipient
      if (to === null) return false
      if (to === USER) {
        if (env.sender === USER || env.sender === "SYSTEM") return false
        yield* toUser(env.sender, env)
        return true
      }
      const held = s.unborn.get(to)
      if (held) {
        held.push(env)
        return true
      }
      if (!s.tree.has(to) || s.terminating.has(to)) {
        yield* dropped(env)
        return false
      }
      yield* logFor(to, makeEvent("message.enqueued", env))
      const inbox = s.inboxes.get(to)
      if (!inbox || !s.tree.has(to) || s.terminating.has(to)) {
        yield* dropped(env)
        return false
      }
      inbox.push(env)
      noteMessage(s, to, { direction: "in", peer: senderName(env), kind: env.kind, message_id: env.id, text: env.payload })
      if (wakes(env)) yield* queueTurn(to, { _tag: "message", id: env.id })
      return true
    })

    /** Reply-timeout timers of pending sync requests, by request id (scoped: interrupted at shutdown). */
    const timers = yield* FiberMap.make<MessageId>()
    /**
     * Requests that timed out: their sender no longer waits, but the recipient's reply (explicit,
     * or its turn's final text) is still delivered, marked `late`. In memory only: after a
     * restart a timed-out request is answered (recovery), so a reply to it is not sent.
     */
    const late = new Map<MessageId, PendingRequest>()

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
        const p = s.requests.get(id)
        if (p === undefined || p.from === USER || p.timeout_s === undefined) return Effect.void
        const from = p.from
        const timeout_s = p.timeout_s
        const name = s.tree.get(p.to)?.name ?? String(p.to)
        const timedOut = makeEvent("message.timed_out", { message_id: id, recipient: p.to, recipient_name: name, timeout_s })
        return logFor(from, timedOut).pipe(
          Effect.zipRight(Effect.suspend(() => {
            // Answered while the event was being written: the reply went through as usual.
            if (s.requests.get(id) !== p) return Effect.void
            s.requests.delete(id)
            late.set(id, p)
            return deliver(envelope({
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

    /**
     * After recovery: arm the timers of the pending requests that carry a timeout. The deadline
     * is the request's timestamp + its timeout; one already past fires at once.
     */
    const armTimeouts = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      for (const p of [...s.requests.values()]) {
        if (p.from === USER) continue
        const env = (s.inboxes.get(p.to) ?? []).find((e) => e.id === p.id)
        const timeout_s = p.timeout_s ?? env?.timeout_s
        if (timeout_s === undefined) continue
        const sent = env === undefined ? Number.NaN : Date.parse(env.timestamp)
        const armed: PendingRequest = { ...p, timeout_s }
        s.requests.set(p.id, armed)
        yield* armTimer(armed, Number.isFinite(sent) ? sent + timeout_s * 1000 - now : 0)
      }
    })

    /** Whether the turn that took request `id` owes it a reply (pending, or timed out: late). */
    const awaitsReply = (id: MessageId, agent: AgentId): boolean => (s.requests.get(id) ?? late.get(id))?.to === agent

    /** A message that can no longer be delivered: a sync request among them is answered with an error. */
    const dropped = (env: MessageEnvelope): Effect.Effect<void> =>
      env.kind === "request" && s.requests.has(env.id) && env.recipient !== null && env.recipient !== USER
        ? reply(env.id, `[error] the recipient is gone; message ${env.id} was not delivered`)
        : Effect.void

    /**
     * Answer a pending sync request (auto-reply, error reply). No-op when already answered.
     * Never fails: when the reply cannot be logged the request stays pending (a later
     * termination, or recovery's lost-reply pass after a restart, answers it) and a warning is
     * logged — nobody was told it was answered.
     */
    const reply = (requestId: MessageId, text: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const live = s.requests.get(requestId)
        const pending = live ?? late.get(requestId)
        if (!pending) return Effect.void
        s.requests.delete(requestId)
        late.delete(requestId)
        const env = envelope({
          sender: pending.to,
          recipient: pending.from,
          kind: "response",
          text,
          reply_to: requestId,
          ...(live === undefined ? { extra: { late: true } } : {})
        })
        const send = pending.from === USER
          ? toUser(pending.to, env)
          : s.tree.has(pending.from)
          ? deliver(env).pipe(Effect.asVoid)
          : Effect.void
        return send.pipe(
          Effect.zipRight(cancelTimer(requestId)),
          Effect.catchAll((e) =>
            Effect.sync(() => {
              if (live === undefined) late.set(requestId, pending)
              else if (!s.requests.has(requestId)) s.requests.set(requestId, pending)
            }).pipe(Effect.zipRight(Effect.logWarning(`reply to request ${requestId} not delivered: ${e.message}`)))
          )
        )
      })

    const sendFrom = Effect.fn("Router.send")(function*(from: AgentId, args: SendArgs) {
      const sender = s.tree.get(from)
      const routeErr = (e: RoutingError) => Effect.fail(e)
      const timeout_s = args.timeout_seconds
      if (timeout_s !== undefined) {
        const why = typeof timeout_s !== "number" || !Number.isFinite(timeout_s) || timeout_s <= 0
          ? `must be a positive number of seconds, got ${String(timeout_s)}`
          : !args.sync
          ? "only applies to sync requests (sync=true)"
          : args.reply_to !== undefined
          ? "does not apply to a reply (reply_to)"
          : null
        if (why !== null) return yield* new InvalidInputError({ field: "timeout_seconds", message: `timeout_seconds ${why}` })
      }
      if (args.recipient === USER && sender && !s.tree.childNamed(from, USER)) {
        if (sender.parent_id !== null) {
          return yield* routeErr(
            new RoutingError({
              from: sender.name,
              to: USER,
              reason: "not-one-hop",
              message: "only root agents talk to USER; send to your parent instead"
            })
          )
        }
        if (timeout_s !== undefined) {
          return yield* new InvalidInputError({
            field: "timeout_seconds",
            message: "timeout_seconds does not apply to messages to USER (they are never requests)"
          })
        }
        const kind: MessageKind = args.reply_to ? "response" : "notification"
        const env = envelope({ sender: from, recipient: USER, kind, text: args.text, reply_to: args.reply_to ?? null })
        yield* toUser(from, env)
        if (args.reply_to) {
          const p = s.requests.get(args.reply_to)
          if (p && p.from === USER && p.to === from) s.requests.delete(args.reply_to)
        }
        return { message_id: env.id, waiting_for_reply: false } satisfies SendResult
      }
      const target = s.tree.resolve(from, args.recipient)
      if (Either.isLeft(target)) return yield* routeErr(target.left)
      const to = target.right.id
      let kind: MessageKind
      /** The request this message answers: pending until the answer is durable. */
      let answers: PendingRequest | undefined
      /** The request answered had timed out: the reply is late. */
      let answersLate = false
      if (args.reply_to !== undefined) {
        const live = s.requests.get(args.reply_to)
        const p = live ?? late.get(args.reply_to)
        if (p && p.to !== from) {
          return yield* new InvalidInputError({
            field: "reply_to",
            message: `message ${args.reply_to} was not addressed to you`
          })
        }
        if (p && p.from !== to) {
          return yield* new InvalidInputError({
            field: "reply_to",
            message: `message ${args.reply_to} came from someone else, not ${args.recipient}`
          })
        }
        answers = p
        answersLate = p !== undefined && live === undefined
        s.requests.delete(args.reply_to)
        late.delete(args.reply_to)
        kind = "response"
      } else {
        kind = args.sync ? "request" : "notification"
      }
      const timed = kind === "request" && timeout_s !== undefined
      const env = envelope({
        sender: from,
        recipient: to,
        kind,
        text: args.text,
        reply_to: args.reply_to ?? null,
        ...(timed ? { extra: { timeout_s } } : answersLate ? { extra: { late: true } } : {})
      })
      // Registered before delivery (a request that cannot be delivered is answered with an error).
      if (kind === "request") s.requests.set(env.id, { id: env.id, from, to, ...(timed ? { timeout_s } : {}) })
      yield* deliver(env).pipe(Effect.tapError(() =>
        Effect.sync(() => {
          // Not durable, not acknowledged: undo the bookkeeping.
          s.requests.delete(env.id)
          if (answers !== undefined && answersLate) late.set(answers.id, answers)
          else if (answers !== undefined && !s.requests.has(answers.id)) s.requests.set(answers.id, answers)
        })
      ))
      if (answers !== undefined) yield* cancelTimer(answers.id)
      // Durable now: the timer runs from here (unless the request was already answered with an error).
      const registered = s.requests.get(env.id)
      if (timed && registered !== undefined) yield* armTimer(registered, timeout_s * 1000)
      noteMessage(s, from, { direction: "out", peer: target.right.name, kind, message_id: env.id, text: args.text })
      // To a child spawned during the sender's running turn the message is held in memory and
      // logged by the child's birth, before that turn ends: like the spawn, it is acknowledged
      // (durable) when the turn ends.
      return { message_id: env.id, waiting_for_reply: kind === "request" } satisfies SendResult
    })

    /**
     * Multicast: one copy per sibling (same parent), each with its own id; never wakes. A copy
     * that cannot be logged fails the broadcast (copies already logged stay delivered).
     */
    const broadcast = Effect.fn("Router.broadcast")(function*(from: AgentId, text: string) {
      const team = s.tree.team(from)
      const multicast_id = newMessageId()
      for (const sib of team) {
        yield* deliver(envelope({ sender: from, recipient: sib.id, kind: "multicast", text, extra: { multicast_id } }))
      }
      noteMessage(s, from, {
        direction: "out",
        peer: team.map((t) => t.name).join(",") || "(nobody)",
        kind: "multicast",
        message_id: multicast_id,
        text
      })
      return { message_id: multicast_id, recipient_count: team.length }
    })

    /** A message from the human. Always wakes the agent; sync=true makes it a request. */
    const fromUser = Effect.fn("Router.fromUser")(function*(agent: AgentId, text: string, sync: boolean) {
      if (!s.tree.has(agent) || s.terminating.has(agent)) {
        return yield* new NotFoundError({ kind: "agent", id: agent, message: `no live agent ${agent}` })
      }
      const env = envelope({ sender: USER, recipient: agent, kind: sync ? "request" : "notification", text })
      if (sync) s.requests.set(env.id, { id: env.id, from: USER, to: agent })
      yield* deliver(env).pipe(Effect.tapError(() => Effect.sync(() => s.requests.delete(env.id))))
      return { message_id: env.id }
    })

    const triggeredIds = (agent: AgentId) =>
      new Set((s.triggers.get(agent) ?? []).flatMap((t) => t._tag === "message" ? [t.id] : []))

    /** Best-effort: a lost `message.delivered` only makes recovery re-inject the message (a duplicate). */
    const markDelivered = (agent: AgentId, envs: ReadonlyArray<MessageEnvelope>) =>
      Effect.forEach(envs, (e) => logBestEffort(agent, makeEvent("message.delivered", { message_id: e.id })), {
        discard: true
      })

    /** Drain what waits in the inbox without waking the agent (notifications, multicasts). */
    const checkInbox = Effect.fn("Router.checkInbox")(function*(agent: AgentId) {
      const inbox = s.inboxes.get(agent) ?? []
      const keep = triggeredIds(agent)
      const drained = inbox.filter((e) => !keep.has(e.id))
      s.inboxes.set(agent, inbox.filter((e) => keep.has(e.id)))
      yield* markDelivered(agent, drained)
      return drained
    })

    /**
     * At the start of a turn: pop the agent's oldest trigger and build the prompt (waiting
     * notifications first, then the waking message or explicit prompt). None: nothing to do.
     */
    const takeForTurn = Effect.fn("Router.takeForTurn")(function*(
      agent: AgentId
    ): Effect.fn.Return<Option.Option<{ readonly trigger: Trigger; readonly prompt: string | null }>> {
      const queue = s.triggers.get(agent) ?? []
      const trigger = queue.shift()
      if (!trigger) return Option.none()
      if (!s.tree.has(agent) || s.terminating.has(agent) || s.unborn.has(agent)) {
        return Option.some({ trigger, prompt: null })
      }
      const inbox = s.inboxes.get(agent) ?? []
      let main: MessageEnvelope | null = null
      if (trigger._tag === "message") main = inbox.find((e) => e.id === trigger.id) ?? null
      const keep = triggeredIds(agent)
      const rest = inbox.filter((e) => e !== main && !keep.has(e.id))
      s.inboxes.set(agent, inbox.filter((e) => e !== main && keep.has(e.id)))
      const parts = [
        ...rest.map(formatMessage),
        ...(main ? [formatMessage(main)] : trigger._tag === "prompt" ? [trigger.text] : [])
      ]
      if (parts.length === 0) return Option.some({ trigger, prompt: null })
      s.turns.set(agent, { trigger, deferredSpawns: [] })
      yield* markDelivered(agent, main ? [...rest, main] : rest)
      return Option.some({ trigger, prompt: parts.join("\n\n") })
    })

    /** Answer every sync request waiting on `agent` with an error (termination). */
    const failPending = Effect.fn("Router.failPending")(function*(agent: AgentId, why: string) {
      const mine = [...s.requests.values()].filter((r) => r.to === agent)
      for (const r of mine) yield* reply(r.id, `[error] ${why}; request ${r.id} will not be answered`)
      // Requests this agent is waiting on: their replies would have nowhere to go.
      for (const r of [...s.requests.values()]) {
        if (r.from !== agent) continue
        s.requests.delete(r.id)
        yield* cancelTimer(r.id)
      }
      for (const [id, r] of [...late]) if (r.from === agent || r.to === agent) late.delete(id)
    })

    return {
      sendFrom,
      broadcast,
      fromUser,
      deliver,
      reply,
      checkInbox,
      takeForTurn,
      failPending,
      armTimeouts,
      awaitsReply,
      queueTurn,
      holdWakes,
      releaseWakes,
      toUser
    } as const
  })
}) {}
