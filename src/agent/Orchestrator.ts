// Orchestrator: the public face of the agent tree — create roots, spawn, send, run turns,
// terminate, inspect, usage, live output, session suspend/resume/delete, awaitIdle. It holds no
// state of the tree: each part belongs to one service (Tree, Mailbox, Requests, Turns, Activity),
// and the work is done by Lifecycle, Router and the TurnRunner; its own is cluster mode's sends in
// flight to a tree that leaves (unloadTree).
// Over 300 lines because it is the agent tree's whole public surface: one short delegating
// operation per entry point, then the layer wiring the services it delegates to.
import { Clock, Deferred, Effect, Either, Layer, Option, Stream } from "effect"
import type { AgentNode } from "../domain/agent.js"
import { AgentNode as AgentNodeClass } from "../domain/agent.js"
import { InvalidInputError, NotFoundError } from "../domain/errors.js"
import { makeEvent } from "../domain/events.js"
import type { AgentId, MessageId, SessionId } from "../domain/ids.js"
import type { MessageEnvelope } from "../domain/message.js"
import { Multiplexer } from "../session/Multiplexer.js"
import { TurnScheduler } from "../session/TurnScheduler.js"
import type { TurnOutcome } from "./Turn.js"
import { EventLog } from "../storage/EventLog.js"
import { SessionStore } from "../storage/SessionStore.js"
import { Activity } from "./Activity.js"
import { Delivery } from "./Delivery.js"
import { Inspection } from "./Inspection.js"
import { type CreateRootArgs, Lifecycle, type SpawnArgs } from "./Lifecycle.js"
import { Mailbox } from "./Mailbox.js"
import { type AgentOutput, OutputBus } from "./OutputBus.js"
import { StateSeeding } from "./RecoveredState.js"
import { Requests } from "./Requests.js"
import { Finder } from "./Finder.js"
import { Router } from "./Router.js"
import { Sessions } from "./Sessions.js"
import { SpawnQueue } from "./SpawnQueue.js"
import { Quotas } from "./Quotas.js"
import { ToolHandler } from "./ToolHandler.js"
import { Tree } from "./Tree.js"
import { TurnRunner } from "./TurnRunner.js"
import { settle, Turns } from "./Turns.js"

export { BirthError } from "./TurnRunner.js"

export interface SendToAgent {
  readonly agent: AgentId
  readonly text: string
  /** Default true: the agent's reply (its turn's final text) goes to USER. */
  readonly sync?: boolean | undefined
  /** The message's id (default a new one): cluster mode derives it from the engine's request. */
  readonly id?: MessageId | undefined
}

