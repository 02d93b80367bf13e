// Delivery: how a message reaches an agent, and how a turn takes its messages.
//  - Every message to an agent is logged as `message.enqueued` in the RECIPIENT's log, then put
//    in its inbox. Requests, replies and anything from USER also queue a turn (wake).
//  - Messages to a child whose session does not exist yet (deferred spawn) are held and
//    replayed when it is born.
//  - A message to a dormant agent (swarm node) materializes it first (Sessions.materialize).
//  - A message from a root to USER is logged in the root's own log and kept in the user outbox.
//  - Nothing is acknowledged that is not durable: a `message.enqueued` append that fails fails
//    the delivery and leaves nothing in memory. Only `message.delivered` (a lost one means a
//    duplicate after a crash, never a loss) is best-effort: a failure is a warning.
//  - A turn's prompt takes its waking message out of the inbox plus every notification /
//    multicast waiting there (prepended); `message.delivered` is logged for each with the turn's
//    `turn.start`, in one durable step (TurnRunner), or by `check_inbox` once drained.
import { Effect, Option } from "effect"
import type { EventLogError } from "../domain/errors.js"
import { type LogEvent, makeEvent } from "../domain/events.js"
import { type AgentId, type MessageId, newMessageId } from "../domain/ids.js"
import { MessageEnvelope, type MessageKind } from "../domain/message.js"
import { EventLog } from "../storage/EventLog.js"
import { Tracing } from "../telemetry/Tracing.js"
import { Activity } from "./Activity.js"
import { USER } from "./AgentTree.js"
import { Mailbox } from "./Mailbox.js"
import { Sessions } from "./Sessions.js"
import { OutputBus } from "./OutputBus.js"
import { formatMessage, senderName } from "./Prompt.js"
import { Tree } from "./Tree.js"
import type { Trigger } from "./Turns.js"

const wakes = (env: MessageEnvelope) =>
  env.kind === "request" || env.kind === "response" || env.sender === USER || (env.sender === "SYSTEM" && env.queued !== true)

/** What became of a message: delivered (or held for an unborn child), dropped (recipient gone), or nothing to do. */
export type Delivered = "delivered" | "dropped" | "ignored"

