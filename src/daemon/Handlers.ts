// RPC handlers of the admin socket: one per method of Rpcs.ts, each a thin adapter from the
// wire shapes to the Orchestrator / SessionStore / WorkspaceStore, with every error mapped to
// a wire error (NotFound, InvalidInput, Unavailable, Internal; WireErrors.ts) — never a defect.
// Over 300 lines because it is one `AdminRpcs.toLayer` with twenty methods sharing the
// reference resolution and attach/session helpers above them.
import { Deferred, Effect, Option, Stream } from "effect"
import { Orchestrator } from "../agent/Orchestrator.js"
import type { AgentOutput } from "../agent/OutputBus.js"
import { version } from "../version.js"
import type { AgentNode } from "../domain/agent.js"
import { AgentId, type SessionId } from "../domain/ids.js"
import type { Session } from "../domain/session.js"
import { EventLog } from "../storage/EventLog.js"
import { ProviderRegistry } from "../provider/ProviderRegistry.js"
import { WorkspaceHistory } from "../sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../sandbox/WorkspaceStore.js"
import { SessionStore } from "../storage/SessionStore.js"
import { DaemonControl } from "./DaemonControl.js"
import { EventTap } from "./EventTap.js"
import { Tracing } from "../telemetry/Tracing.js"
import { AdminRpcs, Internal, InvalidInput, NotFound, type OutputEvent, type RpcError, type SessionInfo, Unavailable } from "./Rpcs.js"
import { isStorageFailure } from "./Storage.js"
import { fromServiceError, message, type ServiceError } from "./WireErrors.js"
import { Transcript } from "./Transcript.js"
import { makeSwarmHandlers } from "./SwarmHandlers.js"

/** Map failures to wire errors, and defects to Internal (the daemon never dies of a request). */
const wire = <A, E extends ServiceError, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, RpcError, R> =>
  effect.pipe(
    Effect.mapError(fromServiceError),
    Effect.catchAllDefect((d) => Effect.logError("handler defect", d).pipe(Effect.zipRight(Effect.fail(new Internal({ message: message(d) })))))
  )


const isUuid = (s: string) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(s)

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

