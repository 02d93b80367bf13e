// TurnRunner: runs the agents' turns, and is the only place a turn begins and ends. A dispatcher
// fiber takes one wake at a time from the Mailbox and runs at most one turn of that agent (its
// oldest trigger). A turn reads top-down in `runWake`: after the agent's earlier turns
// (TurnScheduler.serialize: one at a time per agent) the prompt is taken from its inbox (the
// turn's context begins, Turns), the turn runs in a provider slot (Multiplexer) — `turn.start`,
// the provider's output streamed live, `usage`, the births of the children it spawned,
// `turn.complete`, or `provider.error` when anything failed — then the hooks record it (the
// workspace diff); both can be stopped from outside (TurnScheduler.stoppable), which returns once
// the hooks are done; then `afterTurn` records the usage and summary, answers the request that woke it and USER's open requests (or sends USER
// progress), and ends the turn's context, all before the agent's next turn starts.
// Over 300 lines because the turn's whole story is kept in one file, in the order it happens.
import { Clock, Effect, Fiber, FiberSet, Option, Schema, Stream, type Tracer } from "effect"
import type { AgentNode } from "../domain/agent.js"
import { type LogEvent, makeEvent } from "../domain/events.js"
import { type AgentId, type MessageId, newTurnId, type TurnId } from "../domain/ids.js"
import type { MessageEnvelope } from "../domain/message.js"
import type { ProviderOutput } from "../provider/Provider.js"
import { Multiplexer, type SessionBinding } from "../session/Multiplexer.js"
import { TurnScheduler, type TurnStopped } from "../session/TurnScheduler.js"
import { EventLog } from "../storage/EventLog.js"
import { Tracing } from "../telemetry/Tracing.js"
import { Activity } from "./Activity.js"
import { USER } from "./AgentTree.js"
import { pausedNote } from "./Prompt.js"
import { Delivery } from "./Delivery.js"
import { Lifecycle } from "./Lifecycle.js"
import { Mailbox } from "./Mailbox.js"
import { OutputBus } from "./OutputBus.js"
import { Requests } from "./Requests.js"
import { SpawnQueue } from "./SpawnQueue.js"
import { ToolHandler } from "./ToolHandler.js"
import { Tree } from "./Tree.js"
import { HumanDesk, TurnGate } from "./TurnGate.js"
import { TurnHooks } from "./TurnHooks.js"
import { describeFailure, loggable, Tally, type TurnOutcome, type TurnSpan } from "./Turn.js"
import { settle, type Trigger, Turns } from "./Turns.js"

/** A child spawned during a turn could not be born (its session or `agent.created` not durable). */
export class BirthError extends Schema.TaggedError<BirthError>()("BirthError", {
  child: Schema.String,
  message: Schema.String
}) {}

