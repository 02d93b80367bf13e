// Shared wiring for the crash-recovery suites: one daemon "life" = a ManagedRuntime over the
// orchestration stack + Recovery on the file layers of a $SUBSTRAT_HOME, over a given Durable
// (real, or crash-injecting). A crash = drop the runtime; recovery = a fresh life on the same
// directory. Also: deterministic I/O primitives for crash enumeration, acknowledgement
// tracking for tool calls, and the oracle checks of seed 001.
import { Effect, Effect as E, Layer, ManagedRuntime, Schema, Stream } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import * as Orchestration from "../../src/agent/Orchestrator.js"
import { agentState } from "../support/agentState.js"
import { Recovery, type RecoveryOptions, type RecoveryReport } from "../../src/recovery/Recovery.js"
import { makePaths, SubstratPaths } from "../../src/config/Paths.js"
import { LogLine } from "../../src/domain/events.js"
import type { AgentId, SessionId } from "../../src/domain/ids.js"
import { Session } from "../../src/domain/session.js"
import { Durable } from "../../src/storage/Durable.js"
import { makeCrashing } from "../../src/storage/DurableCrash.js"
import { decodeRecords } from "../../src/storage/internal/eventJournal.js"
import { nodePrimitivesOrdered, type Primitives } from "../../src/storage/Durable.js"
import { DurableError } from "../../src/domain/errors.js"
import type { ProviderFactory, ToolInvoker } from "../../src/provider/Provider.js"
import { ProviderRegistry } from "../../src/provider/ProviderRegistry.js"
import type { Scripts } from "../../src/provider/scripted/Script.js"
import { makeScripted, recoverState } from "../../src/provider/scripted/ScriptedProvider.js"
import { MultiplexerConfig } from "../../src/session/Multiplexer.js"
import { SessionStore } from "../../src/storage/SessionStore.js"
import { EventLog } from "../../src/storage/EventLog.js"

/**
 * Deterministic primitives for crash enumeration: every call synchronous (no libuv callbacks,
 * so fiber interleaving is the same on every run) and fsync a no-op. The crash layer models a
 * process crash (kill -9), not power loss: the page cache survives, so fsync is only a step.
 */
export const syncPrimitives: Primitives = {
  ...nodePrimitivesOrdered,
  fsync: () => E.void,
  fsyncDir: () => E.void,
  read: (fd, path, position, length) =>
    E.try({
      try: () => {
        const buf = Buffer.allocUnsafe(length)
        const n = fs.readSync(fd, buf, 0, length, position)
        return buf.subarray(0, n) as Uint8Array
      },
      catch: (e) => new DurableError({ op: "read", path, message: String(e) })
    })
}

/** Records which tool calls were acknowledged (returned to the provider) before any crash. */
export interface AckLog {
  readonly messages: Array<{
    readonly id: string
    readonly from: string
    readonly to: string
    readonly sync: boolean
    /**
     * Held for a child born at the end of the sender's turn: the message is acknowledged (durable)
     * when that turn ends — checkOracle checks that from the logs — not by the tool answer. A held
     * sync request still must not wait forever.
     */
    readonly held: boolean
  }>
}

/** A scripted registry whose tool results are recorded as acknowledged while `alive()`. */
export const trackedScripted = (scripts: Scripts, acks: AckLog, alive: () => boolean): Layer.Layer<ProviderRegistry> => {
  const factory: ProviderFactory = {
    name: "scripted",
    // The scripted provider's recovery hook (its blob catches up with the log).
    recoverState,
    make: (ctx) => {
      // Children this agent spawned in its current turn: still unborn (deferred spawn), so a
      // message to one of them is held until the turn ends.
      const spawnedThisTurn = new Set<string>()
      const tools: ToolInvoker = {
        invoke: (tool, args) =>
          E.tap(ctx.tools.invoke(tool, args), (r) =>
            E.sync(() => {
              if (!r.is_error && tool === "spawn_agent") {
                const name = (args as { name?: unknown }).name
                if (typeof name === "string") spawnedThisTurn.add(name)
              }
              if (!alive() || r.is_error || tool !== "send_message") return
              const res = r.result as { message_id?: string; waiting_for_reply?: boolean }
              const a = args as { recipient?: string }
              if (typeof res.message_id === "string") {
                acks.messages.push({
                  id: res.message_id,
                  from: ctx.agent_name,
                  to: a.recipient ?? "?",
                  sync: res.waiting_for_reply === true,
                  held: spawnedThisTurn.has(a.recipient ?? "")
                })
              }
            }))
      }
      return E.acquireRelease(makeScripted({ ...ctx, tools }, { scripts }), (p) => E.ignore(p.stop)).pipe(
        E.map((p) => ({
          ...p,
          send: (message: string) => Stream.suspend(() => (spawnedThisTurn.clear(), p.send(message)))
        }))
      )
    }
  }
  return ProviderRegistry.layer(factory)
}