export class Orchestrator extends Effect.Service<Orchestrator>()("substrat/Orchestrator", {
  effect: Effect.gen(function*() {
    const tree = yield* Tree
    const mailbox = yield* Mailbox
    const turns = yield* Turns
    const router = yield* Router
    const lifecycle = yield* Lifecycle
    const runner = yield* TurnRunner
    const inspection = yield* Inspection
    const scheduler = yield* TurnScheduler
    const mux = yield* Multiplexer
    const log = yield* EventLog
    const store = yield* SessionStore
    const bus = yield* OutputBus
    const records = yield* Sessions
    const requests = yield* Requests
    const spawns = yield* SpawnQueue

    // A node of the tree (checked by its Schema when it was made) with its current state (an
    // `AgentState` by type): nothing here for the constructor to re-check. The last view of each
    // tree node is kept (nodes are immutable; a changed node is a new object) and handed out
    // again while the state is the same, so listing an unchanged tree builds no new nodes.
    const views = new WeakMap<AgentNode, AgentNode>()
    const view = (n: AgentNode): AgentNode => {
      const state = inspection.stateOf(n.id)
      const last = views.get(n)
      if (last !== undefined && last.state === state) return last
      const fresh = new AgentNodeClass({ ...n, state }, true)
      views.set(n, fresh)
      return fresh
    }
    const notFound = (id: string) => new NotFoundError({ kind: "agent", id, message: `no agent ${id}` })
    const nodeOf = (id: AgentId) =>
      Effect.suspend(() => {
        const n = tree.get(id)
        return n ? Effect.succeed(n) : Effect.fail(notFound(id))
      })

    const createRoot = Effect.fn("Orchestrator.createRoot")(function*(args: CreateRootArgs) {
      return view(yield* lifecycle.createRoot(args))
    })

    /** Spawn a child as if `parent` had called spawn_agent (deferred while it is mid-turn). */
    const spawn = Effect.fn("Orchestrator.spawn")(function*(parent: AgentId, args: SpawnArgs) {
      return view(yield* lifecycle.spawn(parent, args))
    })

    // Cluster mode's handover (unloadTree): the roots of trees leaving this daemon, and USER's
    // sends to each tree still in flight (from the check that their agent lives to the message in
    // its log and inbox). A tree leaves only once its sends in flight are through; a later send
    // waits until it has left and is refused as to an agent that is not here (the admin handlers
    // then route it to the tree's runner).
    const leaving = new Map<AgentId, Deferred.Deferred<void>>()
    const sending = new Map<AgentId, number>()
    const sendsDone = new Map<AgentId, Deferred.Deferred<void>>()
    const rootOf = (id: AgentId): AgentId | undefined => {
      let n = tree.get(id)
      for (let i = 0; n !== undefined && n.parent_id !== null && i < 10_000; i++) n = tree.get(n.parent_id)
      return n?.id
    }
    const sent = (root: AgentId) =>
      Effect.sync(() => {
        const left = (sending.get(root) ?? 1) - 1
        if (left > 0) return sending.set(root, left)
        sending.delete(root)
        const done = sendsDone.get(root)
        sendsDone.delete(root)
        if (done !== undefined) Deferred.unsafeDone(done, Effect.void)
      })

    /** A message from USER; wakes the agent. */
    const send = Effect.fn("Orchestrator.send")(function*(args: SendToAgent) {
      const root = rootOf(args.agent)
      if (root === undefined) return yield* router.fromUser(args.agent, args.text, args.sync ?? true, args.id)
      const left = leaving.get(root)
      if (left !== undefined) {
        yield* Deferred.await(left)
        return yield* notFound(args.agent)
      }
      sending.set(root, (sending.get(root) ?? 0) + 1)
      return yield* router.fromUser(args.agent, args.text, args.sync ?? true, args.id).pipe(Effect.ensuring(sent(root)))
    })

    /** Queue a turn with an explicit prompt and wait for it. None: the agent went away first. */
    const runTurn = Effect.fn("Orchestrator.runTurn")(function*(agent: AgentId, text: string) {
      yield* nodeOf(agent)
      yield* records.materialize(agent)
      const done = yield* Deferred.make<TurnOutcome | null>()
      yield* mailbox.queueTurn(agent, { _tag: "prompt", text, done })
      return Option.fromNullable(yield* Deferred.await(done))
    })

    const list = Effect.sync(() => [...tree.current().nodes.values()].map(view))
    /** A page of the live tree in pre-order (AgentTree.page); Left: `after` is not a live agent. */
    const page = (after: AgentId | undefined, limit: number, depth: number | undefined) =>
      Effect.sync(() =>
        Either.map(tree.current().page(after, limit, depth), (p) => ({ nodes: p.nodes.map(view), more: p.more }))
      )
    /**
     * Lookups that cost what they return, not the size of the tree (a request naming one agent):
     * by id, session and name from the Tree's indexes; by id prefix a scan of the ids only.
     */
    const lookup = {
      size: (): number => tree.current().size,
      byId: (id: string): AgentNode | undefined => {
        const n = tree.get(id as AgentId)
        return n === undefined ? undefined : view(n)
      },
      bySession: (session: string): AgentNode | undefined => {
        const n = tree.bySession(session)
        return n === undefined ? undefined : view(n)
      },
      named: (name: string): ReadonlyArray<AgentNode> => tree.named(name).map(view),
      /** Agents whose id starts with `lower` (lower case). */
      prefixed: (lower: string): ReadonlyArray<AgentNode> => {
        const out: Array<AgentNode> = []
        for (const [id, n] of tree.current().nodes) if (id.startsWith(lower)) out.push(view(n))
        return out
      },
      children: (id: AgentId): ReadonlyArray<AgentNode> => tree.current().children(id).map(view)
    } as const
    const get = Effect.fn("Orchestrator.get")(function*(agent: AgentId) {
      return view(yield* nodeOf(agent))
    })
    /** Find by name among the children of `parent` (roots when null/omitted). */
    const findByName = Effect.fn("Orchestrator.findByName")(function*(name: string, parent: AgentId | null = null) {
      const n = tree.current().childNamed(parent, name)
      return n ? view(n) : yield* notFound(name)
    })
    const inspect = Effect.fn("Orchestrator.inspect")(function*(agent: AgentId) {
      return inspection.inspect(agent) ?? (yield* notFound(agent))
    })
    /** `agent list`'s extras per live agent, or only those of `ids` (Inspection.briefs). */
    const briefs = (ids?: Iterable<AgentId>) => Effect.sync(() => inspection.briefs(ids))
    const usage = Effect.fn("Orchestrator.usage")(function*(agent: AgentId) {
      yield* nodeOf(agent)
      return inspection.usageOf(agent)
    })
    /** Live output of one agent (or all when omitted), from subscription on. */
    const output = (agent?: AgentId): Stream.Stream<AgentOutput> =>
      agent === undefined ? bus.stream : bus.stream.pipe(Stream.filter((o) => o.agent_id === agent))
    /** Like `output`, but subscribed when this effect returns (for attach: nothing is missed). */
    const subscribe = (agent?: AgentId) =>
      bus.subscribe.pipe(
        Effect.map((st) => agent === undefined ? st : st.pipe(Stream.filter((o) => o.agent_id === agent)))
      )
    /**
     * The answer to USER's request `request` (a response to USER with that `reply_to`): at once
     * when it was already given, else when it comes. None: the daemon shut down first. Callers
     * bound the wait (`Effect.timeout`); `agent.send {wait}` and `POST …/messages {wait}` use it.
     * The waiter is the human reading it: an answer that comes while it waits is logged read by
     * USER (`user.read`) in the same durable step as the answer.
     */
    const awaitAnswer = Effect.fn("Orchestrator.awaitAnswer")(function*(request: MessageId) {
      const isAnswer = (m: MessageEnvelope) => m.kind === "response" && m.reply_to === request
      return yield* Effect.scoped(Effect.gen(function*() {
        // While this waits, an answer that comes is logged read by USER with the answer itself.
        yield* requests.watch(request)
        const live = yield* bus.subscribe
        const given = mailbox.userMessages().find(isAnswer)
        if (given !== undefined) return Option.some(given)
        return yield* live.pipe(
          Stream.filterMap((o) => o._tag === "MessageToUser" && isAnswer(o.message) ? Option.some(o.message) : Option.none()),
          Stream.runHead
        )
      }))
    })

    /**
     * USER's requests to `agent` whose answer can be waited for (`agent wait`): `open`, not
     * answered yet, and `answered`, each in the order they were sent (answered: answered).
     * Both survive a restart (recovery seeds the open requests and the user outbox).
     */
    const userRequests = (agent: AgentId) =>
      Effect.sync(() => ({
        open: requests.openFromUser(agent),
        answered: mailbox.userMessages(agent).flatMap((m) => (m.kind === "response" && m.reply_to !== null ? [m.reply_to] : []))
      }))

    /** Messages agents sent to USER (replies and send_message("USER")), oldest first. */
    const userMessages = (agent?: AgentId) => Effect.sync(() => mailbox.userMessages(agent))

    /**
     * Terminate an agent and its whole subtree (children first); see Lifecycle.terminate.
     * Returns the terminated ids (the agent first).
     */
    const terminate = Effect.fn("Orchestrator.terminate")(function*(agent: AgentId) {
      yield* nodeOf(agent)
      const ids = yield* lifecycle.terminate(agent)
      // Room freed: queued spawns of the tree may start.
      yield* spawns.pump()
      return ids
    })

    /**
     * Lift an agent's crash-loop quarantine (docs/recovery.md): `agent.resumed` is logged, then
     * the turns that waited run. Returns how many turns were released.
     */
    const resumeAgent = Effect.fn("Orchestrator.resumeAgent")(function*(agent: AgentId) {
      const node = yield* nodeOf(agent)
      if (!mailbox.isParked(agent)) {
        return yield* new InvalidInputError({
          field: "agent",
          message: `${node.name} is not quarantined (state ${inspection.stateOf(agent)}); nothing to resume`
        })
      }
      yield* log.append(node.session_id, makeEvent("agent.resumed", { agent_id: agent }))
      return yield* mailbox.unpark(agent)
    })

    /**
     * Stop the agent's running turn (it ends as failed, with `message`) and drop its live
     * provider session, so that its next turn starts its provider afresh (e.g. in a workspace
     * that no longer exists: a clear error then). False: no turn was running.
     */
    const stopTurn = Effect.fn("Orchestrator.stopTurn")(function*(agent: AgentId, message: string) {
      const node = yield* nodeOf(agent)
      const stopped = yield* scheduler.stopTurn(node.session_id, message)
      yield* mux.drop(node.session_id)
      return stopped
    })

    const agentOfSession = (session: SessionId) => tree.bySession(session)

    const suspend = Effect.fn("Orchestrator.suspend")(function*(session: SessionId) {
      return yield* mux.suspend(session)
    })
    /** Make a session live again (resume from its blob) without running a turn. */
    const resume = Effect.fn("Orchestrator.resume")(function*(session: SessionId) {
      const node = agentOfSession(session)
      if (!node) return yield* new NotFoundError({ kind: "session", id: session, message: `no live agent uses ${session}` })
      yield* scheduler.serialize(session, mux.use(runner.bindingOf(node), () => mux.settled(session)))
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

    /** Shutdown past the grace period: see TurnRunner.stopTurns. The orchestrator runs no turns after. */
    const stopTurns = runner.stopTurns

    /** Graceful shutdown: wait for running turns, then suspend every live session (blobs saved). */
    const suspendAll = Effect.fn("Orchestrator.suspendAll")(function*() {
      yield* turns.awaitIdle
      yield* mux.suspendAll()
    })

    /**
     * Cluster mode: let go of the tree rooted at `root` — its shard is another runner's now, which
     * recovers it from the ports once this returns. Its agents start no new turn (parked) and
     * their running turns finish — for at most `limitMs` when given: turns still running then are
     * interrupted as a kill -9 would (TurnRunner.interruptTurns; the runner the tree goes to
     * re-runs them). Then USER's sends to the tree in flight are let through (later ones are
     * refused: `send`), and in one step the tree, its inboxes, queued turns and pending requests
     * leave this daemon's state with nothing logged (the log keeps every message: the recovery
     * where the tree goes re-injects what was not answered), and its sessions are suspended (a
     * live one's blob saved, as at shutdown). False: the tree is not here.
     */
    const unloadTree = Effect.fn("Orchestrator.unloadTree")(function*(root: AgentId, limitMs?: number) {
      const agents = () => (tree.has(root) ? tree.current().subtree(root) : [])
      if (!tree.has(root)) return false
      const deadline = limitMs === undefined ? undefined : (yield* Clock.currentTimeMillis) + limitMs
      // A wake taken before its agent was parked may still start a turn: wait until none runs.
      for (;;) {
        const nodes = agents()
        for (const n of nodes) mailbox.park(n.id)
        const busy = nodes.filter((n) => turns.isBusy(n.id))
        if (busy.length === 0) break
        // The session's queue: returns after its running turn (and the turns queued before this).
        const ended = Effect.forEach(busy, (n) => scheduler.serialize(n.session_id, Effect.void), { concurrency: "unbounded", discard: true })
        if (deadline === undefined) {
          yield* ended
          continue
        }
        const left = deadline - (yield* Clock.currentTimeMillis)
        if (left > 0 && Option.isSome(yield* Effect.timeout(ended, left).pipe(Effect.option))) continue
        yield* Effect.logWarning(
          `tree ${tree.get(root)?.name ?? root} (${root}): the turn(s) of ${busy.map((n) => n.name).join(", ")} still running after ` +
            `cluster.handover_grace_ms (${limitMs} ms): interrupted as by a kill -9; they re-run on the tree's new runner`
        )
        yield* runner.interruptTurns(new Set(busy.map((n) => n.id)))
      }
      const fiber = yield* Effect.fiberId
      const left = Deferred.unsafeMake<void>(fiber)
      leaving.set(root, left)
      return yield* Effect.gen(function*() {
        const inFlight = yield* Effect.sync(() => {
          if ((sending.get(root) ?? 0) === 0) return undefined
          const done = sendsDone.get(root) ?? Deferred.unsafeMake<void>(fiber)
          sendsDone.set(root, done)
          return done
        })
        if (inFlight !== undefined) yield* Deferred.await(inFlight)
        const { nodes, queued } = yield* Effect.sync(() => {
          const nodes = agents()
          const queued = mailbox.unload(new Set(nodes.map((n) => n.id)))
          for (const n of [...nodes].reverse()) tree.remove(n.id)
          // Sends that waited: the tree is gone from here now.
          Deferred.unsafeDone(left, Effect.void)
          return { nodes, queued }
        })
        // A `runTurn` waiting on a queued prompt: the agent went away (None).
        yield* Effect.forEach(queued, (t) => settle(t, null), { discard: true })
        yield* requests.forget(new Set(nodes.map((n) => n.id)))
        for (const n of nodes) {
          yield* mux.suspend(n.session_id).pipe(
            Effect.catchAllCause((c) => Effect.zipRight(Effect.logWarning(`could not suspend ${n.session_id}; dropped`, c), mux.drop(n.session_id)))
          )
          yield* log.close(n.session_id)
        }
        return true
      }).pipe(Effect.ensuring(Effect.sync(() => {
        leaving.delete(root)
        Deferred.unsafeDone(left, Effect.void)
      })))
    })

    return {
      unloadTree,
      createRoot,
      spawn,
      send,
      runTurn,
      list,
      page,
      lookup,
      get,
      findByName,
      inspect,
      briefs,
      usage,
      output,
      subscribe,
      userMessages,
      userRequests,
      awaitAnswer,
      terminate,
      resumeAgent,
      stopTurn,
      suspend,
      resume,
      deleteSession,
      sessions,
      suspendAll,
      stopTurns,
      awaitIdle: turns.awaitIdle
    } as const
  })
}) {}

/**
 * The agent services over a given Tree layer (the daemon builds the Tree below the workspace
 * registry, which asks it which workspaces are in use). Requires EventLog, SessionStore,
 * ProviderRegistry; optionally MultiplexerConfig (default 4 slots), TurnHooks (default no-op)
 * and ChildWorkspaces (default: `workspace_subdir` refused).
 */
export const layerWithTree = <E = never, R = never>(tree: Layer.Layer<Tree, E, R>) =>
  Orchestrator.Default.pipe(
    Layer.provideMerge(StateSeeding.Default),
    Layer.provideMerge(TurnRunner.Default),
    Layer.provideMerge(ToolHandler.Default),
    Layer.provideMerge(Quotas.Default),
    Layer.provideMerge(Inspection.Default),
    Layer.provideMerge(SpawnQueue.Default),
    Layer.provideMerge(Lifecycle.Default),
    Layer.provideMerge(Router.Default),
    Layer.provideMerge(Finder.Default),
    Layer.provideMerge(Requests.Default),
    Layer.provideMerge(Delivery.Default),
    Layer.provideMerge(Sessions.Default),
    Layer.provideMerge(TurnScheduler.Default),
    Layer.provideMerge(Multiplexer.Default),
    Layer.provideMerge(Mailbox.DefaultWithoutDependencies),
    Layer.provideMerge(Layer.mergeAll(tree, Turns.Default, Activity.Default, OutputBus.layer))
  )

export const layer = layerWithTree(Tree.Default)
