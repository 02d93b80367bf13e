// Swarm: the running swarm (docs/swarm.md). Every node of a code tree is an agent of the one
// agent tree — the root directory's agent a root agent, every other node's agent the child of
// its enclosing node's — added DORMANT (Tree.addDormant: a record in memory, no session, no
// inbox, no process; its ids derive from the swarm name and node id). The first message that
// reaches one materializes it (Sessions.materialize): from then on it is an ordinary agent,
// persisted and recovered like any other.
//  - start: discover → diff against the saved nodes → orphan (terminate materialized agents,
//    drop dormant ones, keep a record of each) → adopt new nodes as dormant agents → queue an
//    update notice for changed ones (durable: `message.enqueued` from SYSTEM) → save the record
//    and the nodes → watch. Saved last, so a crash repeats the diff rather than losing it.
//  - a save (watcher batch): the same with `request`s from SYSTEM, which wake exactly the agents
//    of the nodes whose hash changed; turns run through the TurnRunner (slots bounded).
//  - chat / trigger: a message from USER / SYSTEM to one node's agent.
//
// Over 300 lines because it is the one owner of the running swarm's state: the steps above share
// it, so they stay one service, read in that order.
import * as NodePath from "@effect/platform-node/NodePath"
import { Context, Deferred, Duration, Effect, Either, Exit, Fiber, FiberHandle, Layer, Option, Schema, Scope, Stream } from "effect"
import { basename } from "node:path"
import { Orchestrator } from "../agent/Orchestrator.js"
import type { AgentOutput } from "../agent/OutputBus.js"
import { Delivery } from "../agent/Delivery.js"
import { Finder } from "../agent/Finder.js"
import { Lifecycle } from "../agent/Lifecycle.js"
import { Router } from "../agent/Router.js"
import { Sessions } from "../agent/Sessions.js"
import { Tree } from "../agent/Tree.js"
import { Turns } from "../agent/Turns.js"
import { WorkspaceHistory } from "../sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../sandbox/WorkspaceStore.js"
import type { AgentNode } from "../domain/agent.js"
import { InvalidInputError, NotFoundError } from "../domain/errors.js"
import { type AgentId, type MessageId, newTurnId, type SessionId, type WorkspaceId } from "../domain/ids.js"
import { Durable } from "../storage/Durable.js"
import { type SwarmDiff } from "./Diff.js"
import { Discovery, groupByPath } from "./Discovery.js"
import { languageOf } from "./Grammars.js"
import { defaultIgnoredNames } from "./Ignore.js"
import { agentIdOf, changedText, instructionsOf, nodeAgent, sessionIdOf, swarmNameOf, triggeredText, uniqueName, validName } from "./SwarmAgents.js"
import { type LineRange, makeNodeId, type NodeKind, type SwarmLanguage, type SwarmNode, type SwarmNodeId } from "./SwarmNode.js"
import { loadRecord, nodesFile, type OrphanRecord, saveRecord, SwarmError, type SwarmRecord } from "./SwarmRecord.js"
import { SwarmStore } from "./SwarmStore.js"
import { namesNode, nearest, symbolNames } from "./Symbols.js"
import { layerParcelFileSystem, type SwarmChange, SwarmWatcher } from "./Watcher.js"

const ROOT_NODE = makeNodeId(".", "dir")
/**
 * The watcher's quiet period. @parcel/watcher batches too (it holds events until 50 ms without
 * one whenever its previous batch was under 500 ms ago), so a short one of our own suffices.
 */
const DEBOUNCE_MS = 20
/** How long the user's-save record waits at most for the turns its batch woke to start. */
const RECORD_DEFER_MAX = Duration.millis(250)
/** Journal lines (save batches) before the nodes are saved whole again. */
const JOURNAL_MAX = 1000

export const ALL_LANGUAGES: ReadonlyArray<SwarmLanguage> = ["typescript", "tsx", "javascript", "python"]

