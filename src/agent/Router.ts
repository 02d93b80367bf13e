// Router: the one-hop routing rules (parent, children, siblings; USER for roots) and the sends
// that follow them — send_message, broadcast, messages from the human. See docs/messaging.md.
// Delivery (logs, inboxes, wakes) is Delivery's; request tracking, replies and timeouts are
// Requests'. Nothing is acknowledged that is not durable: a send whose `message.enqueued`
// append fails fails, and its bookkeeping is undone.
import { Effect, Either } from "effect"
import { type EventLogError, InvalidInputError, NotFoundError, RoutingError } from "../domain/errors.js"
import { type AgentId, type MessageId, newMessageId } from "../domain/ids.js"
import type { MessageEnvelope, MessageKind } from "../domain/message.js"
import { Activity } from "./Activity.js"
import { USER } from "./AgentTree.js"
import { Delivery } from "./Delivery.js"
import { FIND_PREFIX } from "./FindRoute.js"
import { Finder } from "./Finder.js"
import { Requests, type Tracked } from "./Requests.js"
import { Tree } from "./Tree.js"

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

const invalid = (field: string, message: string) => new InvalidInputError({ field, message })

/** Why `timeout_seconds` does not apply to this send; null when it does (or is absent). */
const timeoutProblem = (args: SendArgs): string | null => {
  const t = args.timeout_seconds
  if (t === undefined) return null
  if (typeof t !== "number" || !Number.isFinite(t) || t <= 0) return `must be a positive number of seconds, got ${String(t)}`
  if (!args.sync) return "only applies to sync requests (sync=true)"
  if (args.reply_to !== undefined) return "does not apply to a reply (reply_to)"
  return null
}

/** Recipient forms beside names (swarm routing, docs/swarm.md): all one hop (`find:<symbol>`: hop by hop, Finder.ts). */
export const PARENT = "parent"
export const BROADCAST_CHILDREN = "broadcast:children"
export const BROADCAST_SIBLINGS = "broadcast:siblings"