export const storageOver = (home: string, durable: Layer.Layer<Durable>) =>
  Layer.mergeAll(EventLog.layerFile, SessionStore.layerFile).pipe(
    Layer.provideMerge(Layer.mergeAll(durable, SubstratPaths.layer(home))),
    Layer.orDie
  )

export type Storage = Layer.Layer<EventLog | SessionStore | Durable | SubstratPaths>

/** The orchestration stack + Recovery over the given storage. */
export const lifeLayerWith = (storage: Storage, registry: Layer.Layer<ProviderRegistry>, slots = 4) =>
  Recovery.Default.pipe(
    Layer.provideMerge(Orchestration.layer),
    Layer.provideMerge(Layer.mergeAll(registry, MultiplexerConfig.layer(slots), storage))
  )

/** The orchestration stack + Recovery over the file layers of `home`. */
export const lifeLayer = (home: string, durable: Layer.Layer<Durable>, registry: Layer.Layer<ProviderRegistry>, slots = 4) =>
  lifeLayerWith(storageOver(home, durable), registry, slots)

export type Life = ManagedRuntime.ManagedRuntime<Layer.Layer.Success<ReturnType<typeof lifeLayerWith>>, never>

/** boss spawns w1 (its first turn), then asks it "do it" (sync); w1 answers "done". */
export const askScripts: Scripts = {
  boss: {
    steps: [
      { tools: [{ tool: "spawn_agent", args: { name: "w1", instructions: "work" } }], text: "spawned" },
      { tools: [{ tool: "send_message", args: { recipient: "w1", text: "do it", sync: true } }], text: "asked" },
      { text: "thanks: {{prompt}}" }
    ],
    after: "silent"
  },
  w1: { steps: [{ text: "done" }], after: "silent" }
}

export const startLife = (home: string, durable: Layer.Layer<Durable>, registry: Layer.Layer<ProviderRegistry>, slots = 4): Life =>
  ManagedRuntime.make(lifeLayer(home, durable, registry, slots))

/** The in-memory state after recovery, in comparable form. */
export interface StateSnapshot {
  readonly tree: ReadonlyArray<{ id: string; name: string; session: string; parent: string | null }>
  readonly inboxes: Record<string, ReadonlyArray<string>>
  readonly requests: ReadonlyArray<string>
  readonly userOutbox: ReadonlyArray<string>
}

export const snapshotState = Effect.map(agentState, (s): StateSnapshot => ({
  tree: [...s.tree.nodes.values()]
    .map((n) => ({ id: n.id, name: n.name, session: n.session_id, parent: n.parent_id }))
    .sort((a, b) => a.id.localeCompare(b.id)),
  inboxes: Object.fromEntries(
    [...s.inboxes.entries()].filter(([, v]) => v.length > 0).sort(([a], [b]) => a.localeCompare(b)).map((
      [k, v]
    ) => [k, v.map((e) => `${e.kind}:${e.id}:${e.reply_to ?? ""}:${e.payload}`)])
  ),
  requests: [...s.requests.values()].map((r) => `${r.id}:${r.from}->${r.to}`).sort(),
  userOutbox: s.userOutbox.map((e) => `${e.id}:${e.payload}`)
}))

