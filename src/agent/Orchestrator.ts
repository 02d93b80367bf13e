// Orchestrator: the public face of the agent tree — create roots, spawn, send, run turns,
// terminate, inspect, usage, live output, session suspend/resume/delete, awaitIdle.
// A dispatcher fiber runs one turn per wake (see Router); every turn goes through the
// TurnScheduler (one at a time per agent) and the Multiplexer (bounded slots).
import { Deferred, Effect, Fiber, FiberSet, Layer, Option, Queue, Schema, Stream } from "effect"
import type { AgentNode } from "../domain/agent.js"
import { AgentNode as AgentNodeClass } from "../domain/agent.js"
import { NotFoundError } from "../domain/errors.js"
import { makeEvent } from "../domain/events.js"
import type { AgentId, SessionId } from "../domain/ids.js"
import { Session } from "../domain/session.js"
import { EventLog } from "../storage/EventLog.js"
import { Multiplexer, type SessionBinding } from "../session/Multiplexer.js"
import { SessionStore } from "../storage/SessionStore.js"
import { addUsage, zeroUsage } from "../domain/usage.js"
import { type TurnOutcome, TurnScheduler } from "../session/TurnScheduler.js"
import { inspectionOf, stateOf, usageOf } from "./Inspection.js"
import { type CreateRootArgs, Lifecycle, type SpawnArgs } from "./Lifecycle.js"
import { addWork, noteTurn, OrchestratorState, type Trigger } from "./OrchestratorState.js"
import { type AgentOutput, OutputBus } from "./OutputBus.js"
import { Router } from "./Router.js"
import { ToolHandler } from "./ToolHandler.js"
import { TurnHooks } from "./TurnHooks.js"

/** A child spawned during a turn could not be born (its session or `agent.created` not durable). */
export class BirthError extends Schema.TaggedError<BirthError>()("BirthError", {
  child: Schema.String,
  message: Schema.String
}) {}

export interface SendToAgent {
  readonly agent: AgentId
  readonly text: string
  /** Default true: the agent's reply (its turn's final text) goes to USER. */
  readonly sync?: boolean | undefined
}

