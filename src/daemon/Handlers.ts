// RPC handlers of the admin socket: one per method of Rpcs.ts, each a thin adapter from the
// wire shapes to the Orchestrator / SessionStore / WorkspaceStore, with every error mapped to
// a wire error (NotFound, InvalidInput, Unavailable, Internal; WireErrors.ts) — never a defect.
// Over 300 lines because it is one `AdminRpcs.toLayer` with twenty methods sharing the
// reference resolution and attach/session helpers above them.
import type * as Rpc from "@effect/rpc/Rpc"
import type * as RpcGroup from "@effect/rpc/RpcGroup"
import { Context, Deferred, Duration, Effect, Either, Layer, Option, Stream } from "effect"
import { Orchestrator } from "../agent/Orchestrator.js"
import { forPeople } from "../agent/Prompt.js"
import type { AgentOutput } from "../agent/OutputBus.js"
import { version } from "../version.js"
import type { AgentNode } from "../domain/agent.js"
import { AgentId, type MessageId, newTurnId, type SessionId } from "../domain/ids.js"
import type { Session } from "../domain/session.js"
import { addUsage, zeroWithTurns } from "../domain/usage.js"
import { Durable } from "../storage/Durable.js"
import { EventLog } from "../storage/EventLog.js"
import * as Cursor from "../feed/Cursor.js"
import { EventFeed, type FeedScope } from "../feed/EventFeed.js"
import { ProviderRegistry } from "../provider/ProviderRegistry.js"
import { WorkspaceHistory } from "../sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../sandbox/WorkspaceStore.js"
import { SessionStore } from "../storage/SessionStore.js"
import { DaemonControl } from "./DaemonControl.js"
import { EventTap } from "./EventTap.js"
import { Tracing } from "../telemetry/Tracing.js"
import { isErrorReply } from "../domain/message.js"
import { AdminRpcs, type FeedItem, type InspectResult, Internal, InvalidInput, NotFound, type OutputEvent, type RpcError, type SessionInfo, Unavailable } from "./Rpcs.js"
import { pick } from "./Refs.js"
import { isStorageFailure } from "./Storage.js"
import { type FeedMemory, feedLine } from "./FeedLines.js"
import { Progress } from "./Progress.js"
import { emptyNames, type Names } from "./TranscriptLines.js"
import { fromServiceError, message, type ServiceError } from "./WireErrors.js"
import { makeResolver } from "./Resolver.js"
import { Transcript } from "./Transcript.js"
import { makeSwarmHandlers } from "./SwarmHandlers.js"
import { Quotas } from "../agent/Quotas.js"
import { budgetHandlers } from "./BudgetHandlers.js"
import { Meter } from "../meter/Meter.js"
import { SpawnQueue } from "../agent/SpawnQueue.js"
import { Egress } from "../egress/Egress.js"
import { EgressPolicy, narrowerThan, normaliseAllow } from "../domain/egress.js"
import { InvalidInputError } from "../domain/errors.js"
import type { WorkspaceId } from "../domain/ids.js"
import { WorkspaceError } from "../sandbox/errors.js"

/** Map failures to wire errors, and defects to Internal (the daemon never dies of a request). */
const wire = <A, E extends ServiceError, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, RpcError, R> =>
  effect.pipe(
    Effect.mapError(fromServiceError),
    Effect.catchAllDefect((d) => Effect.logError("handler defect", d).pipe(Effect.zipRight(Effect.fail(new Internal({ message: message(d) })))))
  )


const learnName = (names: Names, id: string, name: string, session_id: string) => {
  const a = { id, name, session_id }
  names.byAgent.set(id, a)
  names.bySession.set(session_id, a)
}

const clip = (s: string, n = 120) => {
  const one = s.replace(/\r?\n/g, " ↵ ")
  return one.length <= n ? one : `${one.slice(0, n - 1)}…`
}

const shortJson = (u: unknown) => {
  try {
    return clip(JSON.stringify(u) ?? "", 160)
  } catch {
    return "?"
  }
}

