// `agent.send` and `agent.wait`: a message from USER, and the answer to USER's request — at once
// when it was given, else when it comes, within `timeout_s` (none: no limit). Waiting is
// interruptible: a client that goes away stops waiting; the request stays open (`agent wait`
// waits again).
import { Duration, Effect, Either, Option, Stream } from "effect"
import { Orchestrator } from "../../agent/Orchestrator.js"
import type { MessageId, SessionId } from "../../domain/ids.js"
import { EventLog } from "../../storage/EventLog.js"
import { isErrorReply } from "../../domain/message.js"
import { Meter } from "../../meter/Meter.js"
import { FIND_PREFIX } from "../../agent/FindRoute.js"
import { Swarm } from "../../swarm/Swarm.js"
import { pick } from "../Refs.js"
import { type AgentSendRpc, InvalidInput, NotFound, type RpcError, Unavailable } from "../../protocol/AdminRpcs.js"
import type { Resolver } from "../Resolver.js"

/** `agent.send`'s payload (also the cluster Tree entity's `send`, less its request id). */
export type SendParams = typeof AgentSendRpc.payloadSchema.Type

/** USER's request `ref` to agent `name` (a full id or unique prefix) among `ids`. */
const pickRequest = (name: string, ref: string, ids: ReadonlyArray<MessageId>): Effect.Effect<MessageId, RpcError> => {
  const found = pick("message", ref, ids.map((id) => ({ id, names: [], label: `request to ${name}`, value: id })))
  if (Either.isRight(found)) return Effect.succeed(found.right)
  return Effect.fail(found.left._tag === "NotFound"
    ? new NotFound({ kind: "message", id: ref, message: `no request "${ref}" from USER to ${name}` })
    : found.left)
}

export const makeMessageHandlers = (resolver: Resolver) => Effect.gen(function*() {
  const orchestrator = yield* Orchestrator
  const meter = yield* Meter
  const swarm = yield* Swarm
  const log = yield* EventLog

  const answerOf = (name: string, message_id: MessageId, timeout: number | null) =>
    Effect.gen(function*() {
      const waited = orchestrator.awaitAnswer(message_id)
      const answer = timeout === null ? yield* waited : Option.flatten(yield* Effect.timeoutTo(waited, {
        duration: Duration.seconds(timeout),
        onSuccess: Option.some,
        onTimeout: () => Option.none()
      }))
      if (Option.isNone(answer)) {
        return yield* new Unavailable({
          message: timeout === null
            ? `the daemon stopped before ${name} answered (message ${message_id}; once it is back: agent wait ${name} ${message_id})`
            : `no answer from ${name} within ${timeout} s (message ${message_id}; the answer will still come: agent wait ${name} ${message_id})`
        })
      }
      const a = answer.value
      // The human has it now: out of the inbox (best effort; the answer was given either way).
      yield* meter.markRead([a.id]).pipe(Effect.catchAll((e) => Effect.logWarning(`user.read of ${a.id} not logged: ${e.message}`)))
      return { message_id: a.id, text: a.payload, timestamp: a.timestamp, error: isErrorReply(a) }
    }).pipe(Effect.interruptible)

  /** The message `id` is in the session's log (a `message.enqueued` of it). */
  const inLog = (session: SessionId, id: MessageId) =>
    log.read(session).pipe(
      Stream.filter((e) => e.event === "message.enqueued" && e.data.id === id),
      Stream.runHead,
      Effect.map(Option.isSome),
      Effect.mapError((e) => new Unavailable({ message: `cannot read the agent's log: ${e.message}` }))
    )

  const send = (p: SendParams, once?: { readonly id: MessageId; readonly fresh: boolean }) =>
    Effect.gen(function*() {
      const sync = p.sync ?? true
      if (p.wait === true && !sync) {
        return yield* new InvalidInput({ field: "wait", message: "a notification (sync=false) gets no answer to wait for" })
      }
      // `find:<symbol>` / `find:<path>:<symbol>`: the swarm node agent so named (Swarm.find).
      const ref = p.agent.startsWith(FIND_PREFIX) ? (yield* swarm.find(p.agent.slice(FIND_PREFIX.length))).agent : p.agent
      const node = yield* resolver.liveAgent(ref)
      yield* Effect.annotateCurrentSpan({ "substrat.agent.ref": p.agent, "gen_ai.agent.id": node.id, "gen_ai.agent.name": node.name })
      const logged = once !== undefined && !once.fresh && (yield* inLog(node.session_id, once.id))
      const message_id = logged ? once.id : (yield* orchestrator.send({ agent: node.id, text: p.text, sync, id: once?.id })).message_id
      const result = { message_id, agent_id: node.id }
      if (p.wait !== true) return result
      return { ...result, answer: yield* answerOf(node.name, message_id, p.timeout_s ?? null) }
    })

  return {
    "agent.send": (p: SendParams) => send(p),
    /**
     * Cluster mode's `send` on the tree's owner, with the id derived from the engine's request.
     * `fresh` false: the engine may have run this request before (the owner died before its reply
     * was stored): when the agent's log has the message already, it is not logged again — the
     * result (and with `wait` the answer) is that message's.
     */
    sendOnce: (p: SendParams, once: { readonly id: MessageId; readonly fresh: boolean }) => send(p, once),

    "agent.wait": (p: { readonly agent: string; readonly message_id?: string | undefined; readonly timeout_s?: number | undefined }) =>
      Effect.gen(function*() {
        const { node } = yield* resolver.agent(p.agent, { terminated: true })
        const { open, answered } = yield* orchestrator.userRequests(node.id)
        const message_id = p.message_id === undefined
          ? open.at(-1) ?? answered.at(-1)
          : yield* pickRequest(node.name, p.message_id, [...open, ...answered])
        if (message_id === undefined) {
          return yield* new NotFound({
            kind: "message",
            id: node.name,
            message: `USER has no request to ${node.name} to wait for (send one: agent send --wait)`
          })
        }
        return { message_id, agent_id: node.id, answer: yield* answerOf(node.name, message_id, p.timeout_s ?? null) }
      })
  }
})
