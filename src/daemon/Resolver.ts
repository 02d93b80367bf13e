// The daemon's one place that turns a person's reference into an agent, workspace, session or
// turn (rules in Refs.ts): used by every admin RPC handler, hence by the CLI and the HTTP API.
// Terminated agents (and agents of sessions not recovered) are found through their sessions'
// event logs (`agent.created`), so `agent inspect`/`agent logs` reach them too.
import { Effect, Either, Option, Schema, Stream } from "effect"
import { Orchestrator } from "../agent/Orchestrator.js"
import { AgentNode } from "../domain/agent.js"
import type { LogEntry } from "../domain/events.js"
import { type SessionId, TurnId, type WorkspaceId } from "../domain/ids.js"
import type { Session } from "../domain/session.js"
import type { WorkspaceSpec } from "../domain/workspace.js"
import { WorkspaceHistory } from "../sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../sandbox/WorkspaceStore.js"
import { EventLog } from "../storage/EventLog.js"
import { SessionStore } from "../storage/SessionStore.js"
import { type Candidate, pick } from "./Refs.js"
import { InvalidInput, NotFound, type RpcError } from "../protocol/AdminRpcs.js"
import { fromServiceError } from "./WireErrors.js"

/** An agent as a reference designates it: live in the tree, or known only from its log. */
export interface ResolvedAgent {
  readonly node: AgentNode
  readonly live: boolean
}

type Created = Extract<LogEntry, { readonly event: "agent.created" }>

const decodeNode = Schema.decodeUnknownOption(AgentNode)
const isTurnId = Schema.is(TurnId)

const fromEither = <A>(e: Either.Either<A, NotFound | InvalidInput>): Effect.Effect<A, RpcError> =>
  Either.isRight(e) ? Effect.succeed(e.right) : Effect.fail(e.left)

export const makeResolver = Effect.gen(function*() {
  const orchestrator = yield* Orchestrator
  const store = yield* SessionStore
  const log = yield* EventLog
  const workspaces = yield* WorkspaceStore
  const history = yield* WorkspaceHistory

  const createdOf = (session: SessionId): Effect.Effect<Option.Option<Created>> =>
    log.read(session).pipe(
      Stream.filter((e): e is Created => e.event === "agent.created"),
      Stream.runHead,
      Effect.orElseSucceed(() => Option.none<Created>())
    )

  /** Agents of sessions on disk that are not in the live tree (terminated, or not recovered). */
  const offTree = (live: ReadonlyArray<AgentNode>): Effect.Effect<ReadonlyArray<AgentNode>, RpcError> =>
    Effect.gen(function*() {
      const sessions: ReadonlyArray<Session> = yield* store.scan.pipe(Effect.mapError(fromServiceError))
      const created = yield* Effect.forEach(sessions, (s) => createdOf(s.id))
      const ownerOfSession = new Map<string, string>()
      for (const c of created) if (Option.isSome(c)) ownerOfSession.set(c.value.session_id, c.value.data.agent_id)
      const liveIds = new Set<string>(live.map((n) => n.id))
      const out: Array<AgentNode> = []
      for (const c of created) {
        if (Option.isNone(c) || liveIds.has(c.value.data.agent_id)) continue
        const d = c.value.data
        const parent = d.parent_session_id === null ? undefined : ownerOfSession.get(d.parent_session_id)
        const node = decodeNode({
          id: d.agent_id,
          name: d.name,
          session_id: c.value.session_id,
          parent_id: parent ?? null,
          instructions: d.instructions,
          role: d.role.length > 0 ? d.role : "worker",
          provider: d.provider,
          workspace_id: d.workspace,
          state: "terminated"
        })
        if (Option.isSome(node)) out.push(node.value)
      }
      return out
    })

  const agentCandidates = (nodes: ReadonlyArray<AgentNode>, live: boolean): ReadonlyArray<Candidate<ResolvedAgent>> =>
    nodes.map((node) => ({
      id: node.id,
      names: [node.name],
      label: `${node.name}${live ? "" : " (terminated)"}`,
      value: { node, live }
    }))

  /**
   * The agent `ref` designates (id, name, unique id prefix; also its session's id). Live agents
   * first; with `terminated`, agents known only from their logs too.
   */
  const agent = (ref: string, options: { readonly terminated?: boolean } = {}): Effect.Effect<ResolvedAgent, RpcError> =>
    Effect.gen(function*() {
      const live = yield* orchestrator.list
      const bySession = live.find((n) => n.session_id === ref)
      if (bySession) return { node: bySession, live: true }
      const first = pick("agent", ref, agentCandidates(live, true))
      if (Either.isRight(first) || first.left._tag === "InvalidInput") return yield* fromEither(first)
      const gone = yield* offTree(live)
      const goneBySession = gone.find((n) => n.session_id === ref)
      const found = goneBySession
        ? { node: goneBySession, live: false }
        : yield* fromEither(pick("agent", ref, [...agentCandidates(live, true), ...agentCandidates(gone, false)], (a) => a.live))
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
    all ? Effect.flatMap(orchestrator.list, (live) => Effect.map(offTree(live), (gone) => [...live, ...gone])) : orchestrator.list

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
      const bySession = pick("session", ref, all.map((s) => ({ id: s.id, names: [], label: s.provider_name, value: s.id })))
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

  return { agent, liveAgent, agents, workspace, workspaceId, session, turn } as const
})

export type Resolver = Effect.Effect.Success<typeof makeResolver>