/** USER's request `ref` to agent `name` (a full id or unique prefix) among `ids`. */
const pickRequest = (name: string, ref: string, ids: ReadonlyArray<MessageId>): Effect.Effect<MessageId, RpcError> => {
  const found = pick("message", ref, ids.map((id) => ({ id, names: [], label: `request to ${name}`, value: id })))
  if (Either.isRight(found)) return Effect.succeed(found.right)
  return Effect.fail(found.left._tag === "NotFound"
    ? new NotFound({ kind: "message", id: ref, message: `no request "${ref}" from USER to ${name}` })
    : found.left)
}

const makeHandlers = Effect.gen(function*() {
  const control = yield* DaemonControl
  const orchestrator = yield* Orchestrator
  const store = yield* SessionStore
  const log = yield* EventLog
  const tap = yield* EventTap
  const transcript = yield* Transcript
  const workspaces = yield* WorkspaceStore
  const history = yield* WorkspaceHistory
  const providers = yield* ProviderRegistry
  const defaultProvider = control.settings.defaultProvider
  const storage = control.storage

  /**
   * A mutation runs to completion even if its client disconnects meanwhile (an interrupted
   * create or terminate would leave half a change behind). In read-only mode (a full or failing
   * disk, Storage.ts) it is refused before anything runs; a storage failure turns read-only.
   */
  const mutation = <A, E extends ServiceError, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, RpcError, R> =>
    Effect.suspend(() =>
      storage.readOnly()
        ? Effect.fail(new Unavailable({ message: storage.refusal() }))
        : Effect.uninterruptible(wire(effect)).pipe(
          Effect.tapError((e) =>
            Effect.sync(() => {
              if (e._tag === "Unavailable" && isStorageFailure(e.message)) storage.enterReadOnly(e.message)
            })
          )
        )
    )
  const tracing = yield* Tracing

  /** With tracing on, a user's request is the root span of its trace (src/telemetry/Tracing.ts). */
  const request = (method: string, attributes: Record<string, unknown>) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    tracing.enabled
      ? Effect.withSpan(effect, `user.${method}`, { root: true, kind: "server", attributes: { "rpc.method": method, ...attributes } })
      : effect
  const meter = yield* Meter
  const spawnQueue = yield* SpawnQueue
  const quotas = yield* Quotas

  yield* transcript.learn(yield* orchestrator.list)
  const swarmHandlers = yield* makeSwarmHandlers({ wire, mutation })

  const resolver = yield* makeResolver
  const feed = yield* EventFeed
  const egress = yield* Egress

  /** Checked hosts/presets of a request (InvalidInputError naming the bad one; nothing changed). */
  const egressAsked = (hosts: ReadonlyArray<string> | undefined, presets: ReadonlyArray<string> | undefined) =>
    Either.match(normaliseAllow(hosts ?? [], presets ?? [], egress.presets), {
      onLeft: (m) => Effect.fail(new InvalidInputError({ field: "allow", message: m })),
      onRight: (a) => Effect.succeed(a)
    })

  /** Add to a workspace's egress policy: never wider than its parent's. */
  const allowIn = (id: WorkspaceId, add: { readonly hosts: ReadonlyArray<string>; readonly presets: ReadonlyArray<string> }) =>
    Effect.gen(function*() {
      const chain = yield* workspaces.chain(id)
      const parent = chain[1]
      if (parent !== undefined) {
        const narrow = narrowerThan(parent.egress, add, egress.presets)
        if (Either.isLeft(narrow)) return yield* new WorkspaceError({ workspace_id: id, reason: "wider-than-parent", message: narrow.left })
      }
      return yield* workspaces.updateEgress(id, (p) =>
        Either.right(new EgressPolicy({
          ...p,
          hosts: [...p.hosts, ...add.hosts.filter((h) => !p.hosts.includes(h))],
          presets: [...p.presets, ...add.presets.filter((n) => !p.presets.includes(n))],
          dismissed: p.dismissed.filter((h) => !add.hosts.includes(h)),
          asked: p.asked.filter((a) => a.kind !== "host" || !add.hosts.includes(a.host))
        })))
    })
  const progress = yield* Progress

  /**
   * The answer to USER's request `message_id` to agent `name`: at once when it was given, else
   * when it comes, within `timeout` s (null: no limit). Interruptible: a client that goes away
   * stops waiting; the request stays open (`agent wait` waits again).
   */
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
    })

  /** The agent that owns a session, from the tree, else from its event log (`agent.created`). */
  const ownerOf = (session: SessionId, tree: ReadonlyArray<AgentNode>) =>
    Effect.gen(function*() {
      const node = tree.find((n) => n.session_id === session)
      if (node) return Option.some({ id: node.id, name: node.name })
      const created = yield* log.read(session).pipe(
        Stream.filter((e) => e.event === "agent.created"),
        Stream.take(1),
        Stream.runHead,
        Effect.orElseSucceed(() => Option.none())
      )
      return Option.flatMap(created, (e) => e.event === "agent.created" ? Option.some({ id: e.data.agent_id, name: e.data.name }) : Option.none())
    })

  const sessionInfo = (s: Session, tree: ReadonlyArray<AgentNode>): Effect.Effect<SessionInfo> =>
    Effect.map(ownerOf(s.id, tree), (owner) => ({
      id: s.id,
      state: s.state,
      provider_name: s.provider_name,
      model: s.model,
      created_at: s.created_at,
      suspended_at: s.suspended_at,
      agent_id: Option.match(owner, { onNone: () => null, onSome: (o) => AgentId.make(o.id) }),
      agent_name: Option.match(owner, { onNone: () => null, onSome: (o) => o.name })
    }))

  const loadInfo = (session: SessionId) =>
    Effect.gen(function*() {
      const s = yield* store.load(session)
      return yield* sessionInfo(s, yield* orchestrator.list)
    })

  /** `agent.inspect` of an agent that is not in the tree any more: what its event log says. */
  const inspectGone = (node: AgentNode): Effect.Effect<InspectResult, RpcError> =>
    Effect.gen(function*() {
      const all = yield* resolver.agents(true)
      const entries = yield* log.read(node.session_id).pipe(Stream.runCollect, Effect.mapError(fromServiceError))
      let usage = zeroWithTurns
      const turns = new Map<string, { prompt: string; response: string; error: string | null }>()
      const messages: Array<InspectResult["recent_messages"][number]> = []
      for (const e of entries) {
        if (e.event === "usage") usage = { ...addUsage(usage, e.data), turns: usage.turns }
        else if (e.event === "turn.start") turns.set(e.data.turn_id, { prompt: clip(e.data.prompt), response: "", error: null })
        else if (e.event === "turn.complete") {
          usage = { ...usage, turns: usage.turns + 1 }
          const t = turns.get(e.data.turn_id)
          if (t) t.response = clip(e.data.response)
        } else if (e.event === "provider.error" && e.data.turn_id !== null) {
          const t = turns.get(e.data.turn_id)
          if (t) t.error = clip(e.data.message)
        } else if (e.event === "message.enqueued" && e.data.recipient === node.id) {
          const peer = e.data.sender === "USER" || e.data.sender === "SYSTEM" ? e.data.sender : e.data.sender_name ?? nameOf(e.data.sender, all)
          messages.push({ direction: "in", peer, kind: e.data.kind, message_id: e.data.id, text: clip(e.data.payload) })
        }
      }
      const session = yield* store.load(node.session_id).pipe(Effect.flatMap((s) => sessionInfo(s, [])), Effect.option)
      return {
        agent: node,
        session: Option.getOrNull(session),
        parent: node.parent_id === null ? null : nameOf(node.parent_id, all),
        children: all.filter((n) => n.parent_id === node.id),
        inbox: 0,
        queued_turns: 0,
        waiting_for_replies: 0,
        usage: { own: usage, subtree: usage },
        recent_turns: [...turns].slice(-3).map(([turn_id, t]) => ({ turn_id, ...t })),
        recent_messages: messages.slice(-5)
      }
    })

  /** What `events.follow` streams: its scope, start, time filter, and the names known so far. */
  const followScope = (p: {
    readonly agent?: string | undefined
    readonly tree?: string | undefined
    readonly from?: string | undefined
    readonly after?: string | undefined
  }) =>
    Effect.gen(function*() {
      if (p.agent !== undefined && p.tree !== undefined) {
        return yield* new InvalidInput({ field: "tree", message: "give an agent or a tree, not both" })
      }
      const scope: FeedScope = p.tree !== undefined
        ? { _tag: "tree", agent: (yield* resolver.agent(p.tree, { terminated: true })).node.id }
        : p.agent !== undefined
        ? { _tag: "agent", agent: (yield* resolver.agent(p.agent, { terminated: true })).node.session_id }
        : { _tag: "all" }
      const from = p.from === undefined || p.from === "start" ? Cursor.empty : p.from === "end" ? "end" as const : Cursor.decode(p.from)
      if (from === undefined) {
        return yield* new InvalidInput({
          field: "from",
          message: `not a position in the event stream: ${JSON.stringify(p.from)} (expected "start", "end" or the cursor of an item)`
        })
      }
      const after = p.after === undefined ? undefined : Date.parse(p.after)
      if (after !== undefined && Number.isNaN(after)) {
        return yield* new InvalidInput({ field: "after", message: `not a time: ${JSON.stringify(p.after)} (expected an ISO 8601 time)` })
      }
      const names = emptyNames()
      for (const n of yield* resolver.agents(true)) learnName(names, n.id, n.name, n.session_id)
      return { scope, from, after, names }
    })

  const nameOf = (id: string, tree: ReadonlyArray<AgentNode>) => tree.find((n) => n.id === id)?.name ?? id.slice(0, 8)

  const outputEvent = (node: AgentNode) => (o: AgentOutput): Effect.Effect<Option.Option<OutputEvent>> =>
    Effect.gen(function*() {
      const ts = new Date().toISOString()
      const base = { ts, agent_id: node.id }
      switch (o._tag) {
        case "TurnStarted":
          return Option.some({ ...base, kind: "turn.start" as const, from: node.name, text: clip(forPeople(o.prompt)) })
        case "Text":
          return Option.some({ ...base, kind: "text" as const, from: node.name, text: o.text })
        case "ToolCalled":
          return Option.some({
            ...base,
            kind: "tool" as const,
            text: `${o.tool}(${shortJson(o.arguments)}) → ${o.is_error ? "error: " : ""}${shortJson(o.result)}`
          })
        case "TurnCompleted":
          return Option.some(
            o.error === null
              ? { ...base, kind: "turn.complete" as const, text: o.response }
              : { ...base, kind: "error" as const, text: o.error }
          )
        case "MessageToUser": {
          const tree = yield* orchestrator.list
          return Option.some({
            ...base,
            kind: "message" as const,
            from: nameOf(o.message.sender, tree),
            to: "USER",
            text: o.message.payload
          })
        }
      }
    })

  /** What the agent hears (messages from other agents) and its end, from the event tap. */
  const heard = (node: AgentNode): Stream.Stream<OutputEvent> =>
    Stream.unwrapScoped(Effect.map(tap.subscribe, (q) =>
      Stream.fromQueue(q).pipe(
        Stream.filter((e) => e.session_id === node.session_id),
        Stream.mapEffect((e): Effect.Effect<Option.Option<OutputEvent>> =>
          Effect.gen(function*() {
            if (e.event === "agent.terminated" && e.data.agent_id === node.id) {
              return Option.some({ ts: e.ts, agent_id: node.id, kind: "state" as const, text: `${node.name} terminated` })
            }
            if (e.event === "message.enqueued" && e.data.recipient === node.id && e.data.sender !== "USER") {
              const tree = yield* orchestrator.list
              return Option.some({
                ts: e.ts,
                agent_id: node.id,
                kind: "message" as const,
                from: e.data.sender === "SYSTEM" ? "SYSTEM" : nameOf(e.data.sender, tree),
                to: node.name,
                text: e.data.payload
              })
            }
            return Option.none()
          })),
        Stream.filterMap((x) => x)
      )))

  const stopSoon = Deferred.succeed(control.stop, undefined).pipe(Effect.delay("30 millis"), Effect.forkDaemon)

  return AdminRpcs.of({
    ...swarmHandlers,
    "daemon.status": () =>
      wire(Effect.gen(function*() {
        const agents = yield* orchestrator.list
        const sessions = yield* store.scan
        return {
          pid: control.pid,
          version,
          home: control.settings.home,
          socket: control.socket,
          started_at: control.startedAt.toISOString(),
          uptime_ms: Date.now() - control.startedAt.getTime(),
          slots: control.settings.slots,
          grace_ms: control.settings.graceMs,
          agents: agents.length,
          sessions: sessions.length,
          connections: control.connections.open,
          storage: storage.status()
        }
      })),

    // Answer first, then stop: the shutdown closes this very connection.
    "daemon.stop": () => Effect.as(stopSoon, { pid: control.pid, stopping: true }),

    "agent.create": (p) =>
      mutation(Effect.gen(function*() {
        const provider = p.provider ?? defaultProvider
        // Refuse an unknown provider, or one whose CLI binary is missing, now — not at the
        // agent's first turn.
        const factory = yield* providers.get(provider)
        if (factory.check !== undefined) yield* factory.check
        if (p.repo !== undefined && p.workspace_id !== undefined) {
          return yield* new InvalidInput({ field: "repo", message: "give a workspace or a repository (--repo), not both" })
        }
        if (p.ref !== undefined && p.repo === undefined) return yield* new InvalidInput({ field: "ref", message: "--ref goes with --repo" })
        const name = p.name ?? `agent-${Math.random().toString(16).slice(2, 6)}`
        const allow = yield* egressAsked(p.allow_hosts, p.allow_presets)
        // A repository workspace of its own (named after the agent when that name is free, so its
        // branch is substrat/<agent>); removed again when the agent cannot be created.
        const repoWs = p.repo === undefined ? undefined : yield* Effect.gen(function*() {
          const taken = (yield* workspaces.list()).some((w) => w.name === name)
          return yield* workspaces.create({ name: taken ? null : name, default_for: name, repo: { path: p.repo!, ...(p.ref === undefined ? {} : { ref: p.ref }) } })
        })
        const workspace_id = repoWs !== undefined ? repoWs.id : p.workspace_id === undefined ? undefined : yield* resolver.workspaceId(p.workspace_id)
        if (workspace_id !== undefined && (allow.hosts.length > 0 || allow.presets.length > 0)) {
          const parent = (yield* workspaces.chain(workspace_id))[1]
          const narrow = parent === undefined ? Either.right(undefined) : narrowerThan(parent.egress, allow, egress.presets)
          if (Either.isLeft(narrow)) return yield* new WorkspaceError({ workspace_id, reason: "wider-than-parent", message: narrow.left })
        }
        const node = yield* orchestrator.createRoot({
          name,
          instructions: p.instructions ?? "",
          provider,
          ...(p.role === undefined ? {} : { role: p.role }),
          ...(workspace_id === undefined ? {} : { workspace_id })
        }).pipe(Effect.tapError(() => repoWs === undefined ? Effect.void : workspaces.delete(repoWs.id, { force: true }).pipe(Effect.ignore)))
        if (p.budget !== undefined) yield* meter.setBudget(node.id, p.budget)
        if (allow.hosts.length > 0 || allow.presets.length > 0) {
          if (node.workspace_id === null) return yield* new InvalidInputError({ field: "allow", message: "the agent has no workspace to allow egress in" })
          yield* allowIn(node.workspace_id, allow)
        }
        if (p.caps !== undefined) {
          yield* spawnQueue.setCaps(node.id, {
            max_depth: p.caps.max_depth ?? null,
            max_children: p.caps.max_children ?? null,
            max_live: p.caps.max_live ?? null,
            ...(p.caps.quotas === undefined ? {} : { quotas: p.caps.quotas })
          })
        }
        return node
      }).pipe(request("agent.create", { "gen_ai.provider.name": p.provider ?? defaultProvider }))),

    ...budgetHandlers({ meter, egress, spawns: spawnQueue, quotas, orchestrator, resolve: (ref) => resolver.liveAgent(ref), wire, mutation }),

    "agent.list": (p) =>
      wire(Effect.map(Effect.zip(resolver.agents(p?.all ?? false), orchestrator.briefs), ([agents, details]) => ({ agents, activity: progress.all(), details }))),

    "agent.send": (p) =>
      Effect.gen(function*() {
        const sync = p.sync ?? true
        if (p.wait === true && !sync) {
          return yield* new InvalidInput({ field: "wait", message: "a notification (sync=false) gets no answer to wait for" })
        }
        const sent = yield* mutation(Effect.gen(function*() {
          const node = yield* resolver.liveAgent(p.agent)
          yield* Effect.annotateCurrentSpan({ "gen_ai.agent.id": node.id, "gen_ai.agent.name": node.name })
          const r = yield* orchestrator.send({ agent: node.id, text: p.text, sync })
          return { message_id: r.message_id, agent_id: node.id, name: node.name }
        }).pipe(request("agent.send", { "substrat.agent.ref": p.agent })))
        const result = { message_id: sent.message_id, agent_id: sent.agent_id }
        if (p.wait !== true) return result
        return { ...result, answer: yield* answerOf(sent.name, sent.message_id, p.timeout_s ?? null) }
      }),

    "agent.wait": (p) =>
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
      }),

    "agent.attach": (p) =>
      Stream.unwrap(wire(Effect.map(resolver.liveAgent(p.agent), (node) =>
        Stream.merge(
          orchestrator.output(node.id).pipe(Stream.mapEffect(outputEvent(node)), Stream.filterMap((x) => x)),
          heard(node)
        ).pipe(Stream.takeUntil((e) => e.kind === "state" && e.text.endsWith("terminated")))))),

    "agent.inspect": (p) =>
      wire(Effect.gen(function*() {
        const { live, node } = yield* resolver.agent(p.agent, { terminated: true })
        if (!live) return yield* inspectGone(node)
        const i = yield* orchestrator.inspect(node.id)
        const tree = yield* orchestrator.list
        const session = yield* store.load(node.session_id).pipe(
          Effect.flatMap((s) => sessionInfo(s, tree)),
          Effect.option
        )
        return {
          agent: node,
          session: Option.getOrNull(session),
          parent: i.parent,
          children: tree.filter((n) => n.parent_id === node.id),
          inbox: i.pending_inbox,
          queued_turns: i.queued_turns,
          waiting_for_replies: i.waiting_for_replies,
          usage: { own: i.usage.own, subtree: i.usage.subtree },
          recent_turns: i.recent_turns,
          recent_messages: i.recent_messages,
          activity: progress.of(node.id) ?? null,
          ...(quotas.enabled ? { quotas: quotas.view(node.id) } : {})
        }
      })),

    "agent.terminate": (p) =>
      mutation(Effect.gen(function*() {
        const node = yield* resolver.liveAgent(p.agent)
        const ids = yield* orchestrator.terminate(node.id)
        return { agent_id: node.id, terminated: ids }
      })),

    "agent.resume": (p) =>
      mutation(Effect.gen(function*() {
        const node = yield* resolver.liveAgent(p.agent)
        const turns = yield* orchestrator.resumeAgent(node.id)
        return { agent_id: node.id, turns }
      })),

    "agent.logs": (p) =>
      Stream.unwrap(wire(Effect.map(
        resolver.agent(p.agent, { terminated: true }),
        (a) => transcript.lines(a.node.session_id, p.follow ?? false)
      ))),

    "events.follow": (p) =>
      Stream.unwrap(wire(Effect.map(followScope(p), ({ scope, from, after, names }) => {
        let live = false
        const said: FeedMemory = new Map()
        const items = feed.stream({ scope, from }).pipe(
          Stream.mapError(fromServiceError),
          Stream.filterMap((item): Option.Option<FeedItem> => {
            if (item._tag === "Live") {
              live = true
              return Option.some({ kind: "live", cursor: Cursor.encode(item.cursor) })
            }
            const e = item.entry
            if (e.event === "agent.created") learnName(names, e.data.agent_id, e.data.name, e.session_id)
            if (!live && after !== undefined && Date.parse(e.ts) < after) return Option.none()
            const { agent, text } = feedLine(e, names, said)
            return Option.some({
              kind: "event",
              cursor: Cursor.encode(item.position),
              session_id: item.session,
              line: item.line,
              ts: e.ts,
              event: e.event,
              agent,
              text,
              entry: e
            })
          })
        )
        return p.follow === true ? items : items.pipe(Stream.takeUntil((i) => i.kind === "live"))
      }))),

    "session.list": () =>
      wire(Effect.gen(function*() {
        const tree = yield* orchestrator.list
        const all = yield* store.scan
        const sessions = yield* Effect.forEach(
          [...all].sort((a, b) => a.created_at.localeCompare(b.created_at)),
          (s) => sessionInfo(s, tree)
        )
        return { sessions }
      })),

    "session.suspend": (p) =>
      mutation(Effect.gen(function*() {
        const session = yield* resolver.session(p.session)
        yield* orchestrator.suspend(session)
        return yield* loadInfo(session)
      })),

    "session.resume": (p) =>
      mutation(Effect.gen(function*() {
        const session = yield* resolver.session(p.session)
        yield* orchestrator.resume(session)
        return yield* loadInfo(session)
      })),

    "session.delete": (p) =>
      mutation(Effect.gen(function*() {
        const session = yield* resolver.session(p.session)
        yield* orchestrator.deleteSession(session)
        return { session, deleted: true }
      })),

    "workspace.create": (p) =>
      mutation(Effect.gen(function*() {
        const parent = p.parent === undefined ? undefined : yield* resolver.workspaceId(p.parent)
        const given = p.allow_hosts !== undefined || p.allow_presets !== undefined
        const allow = yield* egressAsked(p.allow_hosts, p.allow_presets)
        return yield* workspaces.create({
          ...(p.name === undefined ? {} : { name: p.name }),
          ...(parent === undefined ? {} : { parent }),
          ...(p.network === undefined ? {} : { network_access: p.network }),
          ...(p.repo === undefined ? {} : { repo: { path: p.repo, ...(p.ref === undefined ? {} : { ref: p.ref }) } }),
          ...(given ? { egress: { ...allow, table: egress.presets } } : {})
        })
      })),

    "workspace.merge": (p) =>
      mutation(Effect.gen(function*() {
        const ws = yield* resolver.workspaceId(p.workspace)
        const spec = yield* workspaces.get(ws)
        const r = yield* history.merge(ws, {
          ...(p.into === undefined ? {} : { into: p.into }),
          ...(p.squash === undefined ? {} : { squash: p.squash }),
          ...(p.message === undefined ? {} : { message: p.message })
        })
        return { workspace: ws, branch: spec.repo?.branch ?? "", ...r }
      })),

    "workspace.export": (p) =>
      wire(Effect.gen(function*() {
        const ws = yield* resolver.workspaceId(p.workspace)
        return { workspace: ws, patches: yield* history.exportPatches(ws) }
      })),

    "workspace.allow": (p) =>
      mutation(Effect.gen(function*() {
        const id = yield* resolver.workspaceId(p.workspace)
        const add = yield* egressAsked(p.hosts, p.presets)
        if (add.hosts.length === 0 && add.presets.length === 0) {
          return yield* new InvalidInputError({ field: "allow", message: "give at least one host or preset to allow" })
        }
        return yield* allowIn(id, add)
      })),

    "workspace.deny": (p) =>
      mutation(Effect.gen(function*() {
        const id = yield* resolver.workspaceId(p.workspace)
        const drop = yield* egressAsked(p.hosts, p.presets)
        if (drop.hosts.length === 0 && drop.presets.length === 0) {
          return yield* new InvalidInputError({ field: "deny", message: "give at least one host or preset to remove" })
        }
        return yield* workspaces.updateEgress(id, (pol) => {
          const missing = [...drop.hosts.filter((h) => !pol.hosts.includes(h)), ...drop.presets.filter((n) => !pol.presets.includes(n)).map((n) => `preset ${n}`)]
          if (missing.length > 0) return Either.left(`not in the egress policy: ${missing.join(", ")} (it allows: ${[...pol.presets.map((n) => `preset ${n}`), ...pol.hosts].join(", ") || "nothing"})`)
          return Either.right(new EgressPolicy({
            ...pol,
            hosts: pol.hosts.filter((h) => !drop.hosts.includes(h)),
            presets: pol.presets.filter((n) => !drop.presets.includes(n))
          }))
        }).pipe(Effect.mapError((e) => e._tag === "WorkspaceError" && e.reason === "wider-than-parent" ? new InvalidInputError({ field: "deny", message: e.message }) : e))
      })),

    "workspace.list": () => wire(Effect.map(workspaces.list(), (ws) => ({ workspaces: ws }))),

    "workspace.link": (p) =>
      mutation(Effect.flatMap(
        resolver.workspaceId(p.workspace),
        (id) => workspaces.link(id, { host_path: p.host_path, mount_path: p.mount_path, mode: p.mode ?? "ro" })
      )),

    "workspace.delete": (p) =>
      mutation(Effect.gen(function*() {
        const id = yield* resolver.workspaceId(p.workspace)
        if (p.force === true) {
          // Agents running in it (or in a workspace below it): their turns are stopped first, so
          // no sandbox runs in a directory being removed.
          const all = yield* workspaces.list()
          const gone = new Set([id])
          for (let grew = true; grew;) {
            grew = false
            for (const w of all) {
              if (w.parent_id !== null && gone.has(w.parent_id) && !gone.has(w.id)) {
                gone.add(w.id)
                grew = true
              }
            }
          }
          for (const n of yield* orchestrator.list) {
            if (n.workspace_id !== null && gone.has(n.workspace_id)) {
              yield* orchestrator.stopTurn(n.id, `workspace ${n.workspace_id} is being deleted (workspace delete --force)`)
            }
          }
        }
        const r = yield* workspaces.delete(id, { force: p.force ?? false })
        return { workspace: id, deleted: true, removed: r.deleted }
      })),

    "workspace.diff": (p) =>
      wire(Effect.gen(function*() {
        const ws = yield* resolver.workspaceId(p.workspace)
        if (p.turn === undefined) {
          const paths = yield* history.pendingChanges(ws)
          const diff = yield* history.diff(ws)
          return { workspace: ws, turn: null, paths, diff }
        }
        const turn = yield* resolver.turn(ws, p.turn)
        const paths = yield* history.changes(ws, turn)
        const diff = yield* history.diff(ws, turn)
        return { workspace: ws, turn, paths, diff }
      })),

    "workspace.revert": (p) =>
      mutation(Effect.gen(function*() {
        const ws = yield* resolver.workspaceId(p.workspace)
        const turn = yield* resolver.turn(ws, p.turn)
        const r = yield* history.revert(ws, turn, { agent: "USER" })
        return { workspace: ws, turn, commit: r.commit, paths: r.paths }
      })),

    "workspace.record": (p) =>
      mutation(Effect.gen(function*() {
        yield* workspaces.get(p.workspace)
        const turn = newTurnId()
        const r = yield* history.commitTurn(p.workspace, { agent: p.author, turnId: turn, summary: p.summary ?? `${p.author}: changes made by hand` })
        return { workspace: p.workspace, turn, commit: r.commit, paths: r.paths }
      })),

    "workspace.log": (p) =>
      wire(Effect.gen(function*() {
        const ws = yield* resolver.workspaceId(p.workspace)
        const turns = yield* history.log(ws, { limit: Math.max(1, Math.min(10_000, Math.floor(p.limit ?? 100))) })
        return { workspace: ws, turns }
      }))
  })
})

/**
 * The handlers as the RpcServer's context. Each handler has its services from `makeHandlers`;
 * what `toHandlersContext` captures for running them is only the services a handler still needs
 * at run time (the annotation below lists them: Durable, for the swarm's), so the per-request
 * runtime RpcServer builds merges a small context, not the daemon's whole one.
 */
export const HandlersLive = Layer.scopedContext(Effect.flatMap(makeHandlers, (handlers) => {
  const handlersContext: Effect.Effect<Context.Context<Rpc.ToHandler<RpcGroup.Rpcs<typeof AdminRpcs>>>, never, Durable> =
    AdminRpcs.toHandlersContext(handlers)
  return Effect.mapInputContext(handlersContext, (context: Context.Context<Durable>) => Context.pick(Durable)(context))
}))