export class Delivery extends Effect.Service<Delivery>()("substrat/Delivery", {
  effect: Effect.gen(function*() {
    const tree = yield* Tree
    const mailbox = yield* Mailbox
    const activity = yield* Activity
    const log = yield* EventLog
    const bus = yield* OutputBus
    const tracing = yield* Tracing
    const sessions = yield* Sessions

    const envelope = (args: {
      readonly sender: AgentId | "USER" | "SYSTEM"
      readonly recipient: AgentId | "USER"
      readonly kind: MessageKind
      readonly text: string
      readonly reply_to?: MessageId | null
      readonly extra?: Pick<MessageEnvelope, "timeout_s" | "timed_out" | "late" | "multicast_id" | "progress" | "queued">
      /** Default a new id. */
      readonly id?: MessageId | undefined
    }) =>
      new MessageEnvelope({
        id: args.id ?? newMessageId(),
        timestamp: new Date().toISOString(),
        sender: args.sender,
        sender_name: args.sender === USER || args.sender === "SYSTEM" ? args.sender : tree.get(args.sender)?.name ?? args.sender,
        recipient: args.recipient,
        reply_to: args.reply_to ?? null,
        kind: args.kind,
        payload: args.text,
        ...args.extra
      })

    /**
     * Append to an agent's session log; fails when the append fails (the caller must not
     * acknowledge). An agent already gone from the tree has no log to write.
     */
    const logFor = (agent: AgentId, event: LogEvent): Effect.Effect<void, EventLogError> =>
      Effect.suspend(() => {
        const node = tree.get(agent)
        return node ? Effect.asVoid(log.append(node.session_id, event)) : Effect.void
      })

    /** For events whose loss costs at most a duplicate after a crash (`message.delivered`). */
    const logBestEffort = (agent: AgentId, event: LogEvent): Effect.Effect<void> =>
      logFor(agent, event).pipe(
        Effect.catchAll((e) => Effect.logWarning(`${event.event} not logged for agent ${agent}: ${e.message}`))
      )

    const markDelivered = (agent: AgentId, envs: ReadonlyArray<MessageEnvelope>) =>
      Effect.forEach(envs, (e) => logBestEffort(agent, makeEvent("message.delivered", { message_id: e.id })), {
        discard: true
      })

    /**
     * A message from a root to the human: durable in the root's log first, then in the outbox.
     * Its `message.enqueued` and `message.delivered` are one durable step (the human's outbox is
     * its destination: nothing more happens to it between the two); with `read` (an answer the
     * human is waiting for: Requests), its `user.read` too.
     */
    const toUser = (from: AgentId, env: MessageEnvelope, read = false) =>
      Effect.gen(function*() {
        const node = tree.get(from)
        if (node !== undefined) {
          yield* log.appendAll(node.session_id, [
            makeEvent("message.enqueued", env),
            makeEvent("message.delivered", { message_id: env.id }),
            ...(read ? [makeEvent("user.read", { message_ids: [env.id] })] : [])
          ])
        }
        mailbox.toUser(env, read)
        activity.noteMessage(from, { direction: "out", peer: USER, kind: env.kind, message_id: env.id, text: env.payload })
        yield* bus.publish({ _tag: "MessageToUser", agent_id: from, message: env })
      })

    /**
     * Put an envelope into its recipient's log + inbox (or hold it for an unborn child). With
     * tracing on, as a `message` span whose traceparent the envelope carries.
     */
    const deliver = (env: MessageEnvelope): Effect.Effect<Delivered, EventLogError> =>
      // (An envelope with a trace already has its span: a held message delivered at birth.)
      !tracing.enabled || env.trace !== undefined ? deliverNow(env) : Effect.gen(function*() {
        const trace = yield* tracing.traceparent
        return yield* deliverNow(trace === undefined ? env : new MessageEnvelope({ ...env, trace }))
      }).pipe(Effect.withSpan("message", {
        kind: "producer",
        attributes: {
          "messaging.message.id": env.id,
          "substrat.message.kind": env.kind,
          "substrat.message.from": senderName(env),
          "substrat.message.to": env.recipient === null || env.recipient === USER ? String(env.recipient) : tree.get(env.recipient)?.name ?? env.recipient,
          ...(env.reply_to === null ? {} : { "substrat.message.reply_to": env.reply_to })
        }
      }))

    const deliverNow = (env: MessageEnvelope): Effect.Effect<Delivered, EventLogError> =>
      Effect.gen(function*() {
        const to = env.recipient
        if (to === null) return "ignored"
        if (to === USER) {
          if (env.sender === USER || env.sender === "SYSTEM") return "ignored"
          yield* toUser(env.sender, env)
          return "delivered"
        }
        if (mailbox.hold(to, env)) return "delivered"
        if (!tree.isLive(to)) return "dropped"
        yield* sessions.materialize(to)
        yield* logFor(to, makeEvent("message.enqueued", env))
        // (Re-checked: the recipient may have gone while the event was written.)
        if (!tree.isLive(to) || !mailbox.put(to, env)) return "dropped"
        activity.noteMessage(to, { direction: "in", peer: senderName(env), kind: env.kind, message_id: env.id, text: env.payload })
        if (wakes(env)) yield* mailbox.queueTurn(to, { _tag: "message", id: env.id })
        return "delivered"
      })

    /** `check_inbox`: drain what waits without waking the agent (notifications, multicasts). */
    const checkInbox = Effect.fn("Delivery.checkInbox")(function*(agent: AgentId) {
      const drained = mailbox.drainWaiting(agent)
      yield* markDelivered(agent, drained)
      return drained
    })

    /**
     * At the start of a turn: pop the agent's oldest trigger and build the prompt (waiting
     * notifications first, then the waking message or explicit prompt) from the messages it
     * takes out of the inbox (`consumed`: the turn marks them delivered with its start). None:
     * nothing queued; a null prompt: nothing to say (or the agent is gone / not born).
     */
    const takeForTurn = (agent: AgentId): Option.Option<{
      readonly trigger: Trigger
      readonly prompt: string | null
      readonly consumed: ReadonlyArray<MessageEnvelope>
    }> => {
      const trigger = mailbox.shiftTrigger(agent)
      if (!trigger) return Option.none()
      if (!tree.isLive(agent) || mailbox.isUnborn(agent)) return Option.some({ trigger, prompt: null, consumed: [] })
      const { main, rest } = mailbox.takeForTurn(agent, trigger)
      const parts = [
        ...(trigger.note === undefined ? [] : [trigger.note]),
        ...rest.map(formatMessage),
        ...(main ? [formatMessage(main)] : trigger._tag === "prompt" && trigger.text !== "" ? [trigger.text] : [])
      ]
      if (parts.length === 0) return Option.some({ trigger, prompt: null, consumed: [] })
      return Option.some({ trigger, prompt: parts.join("\n\n"), consumed: main ? [...rest, main] : rest })
    }

    return { envelope, logFor, toUser, deliver, markDelivered, checkInbox, takeForTurn } as const
  })
}) {}
