// The daemon's one place that turns a person's reference into an agent, workspace, session or
// turn (rules in Refs.ts): used by every admin RPC handler, hence by the CLI and the HTTP API.
// Terminated agents (and agents of sessions not recovered) are found through their sessions'
// event logs (`agent.created`), so `agent inspect`/`agent logs` reach them too.
// Over 300 lines because the lookups by kind share one directory of agents known from their
// logs (its maps are private to this service); each lookup is a short function over it.
import { Context, Effect, Either, Layer, Option, Schema, Stream } from "effect"
import { Orchestrator } from "../agent/Orchestrator.js"
import { AgentNode } from "../domain/agent.js"
import type { LogEntry } from "../domain/events.js"
import { type AgentId, SessionId, TurnId, type WorkspaceId } from "../domain/ids.js"
import type { Session } from "../domain/session.js"
import type { WorkspaceSpec } from "../domain/workspace.js"
import { WorkspaceHistory } from "../sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../sandbox/WorkspaceStore.js"
import { EventLog } from "../storage/EventLog.js"
import { SessionStore } from "../storage/SessionStore.js"
import { type Candidate, type Lookup, pick, pickIndexed } from "./Refs.js"
import { InvalidInput, NotFound, type RpcError } from "../protocol/AdminRpcs.js"
import { fromServiceError } from "../protocol/WireErrors.js"

/** An agent as a reference designates it: live in the tree, or known only from its log. */
export interface ResolvedAgent {
  readonly node: AgentNode
  readonly live: boolean
}

type Created = Extract<LogEntry, { readonly event: "agent.created" }>

const decodeNode = Schema.decodeUnknownOption(AgentNode)
const isTurnId = Schema.is(TurnId)
const isSessionId = Schema.is(SessionId)

const fromEither = <A>(e: Either.Either<A, NotFound | InvalidInput>): Effect.Effect<A, RpcError> =>
  Either.isRight(e) ? Effect.succeed(e.right) : Effect.fail(e.left)