/** Everything on disk under agents/, in comparable form (record timestamps aside). */
export const snapshotDisk = (home: string): Record<string, string> => {
  const paths = makePaths(home)
  const out: Record<string, string> = {}
  if (!fs.existsSync(paths.agentsDir)) return out
  for (const d of fs.readdirSync(paths.agentsDir).sort()) {
    const dir = join(paths.agentsDir, d)
    for (const f of fs.readdirSync(dir).sort()) {
      const text = fs.readFileSync(join(dir, f), "utf8")
      // An empty pending file is no pending write (docs/recovery.md): appends leave it emptied,
      // a repair removes it; both are the same state.
      if (f === "events.pending" && text === "") continue
      if (f === "session.json") {
        const r = JSON.parse(text) as Record<string, unknown>
        out[`${d}/${f}`] = JSON.stringify({ ...r, suspended_at: r["suspended_at"] === null ? null : "<ts>" })
      } else if (f === "events.jsonl") {
        out[`${d}/${f}`] = text.split("\n").filter((l) => l.length > 0).map((l) => {
          const o = JSON.parse(l) as Record<string, unknown>
          return JSON.stringify({ ...o, ts: "<ts>" })
        }).join("\n")
      } else {
        out[`${d}/${f}`] = text
      }
    }
  }
  return out
}

/** Run recovery in a fresh life with the real file layers; returns report, state, and the life. */
export const recoverLife = async (
  home: string,
  registry: Layer.Layer<ProviderRegistry>,
  options: RecoveryOptions = { resume: false },
  durable: Layer.Layer<Durable> = Durable.layer
) => {
  const life = startLife(home, durable, registry)
  const report: RecoveryReport = await life.runPromise(Effect.flatMap(Recovery, (r) => r.run(options)))
  const state = await life.runPromise(snapshotState)
  return { life, report, state }
}

const decodeLine = Schema.decodeUnknownEither(LogLine)

export interface OracleInput {
  readonly home: string
  readonly life: Life
  /** Messages acknowledged to their sender before the crash (id → recipient agent id, or null = unknown). */
  readonly ackedMessages: ReadonlyArray<{ readonly id: string; readonly to: AgentId | null }>
  /** Sync requests acknowledged to a sender agent (must not wait forever). */
  readonly ackedRequests: ReadonlyArray<{ readonly id: string; readonly from: AgentId }>
  /** Agents that must be alive / must be gone. */
  readonly mustLive: ReadonlyArray<AgentId>
  readonly mustBeGone: ReadonlyArray<AgentId>
  /** Every agent that may exist (created or being created before the crash), by id. */
  readonly mayExist: ReadonlySet<string> | null
}

