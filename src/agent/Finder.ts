// Finder: `find:<symbol>` searches in transit (docs/swarm.md, "find:"). A search is a chain of
// one-hop messages the daemon passes on itself — no agent on the way takes a turn:
//  1. `send_message("find:User", …)`: the nearest agent matching the symbol (FindRoute.nextHop)
//     is looked up; none: the send fails at once (RoutingError). Otherwise the first hop is
//     logged `message.enqueued` in the next agent's log (a dormant one is materialized for it)
//     before the send is acknowledged; its id is the search's id.
//  2. each hop: the holder's next hop is computed from the tree as it is now; the next hop is
//     logged in the next agent's log, then `message.forwarded` in the holder's (so a crash in
//     between leaves two pending hops, and recovery resumes only the furthest: FindRoute).
//  3. one hop from the match: the found copy — id = the search's id, sender = the searcher,
//     kind request (sync) or notification — is delivered as any message (a request wakes the
//     agent; its turn's answer goes to the searcher as the reply).
//  4. no match any more, a loop, or too many hops: the searcher gets an error (a SYSTEM reply to
//     its request, or a SYSTEM notification) and the holder logs the hop forwarded to nobody.
// What matches a symbol: an agent of that name, and whatever the registered index says (the
// swarm: a node's qualified or short name, a file's path or base name).
import { Duration, Effect, FiberSet, Option } from "effect"
import { SubstratConfig } from "../config/Config.js"
import { type EventLogError, InvalidInputError, RoutingError } from "../domain/errors.js"
import { makeEvent } from "../domain/events.js"
import { type AgentId, type MessageId, newMessageId } from "../domain/ids.js"
import { type FindRoute, MessageEnvelope } from "../domain/message.js"
import { Activity } from "./Activity.js"
import { Delivery } from "./Delivery.js"
import { FIND_PREFIX, MAX_FIND_HOPS, nextHop, type RecoveredFinds } from "./FindRoute.js"
import { Requests } from "./Requests.js"
import { Sessions } from "./Sessions.js"
import { Tree } from "./Tree.js"

/** Agents matching a symbol beside those named so, best first (the swarm registers its nodes). */
export type SymbolIndex = (symbol: string) => ReadonlyArray<AgentId>

export interface FindArgs {
  readonly recipient: string
  readonly text: string
  readonly sync: boolean
  readonly reply_to?: MessageId | undefined
  readonly timeout_seconds?: number | undefined
}