export class Router extends Effect.Service<Router>()("substrat/Router", {
  effect: Effect.gen(function*() {
    const tree = yield* Tree
    const delivery = yield* Delivery
    const requests = yield* Requests
    const activity = yield* Activity
    const finder = yield* Finder

    /** Deliver; a sync request whose recipient is gone is answered with an error. */
    const deliver = (env: MessageEnvelope): Effect.Effect<boolean, EventLogError> =>
      Effect.flatMap(delivery.deliver(env), (d) =>
        d === "dropped" ? Effect.as(requests.dropped(env), false) : Effect.succeed(d === "delivered"))

    /** A root's message to the human (a notification, or the answer to USER's request). */
    const toUser = (from: AgentId, args: SendArgs) =>
      Effect.gen(function*() {
        if (args.timeout_seconds !== undefined) {
          return yield* invalid("timeout_seconds", "timeout_seconds does not apply to messages to USER (they are never requests)")
        }
        const kind: MessageKind = args.reply_to ? "response" : "notification"
        const env = delivery.envelope({ sender: from, recipient: USER, kind, text: args.text, reply_to: args.reply_to ?? null })
        yield* delivery.toUser(from, env)
        if (args.reply_to) {
          const t = requests.find(args.reply_to)
          if (t && !t.late && t.request.from === USER && t.request.to === from) {
            requests.take(args.reply_to)
            requests.settle(args.reply_to)
          }
        }
        return { message_id: env.id, waiting_for_reply: false } satisfies SendResult
      })

    /** The request `reply_to` answers, checked: addressed to `from`, sent by `to`. */
    const answering = (from: AgentId, to: AgentId, args: SendArgs): Either.Either<Tracked | undefined, InvalidInputError> => {
      if (args.reply_to === undefined) return Either.right(undefined)
      const t = requests.find(args.reply_to)
      if (t && t.request.to !== from) return Either.left(invalid("reply_to", `message ${args.reply_to} was not addressed to you`))
      if (t && t.request.from !== to) {
        return Either.left(invalid("reply_to", `message ${args.reply_to} came from someone else, not ${args.recipient}`))
      }
      return Either.right(t)
    }

    /** A name under the one-hop rule; `parent` (unless a one-hop agent is named so) is the sender's parent. */
    const resolveRecipient = (from: AgentId, recipient: string) => {
      const t = tree.current()
      if (recipient === PARENT && !t.oneHop(from).some((n) => n.name === PARENT)) {
        const p = t.parent(from)
        if (p !== undefined) return Either.right(p)
        return Either.left(new RoutingError({
          from: t.get(from)?.name ?? from,
          to: PARENT,
          reason: "unknown-recipient",
          message: "you have no parent (a root agent talks to USER)"
        }))
      }
      return t.resolve(from, recipient)
    }

    const sendFrom = Effect.fn("Router.send")(function*(from: AgentId, args: SendArgs) {
      const why = timeoutProblem(args)
      if (why !== null) return yield* invalid("timeout_seconds", `timeout_seconds ${why}`)
      const sender = tree.get(from)
      if (args.recipient === USER && sender && !tree.current().childNamed(from, USER)) {
        if (sender.parent_id !== null) {
          return yield* new RoutingError({
            from: sender.name,
            to: USER,
            reason: "not-one-hop",
            message: "only root agents talk to USER; send to your parent instead"
          })
        }
        return yield* toUser(from, args)
      }
      if (args.recipient === BROADCAST_SIBLINGS || args.recipient === BROADCAST_CHILDREN) {
        if (args.reply_to !== undefined || args.timeout_seconds !== undefined) {
          return yield* invalid("recipient", `${args.recipient} is a multicast: no reply_to or timeout_seconds`)
        }
        const r = yield* multicast(from, args.text, args.recipient === BROADCAST_CHILDREN ? "children" : "siblings")
        return { message_id: r.message_id, waiting_for_reply: false } satisfies SendResult
      }
      if (args.recipient.startsWith(FIND_PREFIX)) return yield* finder.send(from, args)
      const target = yield* resolveRecipient(from, args.recipient)
      const to = target.id
      // The request this message answers: no longer pending, unless the answer is not durable.
      const answers = yield* answering(from, to, args)
      if (args.reply_to !== undefined) requests.take(args.reply_to)
      const kind: MessageKind = args.reply_to !== undefined ? "response" : args.sync ? "request" : "notification"
      const timeout_s = kind === "request" ? args.timeout_seconds : undefined
      const env = delivery.envelope({
        sender: from,
        recipient: to,
        kind,
        text: args.text,
        reply_to: args.reply_to ?? null,
        ...(timeout_s !== undefined ? { extra: { timeout_s } } : answers?.late ? { extra: { late: true } } : {})
      })
      // Registered before delivery (a request that cannot be delivered is answered with an error).
      if (kind === "request") requests.register({ id: env.id, from, to, ...(timeout_s !== undefined ? { timeout_s } : {}) })
      yield* deliver(env).pipe(
        Effect.tapError(() =>
          Effect.sync(() => {
            requests.unregister(env.id)
            if (answers !== undefined) requests.restore(answers)
          })
        ),
        Effect.ensuring(Effect.sync(() => args.reply_to !== undefined && requests.settle(args.reply_to)))
      )
      if (answers !== undefined) yield* requests.cancelTimer(answers.request.id)
      // Durable now: the timer runs from here (unless the request was already answered with an error).
      const registered = requests.find(env.id)
      if (timeout_s !== undefined && registered && !registered.late) yield* requests.armTimer(registered.request, timeout_s * 1000)
      activity.noteMessage(from, { direction: "out", peer: target.name, kind, message_id: env.id, text: args.text })
      // To a child spawned during the sender's running turn the message is held in memory and
      // logged by the child's birth, before that turn ends: like the spawn, it is acknowledged
      // (durable) when the turn ends.
      return { message_id: env.id, waiting_for_reply: kind === "request" } satisfies SendResult
    })

    /**
     * Multicast: one copy per sibling (same parent) — or per child — each with its own id; never
     * wakes. A copy that cannot be logged fails the broadcast (copies already logged stay delivered).
     */
    const multicast = Effect.fn("Router.broadcast")(function*(from: AgentId, text: string, to: "siblings" | "children") {
      const team = to === "children" ? tree.current().children(from) : tree.current().team(from)
      const multicast_id = newMessageId()
      for (const sib of team) {
        yield* deliver(delivery.envelope({ sender: from, recipient: sib.id, kind: "multicast", text, extra: { multicast_id } }))
      }
      activity.noteMessage(from, {
        direction: "out",
        peer: team.map((t) => t.name).join(",") || "(nobody)",
        kind: "multicast",
        message_id: multicast_id,
        text
      })
      return { message_id: multicast_id, recipient_count: team.length }
    })

    /** A message from the human. Always wakes the agent; sync=true makes it a request. */
    const fromUser = Effect.fn("Router.fromUser")(function*(agent: AgentId, text: string, sync: boolean, id?: MessageId) {
      if (!tree.isLive(agent)) return yield* new NotFoundError({ kind: "agent", id: agent, message: `no live agent ${agent}` })
      const env = delivery.envelope({ sender: USER, recipient: agent, kind: sync ? "request" : "notification", text, id })
      if (sync) requests.register({ id: env.id, from: USER, to: agent })
      yield* deliver(env).pipe(Effect.tapError(() => Effect.sync(() => requests.unregister(env.id))))
      return { message_id: env.id }
    })

    const broadcast = (from: AgentId, text: string) => multicast(from, text, "siblings")

    return { sendFrom, broadcast, fromUser, deliver } as const
  })
}) {}