/** Where the swarm keeps its record (`<home>/swarm/`) and which provider a start defaults to. */
export class SwarmConfig extends Context.Tag("substrat/swarm/SwarmConfig")<SwarmConfig, {
  readonly home: string
  readonly defaultProvider: string
  /** Quiet time after the last save before a batch (default 20 ms). */
  readonly debounceMs?: number
}>() {}

export interface StartArgs {
  /** Absolute path of the code tree. */
  readonly path: string
  readonly provider?: string | undefined
  readonly languages?: ReadonlyArray<SwarmLanguage> | undefined
  readonly name?: string | undefined
}

export const NodeStatus = Schema.Literal("dormant", "idle", "busy", "waiting", "quarantined", "orphaned")
export type NodeStatus = typeof NodeStatus.Type

export interface SwarmAgentView {
  readonly node_id: SwarmNodeId
  readonly agent_id: AgentId
  readonly session_id: SessionId
  readonly name: string
  readonly kind: NodeKind
  readonly path: string
  readonly symbol: string
  readonly lines: LineRange | null
  readonly parent: SwarmNodeId | null
  readonly status: NodeStatus
}

export interface SwarmStatusView {
  readonly name: string
  readonly root: string
  readonly provider: string
  readonly languages: ReadonlyArray<SwarmLanguage>
  readonly running: boolean
  readonly watching: boolean
  readonly started_at: string
  readonly workspace_id: WorkspaceId | null
  readonly nodes: number
  readonly dormant: number
  readonly orphaned: number
}

interface Entry {
  node: SwarmNode
  readonly agent: AgentId
}

/** Parents before children; nodes whose parent is neither in `nodes` nor `known` come first. */
const parentFirst = (nodes: ReadonlyArray<SwarmNode>): Array<SwarmNode> => {
  const byId = new Map<SwarmNodeId, SwarmNode>()
  for (const n of nodes) byId.set(n.id, n)
  const out: Array<SwarmNode> = []
  const placed = new Set<SwarmNodeId>()
  const visit = (n: SwarmNode): void => {
    if (placed.has(n.id)) return
    placed.add(n.id)
    const p = n.parent === null ? undefined : byId.get(n.parent)
    if (p !== undefined) visit(p)
    out.push(n)
  }
  for (const n of nodes) visit(n)
  return out
}

const toolsLayer = Layer.mergeAll(SwarmWatcher.DefaultWithoutDependencies, SwarmStore.Default).pipe(
  Layer.provideMerge(Discovery.Default),
  Layer.provide(Layer.mergeAll(layerParcelFileSystem, NodePath.layer))
)

