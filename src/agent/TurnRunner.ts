// TurnRunner: runs the agents' turns. A dispatcher fiber takes one wake at a time from the
// Mailbox and runs at most one turn of that agent (its oldest trigger) through the TurnScheduler
// (one turn at a time per agent) and the Multiplexer (bounded slots). It is the only place a
// turn begins and ends (Turns): the turn's context is created when its prompt is taken and
// deleted once the turn is recorded. At the end of a turn it births the children the turn
// spawned, sends the auto-reply and notes the turn's usage and summary.
import { Effect, Fiber, FiberSet, Option, Schema, type Tracer } from "effect"
import type { AgentNode } from "../domain/agent.js"
import type { AgentId, MessageId } from "../domain/ids.js"
import type { SessionBinding } from "../session/Multiplexer.js"
import type { MessageEnvelope } from "../domain/message.js"
import { type TurnOutcome, TurnScheduler, type TurnSpan } from "../session/TurnScheduler.js"
import { Tracing } from "../telemetry/Tracing.js"
import { Activity } from "./Activity.js"
import { USER } from "./AgentTree.js"
import { pausedNote } from "./Prompt.js"
import { Delivery } from "./Delivery.js"
import { Lifecycle } from "./Lifecycle.js"
import { Mailbox } from "./Mailbox.js"
import { type AgentOutput, OutputBus } from "./OutputBus.js"
import { Requests } from "./Requests.js"
import { SpawnQueue } from "./SpawnQueue.js"
import { ToolHandler } from "./ToolHandler.js"
import { Tree } from "./Tree.js"
import { HumanDesk, TurnGate } from "./TurnGate.js"
import { TurnHooks } from "./TurnHooks.js"
import { settle, type Trigger, Turns } from "./Turns.js"

/** A child spawned during a turn could not be born (its session or `agent.created` not durable). */
export class BirthError extends Schema.TaggedError<BirthError>()("BirthError", {
  child: Schema.String,
  message: Schema.String
}) {}