/** The births of the turn's children failed (the turn fails; they are not tried again). */
class BirthsFailed {
  constructor(readonly cause: BirthError) {}
}

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
    const mux = yield* Multiplexer
    const log = yield* EventLog
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
      context: { agent_name: n.name, role: n.role, tools: tools.forAgent(n.id), ...(n.approve === undefined ? {} : { approve: n.approve }) }
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
        // The hooks (e.g. recording the turn's workspace diff) ran already, inside the stoppable
        // turn: the agent still counted as busy, and nothing the turn triggers (its reply waking
        // the parent, its children's first turns) runs before the turn is fully recorded.
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

    /**
     * What the provider streams, as it streams: its text and tool calls to the live output, and
     * its own tool calls (claude's Write/Bash, codex's exec_command — ours are logged by the
     * ToolHandler) into the log as a `tool_call.invoked` + `tool_call.result` pair, best-effort.
     */
    const streamed = (node: AgentNode, turn_id: TurnId, out: ProviderOutput) =>
      Effect.gen(function*() {
        if (out._tag === "TextChunk") {
          return yield* bus.publish({ _tag: "Text", agent_id: node.id, turn_id, text: out.text })
        }
        if (out._tag !== "ToolCall") return
        const { call_id, tool } = out
        if (out.source === "provider") {
          // The provider ran it before telling us: a span of no length below the turn.
          if (tracing.enabled) {
            yield* Effect.withSpan(Effect.void, "tool_call", {
              attributes: { "gen_ai.tool.name": tool, "gen_ai.tool.call.id": call_id, "substrat.tool.source": "provider", "error": out.is_error }
            })
          }
          yield* log.append(node.session_id, makeEvent("tool_call.invoked", { call_id, tool, arguments: loggable(out.arguments), source: "provider" })).pipe(
            Effect.zipRight(log.append(node.session_id, makeEvent("tool_call.result", { call_id, tool, result: loggable(out.result), is_error: out.is_error, source: "provider" }))),
            Effect.catchAll((e) => Effect.logWarning(`provider tool call ${tool} of turn ${turn_id} not logged: ${e.message}`)),
            // The pair is logged whole, also when the turn is stopped meanwhile.
            Effect.uninterruptible
          )
        }
        yield* bus.publish({ _tag: "ToolCalled", agent_id: node.id, turn_id, tool, arguments: out.arguments, result: out.result, is_error: out.is_error })
      })

    /**
     * One turn, top-down, holding a provider slot: `turn.start` is logged, the provider runs
     * with its output streamed (until `stopped`), the children it spawned are born (seed 001:
     * durable before the turn's end), and its usage and `turn.complete` are logged together, in
     * one durable step (`appendAll`). A failed end append fails the turn: nothing is acknowledged
     * that is not durable; a `usage` that does not encode is left out (a warning).
     */
    const runTurn = (
      node: AgentNode,
      turn_id: TurnId,
      prompt: string,
      took: ReadonlyArray<MessageEnvelope>,
      tally: Tally,
      stopped: Effect.Effect<never, TurnStopped>
    ) =>
      mux.use(bindingOf(node), (provider) =>
        Effect.gen(function*() {
          const started = yield* Clock.currentTimeNanos
          // The messages the prompt took are marked delivered in the same durable step.
          yield* log.appendAll(node.session_id, [...deliveredOf(took), makeEvent("turn.start", { turn_id, prompt })])
          tally.startLogged = true
          turns.started(node.id, turn_id)
          yield* bus.publish({ _tag: "TurnStarted", agent_id: node.id, turn_id, prompt })
          // A stop ends the run (the provider's stream interrupted, its finalizers run) with
          // TurnStopped; raced rather than `Stream.interruptWhen`, which forks and merges a
          // second stream per turn.
          yield* Effect.raceFirst(
            provider.send(prompt).pipe(
              Stream.runForEach((out) => Effect.zipRight(Effect.sync(() => tally.add(out)), streamed(node, turn_id, out)))
            ),
            stopped
          )
          yield* Effect.mapError(birthChildren(node), (e) => new BirthsFailed(e))
          const duration_ms = Math.round(Number((yield* Clock.currentTimeNanos) - started) / 1000) / 1000
          yield* endTurn(node, turn_id, tally, makeEvent("turn.complete", { turn_id, response: tally.response, duration_ms }))
          return { turn_id, prompt, response: tally.response, usage: tally.usage, error: null } satisfies TurnOutcome
        })
      )

    /** `message.delivered` of each message a turn's prompt took. */
    const deliveredOf = (took: ReadonlyArray<MessageEnvelope>): Array<LogEvent> =>
      took.map((m) => makeEvent("message.delivered", { message_id: m.id }))

    /**
     * The turn's end event, preceded by its `usage` when the provider reported any, in one durable
     * step. A `usage` that does not encode is dropped with a warning and the end logged alone.
     */
    const endTurn = (node: AgentNode, turn_id: TurnId, tally: Tally, end: LogEvent) =>
      tally.sawUsage
        ? log.appendAll(node.session_id, [makeEvent("usage", { turn_id, ...tally.usage }), end]).pipe(
          Effect.catchIf((e) => e.reason === "encode", (e) =>
            Effect.zipRight(Effect.logWarning(`usage of turn ${turn_id} not logged: ${e.message}`), log.append(node.session_id, end)))
        )
        : log.append(node.session_id, end)

    /**
     * A turn that failed (its provider, a slot, a log append, or the births): the children it
     * spawned are born anyway (also durable before its end; not again when their birth was what
     * failed), a budget on its path that ran out parks it (the reason is logged with the error, so
     * recovery after a crash keeps it parked too), and `provider.error` is logged, best-effort.
     * The session stays usable: its provider stays live for the next turn.
     */
    const failTurn = (node: AgentNode, turn_id: TurnId, prompt: string, took: ReadonlyArray<MessageEnvelope>, tally: Tally, e: unknown) =>
      Effect.gen(function*() {
        if (!(e instanceof BirthsFailed)) {
          yield* birthChildren(node).pipe(Effect.catchAll((b) => Effect.logWarning(`turn ${turn_id}: ${b._tag}: ${b.message}`)))
        }
        const error = describeFailure(e instanceof BirthsFailed ? e.cause : e)
        const parked = gate === null ? null : gate.spent(node)
        const failed = makeEvent("provider.error", { turn_id, ...error, ...(parked === null ? {} : { parked }) })
        // The provider had finished when the births failed: its usage goes with the error. A turn
        // that failed before its start was logged (no slot, no provider) consumed its messages
        // all the same: they are marked delivered with its error.
        const logged = e instanceof BirthsFailed
          ? endTurn(node, turn_id, tally, failed)
          : log.appendAll(node.session_id, [...(tally.startLogged ? [] : deliveredOf(took)), failed])
        yield* logged.pipe(
          Effect.catchAll((le) => Effect.logWarning(`provider.error of turn ${turn_id} not logged: ${le.message}`))
        )
        return { turn_id, prompt, response: "", usage: tally.usage, error, ...(parked === null ? {} : { parked }) } satisfies TurnOutcome
      })

    /** With tracing on, the turn (and what follows it) as a `turn` span, its outcome as attributes. */
    const traced = <E, R>(node: AgentNode, span: TurnSpan, turn: Effect.Effect<TurnOutcome, E, R>) =>
      turn.pipe(
        Effect.tap((o) =>
          Effect.annotateCurrentSpan({
            "substrat.turn.id": o.turn_id,
            "gen_ai.usage.input_tokens": o.usage.input_tokens,
            "gen_ai.usage.output_tokens": o.usage.output_tokens,
            "substrat.cost_usd": o.usage.cost_usd,
            ...(o.error === null ? {} : { "error": true, "error.type": o.error.reason, "substrat.error.message": o.error.message })
          })
        ),
        tracing.asTurnOf(node.session_id),
        Effect.withSpan("turn", {
          ...(span.parent === undefined ? { root: true } : { parent: span.parent }),
          links: span.links,
          attributes: { "substrat.session.id": node.session_id, ...span.attributes }
        })
      )

    /**
     * Take the agent's oldest trigger and the messages its turn reads (None: nothing queued, or
     * nothing to say — then the trigger is settled here). The turn's context begins now.
     */
    const takePrompt = (agent: AgentId) =>
      Effect.suspend(() => {
        const t = delivery.takeForTurn(agent)
        if (Option.isNone(t)) return Effect.succeedNone
        const { consumed, prompt, trigger } = t.value
        if (prompt === null) return settle(trigger, null).pipe(Effect.as(Option.none()))
        turns.begin(agent, trigger)
        // (Marked delivered with the turn's start: runTurn, or failTurn when it fails before.)
        return Effect.succeedSome({ prompt, trigger, took: consumed })
      })

    /**
     * One wake = at most one turn of `agent` (its oldest trigger), read top-down: after the
     * agent's earlier turns (one at a time per agent), the prompt is taken from its inbox, the
     * turn runs in a provider slot (runTurn; failTurn when it fails) and the hooks record it, the
     * two stoppable from outside; then it is answered (afterTurn) before the agent's next turn starts.
     */
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
        yield* scheduler.serialize(
          node.session_id,
          Effect.gen(function*() {
            const taken = yield* takePrompt(agent)
            if (Option.isNone(taken)) return
            const { prompt, trigger, took } = taken.value
            const turn = Effect.gen(function*() {
              const turn_id = newTurnId()
              const tally = new Tally()
              const outcome = yield* scheduler.stoppable(node.session_id, (stopped) =>
                runTurn(node, turn_id, prompt, took, tally, stopped).pipe(
                  Effect.catchAll((e) => failTurn(node, turn_id, prompt, took, tally, e)),
                  // Inside the stoppable part: a `stopTurn` returns only once the hooks' work (git
                  // in the agent's workspace) is done, so a workspace delete never races it.
                  Effect.tap((o) => hooks.afterTurn(node, o).pipe(Effect.catchAllCause(() => Effect.void)))
                ))
              yield* afterTurn(node, trigger, outcome, took).pipe(Effect.ensuring(release))
              return outcome
            })
            yield* tracing.enabled ? traced(node, turnSpan(node, trigger, took), turn) : turn
          })
        ).pipe(Effect.ensuring(release))
      }).pipe(Effect.ensuring(turns.addWork(-1)))

    // The running wakes of each agent (interruptTurns).
    const wakes = new Map<AgentId, Set<Fiber.RuntimeFiber<unknown, unknown>>>()
    const track = (agent: AgentId, fiber: Fiber.RuntimeFiber<unknown, unknown>) =>
      Effect.sync(() => {
        const mine = wakes.get(agent) ?? new Set()
        wakes.set(agent, mine)
        mine.add(fiber)
        fiber.addObserver(() => {
          mine.delete(fiber)
          if (mine.size === 0 && wakes.get(agent) === mine) wakes.delete(agent)
        })
      })
    const wakeLoop = yield* mailbox.nextWake.pipe(
      Effect.flatMap((agent) => Effect.flatMap(FiberSet.run(fibers, runWake(agent)), (fiber) => track(agent, fiber))),
      Effect.forever,
      Effect.forkScoped
    )

    /**
     * Cluster mode's handover past its limit (`cluster.handover_grace_ms`): interrupt the wakes of
     * `agents` as a kill -9 would — their providers stopped, nothing more logged (a started turn
     * stays open in its log, so the runner that recovers the tree re-runs it), the turn's workspace
     * changes not recorded. Their turns' contexts end here (a waiting `runTurn` gets None).
     * Returns how many wakes were interrupted.
     */
    const interruptTurns = Effect.fn("TurnRunner.interruptTurns")(function*(agents: ReadonlySet<AgentId>) {
      const running = [...agents].flatMap((a) => [...(wakes.get(a) ?? [])])
      yield* Fiber.interruptAll(running)
      for (const a of agents) {
        const trigger = turns.triggerOf(a)
        if (!turns.isBusy(a)) continue
        turns.end(a)
        if (trigger !== undefined) yield* settle(trigger, null)
      }
      return running.length
    })

    /**
     * Start no more turns and interrupt the running ones; returns once they have let go of their
     * sessions. An interrupted turn stays open in its log (`turn.start` without an end) and
     * queued wakes are not run, so the next start-up handles them as recovery does after a crash.
     */
    const stopTurns = Effect.fn("TurnRunner.stopTurns")(function*() {
      yield* Fiber.interrupt(wakeLoop)
      yield* FiberSet.clear(fibers)
    })

    return { bindingOf, stopTurns, interruptTurns } as const
  })
}) {}