const make = Effect.gen(function*() {
  const orchestrator = yield* Orchestrator
  const store = yield* SessionStore
  const log = yield* EventLog
  const workspaces = yield* WorkspaceStore
  const history = yield* WorkspaceHistory
  const live = orchestrator.lookup

  const createdOf = (session: SessionId): Effect.Effect<Option.Option<Created>> =>
    log.read(session).pipe(
      Stream.filter((e): e is Created => e.event === "agent.created"),
      Stream.runHead,
      Effect.orElseSucceed(() => Option.none<Created>())
    )

  // The directory of agents known from their logs: each session's `agent.created` (it never
  // changes once written), read once per session and only for sessions whose agent is not live.
  // Kept up to date from the session store's records (`learn`: nothing to do while they are the
  // same; else only sessions not seen yet are read), so a lookup among terminated agents reads
  // no log it has read before.
  const created = new Map<SessionId, Created>()
  const createdByAgent = new Map<string, SessionId>()
  const createdByName = new Map<string, Array<SessionId>>()
  const createdByParent = new Map<SessionId, Array<SessionId>>()
  const goneNodes = new Map<SessionId, AgentNode | null>()
  let learnedFrom: ReadonlyArray<Session> | undefined
  /** The sessions with a record when `learn` last ran (a deleted session's agent is gone for good). */
  let onDisk = new Set<SessionId>()
  const know = (session: SessionId, c: Created) => {
    if (created.has(session)) return
    created.set(session, c)
    createdByAgent.set(c.data.agent_id, session)
    const named = createdByName.get(c.data.name)
    if (named === undefined) createdByName.set(c.data.name, [session])
    else named.push(session)
    const parent = c.data.parent_session_id
    if (parent !== null) {
      const kids = createdByParent.get(parent)
      if (kids === undefined) createdByParent.set(parent, [session])
      else kids.push(session)
    }
  }
  const learn: Effect.Effect<ReadonlyArray<Session>, RpcError> = Effect.flatMap(
    store.scan.pipe(Effect.mapError(fromServiceError)),
    (sessions) => {
      if (sessions === learnedFrom) return Effect.succeed(sessions)
      const unread = sessions.filter((s) => !created.has(s.id) && live.bySession(s.id) === undefined)
      return Effect.as(
        Effect.forEach(unread, (s) =>
          Effect.map(createdOf(s.id), (c) => {
            if (Option.isSome(c)) know(s.id, c.value)
          }), { discard: true }).pipe(
            // A live agent's session is read once it is not live: terminating saves its record
            // (state `terminated`), which gives `scan` a new array.
            Effect.tap(() =>
              Effect.sync(() => {
                learnedFrom = sessions
                onDisk = new Set(sessions.map((s) => s.id))
              })
            )
          ),
        sessions
      )
    }
  )

  /** The agent of a session known from its log, when it is not live (terminated, or not recovered). */
  const goneOf = (session: SessionId): AgentNode | undefined => {
    const c = created.get(session)
    if (c === undefined || !onDisk.has(session) || live.byId(c.data.agent_id) !== undefined) return undefined
    const cached = goneNodes.get(session)
    if (cached !== undefined) return cached ?? undefined
    const d = c.data
    const parentSession = d.parent_session_id
    const parent = parentSession === null
      ? undefined
      : live.bySession(parentSession)?.id ?? created.get(parentSession)?.data.agent_id
    const node = Option.getOrNull(decodeNode({
      id: d.agent_id,
      name: d.name,
      session_id: c.session_id,
      parent_id: parent ?? null,
      instructions: d.instructions,
      role: d.role.length > 0 ? d.role : "worker",
      provider: d.provider,
      workspace_id: d.workspace,
      state: "terminated"
    }))
    goneNodes.set(session, node)
    return node ?? undefined
  }

  /** Agents of sessions on disk that are not in the live tree (terminated, or not recovered). */
  const offTree: Effect.Effect<ReadonlyArray<AgentNode>, RpcError> = Effect.map(learn, (sessions) => {
    const out: Array<AgentNode> = []
    for (const s of sessions) {
      const n = goneOf(s.id)
      if (n !== undefined) out.push(n)
    }
    return out
  })

  const candidate = (live: boolean) => (node: AgentNode): Candidate<ResolvedAgent> => ({
    id: node.id,
    names: [node.name],
    label: `${node.name}${live ? "" : " (terminated)"}`,
    value: { node, live }
  })
  const liveCandidate = candidate(true)
  const goneCandidate = candidate(false)
  const gone = (sessions: Iterable<SessionId> | undefined): Array<Candidate<ResolvedAgent>> => {
    const out: Array<Candidate<ResolvedAgent>> = []
    for (const s of sessions ?? []) {
      const n = goneOf(s)
      if (n !== undefined) out.push(goneCandidate(n))
    }
    return out
  }
  const liveLookup: Lookup<ResolvedAgent> = {
    exact: (id) => {
      const n = live.byId(id)
      return n === undefined ? [] : [liveCandidate(n)]
    },
    named: (name) => live.named(name).map(liveCandidate),
    prefixed: (prefix) => live.prefixed(prefix).map(liveCandidate)
  }
  const allLookup: Lookup<ResolvedAgent> = {
    exact: (id) => {
      const s = createdByAgent.get(id)
      return [...liveLookup.exact(id), ...gone(s === undefined ? [] : [s])]
    },
    named: (name) => [...liveLookup.named(name), ...gone(createdByName.get(name))],
    prefixed: (prefix) => {
      const sessions: Array<SessionId> = []
      for (const [agent, s] of createdByAgent) if (agent.startsWith(prefix)) sessions.push(s)
      return [...liveLookup.prefixed(prefix), ...gone(sessions)]
    }
  }

  /**
   * The agent `ref` designates (id, name, unique id prefix; also its session's id). Live agents
   * first; with `terminated`, agents known only from their logs too.
   */
  const agent = (ref: string, options: { readonly terminated?: boolean } = {}): Effect.Effect<ResolvedAgent, RpcError> =>
    Effect.gen(function*() {
      const bySession = live.bySession(ref)
      if (bySession) return { node: bySession, live: true }
      const first = pickIndexed("agent", ref, liveLookup)
      if (Either.isRight(first) || first.left._tag === "InvalidInput") return yield* fromEither(first)
      yield* learn
      const goneBySession = isSessionId(ref) ? goneOf(ref) : undefined
      const found = goneBySession
        ? { node: goneBySession, live: false }
        : yield* fromEither(pickIndexed("agent", ref, allLookup, (a) => a.live))
      if (!found.live && options.terminated !== true) {
        return yield* new NotFound({
          kind: "agent",
          id: ref,
          message: `agent ${found.node.name} (${found.node.id.slice(0, 8)}) is terminated; \`substrat agent inspect\` and \`agent logs\` still show it`
        })
      }
      return found
    })

  /** A live agent (send, attach, terminate, …). */
  const liveAgent = (ref: string): Effect.Effect<AgentNode, RpcError> => Effect.map(agent(ref), (a) => a.node)

  /** Every agent: the live tree, and with `all` the terminated ones after it. */
  const agents = (all: boolean): Effect.Effect<ReadonlyArray<AgentNode>, RpcError> =>
    all ? Effect.flatMap(orchestrator.list, (l) => Effect.map(offTree, (g) => [...l, ...g])) : orchestrator.list

  /**
   * A page of `agents(all)`: the live tree in pre-order, then (with `all`) the terminated agents;
   * `after` is the last id of the previous page. Costs the page, not the tree. `more`: a next page exists.
   */
  const agentsPage = (
    all: boolean,
    after: AgentId | undefined,
    limit: number,
    depth: number | undefined
  ): Effect.Effect<{ readonly nodes: ReadonlyArray<AgentNode>; readonly more: boolean }, RpcError> =>
    Effect.gen(function*() {
      const liveAfter = after === undefined || orchestrator.lookup.byId(after) !== undefined
      if (liveAfter) {
        const live = yield* orchestrator.page(after, limit, depth)
        if (Either.isLeft(live)) return yield* new InvalidInput({ field: "after", message: `agent ${after} is deeper than depth ${depth}` })
        if (!all || live.right.more) return live.right
        const gone = yield* offTree
        const rest = limit - live.right.nodes.length
        return { nodes: [...live.right.nodes, ...gone.slice(0, rest)], more: gone.length > rest }
      }
      const gone = all ? yield* offTree : []
      const at = gone.findIndex((n) => n.id === after)
      if (at < 0) return yield* new InvalidInput({ field: "after", message: `no agent ${after} to continue after (an id from the previous page)` })
      return { nodes: gone.slice(at + 1, at + 1 + limit), more: gone.length > at + 1 + limit }
    })

  /** The agent that owns a session: live, else from its log (`agent.created`). */
  const ownerOfSession = (session: SessionId): Effect.Effect<Option.Option<{ readonly id: string; readonly name: string }>> =>
    Effect.suspend(() => {
      const n = live.bySession(session)
      if (n !== undefined) return Effect.succeed(Option.some({ id: n.id, name: n.name }))
      const c = created.get(session)
      if (c !== undefined) return Effect.succeed(Option.some({ id: c.data.agent_id, name: c.data.name }))
      return Effect.map(createdOf(session), Option.map((e) => {
        know(session, e)
        return { id: e.data.agent_id, name: e.data.name }
      }))
    })

  /** The children of an agent known from its log (after `learn`): those not live, from their logs. */
  const goneChildren = (node: AgentNode): Effect.Effect<ReadonlyArray<AgentNode>, RpcError> =>
    Effect.as(learn, gone(createdByParent.get(node.session_id)).map((c) => c.value.node))

  /** An agent's name by id (live, or known from its log); the id's first 8 characters otherwise. */
  const names: Effect.Effect<(id: string) => string, RpcError> = Effect.as(learn, (id: string) =>
    live.byId(id)?.name ?? (() => {
      const s = createdByAgent.get(id)
      return s === undefined ? undefined : created.get(s)?.data.name
    })() ?? id.slice(0, 8))

  const workspace = (ref: string): Effect.Effect<WorkspaceSpec, RpcError> =>
    Effect.gen(function*() {
      const all = yield* workspaces.list().pipe(Effect.mapError(fromServiceError))
      return yield* fromEither(pick("workspace", ref, all.map((w) => ({
        id: w.id,
        names: w.name === null ? [] : [w.name],
        label: w.name ?? w.root_path,
        value: w
      }))))
    })

  const workspaceId = (ref: string): Effect.Effect<WorkspaceId, RpcError> => Effect.map(workspace(ref), (w) => w.id)

  /** A session by id or id prefix, else the session of the agent `ref` designates (terminated too). */
  const session = (ref: string): Effect.Effect<SessionId, RpcError> =>
    Effect.gen(function*() {
      const all = yield* store.scan.pipe(Effect.mapError(fromServiceError))
      const candidate = (s: Session): Candidate<SessionId> => ({ id: s.id, names: [], label: s.provider_name, value: s.id })
      const bySession = pickIndexed("session", ref, {
        exact: (id) => all.filter((s) => s.id === id).map(candidate),
        named: () => [],
        prefixed: (prefix) => all.filter((s) => s.id.startsWith(prefix)).map(candidate)
      })
      if (Either.isRight(bySession) || bySession.left._tag === "InvalidInput") return yield* fromEither(bySession)
      return yield* agent(ref, { terminated: true }).pipe(
        Effect.map((a) => a.node.session_id),
        Effect.mapError((e) => e._tag === "NotFound" ? new NotFound({ kind: "session", id: ref, message: `no session or agent "${ref}"` }) : e)
      )
    })

  /** A recorded turn of a workspace, by id or unique id prefix. */
  const turn = (workspace: WorkspaceId, ref: string): Effect.Effect<TurnId, RpcError> =>
    Effect.gen(function*() {
      const turns = yield* history.log(workspace, { limit: 10_000 }).pipe(Effect.mapError(fromServiceError))
      const candidates: Array<Candidate<TurnId>> = []
      for (const t of turns) {
        const id = t.turn_id
        if (isTurnId(id)) candidates.push({ id, names: [], label: `${t.agent} ${t.time}`, value: id })
      }
      return yield* fromEither(pick("turn", ref, candidates))
    })

  return { agent, liveAgent, agents, agentsPage, ownerOfSession, names, goneChildren, workspace, workspaceId, session, turn } as const
})

export type Resolver = Effect.Effect.Success<typeof make>

/**
 * The one resolver of the daemon (its directory of agents known from their logs is state: one
 * copy, shared by every area's handlers). `yield* makeResolver` gives it.
 */
export class ResolverService extends Context.Tag("substrat/Resolver")<ResolverService, Resolver>() {
  static readonly layer = Layer.effect(ResolverService, make)
}
export const makeResolver = ResolverService