export class Swarm extends Effect.Service<Swarm>()("substrat/swarm/Swarm", {
  scoped: Effect.gen(function*() {
    const config = yield* SwarmConfig
    const durable = yield* Durable
    const tree = yield* Tree
    const router = yield* Router
    const delivery = yield* Delivery
    const lifecycle = yield* Lifecycle
    const orchestrator = yield* Orchestrator
    const sessions = yield* Sessions
    const finder = yield* Finder
    const turns = yield* Turns
    const workspaces = yield* WorkspaceStore
    const history = yield* WorkspaceHistory
    const scope = yield* Effect.scope
    // Grammars are loaded on the first start, not with the daemon.
    const tools = yield* Effect.cached(Layer.buildWithScope(Layer.provide(toolsLayer, Layer.succeed(Durable, durable)), scope))
    const watching = yield* FiberHandle.make<void, never>()
    const lock = yield* Effect.makeSemaphore(1)
    const home = config.home

    let record: SwarmRecord | null = null
    const entries = new Map<string, Entry>()
    // Own edits: the hash a node had when its own agent's turn recorded a change to its file. A
    // save batch showing that hash does not trigger the agent (it would wake itself in a loop).
    const ownEdits = new Map<SwarmNodeId, string>()
    // Batches appended to the nodes journal since the last whole save (compacted past JOURNAL_MAX).
    let journaled = 0

    const now = () => new Date().toISOString()
    const generation = (id: SwarmNodeId) => record?.generations[id] ?? 0
    const agentOf = (id: SwarmNodeId): AgentId => entries.get(id)?.agent ?? agentIdOf(record!.name, id, generation(id))
    const withTools = <A, E>(f: (ctx: Context.Context<SwarmStore | SwarmWatcher | Discovery>) => Effect.Effect<A, E>) =>
      Effect.flatMap(tools, f)
    const storeError = (e: { readonly message: string }) => new SwarmError({ reason: "io", message: e.message })

    const systemMessage = (agent: AgentId, kind: "request" | "notification", text: string) =>
      Effect.gen(function*() {
        // A notification (a change found at start) waits for the agent's next turn; a request wakes it.
        const env = delivery.envelope({ sender: "SYSTEM", recipient: agent, kind, text, ...(kind === "notification" ? { extra: { queued: true } } : {}) })
        yield* router.deliver(env)
        return env.id
      })

    /** Orphan these nodes' agents: materialized ones terminated (history kept), dormant ones dropped. */
    const orphan = (nodes: ReadonlyArray<SwarmNode>) =>
      Effect.gen(function*() {
        const rec = record!
        const at = now()
        const added: Array<OrphanRecord> = []
        const generations = { ...rec.generations }
        const live: Array<AgentId> = []
        for (const n of nodes) {
          const agent = agentOf(n.id)
          const node = tree.get(agent)
          entries.delete(n.id)
          const materialized = node !== undefined && !tree.isDormant(agent)
          const session_id = node?.session_id ?? sessionIdOf(rec.name, n.id, generation(n.id))
          added.push({ node: n, agent_id: agent, session_id, materialized, at })
          if (materialized) {
            generations[n.id] = (generations[n.id] ?? 0) + 1
            live.push(agent)
          }
        }
        for (const a of live) if (tree.has(a)) yield* lifecycle.terminate(a)
        const dormant = added.map((o) => o.agent_id).filter((a) => tree.has(a))
        const removed = tree.removeAll(dormant)
        if (Either.isLeft(removed)) yield* Effect.logWarning(`swarm: orphaned agents not removed: ${removed.left.message}`)
        record = { ...rec, generations, orphans: [...rec.orphans, ...added] }
      })

    /** Give every node without an agent a dormant one (parents first). */
    const adopt = (nodes: ReadonlyArray<SwarmNode>) =>
      Effect.gen(function*() {
        const rec = record!
        const batch: Array<AgentNode> = []
        const batchNames = new Map<AgentId | null, Set<string>>()
        for (const n of parentFirst(nodes)) {
          const agent = agentIdOf(rec.name, n.id, generation(n.id))
          entries.set(n.id, { node: n, agent })
          if (tree.has(agent)) continue
          const parent = n.parent === null ? null : agentOf(n.parent)
          let names = batchNames.get(parent)
          if (names === undefined) batchNames.set(parent, names = new Set())
          const taken = (name: string) => names.has(name) || tree.current().childNamed(parent, name) !== undefined
          const name = n.parent === null ? rec.name : uniqueName(validName(n.agentName, n.id), n.id, taken)
          names.add(name)
          batch.push(nodeAgent({ swarm: rec.name, id: agent, node: n, generation: generation(n.id), name, parent, provider: rec.provider, workspace: rec.workspace_id }))
        }
        const added = tree.addDormant(batch)
        if (Either.isLeft(added)) return yield* new SwarmError({ reason: "io", message: `swarm agents not added: ${added.left.message}` })
        return batch.length
      })

    /** Queue the update notices (start: notifications) or wake the agents (saves: requests); returns the agents told. */
    const notify = (diff: SwarmDiff, atStart: boolean) =>
      Effect.gen(function*() {
        const told: Array<AgentId> = []
        for (const c of diff.changed) {
          const agent = agentOf(c.after.id)
          if (!tree.isLive(agent)) continue
          if (!atStart && isOwnEdit(c.after, agent)) continue
          yield* systemMessage(agent, atStart ? "notification" : "request", changedText(c.before, c.after, atStart)).pipe(
            Effect.map(() => told.push(agent)),
            Effect.catchAll((e) => Effect.logWarning(`swarm: ${c.after.id} not notified: ${e.message}`))
          )
        }
        return told
      })

    /**
     * A change the node's own agent made: it is in a turn now (the change is recorded with that
     * turn), or its last turn recorded its file with the node at this hash.
     */
    const isOwnEdit = (node: SwarmNode, agent: AgentId): boolean => {
      const own = ownEdits.get(node.id)
      ownEdits.delete(node.id)
      return turns.isBusy(agent) || own === node.hash
    }

    const liveNodes = () => Array.from(entries.values(), (e) => e.node)
    const store = withTools((ctx) => Effect.succeed(Context.get(ctx, SwarmStore)))

    /**
     * `find:<symbol>` (Finder): the node agents whose node is named so — a code node by its
     * qualified name (`User.format`) or its last part (`format`), a file or directory by its path
     * or base name (`Duration.ts`), any node by its id — in discovery order.
     */
    finder.setIndex((symbol) => {
      const out: Array<AgentId> = []
      for (const e of entries.values()) {
        if (e.node.id === symbol || e.node.name === symbol || symbolNames(e.node).includes(symbol)) out.push(e.agent)
      }
      return out
    })

    // A dormant node agent's instructions, derived from its node when it materializes (rare: a
    // scan of the nodes rather than an agent → node map kept for every agent).
    tree.describeDormant((agent) => {
      for (const e of entries.values()) if (e.agent === agent.id) return instructionsOf(e.node)
      return undefined
    })

    /** The record and every node, whole (at start; and to compact the journal). */
    const persist = Effect.gen(function*() {
      yield* saveRecord(home, record!)
      yield* (yield* store).save(nodesFile(home), { version: 1, root: record!.root, nodes: liveNodes() }).pipe(Effect.mapError(storeError))
      journaled = 0
    })

    /** After a save batch: the batch's files' nodes as one journal line; the record only when orphans changed it. */
    const persistFiles = (change: SwarmChange) =>
      Effect.gen(function*() {
        if (journaled >= JOURNAL_MAX) return yield* persist
        if (change.diff.orphaned.length > 0) yield* saveRecord(home, record!)
        const after = groupByPath([...change.diff.added, ...change.diff.changed.map((c) => c.after), ...change.diff.unchanged])
        const files = change.files.map((path) => ({ path, nodes: after.get(path) ?? [] }))
        yield* (yield* store).appendFiles(nodesFile(home), files).pipe(Effect.mapError(storeError))
        journaled++
      })

    /** Apply one diff: orphans, new agents, notices (durable). The caller saves next (a crash before repeats the diff). */
    const apply = (diff: SwarmDiff, atStart: boolean) =>
      Effect.gen(function*() {
        if (diff.orphaned.length > 0) yield* orphan(diff.orphaned)
        yield* adopt(diff.added)
        for (const n of diff.unchanged) {
          const e = entries.get(n.id)
          if (e !== undefined) e.node = n
        }
        for (const c of diff.changed) {
          const e = entries.get(c.after.id)
          if (e !== undefined) e.node = c.after
        }
        return yield* notify(diff, atStart)
      })

    /**
     * The saved files' changes recorded in the swarm's workspace history as the user's, before
     * any turn they trigger can record them as its own. Not while a turn runs in the workspace:
     * what that agent wrote is its own, and its turn records everything pending when it ends.
     * Returns once the record holds the repository (the turns it triggers record after it).
     */
    const recordSaves = (ws: WorkspaceId, files: ReadonlyArray<string>, proceed: Effect.Effect<void>) =>
      Effect.gen(function*() {
        for (const a of turns.runningAgents()) if (tree.get(a)?.workspace_id === ws) return
        const locked = yield* Deferred.make<void>()
        const fiber = yield* history.commitTurn(ws, {
          agent: "USER",
          turnId: newTurnId(),
          summary: `saved by the user: ${files.slice(0, 5).join(", ")}${files.length > 5 ? ", …" : ""}`,
          paths: files,
          locked,
          proceed
        }).pipe(
          Effect.catchAllCause((cause) => Effect.logWarning("swarm: saves not recorded in the workspace history", cause)),
          Effect.forkIn(scope)
        )
        yield* Effect.raceFirst(Deferred.await(locked), Fiber.await(fiber))
      })

    /**
     * Completes `go` once each of `agents` has started its turn (their `TurnStarted`, from
     * `events`, subscribed before they were woken), or after RECORD_DEFER_MAX; closes `sub`.
     */
    const whenStarted = (
      events: Stream.Stream<AgentOutput>,
      sub: Scope.CloseableScope,
      agents: ReadonlyArray<AgentId>,
      go: Deferred.Deferred<void>
    ) => {
      const waiting = new Set(agents)
      return (waiting.size === 0 ? Effect.void : events.pipe(
        Stream.filter((o) => o._tag === "TurnStarted" && waiting.delete(o.agent_id) && waiting.size === 0),
        Stream.take(1),
        Stream.runDrain,
        Effect.timeout(RECORD_DEFER_MAX),
        Effect.ignore
      )).pipe(Effect.ensuring(Deferred.succeed(go, undefined).pipe(Effect.zipRight(Scope.close(sub, Exit.void)))))
    }

    /**
     * A watcher batch: record the user's saves, act on the diff (wake changed nodes' agents),
     * journal the files. The record takes the repository first (the turns it triggers record
     * after it) but runs its git commands once those turns have started: each git process the
     * daemon spawns stalls its event loop while it forks, which would delay the turns.
     */
    const onSave = (change: SwarmChange) =>
      Effect.gen(function*() {
        const ws = record!.workspace_id
        const go = yield* Deferred.make<void>()
        const sub = yield* Scope.make()
        const events = yield* Scope.extend(orchestrator.subscribe(), sub)
        const woken = yield* Effect.gen(function*() {
          if (ws !== null) yield* recordSaves(ws, change.files, Deferred.await(go))
          return yield* apply(change.diff, false)
        }).pipe(Effect.onError(() => Deferred.succeed(go, undefined).pipe(Effect.zipRight(Scope.close(sub, Exit.void)))))
        yield* Effect.forkIn(whenStarted(events, sub, woken, go), scope)
        yield* persistFiles(change)
      })

    /** The swarm's workspace: the code tree itself, its history recording every node turn's changes. */
    const ensureWorkspace = (rec: SwarmRecord) =>
      Effect.gen(function*() {
        if (rec.workspace_id !== null) {
          const spec = yield* Effect.option(workspaces.get(rec.workspace_id))
          if (Option.isSome(spec)) return spec.value.id
        }
        const spec = yield* workspaces.create({ root: rec.root, name: null, exclude: defaultIgnoredNames.filter((n) => n !== ".git") }).pipe(
          Effect.mapError((e) => new SwarmError({ reason: "io", message: `the swarm's workspace on ${rec.root}: ${e.message}` }))
        )
        return spec.id
      })

    /** Start the watcher; done once its OS watch is in place (a save from then on counts), or it failed. */
    const watch = Effect.gen(function*() {
      const rec = record!
      const watcher = yield* withTools((ctx) => Effect.succeed(Context.get(ctx, SwarmWatcher)))
      const subscribed = yield* Deferred.make<void>()
      const run = watcher.watch(rec.root, liveNodes(), {
        languages: rec.languages,
        debounce: config.debounceMs ?? DEBOUNCE_MS,
        subscribed: Deferred.succeed(subscribed, undefined)
      }).pipe(
        Stream.runForEach((change) =>
          lock.withPermits(1)(onSave(change)).pipe(
            Effect.catchAll((e) => Effect.logWarning(`swarm: a change batch failed: ${e.message}`))
          )
        ),
        Effect.catchAllCause((cause) => Effect.logError("swarm: the watcher stopped", cause)),
        Effect.ensuring(Deferred.succeed(subscribed, undefined))
      )
      yield* FiberHandle.run(watching, run)
      yield* Deferred.await(subscribed)
    })

    const startLocked = (args: StartArgs) =>
      Effect.gen(function*() {
        const saved = record ?? Option.getOrNull(yield* loadRecord(home))
        if (saved !== null && saved.root !== args.path) {
          return yield* new InvalidInputError({
            field: "path",
            message: `this daemon's swarm is of ${saved.root}${saved.running ? " (running)" : ""}; one swarm per SUBSTRAT_HOME`
          })
        }
        if (record !== null && record.running) {
          return yield* new SwarmError({ reason: "running", message: `the swarm of ${record.root} is running` })
        }
        // Node agents keep the provider they were made with: a different one is refused, not reported.
        if (saved !== null && args.provider !== undefined && args.provider !== saved.provider) {
          return yield* new InvalidInputError({
            field: "provider",
            message: `the swarm of ${saved.root} was made with provider ${saved.provider} and its node agents keep it; ` +
              `start it without --provider (a swarm with another provider needs another SUBSTRAT_HOME)`
          })
        }
        const name = saved?.name ?? (args.name !== undefined ? validName(args.name, args.path) : swarmNameOf(basename(args.path)))
        const root = tree.current().childNamed(null, name)
        if (root !== undefined && root.id !== agentIdOf(name, ROOT_NODE, saved?.generations[ROOT_NODE] ?? 0)) {
          return yield* new InvalidInputError({ field: "name", message: `a root agent named "${name}" exists; pick another swarm name` })
        }
        record = {
          version: 1,
          name,
          root: args.path,
          provider: args.provider ?? saved?.provider ?? config.defaultProvider,
          languages: args.languages ?? saved?.languages ?? ALL_LANGUAGES,
          workspace_id: saved?.workspace_id ?? null,
          running: true,
          started_at: now(),
          generations: saved?.generations ?? {},
          orphans: saved?.orphans ?? []
        }
        const ws = yield* ensureWorkspace(record)
        record = { ...record, workspace_id: ws }
        // What changed in the tree while no node agent ran is the user's (a baseline for the turns' records).
        yield* history.commitTurn(ws, { agent: "USER", turnId: newTurnId(), summary: `swarm ${name} started: the code tree as found` }).pipe(
          Effect.catchAllCause((cause) => Effect.logWarning("swarm: the code tree's baseline not recorded", cause))
        )
        const r = yield* (yield* store).reconcile(args.path, nodesFile(home), { languages: record.languages }).pipe(Effect.mapError(storeError))
        // Every discovered node gets its agent (recovered materialized ones are kept as they are).
        const discovered = r.snapshot.nodes
        yield* apply({ ...r.diff, added: discovered }, true)
        // The nodes are saved whole only when they changed (a warm start of an unchanged tree
        // rewrites no node: on a large tree that is tens of MB of JSON made and dropped).
        if (!r.upToDate) yield* persist
        else yield* saveRecord(home, record)
        // The root's session exists from the start: the swarm's event stream is its tree's.
        yield* sessions.materialize(agentOf(ROOT_NODE)).pipe(Effect.mapError(storeError))
        yield* watch
        return statusNow()
      })

    const statusNow = (): SwarmStatusView => {
      const rec = record!
      let dormant = 0
      for (const e of entries.values()) if (tree.isDormant(e.agent)) dormant++
      return {
        name: rec.name,
        root: rec.root,
        provider: rec.provider,
        languages: rec.languages,
        running: rec.running,
        watching: rec.running,
        started_at: rec.started_at,
        workspace_id: rec.workspace_id,
        nodes: entries.size,
        dormant,
        orphaned: rec.orphans.length
      }
    }

    const start = (args: StartArgs) => lock.withPermits(1)(startLocked(args))

    // A node agent's turn recorded changes: note its own nodes' hashes in the files it changed
    // (re-parsed now, while the agent still counts as busy), so the saves it made do not wake it.
    yield* history.onRecorded((r) =>
      Effect.gen(function*() {
        const rec = record
        if (rec === null || rec.workspace_id !== r.workspace || r.agentId === null) return
        const langs = new Set<string>(rec.languages)
        const files = r.paths.filter((p) => p.change !== "deleted" && langs.has(languageOf(p.path) ?? "")).map((p) => p.path)
        if (files.length === 0) return
        const discovery = yield* withTools((ctx) => Effect.succeed(Context.get(ctx, Discovery)))
        const found = yield* discovery.discoverFiles(rec.root, files)
        for (const n of found) if (agentOf(n.id) === r.agentId) ownEdits.set(n.id, n.hash)
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("swarm: a node turn's own edits not noted", cause))))

    const stop = lock.withPermits(1)(Effect.gen(function*() {
      if (record === null || !record.running) return yield* new SwarmError({ reason: "not-running", message: "no swarm is running" })
      yield* FiberHandle.clear(watching)
      record = { ...record, running: false }
      yield* saveRecord(home, record)
      return statusNow()
    }))

    /** At daemon start (after recovery): a swarm that was running runs again. */
    const resume = Effect.gen(function*() {
      const saved = yield* loadRecord(home)
      if (Option.isNone(saved) || !saved.value.running) return Option.none<SwarmStatusView>()
      record = { ...saved.value, running: false }
      return Option.some(yield* start({ path: saved.value.root }))
    })

    const status = Effect.gen(function*() {
      if (record === null) {
        const saved = yield* loadRecord(home)
        if (Option.isNone(saved)) return Option.none<SwarmStatusView>()
        record = { ...saved.value, running: false }
      }
      return Option.some(statusNow())
    })

    const viewOf = (e: Entry, status: NodeStatus): SwarmAgentView => {
      const n = tree.get(e.agent)
      return {
        node_id: e.node.id,
        agent_id: e.agent,
        session_id: n?.session_id ?? sessionIdOf(record!.name, e.node.id, generation(e.node.id)),
        name: n?.name ?? e.node.agentName,
        kind: e.node.kind,
        path: e.node.path,
        symbol: e.node.name,
        lines: e.node.lines,
        parent: e.node.parent,
        status
      }
    }
    const statusOf = (agent: AgentId) =>
      tree.isDormant(agent) ? Effect.succeed<NodeStatus>("dormant") : Effect.map(Effect.orElseSucceed(orchestrator.get(agent), () => null), (n) =>
        n === null || n.state === "terminated" ? "orphaned" : n.state)

    const notRunning = new SwarmError({ reason: "not-running", message: "no swarm here: substrat swarm start <path>" })

    /**
     * A node by node id, agent id, agent name (of exactly one live node agent), or symbol (as
     * `find:` routes it; `path:symbol` within one file). A miss names the nearest symbols
     * (InvalidInput: "did you mean …").
     */
    const find = (ref: string) =>
      Effect.gen(function*() {
        if (record === null) return yield* notRunning
        const byNode = entries.get(ref)
        if (byNode !== undefined) return byNode
        const named: Array<Entry> = []
        for (const e of entries.values()) {
          if (e.agent === ref) return e
          if (tree.get(e.agent)?.name === ref) named.push(e)
        }
        if (named.length === 1) return named[0]!
        if (named.length > 1) {
          return yield* new InvalidInputError({
            field: "node",
            message: `${named.length} swarm agents are named "${ref}"; use a node id: ${named.slice(0, 5).map((e) => e.node.id).join(", ")}`
          })
        }
        const gone = record.orphans.find((o) => o.node.id === ref || o.agent_id === ref)
        if (gone !== undefined) {
          return yield* new InvalidInputError({ field: "node", message: `${gone.node.id} is orphaned (its code is gone); it is not triggered` })
        }
        // A symbol (as find: routes it), or path:symbol.
        const symbol: Array<Entry> = []
        for (const e of entries.values()) if (namesNode(ref, e.node)) symbol.push(e)
        if (symbol.length === 1) return symbol[0]!
        if (symbol.length > 1) {
          return yield* new InvalidInputError({
            field: "node",
            message: `${symbol.length} swarm nodes are named "${ref}"; use a node id or path:symbol: ${symbol.slice(0, 5).map((e) => e.node.id).join(", ")}`
          })
        }
        const near = nearest(ref, Array.from(entries.values(), (e) => symbolNames(e.node)).flat())
        if (near.length > 0) {
          return yield* new InvalidInputError({ field: "node", message: `no swarm node ${ref}; did you mean ${near.join(", ")}?` })
        }
        return yield* new NotFoundError({ kind: "agent", id: ref, message: `no swarm node ${ref}` })
      })

    const agents = (filter: { readonly parent?: string | undefined; readonly status?: ReadonlyArray<NodeStatus> | undefined }) =>
      Effect.gen(function*() {
        if (record === null) return yield* notRunning
        const parent = filter.parent === undefined ? undefined : (yield* find(filter.parent)).node.id
        const want = filter.status === undefined || filter.status.length === 0 ? null : new Set(filter.status)
        const out: Array<SwarmAgentView> = []
        for (const e of entries.values()) {
          if (parent !== undefined && e.node.parent !== parent) continue
          const s = yield* statusOf(e.agent)
          if (want === null || want.has(s)) out.push(viewOf(e, s))
        }
        if (want === null || want.has("orphaned")) {
          for (const o of record.orphans) {
            if (parent !== undefined && o.node.parent !== parent) continue
            out.push({ ...viewOf({ node: o.node, agent: o.agent_id }, "orphaned"), session_id: o.session_id })
          }
        }
        return out
      })

    const agent = (ref: string) => Effect.flatMap(find(ref), (e) => Effect.map(statusOf(e.agent), (s) => viewOf(e, s)))

    /** A message from USER to a node's agent (a request: it wakes the agent; its turn's answer is the reply). */
    const chat = (ref: string, text: string, wait: boolean) =>
      Effect.scoped(Effect.gen(function*() {
        const e = yield* find(ref)
        const replies = wait ? Option.some(yield* orchestrator.subscribe(e.agent)) : Option.none()
        const sent = yield* orchestrator.send({ agent: e.agent, text, sync: true })
        let reply: { readonly id: MessageId; readonly text: string } | null = null
        if (Option.isSome(replies)) {
          const got = yield* replies.value.pipe(
            Stream.filterMap((o) =>
              o._tag === "MessageToUser" && o.message.reply_to === sent.message_id
                ? Option.some({ id: o.message.id, text: o.message.payload })
                : Option.none()
            ),
            Stream.runHead
          )
          reply = Option.getOrNull(got)
        }
        return { message_id: sent.message_id, agent_id: e.agent, node_id: e.node.id, reply: reply?.text ?? null, reply_id: reply?.id ?? null }
      }))

    /** Wake a node's agent with a SYSTEM request (as a save of its code would). */
    const trigger = (ref: string, why = "by the user") =>
      Effect.gen(function*() {
        const e = yield* find(ref)
        const id: MessageId = yield* systemMessage(e.agent, "request", triggeredText(e.node, why))
        return { message_id: id, agent_id: e.agent, node_id: e.node.id }
      })

    return { start, stop, resume, status, agents, agent, chat, trigger, find } as const
  })
}) {}