export class TurnRunner extends Effect.Service<TurnRunner>()("substrat/TurnRunner", {
  scoped: Effect.gen(function*() {
    const tree = yield* Tree
    const mailbox = yield* Mailbox
    const turns = yield* Turns
    const delivery = yield* Delivery
    const requests = yield* Requests
    const activity = yield* Activity
    const lifecycle = yield* Lifecycle
    const spawns = yield* SpawnQueue
    const tools = yield* ToolHandler
    const scheduler = yield* TurnScheduler
    const bus = yield* OutputBus
    const hooks = Option.getOrElse(yield* Effect.serviceOption(TurnHooks), () => ({
      afterTurn: () => Effect.void
    }))
    const gate = Option.getOrNull(yield* Effect.serviceOption(TurnGate))
    const desk = Option.getOrNull(yield* Effect.serviceOption(HumanDesk))
    const fibers = yield* FiberSet.make()
    const tracing = yield* Tracing

    const bindingOf = (n: AgentNode): SessionBinding => ({
      session_id: n.session_id,
      provider: n.provider,
      instructions: n.instructions,
      context: { agent_name: n.name, role: n.role, tools: tools.forAgent(n.id) }
    })

    /**
     * Birth the children spawned during `node`'s turn (deferred spawn) so that they are durable
     * before the turn's end is logged: seed 001 — the spawn is acknowledged when the parent's
     * turn ends, so every child of a durably ended turn must exist after a crash. Messages held
     * for a child are logged (`message.enqueued`) in its log by the birth too; the child's wakes
     * are held until `afterTurn` has recorded the parent's turn (releaseWakes).
     * A child whose birth fails is dropped (its held requests answered with an error) and the
     * turn fails with BirthError.
     */
    const birthChildren = (node: AgentNode) =>
      Effect.gen(function*() {
        let failure: BirthError | null = null
        for (const child of turns.deferredOf(node.id)) {
          if (!mailbox.isUnborn(child)) continue
          mailbox.holdWakes(child)
          const born = yield* Effect.either(lifecycle.birth(child))
          if (born._tag === "Right") continue
          const name = tree.get(child)?.name ?? child
          const message = `could not create ${name}: ${born.left.message}`
          // Still unborn: nothing durable says it exists; take it out of memory too. (A failure
          // after `agent.created` — delivering a held message — leaves a born child.)
          if (mailbox.isUnborn(child)) yield* lifecycle.dropUnborn(child, `${name} could not be created`)
          else {
            // Born, but a held message could not be logged: the requests among the lost ones
            // (pending, not in its inbox) are answered with an error so no sender waits forever.
            const inbox = mailbox.inboxIds(child)
            for (const r of requests.addressedTo(child)) {
              if (!inbox.has(r.id)) {
                yield* requests.reply(r.id, `[error] your message to ${name} could not be delivered: ${born.left.message}`)
              }
            }
          }
          yield* mailbox.releaseWakes(child)
          failure ??= new BirthError({ child: name, message })
        }
        if (failure !== null) return yield* failure
      })

    /**
     * The answer rule (docs/messaging.md): USER's requests this agent has read (the one that
     * woke this turn, and earlier ones still open) are answered by the text of a turn that ends
     * with nothing outstanding — no sync request of its own unanswered, no reply unread, no
     * question to the human unanswered. A turn that ends with work outstanding keeps them open
     * and its text goes to USER as progress.
     */
    const answerUser = (node: AgentNode, woke: MessageId | null, text: string) =>
      Effect.gen(function*() {
        const open = [...requests.carriedFor(node.id).map((r) => r.id), ...(woke === null ? [] : [woke])]
        if (open.length === 0) return
        const asking = desk !== null && desk.asking(node.id)
        if (requests.waitingOn(node.id) === 0 && mailbox.unreadReplies(node.id) === 0 && !asking) {
          for (const id of open) yield* requests.reply(id, text)
          return
        }
        for (const id of open) requests.carry(id)
        if (text === "") return
        const env = delivery.envelope({ sender: node.id, recipient: USER, kind: "notification", text, extra: { progress: true } })
        yield* delivery.toUser(node.id, env).pipe(
          Effect.catchAll((e) => Effect.logWarning(`progress of ${node.name} to USER not logged: ${e.message}`))
        )
      })

    const afterTurn = (node: AgentNode, trigger: Trigger, o: TurnOutcome, took: ReadonlyArray<MessageEnvelope>) =>
      Effect.gen(function*() {
        // Hooks first (e.g. recording the turn's workspace diff): the agent still counts as busy,
        // and nothing the turn triggers (its reply waking the parent, its children's first
        // turns) runs before the turn is fully recorded.
        yield* hooks.afterTurn(node, o).pipe(Effect.catchAllCause(() => Effect.void))
        const spawned = turns.end(node.id)
        activity.noteTurn(node.id, o)
        for (const child of spawned) {
          // Spawned after `birthChildren` ran (an Orchestrator.spawn racing the turn's end): born now.
          if (mailbox.isUnborn(child)) {
            yield* lifecycle.birth(child).pipe(
              Effect.catchAll((e) =>
                mailbox.isUnborn(child)
                  ? lifecycle.dropUnborn(child, `${tree.get(child)?.name ?? child} could not be created`)
                  : Effect.logWarning(`birth of ${child}: ${e.message}`)
              )
            )
          }
          yield* mailbox.releaseWakes(child)
        }
        // A turn that failed because a budget on its path ran out is parked, not failed: nobody is
        // answered; its messages and trigger wait (with a note) until a raise runs it again, or
        // the human stops the subtree (its requests are then answered by the termination).
        // (Decided as the turn failed, and logged with its `provider.error`: recovery parks it too.)
        const spent = o.error !== null ? o.parked ?? null : null
        if (spent !== null && mailbox.requeue(node.id, took, { ...trigger, note: pausedNote(spent) })) {
          yield* bus.publish({ _tag: "TurnCompleted", agent_id: node.id, turn_id: o.turn_id, response: "", error: `parked: ${spent}` })
          yield* spawns.pump()
          return
        }
        const text = o.error ? `[error] ${node.name} failed to answer: ${o.error.message}` : o.response
        const owed = trigger._tag === "message" && requests.awaitsReply(trigger.id, node.id) ? trigger.id : null
        const fromUser = owed !== null && requests.find(owed)?.request.from === USER
        // (A request that timed out meanwhile still gets its reply, delivered as a late one.)
        if (owed !== null && !fromUser) yield* requests.reply(owed, text)
        yield* answerUser(node, fromUser ? owed : null, text)
        yield* bus.publish({
          _tag: "TurnCompleted",
          agent_id: node.id,
          turn_id: o.turn_id,
          response: o.response,
          error: o.error ? o.error.message : null
        })
        // The agent may have finished its work (or its first turn ran): queued spawns may start.
        yield* spawns.pump()
        yield* settle(trigger, o)
      })

    /**
     * The turn's span: below the span of the message that woke it (its envelope's trace
     * context), linked to the other messages its prompt took; a root when nothing woke it so.
     */
    const turnSpan = (node: AgentNode, trigger: Trigger | null, took: ReadonlyArray<MessageEnvelope>): TurnSpan => {
      const main = trigger?._tag === "message" ? took.find((m) => m.id === trigger.id) : undefined
      const links: Array<Tracer.SpanLink> = []
      for (const m of took) {
        const span = m === main ? undefined : tracing.spanOf(m.trace)
        if (span !== undefined) links.push({ _tag: "SpanLink", span, attributes: { "messaging.message.id": m.id } })
      }
      return {
        parent: tracing.spanOf(main?.trace),
        links,
        attributes: {
          "gen_ai.agent.id": node.id,
          "gen_ai.agent.name": node.name,
          "gen_ai.provider.name": node.provider,
          "substrat.agent.role": node.role,
          "substrat.agent.parent_id": node.parent_id ?? "",
          ...(main === undefined ? {} : { "messaging.message.id": main.id })
        }
      }
    }

    /** One wake = at most one turn of `agent` (its oldest trigger). */
    const runWake = (agent: AgentId) =>
      Effect.gen(function*() {
        const node = tree.get(agent)
        if (!node) {
          const t = mailbox.shiftTrigger(agent)
          if (t) yield* settle(t, null)
          return
        }
        // Parked (budget spent, or waiting for the human): the trigger stays queued, no slot is taken.
        if (gate !== null && mailbox.queuedTurns(agent) > 0 && !(yield* gate.mayStart(node))) {
          mailbox.gateWake(agent)
          return
        }
        let reserved = gate !== null && mailbox.queuedTurns(agent) > 0
        const release = Effect.suspend(() => {
          if (!reserved || gate === null) return Effect.void
          reserved = false
          return gate.turnEnded(node)
        })
        let taken: Trigger | null = null
        let took: ReadonlyArray<MessageEnvelope> = []
        const prompt = Effect.suspend(() => {
          const t = delivery.takeForTurn(agent)
          if (Option.isNone(t)) return Effect.succeedNone
          const { consumed, prompt, trigger } = t.value
          taken = trigger
          took = consumed
          if (prompt === null) return settle(trigger, null).pipe(Effect.as(Option.none<string>()))
          turns.begin(agent, trigger)
          return delivery.markDelivered(agent, consumed).pipe(Effect.as(Option.some(prompt)))
        })
        const publish = (o: AgentOutput) => bus.publish(o)
        yield* scheduler.run(bindingOf(node), prompt, {
          onStart: (turn_id, p) =>
            Effect.sync(() => turns.started(agent, turn_id)).pipe(
              Effect.zipRight(publish({ _tag: "TurnStarted", agent_id: agent, turn_id, prompt: p }))
            ),
          onOutput: (turn_id, out) =>
            out._tag === "TextChunk"
              ? publish({ _tag: "Text", agent_id: agent, turn_id, text: out.text })
              : out._tag === "ToolCall"
              ? publish({
                _tag: "ToolCalled",
                agent_id: agent,
                turn_id,
                tool: out.tool,
                arguments: out.arguments,
                result: out.result,
                is_error: out.is_error
              })
              : Effect.void,
          beforeEnd: () => birthChildren(node),
          parkedBy: () => Effect.sync(() => (gate === null ? null : gate.spent(node))),
          after: (o) => (taken ? afterTurn(node, taken, o, took) : Effect.void).pipe(Effect.ensuring(release)),
          span: () => turnSpan(node, taken, took)
        }).pipe(Effect.ensuring(release))
      }).pipe(Effect.ensuring(turns.addWork(-1)))

    const wakeLoop = yield* mailbox.nextWake.pipe(
      Effect.flatMap((agent) => FiberSet.run(fibers, runWake(agent))),
      Effect.forever,
      Effect.forkScoped
    )

    /**
     * Start no more turns and interrupt the running ones; returns once they have let go of their
     * sessions. An interrupted turn stays open in its log (`turn.start` without an end) and
     * queued wakes are not run, so the next start-up handles them as recovery does after a crash.
     */
    const stopTurns = Effect.fn("TurnRunner.stopTurns")(function*() {
      yield* Fiber.interrupt(wakeLoop)
      yield* FiberSet.clear(fibers)
    })

    return { bindingOf, stopTurns } as const
  })
}) {}