/** Seed 001's oracle, on the recovered life (recovered with `resume: false`). Returns failures. */
export const checkOracle = async (o: OracleInput): Promise<Array<string>> => {
  const bad: Array<string> = []
  const paths = makePaths(o.home)
  const records = await o.life.runPromise(Effect.flatMap(SessionStore, (st) => st.scan))
  for (const r of records) if (r.state === "active") bad.push(`session ${r.id} is ACTIVE`)
  const byId = new Map(records.map((r) => [r.id, r] as const))
  const logs = new Map<string, Array<{ event: string; data: Record<string, unknown> }>>()
  const dirs = fs.existsSync(paths.agentsDir) ? fs.readdirSync(paths.agentsDir) : []
  for (const d of dirs) {
    if (!byId.has(d as SessionId)) bad.push(`session dir ${d} has no record (orphan left)`)
    const file = paths.eventsFile(d)
    const text = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : ""
    if (text.length > 0 && !text.endsWith("\n")) bad.push(`${d}: log does not end with a newline`)
    // An empty pending file is the WAL's resting state; one holding an entry was not repaired.
    if (fs.existsSync(paths.pendingFile(d)) && fs.statSync(paths.pendingFile(d)).size > 0) bad.push(`${d}: pending WAL entry left`)
    const entries: Array<{ event: string; data: Record<string, unknown> }> = []
    text.split("\n").filter((l) => l.length > 0).forEach((l, i) => {
      const e = decodeLine(l)
      if (e._tag === "Left") bad.push(`${d}:${i + 1}: invalid log line: ${e.left.message.slice(0, 200)}`)
      else entries.push({ event: e.right.event, data: e.right.data as unknown as Record<string, unknown> })
    })
    logs.set(d, entries)
    const created = entries.filter((e) => e.event === "agent.created")
    if (created.length === 0) bad.push(`${d}: session without agent.created survived recovery`)
    const terminated = entries.some((e) => e.event === "agent.terminated")
    const rec = byId.get(d as SessionId)
    if (rec && terminated !== (rec.state === "terminated")) {
      bad.push(`${d}: record state ${rec.state} but log terminated=${terminated}`)
    }
  }
  const s = await o.life.runPromise(agentState)
  for (const n of s.tree.nodes.values()) {
    if (n.parent_id !== null && !s.tree.has(n.parent_id)) bad.push(`agent ${n.name}: dangling parent`)
    const rec = byId.get(n.session_id)
    if (!rec) bad.push(`agent ${n.name}: no record`)
    else if (rec.state === "terminated") bad.push(`agent ${n.name}: terminated record in the tree`)
    if (o.mayExist !== null && !o.mayExist.has(n.id)) bad.push(`agent ${n.name} (${n.id}) was never created`)
  }
  // Every live (non-terminated) session with agent.created is in the tree.
  const inTree = new Set([...s.tree.nodes.values()].map((n) => n.session_id as string))
  for (const [d, entries] of logs) {
    const rec = byId.get(d as SessionId)
    if (rec && rec.state !== "terminated" && entries.some((e) => e.event === "agent.created") && !inTree.has(d)) {
      bad.push(`${d}: live session not in the tree (orphan child)`)
    }
  }
  for (const a of o.mustLive) if (!s.tree.has(a)) bad.push(`acknowledged agent ${a} lost`)
  // Seed 001: a spawn is acknowledged when the parent's turn ends. For every live agent, every
  // child its durably ended turns spawned exists (or was terminated since, on disk), and every
  // message those turns sent to a live agent is logged in the recipient's log or in its inbox.
  const createdOnDisk = new Set<string>()
  const terminatedOnDisk = new Set<string>()
  const enqueuedIn = new Map<string, Set<string>>()
  for (const [d, entries] of logs) {
    const ids = new Set<string>()
    for (const e of entries) {
      if (e.event === "agent.created") createdOnDisk.add(String(e.data["agent_id"]))
      if (e.event === "agent.terminated") terminatedOnDisk.add(String(e.data["agent_id"]))
      if (e.event === "message.enqueued") ids.add(String(e.data["id"]))
    }
    enqueuedIn.set(d, ids)
  }
  for (const n of s.tree.nodes.values()) {
    let spawned: Array<string> = []
    let sent: Array<{ id: string; to: string }> = []
    const invoked = new Map<string, string>()
    for (const e of logs.get(n.session_id) ?? []) {
      if (e.event === "turn.start") {
        spawned = []
        sent = []
      } else if (e.event === "tool_call.invoked" && e.data["tool"] === "send_message") {
        const args = e.data["arguments"] as { recipient?: string } | null
        invoked.set(String(e.data["call_id"]), args?.recipient ?? "?")
      } else if (e.event === "tool_call.result" && e.data["is_error"] === false) {
        const r = e.data["result"] as Record<string, unknown> | null
        if (e.data["tool"] === "spawn_agent" && typeof r?.["agent_id"] === "string") spawned.push(r["agent_id"])
        if (e.data["tool"] === "send_message" && typeof r?.["message_id"] === "string") {
          sent.push({ id: r["message_id"], to: invoked.get(String(e.data["call_id"])) ?? "?" })
        }
      } else if (e.event === "turn.complete" || (e.event === "provider.error" && e.data["turn_id"] != null)) {
        // A turn that failed *because* a birth failed (BirthError) acknowledged no unborn child.
        const birthFailed = e.event === "provider.error" && e.data["reason"] === "BirthError"
        for (const c of spawned) {
          if (terminatedOnDisk.has(c) || o.mustBeGone.includes(c as AgentId)) continue
          if (birthFailed && !createdOnDisk.has(c)) continue
          if (!createdOnDisk.has(c)) bad.push(`child ${c} spawned by ${n.name}'s completed turn was never born`)
          else if (!s.tree.has(c as AgentId)) bad.push(`child ${c} spawned by ${n.name}'s completed turn is not in the tree`)
        }
        for (const m of sent) {
          if (m.to === "USER") continue
          const to = s.tree.resolve(n.id, m.to)
          if (to._tag === "Left") continue
          const inInbox = (s.inboxes.get(to.right.id) ?? []).some((x) => x.id === m.id)
          if (!inInbox && !(enqueuedIn.get(to.right.session_id)?.has(m.id) ?? false)) {
            bad.push(`message ${m.id} sent by ${n.name}'s completed turn to ${m.to} is neither logged nor in its inbox`)
          }
        }
        spawned = []
        sent = []
      }
    }
  }
  for (const a of o.mustBeGone) if (s.tree.has(a)) bad.push(`terminated agent ${a} came back`)
  // Every acknowledged message to a live agent: delivered (logged) or back in its inbox.
  for (const m of o.ackedMessages) {
    if (m.to === null || !s.tree.has(m.to)) continue
    const node = s.tree.get(m.to)!
    const inInbox = (s.inboxes.get(m.to) ?? []).some((e) => e.id === m.id)
    const delivered = (logs.get(node.session_id) ?? []).some((e) =>
      e.event === "message.delivered" && e.data["message_id"] === m.id
    )
    if (!inInbox && !delivered) bad.push(`acknowledged message ${m.id} to ${node.name} lost`)
  }
  // No sender waits forever: each acknowledged sync request is answered or still pending.
  for (const r of o.ackedRequests) {
    if (!s.tree.has(r.from)) continue
    const node = s.tree.get(r.from)!
    const answered = (logs.get(node.session_id) ?? []).some((e) =>
      e.event === "message.enqueued" && e.data["kind"] === "response" && e.data["reply_to"] === r.id
    )
    if (!answered && !s.requests.has(r.id as never)) bad.push(`request ${r.id} from ${node.name} will never be answered`)
  }
  return bad
}