export const HandlersLive = AdminRpcs.toLayer(Effect.gen(function*() {
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

  yield* transcript.learn(yield* orchestrator.list)
  const swarmHandlers = yield* makeSwarmHandlers({ wire, mutation })

  /** An agent by id or by a name that designates exactly one live agent. */
  const resolve = (ref: string): Effect.Effect<AgentNode, RpcError> =>
    Effect.gen(function*() {
      const all = yield* orchestrator.list
      const byId = all.find((n) => n.id === ref)
      if (byId) return byId
      const named = all.filter((n) => n.name === ref)
      if (named.length === 1) return named[0]!
      if (named.length > 1) {
        return yield* new InvalidInput({
          field: "agent",
          message: `${named.length} agents are named "${ref}"; use an id: ${named.map((n) => n.id).join(", ")}`
        })
      }
      return yield* new NotFound({ kind: "agent", id: ref, message: `no live agent ${ref}` })
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

  /** A session of a terminated/unrecovered agent is still found through its event log. */
  const sessionOfRef = (ref: string): Effect.Effect<SessionId, RpcError> =>
    resolve(ref).pipe(
      Effect.map((n) => n.session_id),
      Effect.catchTag("NotFound", (nf) =>
        Effect.gen(function*() {
          const all = yield* wire(store.scan)
          for (const s of all) {
            if (s.id === ref) return s.id
            const owner = yield* ownerOf(s.id, [])
            if (Option.isSome(owner) && (owner.value.id === ref || (!isUuid(ref) && owner.value.name === ref))) return s.id
          }
          return yield* nf
        }))
    )

  const nameOf = (id: string, tree: ReadonlyArray<AgentNode>) => tree.find((n) => n.id === id)?.name ?? id.slice(0, 8)

  const outputEvent = (node: AgentNode) => (o: AgentOutput): Effect.Effect<Option.Option<OutputEvent>> =>
    Effect.gen(function*() {
      const ts = new Date().toISOString()
      const base = { ts, agent_id: node.id }
      switch (o._tag) {
        case "TurnStarted":
          return Option.some({ ...base, kind: "turn.start" as const, text: `${node.name} turn: ${clip(o.prompt)}` })
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

  return {
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
        if (p.workspace_id !== undefined) yield* workspaces.get(p.workspace_id)
        return yield* orchestrator.createRoot({
          name: p.name ?? `agent-${Math.random().toString(16).slice(2, 6)}`,
          instructions: p.instructions ?? "",
          provider,
          ...(p.role === undefined ? {} : { role: p.role }),
          ...(p.workspace_id === undefined ? {} : { workspace_id: p.workspace_id })
        })
      }).pipe(request("agent.create", { "gen_ai.provider.name": p.provider ?? defaultProvider }))),

    "agent.list": () => wire(Effect.map(orchestrator.list, (agents) => ({ agents }))),

    "agent.send": (p) =>
      mutation(Effect.gen(function*() {
        const node = yield* resolve(p.agent)
        yield* Effect.annotateCurrentSpan({ "gen_ai.agent.id": node.id, "gen_ai.agent.name": node.name })
        const r = yield* orchestrator.send({ agent: node.id, text: p.text, sync: p.sync ?? true })
        return { message_id: r.message_id, agent_id: node.id }
      }).pipe(request("agent.send", { "substrat.agent.ref": p.agent }))),

    "agent.attach": (p) =>
      Stream.unwrap(wire(Effect.map(resolve(p.agent), (node) =>
        Stream.merge(
          orchestrator.output(node.id).pipe(Stream.mapEffect(outputEvent(node)), Stream.filterMap((x) => x)),
          heard(node)
        ).pipe(Stream.takeUntil((e) => e.kind === "state" && e.text.endsWith("terminated")))))),

    "agent.inspect": (p) =>
      wire(Effect.gen(function*() {
        const node = yield* resolve(p.agent)
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
          recent_messages: i.recent_messages
        }
      })),

    "agent.terminate": (p) =>
      mutation(Effect.gen(function*() {
        const node = yield* resolve(p.agent)
        const ids = yield* orchestrator.terminate(node.id)
        return { agent_id: node.id, terminated: ids }
      })),

    "agent.resume": (p) =>
      mutation(Effect.gen(function*() {
        const node = yield* resolve(p.agent)
        const turns = yield* orchestrator.resumeAgent(node.id)
        return { agent_id: node.id, turns }
      })),

    "agent.logs": (p) =>
      Stream.unwrap(wire(Effect.map(sessionOfRef(p.agent), (session) => transcript.lines(session, p.follow ?? false)))),

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
        yield* store.load(p.session)
        yield* orchestrator.suspend(p.session)
        return yield* loadInfo(p.session)
      })),

    "session.resume": (p) =>
      mutation(Effect.gen(function*() {
        yield* store.load(p.session)
        yield* orchestrator.resume(p.session)
        return yield* loadInfo(p.session)
      })),

    "session.delete": (p) =>
      mutation(Effect.gen(function*() {
        yield* store.load(p.session)
        yield* orchestrator.deleteSession(p.session)
        return { session: p.session, deleted: true }
      })),

    "workspace.create": (p) =>
      mutation(workspaces.create({
        ...(p.name === undefined ? {} : { name: p.name }),
        ...(p.parent === undefined ? {} : { parent: p.parent }),
        ...(p.network === undefined ? {} : { network_access: p.network })
      })),

    "workspace.list": () => wire(Effect.map(workspaces.list(), (ws) => ({ workspaces: ws }))),

    "workspace.link": (p) =>
      mutation(workspaces.link(p.workspace, { host_path: p.host_path, mount_path: p.mount_path, mode: p.mode ?? "ro" })),

    "workspace.delete": (p) =>
      mutation(Effect.gen(function*() {
        if (p.force === true) {
          // Agents running in it (or in a workspace below it): their turns are stopped first, so
          // no sandbox runs in a directory being removed.
          yield* workspaces.get(p.workspace)
          const all = yield* workspaces.list()
          const gone = new Set([p.workspace])
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
        const r = yield* workspaces.delete(p.workspace, { force: p.force ?? false })
        return { workspace: p.workspace, deleted: true, removed: r.deleted }
      })),

    "workspace.diff": (p) =>
      wire(Effect.gen(function*() {
        yield* workspaces.get(p.workspace)
        if (p.turn === undefined) {
          const paths = yield* history.pendingChanges(p.workspace)
          const diff = yield* history.diff(p.workspace)
          return { workspace: p.workspace, turn: null, paths, diff }
        }
        const paths = yield* history.changes(p.workspace, p.turn)
        const diff = yield* history.diff(p.workspace, p.turn)
        return { workspace: p.workspace, turn: p.turn, paths, diff }
      })),

    "workspace.revert": (p) =>
      mutation(Effect.gen(function*() {
        yield* workspaces.get(p.workspace)
        const r = yield* history.revert(p.workspace, p.turn, { agent: "USER" })
        return { workspace: p.workspace, turn: p.turn, commit: r.commit, paths: r.paths }
      })),

    "workspace.log": (p) =>
      wire(Effect.gen(function*() {
        yield* workspaces.get(p.workspace)
        const turns = yield* history.log(p.workspace, { limit: Math.max(1, Math.min(10_000, Math.floor(p.limit ?? 100))) })
        return { workspace: p.workspace, turns }
      }))
  }
}))