export class Finder extends Effect.Service<Finder>()("substrat/Finder", {
  scoped: Effect.gen(function*() {
    const tree = yield* Tree
    const delivery = yield* Delivery
    const requests = yield* Requests
    const sessions = yield* Sessions
    const activity = yield* Activity
    const hopDelayMs = Option.match(yield* Effect.serviceOption(SubstratConfig), {
      onNone: () => 0,
      onSome: (c) => c.swarm.findHopDelayMs
    })
    const running = yield* FiberSet.make<void, never>()
    let index: SymbolIndex | null = null
    let recovered: RecoveredFinds = { resume: [], superseded: [] }

    const nameOf = (id: AgentId) => tree.get(id)?.name ?? id

    /** Live agents matching `symbol`, the searcher excluded; the index's first. */
    const candidates = (symbol: string, searcher: AgentId): ReadonlyArray<AgentId> => {
      const out = new Set<AgentId>(index?.(symbol) ?? [])
      for (const n of tree.current().named(symbol)) out.add(n.id)
      out.delete(searcher)
      return [...out].filter((a) => tree.isLive(a))
    }

    const envelope = (args: {
      readonly id: MessageId
      readonly sender: AgentId
      readonly recipient: AgentId
      readonly kind: "request" | "notification"
      readonly text: string
      readonly find: FindRoute
    }) =>
      new MessageEnvelope({
        id: args.id,
        timestamp: new Date().toISOString(),
        sender: args.sender,
        sender_name: nameOf(args.sender),
        recipient: args.recipient,
        reply_to: null,
        kind: args.kind,
        payload: args.text,
        find: args.find
      })

    /** A hop into `to`'s log (materializing a dormant `to`): durable, in no inbox. */
    const logHop = (env: MessageEnvelope): Effect.Effect<void, EventLogError> =>
      Effect.gen(function*() {
        const to = env.recipient as AgentId
        yield* sessions.materialize(to)
        yield* delivery.logFor(to, makeEvent("message.enqueued", env))
      })

    const forwarded = (holder: AgentId, hop: MessageId, to: AgentId | null, next: MessageId | null) =>
      delivery.logFor(holder, makeEvent("message.forwarded", { message_id: hop, to, next_message_id: next }))

    /** The found copy: the search's id, from the searcher; a request is answered by the target's turn. */
    const deliverFound = (f: FindRoute, target: AgentId, text: string, hops: number, path: ReadonlyArray<AgentId>) =>
      Effect.gen(function*() {
        const env = new MessageEnvelope({
          ...envelope({
            id: f.origin,
            sender: f.origin_sender,
            recipient: target,
            kind: f.sync ? "request" : "notification",
            text,
            find: { ...f, hops, state: "found", path }
          })
        })
        if (f.sync) requests.register({ id: f.origin, from: f.origin_sender, to: target })
        const d = yield* delivery.deliver(env)
        if (d === "dropped") yield* requests.dropped(env)
      })

    /** The searcher is told the search failed (a SYSTEM reply to its request, or a SYSTEM notification). */
    const fail = (f: FindRoute, why: string) =>
      Effect.gen(function*() {
        if (!tree.isLive(f.origin_sender)) return
        const text = `[error] find:${f.symbol}: ${why}; message ${f.origin} was not delivered`
        const t = f.sync ? requests.take(f.origin) : undefined
        const env = delivery.envelope({
          sender: "SYSTEM",
          recipient: f.origin_sender,
          kind: t !== undefined ? "response" : "notification",
          text,
          reply_to: t !== undefined ? f.origin : null
        })
        yield* delivery.deliver(env).pipe(
          Effect.tapError(() => Effect.sync(() => t !== undefined && requests.restore(t))),
          Effect.ensuring(Effect.sync(() => requests.settle(f.origin)))
        )
      })

    /** Pass on the hop `env` (logged in its recipient's log), hop after hop, until found or failed. */
    const carry = (env: MessageEnvelope): Effect.Effect<void, EventLogError> =>
      Effect.gen(function*() {
        let hop = env
        for (;;) {
          if (hopDelayMs > 0) yield* Effect.sleep(Duration.millis(hopDelayMs))
          const f = hop.find!
          const holder = hop.recipient as AgentId
          const next = tree.isLive(holder)
            ? nextHop(tree.current(), holder, candidates(f.symbol, f.origin_sender))
            : { _tag: "not-found" as const }
          const loops = next._tag === "hop" && (f.path.includes(next.next) || f.hops >= MAX_FIND_HOPS)
          if (next._tag === "not-found" || loops) {
            const why = loops
              ? `the search went ${f.hops} hops without reaching it (the tree changed under it)`
              : `no agent for "${f.symbol}" in the tree any more (the search stopped at ${nameOf(holder)} after ${f.hops} hop(s))`
            yield* Effect.uninterruptible(Effect.zipRight(fail(f, why), forwarded(holder, hop.id, null, null)))
            return
          }
          if (next._tag === "found") {
            const path = next.target === holder ? f.path : [...f.path, next.target]
            const hops = next.target === holder ? f.hops : f.hops + 1
            yield* Effect.uninterruptible(Effect.zipRight(
              deliverFound(f, next.target, hop.payload, hops, path),
              forwarded(holder, hop.id, next.target, f.origin)
            ))
            return
          }
          const further = envelope({
            id: newMessageId(),
            sender: holder,
            recipient: next.next,
            kind: "notification",
            text: hop.payload,
            find: { ...f, hops: f.hops + 1, path: [...f.path, next.next] }
          })
          yield* Effect.uninterruptible(Effect.gen(function*() {
            yield* logHop(further)
            if (f.sync && requests.isPending(f.origin)) requests.register({ id: f.origin, from: f.origin_sender, to: next.next })
            yield* forwarded(holder, hop.id, next.next, further.id)
          }))
          hop = further
        }
      })

    const carryInBackground = (env: MessageEnvelope) =>
      FiberSet.run(running, carry(env).pipe(
        Effect.catchAll((e) => Effect.logWarning(`find:${env.find?.symbol}: hop ${env.id} not passed on (resumed at the next start): ${e.message}`))
      ))

    /** `send_message` to `find:<symbol>`: the first hop is durable when this returns. */
    const send = Effect.fn("Finder.send")(function*(from: AgentId, args: FindArgs) {
      const symbol = args.recipient.slice(FIND_PREFIX.length).trim()
      const bad = (message: string) => new InvalidInputError({ field: "recipient", message })
      if (symbol === "") return yield* bad("find: needs a symbol: find:<name> (a class, function, method, file or agent name)")
      if (args.reply_to !== undefined) return yield* bad("a reply goes to the request's sender by name, not through find:")
      if (args.timeout_seconds !== undefined) return yield* bad("timeout_seconds does not apply to find: (the search may take many hops)")
      const next = nextHop(tree.current(), from, candidates(symbol, from))
      if (next._tag === "not-found") {
        return yield* new RoutingError({
          from: nameOf(from),
          to: args.recipient,
          reason: "unknown-recipient",
          message: `find:${symbol}: no agent in your tree matches "${symbol}" (a class, function, method, file or agent name)`
        })
      }
      const origin = newMessageId()
      const f: FindRoute = { symbol, origin, origin_sender: from, sync: args.sync, hops: 0, state: "hop", path: [from] }
      if (next._tag === "found") {
        yield* deliverFound(f, next.target, args.text, 1, [from, next.target]).pipe(
          Effect.tapError(() => Effect.sync(() => requests.unregister(origin)))
        )
      } else {
        const first = envelope({
          id: newMessageId(),
          sender: from,
          recipient: next.next,
          kind: "notification",
          text: args.text,
          find: { ...f, hops: 1, path: [from, next.next] }
        })
        yield* logHop(first)
        if (args.sync) requests.register({ id: origin, from, to: next.next })
        yield* carryInBackground(first)
      }
      activity.noteMessage(from, {
        direction: "out",
        peer: args.recipient,
        kind: args.sync ? "request" : "notification",
        message_id: origin,
        text: args.text
      })
      return { message_id: origin, waiting_for_reply: args.sync }
    })

    return {
      send,
      /** The swarm's symbol lookup (one at a time; the last registered wins). */
      setIndex: (f: SymbolIndex | null): void => {
        index = f
      },
      /** Recovery: the searches that were in transit at the crash (resumed by `resumeRecovered`). */
      seed: (finds: RecoveredFinds): void => {
        recovered = finds
      },
      /**
       * After start-up (the swarm resumed, so its index is back): close the superseded hops and
       * pass on the held ones.
       */
      resumeRecovered: Effect.gen(function*() {
        const { resume, superseded } = recovered
        recovered = { resume: [], superseded: [] }
        for (const s of superseded) {
          yield* forwarded(s.agent, s.envelope.id, s.to, s.next).pipe(
            Effect.catchAll((e) => Effect.logWarning(`find: hop ${s.envelope.id} not closed: ${e.message}`))
          )
        }
        for (const h of resume) {
          const f = h.envelope.find!
          if (f.sync && tree.isLive(f.origin_sender)) requests.register({ id: f.origin, from: f.origin_sender, to: h.agent })
          yield* carryInBackground(h.envelope)
        }
        return resume.length
      })
    } as const
  })
}) {}