export class Orchestrator extends Effect.Service<Orchestrator>()("substrat/Orchestrator", {
  scoped: Effect.gen(function*() {
    const s = yield* OrchestratorState
    const router = yield* Router
    const tools = yield* ToolHandler
    const lifecycle = yield* Lifecycle
    const scheduler = yield* TurnScheduler
    const mux = yield* Multiplexer
    const log = yield* EventLog
    const store = yield* SessionStore
    const bus = yield* OutputBus
    const hooks = Option.getOrElse(yield* Effect.serviceOption(TurnHooks), () => ({
      afterTurn: () => Effect.void
    }))
    const fibers = yield* FiberSet.make()

    /** Completes when no turn is queued or running anywhere. */
    const awaitIdle = s.work.changes.pipe(Stream.filter((n) => n <= 0), Stream.take(1), Stream.runDrain)

    const view = (n: AgentNode): AgentNode => new AgentNodeClass({ ...n, state: stateOf(s, n.id) })
    const notFound = (id: string) => new NotFoundError({ kind: "agent", id, message: `no agent ${id}` })
    const nodeOf = (id: AgentId) => {
      const n = s.tree.get(id)
      return n ? Effect.succeed(n) : Effect.fail(notFound(id))
    }

    const bindingOf = (n: AgentNode): SessionBinding => ({
      session_id: n.session_id,
      provider: n.provider,
      instructions: n.instructions,
      context: { agent_name: n.name, role: n.role, tools: tools.forAgent(n.id) }
    })

    const settle = (t: Trigger, o: TurnOutcome | null) =>
      t._tag === "prompt" && t.done ? Deferred.succeed(t.done, o).pipe(Effect.asVoid) : Effect.void

    /** Remove an agent that never got a durable birth (and anything spawned below it). */
    const dropUnborn = (id: AgentId, why: string) =>
      Effect.gen(function*() {
        const ids = s.tree.subtree(id).map((n) => n.id)
        for (const k of ids) s.terminating.add(k)
        for (const k of [...ids].reverse()) {
          yield* terminateOne(k, why).pipe(
            Effect.catchAll((e) => Effect.logWarning(`dropping unborn agent ${k}: ${e.message}`))
          )
        }
        for (const k of ids) s.terminating.delete(k)
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
        const ctx = s.turns.get(node.id)
        let failure: BirthError | null = null
        for (const child of ctx?.deferredSpawns ?? []) {
          if (!s.unborn.has(child)) continue
          yield* router.holdWakes(child)
          const born = yield* Effect.either(lifecycle.birth(child))
          if (born._tag === "Right") continue
          const name = s.tree.get(child)?.name ?? child
          const message = `could not create ${name}: ${born.left.message}`
          // Still unborn: nothing durable says it exists; take it out of memory too. (A failure
          // after `agent.created` — delivering a held message — leaves a born child.)
          if (s.unborn.has(child)) yield* dropUnborn(child, `${name} could not be created`)
          else {
            // Born, but a held message could not be logged: the requests among the lost ones
            // (pending, not in its inbox) are answered with an error so no sender waits forever.
            const inbox = new Set((s.inboxes.get(child) ?? []).map((e) => e.id))
            for (const r of [...s.requests.values()]) {
              if (r.to === child && !inbox.has(r.id)) {
                yield* router.reply(r.id, `[error] your message to ${name} could not be delivered: ${born.left.message}`)
              }
            }
          }
          yield* router.releaseWakes(child)
          failure ??= new BirthError({ child: name, message })
        }
        if (failure !== null) return yield* failure
      })

    const afterTurn = (node: AgentNode, trigger: Trigger, o: TurnOutcome) =>
      Effect.gen(function*() {
        // Hooks first (e.g. recording the turn's workspace diff): the agent still counts as busy,
        // and nothing the turn triggers (its reply waking the parent, its children's first
        // turns) runs before the turn is fully recorded.
        yield* hooks.afterTurn(node, o).pipe(Effect.catchAllCause(() => Effect.void))
        const ctx = s.turns.get(node.id)
        s.turns.delete(node.id)
        const u = s.usage.get(node.id) ?? { own: zeroUsage, turns: 0, retired: zeroUsage, retiredTurns: 0 }
        s.usage.set(node.id, { ...u, own: addUsage(u.own, o.usage), turns: u.turns + 1 })
        noteTurn(s, node.id, {
          turn_id: o.turn_id,
          prompt: o.prompt,
          response: o.response,
          error: o.error ? `${o.error.reason}: ${o.error.message}` : null
        })
        for (const child of ctx?.deferredSpawns ?? []) {
          // Spawned after `birthChildren` ran (an Orchestrator.spawn racing the turn's end): born now.
          if (s.unborn.has(child)) {
            yield* lifecycle.birth(child).pipe(
              Effect.catchAll((e) =>
                s.unborn.has(child)
                  ? dropUnborn(child, `${s.tree.get(child)?.name ?? child} could not be created`)
                  : Effect.logWarning(`birth of ${child}: ${e.message}`)
              )
            )
          }
          yield* router.releaseWakes(child)
        }
        // (A request that timed out meanwhile still gets its reply, delivered as a late one.)
        if (trigger._tag === "message" && router.awaitsReply(trigger.id, node.id)) {
          yield* router.reply(
            trigger.id,
            o.error ? `[error] ${node.name} failed to answer: ${o.error.message}` : o.response
          )
        }
        yield* bus.publish({
          _tag: "TurnCompleted",
          agent_id: node.id,
          turn_id: o.turn_id,
          response: o.response,
          error: o.error ? o.error.message : null
        })
        yield* settle(trigger, o)
      })

    /** One wake = at most one turn of `agent` (its oldest trigger). */
    const runWake = (agent: AgentId) =>
      Effect.gen(function*() {
        const node = s.tree.get(agent)
        if (!node) {
          const t = s.triggers.get(agent)?.shift()
          if (t) yield* settle(t, null)
          return
        }
        let taken: Trigger | null = null
        const prompt = router.takeForTurn(agent).pipe(
          Effect.flatMap(Option.match({
            onNone: () => Effect.succeedNone,
            onSome: (t) => {
              taken = t.trigger
              return t.prompt === null ? settle(t.trigger, null).pipe(Effect.as(Option.none<string>())) : Effect.succeedSome(t.prompt)
            }
          }))
        )
        const publish = (o: AgentOutput) => bus.publish(o)
        yield* scheduler.run(bindingOf(node), prompt, {
          onStart: (turn_id, p) => publish({ _tag: "TurnStarted", agent_id: agent, turn_id, prompt: p }),
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
          after: (o) => taken ? afterTurn(node, taken, o) : Effect.void
        })
      }).pipe(Effect.ensuring(addWork(s, -1)))

    const wakeLoop = yield* Queue.take(s.wakes).pipe(
      Effect.flatMap((agent) => FiberSet.run(fibers, runWake(agent))),
      Effect.forever,
      Effect.forkScoped
    )

    // ---- public operations -------------------------------------------------------------

    const createRoot = Effect.fn("Orchestrator.createRoot")(function*(args: CreateRootArgs) {
      return view(yield* lifecycle.createRoot(args))
    })

    /** Spawn a child as if `parent` had called spawn_agent (deferred while it is mid-turn). */
    const spawn = Effect.fn("Orchestrator.spawn")(function*(parent: AgentId, args: SpawnArgs) {
      return view(yield* lifecycle.spawn(parent, args))
    })

    /** A message from USER; wakes the agent. */
    const send = Effect.fn("Orchestrator.send")(function*(args: SendToAgent) {
      return yield* router.fromUser(args.agent, args.text, args.sync ?? true)
    })

    /** Queue a turn with an explicit prompt and wait for it. None: the agent went away first. */
    const runTurn = Effect.fn("Orchestrator.runTurn")(function*(agent: AgentId, text: string) {
      yield* nodeOf(agent)
      const done = yield* Deferred.make<TurnOutcome | null>()
      yield* router.queueTurn(agent, { _tag: "prompt", text, done })
      return Option.fromNullable(yield* Deferred.await(done))
    })

    const list = Effect.sync(() => [...s.tree.nodes.values()].map(view))
    const get = Effect.fn("Orchestrator.get")(function*(agent: AgentId) {
      return view(yield* nodeOf(agent))
    })
    /** Find by name among the children of `parent` (roots when null/omitted). */
    const findByName = Effect.fn("Orchestrator.findByName")(function*(name: string, parent: AgentId | null = null) {
      const n = s.tree.childNamed(parent, name)
      return n ? view(n) : yield* notFound(name)
    })
    const inspect = Effect.fn("Orchestrator.inspect")(function*(agent: AgentId) {
      return inspectionOf(s, agent) ?? (yield* notFound(agent))
    })
    const usage = Effect.fn("Orchestrator.usage")(function*(agent: AgentId) {
      yield* nodeOf(agent)
      return usageOf(s, agent)
    })
    /** Live output of one agent (or all when omitted), from subscription on. */
    const output = (agent?: AgentId): Stream.Stream<AgentOutput> =>
      agent === undefined ? bus.stream : bus.stream.pipe(Stream.filter((o) => o.agent_id === agent))
    /** Like `output`, but subscribed when this effect returns (for attach: nothing is missed). */
    const subscribe = (agent?: AgentId) =>
      bus.subscribe.pipe(
        Effect.map((st) => agent === undefined ? st : st.pipe(Stream.filter((o) => o.agent_id === agent)))
      )
    /** Messages agents sent to USER (replies and send_message("USER")), oldest first. */
    const userMessages = (agent?: AgentId) =>
      Effect.sync(() => s.userOutbox.filter((m) => agent === undefined || m.sender === agent))

    /**
     * Terminate one agent (a leaf by now). `agent.terminated` is logged first: if that append
     * fails nothing changes and the termination fails (it is not acknowledged). The record's
     * `terminated` state is best-effort — recovery sets it from the log.
     */
    const terminateOne = (id: AgentId, why?: string) =>
      Effect.gen(function*() {
        const node = s.tree.get(id)
        if (!node) return
        const born = !s.unborn.has(id)
        if (born) yield* log.append(node.session_id, makeEvent("agent.terminated", { agent_id: id }))
        yield* router.failPending(id, why ?? `${node.name} was terminated`)
        for (const t of s.triggers.get(id) ?? []) yield* settle(t, null)
        s.triggers.delete(id)
        const removed = s.tree.remove(id)
        if (removed._tag === "Right") s.tree = removed.right
        s.inboxes.delete(id)
        s.unborn.delete(id)
        s.turns.delete(id)
        s.activity.delete(id)
        const u = s.usage.get(id)
        s.usage.delete(id)
        if (u && node.parent_id !== null) {
          const p = s.usage.get(node.parent_id) ?? { own: zeroUsage, turns: 0, retired: zeroUsage, retiredTurns: 0 }
          s.usage.set(node.parent_id, {
            ...p,
            retired: addUsage(p.retired, addUsage(u.own, u.retired)),
            retiredTurns: p.retiredTurns + u.turns + u.retiredTurns
          })
        }
        yield* mux.drop(node.session_id)
        if (born) {
          yield* store.load(node.session_id).pipe(
            Effect.flatMap((rec) => store.save(new Session({ ...rec, state: "terminated" }))),
            Effect.catchAll((e) => Effect.logWarning(`record of ${node.session_id} not set to terminated: ${e.message}`))
          )
          yield* log.close(node.session_id)
        }
        s.terminating.delete(id)
      })

    /**
     * Terminate an agent and its whole subtree (children first). Each agent's running turn
     * finishes first; its queued turns are dropped; sync requests waiting on it are answered
     * with an error. Returns the terminated ids (the agent first). Fails, with the agents
     * terminated so far staying terminated and the rest alive, when an `agent.terminated`
     * cannot be logged.
     */
    const terminate = Effect.fn("Orchestrator.terminate")(function*(agent: AgentId) {
      yield* nodeOf(agent)
      const ids = s.tree.subtree(agent).map((n) => n.id)
      for (const id of ids) s.terminating.add(id)
      yield* Effect.forEach([...ids].reverse(), (id) => {
        const node = s.tree.get(id)
        return node ? scheduler.serialize(node.session_id, terminateOne(id)) : Effect.void
      }, { discard: true }).pipe(Effect.ensuring(Effect.sync(() => {
        for (const id of ids) s.terminating.delete(id)
      })))
      return ids
    })

    const agentOfSession = (session: SessionId) =>
      [...s.tree.nodes.values()].find((n) => n.session_id === session)

    const suspend = Effect.fn("Orchestrator.suspend")(function*(session: SessionId) {
      return yield* mux.suspend(session)
    })
    /** Make a session live again (resume from its blob) without running a turn. */
    const resume = Effect.fn("Orchestrator.resume")(function*(session: SessionId) {
      const node = agentOfSession(session)
      if (!node) return yield* new NotFoundError({ kind: "session", id: session, message: `no live agent uses ${session}` })
      yield* scheduler.serialize(session, mux.use(bindingOf(node), () => Effect.void))
    })
    /** Terminate the owning agent (and its subtree) if any, then delete the record and the log. */
    const deleteSession = Effect.fn("Orchestrator.deleteSession")(function*(session: SessionId) {
      const node = agentOfSession(session)
      if (node) yield* terminate(node.id)
      yield* mux.drop(session)
      yield* store.delete(session)
      yield* log.remove(session)
    })
    const sessions = store.scan

    /**
     * Shutdown past the grace period: start no more turns and interrupt the running ones; returns
     * once they have let go of their sessions. An interrupted turn stays open in its log
     * (`turn.start` without an end) and queued wakes are not run, so the next start-up handles
     * them as recovery does after a crash (docs/recovery.md). The orchestrator runs no turns after.
     */
    const stopTurns = Effect.fn("Orchestrator.stopTurns")(function*() {
      yield* Fiber.interrupt(wakeLoop)
      yield* FiberSet.clear(fibers)
    })

    /** Graceful shutdown: wait for running turns, then suspend every live session (blobs saved). */
    const suspendAll = Effect.fn("Orchestrator.suspendAll")(function*() {
      yield* awaitIdle
      yield* mux.suspendAll()
    })


    return {
      createRoot,
      spawn,
      send,
      runTurn,
      list,
      get,
      findByName,
      inspect,
      usage,
      output,
      subscribe,
      userMessages,
      terminate,
      suspend,
      resume,
      deleteSession,
      sessions,
      suspendAll,
      stopTurns,
      awaitIdle
    } as const
  })
}) {}

/**
 * The whole orchestration stack over a given state layer. Requires EventLog, SessionStore,
 * ProviderRegistry; optionally MultiplexerConfig (default 4 slots), TurnHooks (default no-op) and
 * ChildWorkspaces (default: `workspace_subdir` refused).
 */
export const layerWithState = <E = never, R = never>(state: Layer.Layer<OrchestratorState, E, R>) =>
  Orchestrator.Default.pipe(
    Layer.provideMerge(ToolHandler.Default),
    Layer.provideMerge(Lifecycle.Default),
    Layer.provideMerge(Router.Default),
    Layer.provideMerge(TurnScheduler.Default),
    Layer.provideMerge(Multiplexer.Default),
    Layer.provideMerge(Layer.mergeAll(state, OutputBus.layer))
  )

export const layer = layerWithState(OrchestratorState.layer)