/** The crash-injecting Durable over deterministic primitives, with a label recorder per step. */
export const crashingLayer = (crashAt: number | undefined) => makeCrashing({ crashAt }, syncPrimitives)

export const readLogEvents = (home: string, session: string) => {
  const file = makePaths(home).eventsFile(session)
  if (!fs.existsSync(file)) return []
  return fs.readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0).map((l) =>
    JSON.parse(l) as { event: string; data: Record<string, unknown> }
  )
}

export const records = (home: string): Array<Session> => {
  const paths = makePaths(home)
  if (!fs.existsSync(paths.agentsDir)) return []
  return fs.readdirSync(paths.agentsDir).flatMap((d) => {
    const f = paths.sessionFile(d)
    return fs.existsSync(f) ? [Schema.decodeUnknownSync(Schema.parseJson(Session))(fs.readFileSync(f, "utf8"))] : []
  })
}


/**
 * Agent ids with an `agent.created` line on disk (read before recovery). Such an agent was
 * attempted even if the in-memory state dropped it: a failed append means "unknown" (the line may
 * be durable although the append reported an error), so the creator undid it in memory.
 */
export const agentsOnDisk = (home: string): Set<string> => {
  const paths = makePaths(home)
  const out = new Set<string>()
  if (!fs.existsSync(paths.agentsDir)) return out
  // The journal's whole records are durable too: the next start replays them into the logs.
  const journaled = fs.existsSync(paths.eventJournal)
    ? decodeRecords(fs.readFileSync(paths.eventJournal)).records.map((r) => Buffer.from(r.bytes).toString("utf8"))
    : []
  const texts = [...journaled]
  for (const d of fs.readdirSync(paths.agentsDir)) {
    for (const file of [paths.eventsFile(d), paths.pendingFile(d)]) {
      if (fs.existsSync(file)) texts.push(fs.readFileSync(file, "utf8"))
    }
  }
  for (const l of texts.flatMap((t) => t.split("\n"))) {
    if (!l.includes("\"agent.created\"")) continue
    try {
      const o = JSON.parse(l) as { event?: string; data?: { agent_id?: string } }
      if (o.event === "agent.created" && typeof o.data?.agent_id === "string") out.add(o.data.agent_id)
    } catch {
      // a torn line: not durable
    }
  }
  return out
}
