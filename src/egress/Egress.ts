// The daemon's egress service (docs/sandbox.md "Egress"): for one agent turn whose workspace has
// an egress policy, the proxy (Proxy.ts) on the agent's own socket, with the policy read fresh
// for every request (an approval applies to the very next one), names resolved by the
// EgressResolver, limits kept (bytes per turn, bytes per workspace per UTC day, open connections
// per workspace), every request logged as `egress.request` in the agent's log, and the human's
// side: a refused host becomes one inbox item per host per workspace (kept in the workspace's
// spec, so it survives a crash), which the human approves (the host joins the allowlist) or
// dismisses. The model has no way to answer it: the inbox is the admin socket's.
// Over 300 lines because it is the one owner of the egress counters and host inbox items: the
// proxy's per-request checks and the human's answers change the same state.
import { Context, Effect, Either, Layer, Runtime, type Scope } from "effect"
import { randomUUID } from "node:crypto"
import type { InboxItem } from "../domain/budget.js"
import { EgressAsk, EgressDayUsage, EgressPolicy, isEmptyPolicy, type PresetTable, ruleFor } from "../domain/egress.js"
import { InvalidInputError } from "../domain/errors.js"
import { makeEvent } from "../domain/events.js"
import type { SessionId, WorkspaceId } from "../domain/ids.js"
import type { WorkspaceSpec } from "../domain/workspace.js"
import { WorkspaceStore } from "../sandbox/WorkspaceStore.js"
import { EventLog } from "../storage/EventLog.js"
import { Tracing } from "../telemetry/Tracing.js"
import * as Proxy from "./Proxy.js"
import { EgressResolver } from "./Resolver.js"

export interface EgressLimits {
  /** Bytes one turn may move (0: unbounded). */
  readonly bytesPerTurn: number
  /** Bytes one workspace may move per UTC day (0: unbounded). */
  readonly bytesPerDay: number
  /** Open connections per workspace. */
  readonly maxConnections: number
}

export interface EgressSettings extends EgressLimits {
  readonly presets: PresetTable
}

export interface TurnEgress {
  /** The agent's session (its log gets each `egress.request`); null: a human's shell, logged in the daemon's log. */
  readonly session_id: SessionId | null
  readonly agent_id: string
  readonly agent_name: string
  readonly workspace_id: WorkspaceId | null
  /** Where to serve the proxy (the agent's own socket). */
  readonly socketPath: string
  /**
   * The number of the agent's turn now running, when the proxy is served across turns (a live
   * ACP agent's process): the per-turn byte count starts again when it changes. Absent: one turn.
   */
  readonly turn?: () => number
}

export interface EgressAnswer {
  readonly id: string
  readonly kind: "approve" | "dismiss"
  readonly agent_id: string
  readonly agent_name: string
}

export class Egress extends Context.Tag("substrat/Egress")<Egress, {
  readonly presets: PresetTable
  /**
   * Serve the proxy for one turn while the scope lives; false (nothing served) when the workspace
   * has network access or no egress policy.
   */
  readonly serveTurn: (t: TurnEgress) => Effect.Effect<boolean, Error, Scope.Scope>
  /** The unanswered egress items of every workspace. */
  readonly inbox: Effect.Effect<ReadonlyArray<InboxItem>>
  /** Answer one (`approve` or `dismiss`); null: no such egress item. */
  readonly answer: (id: string, text: string) => Effect.Effect<EgressAnswer | null, InvalidInputError>
}>() {}

/** `host` for 80/443, else `host:port`: what an approval adds. */
const asked = (host: string, port: number) => (port === 80 || port === 443 ? host : `${host}:${port}`)

const describe = (spec: WorkspaceSpec) => spec.name ?? spec.id.slice(0, 8)

/** Bytes counted between two writes of a workspace's daily count during a long transfer (and at every request's end). */
const PERSIST_EVERY = 4 * 1024 * 1024

const day = () => new Date().toISOString().slice(0, 10)

export const make = (settings: EgressSettings) =>
  Effect.gen(function*() {
    const store = yield* WorkspaceStore
    const log = yield* EventLog
    const resolver = yield* EgressResolver
    const tracing = yield* Tracing
    const runtime = yield* Effect.runtime<never>()
    const run = Runtime.runPromise(runtime)
    const table = settings.presets

    /**
     * Per workspace: open connections, bytes today, the bytes last written to its
     * `egress-usage.json` and the write in progress (writes to one file never overlap).
     */
    const usage = new Map<string, { open: number; day: string; bytes: number; saved: number; saving: Promise<void> }>()
    const usageOf = (ws: string) => {
      let u = usage.get(ws)
      if (u === undefined) usage.set(ws, u = { open: 0, day: day(), bytes: 0, saved: 0, saving: Promise.resolve() })
      if (u.day !== day()) {
        u.day = day()
        u.bytes = 0
        u.saved = -1
      }
      return u
    }
    /** Today's count from disk, once per workspace per daemon (a kill -9 does not reset the daily limit). */
    const loadUsage = (ws: WorkspaceId) =>
      Effect.gen(function*() {
        if (usage.has(ws)) return
        const on = yield* store.egressUsage(ws)
        if (usage.has(ws)) return
        const u = usageOf(ws)
        if (on !== null && on.day === u.day) u.bytes = u.saved = on.bytes
      })
    /** Write the day's count (in order; a failed write is retried by the next). */
    const persist = (ws: WorkspaceId) => {
      const u = usageOf(ws)
      if (u.saved === u.bytes) return
      u.saved = u.bytes
      u.saving = u.saving.then(() =>
        run(store.writeEgressUsage(ws, new EgressDayUsage({ day: u.day, bytes: u.bytes })).pipe(
          Effect.catchAll((e) => Effect.sync(() => { u.saved = -1 }).pipe(Effect.zipRight(Effect.logWarning(`egress usage not saved: ${e.message}`))))
        ))
      )
    }

    /** Add an inbox item to the workspace (once per host, none for a dismissed host); its id. */
    const ask = (ws: WorkspaceId, entry: Omit<EgressAsk, "item_id" | "ts">) =>
      Effect.gen(function*() {
        let id: string | null = null
        yield* store.updateEgress(ws, (p) => {
          const same = p.asked.find((a) => a.kind === entry.kind && a.host === entry.host)
          if (same !== undefined) {
            id = same.item_id
            return Either.right(p)
          }
          if (entry.kind === "host" && p.dismissed.includes(entry.host)) return Either.right(p)
          id = randomUUID()
          return Either.right(new EgressPolicy({ ...p, asked: [...p.asked, new EgressAsk({ ...entry, item_id: id, ts: new Date().toISOString() })] }))
        })
        return id as string | null
      }).pipe(Effect.orElseSucceed(() => null))

    const serveTurn = Effect.fn("Egress.serveTurn")(function*(t: TurnEgress) {
      if (t.workspace_id === null) return false
      const wsId = t.workspace_id
      const chain = yield* store.chain(wsId).pipe(Effect.orElseSucceed(() => [] as ReadonlyArray<WorkspaceSpec>))
      const self = chain[0]
      if (self === undefined || self.network_access || isEmptyPolicy(self.egress)) return false
      yield* loadUsage(wsId)
      let turnBytes = 0
      let turnBreached = false
      /** The inbox item a refusal of host:port raised (for its event). */
      const pending = new Map<string, string | null>()

      const check = async (host: string, port: number): Promise<Proxy.Check> => {
        const specs = await run(store.chain(wsId).pipe(Effect.orElseSucceed(() => [] as ReadonlyArray<WorkspaceSpec>)))
        const own = specs[0]
        if (own === undefined) return { allowed: false, reason: "the workspace no longer exists", message: "substrat egress: the workspace no longer exists\n" }
        const rule = ruleFor(own.egress, table, host, port)
        const blocking = rule === null ? own : specs.slice(1).find((s) => ruleFor(s.egress, table, host, port) === null)
        if (rule !== null && blocking === undefined) return { allowed: true, rule }
        const b = blocking ?? own
        const target = asked(host, port)
        const item = await run(ask(wsId, {
          host: target,
          kind: "host",
          agent_id: t.agent_id,
          agent_name: t.agent_name,
          text: `${t.agent_name} asked for ${target} (workspace ${describe(own)})`
        }))
        const reason = b === own
          ? `${target} is not in the egress policy of workspace ${describe(own)}`
          : `${target} is not allowed by the parent workspace ${describe(b)}`
        const how = item !== null
          ? `A human can allow it: substrat inbox answer ${item} approve (or: substrat workspace allow ${describe(b)} ${target}).`
          : `A human dismissed an earlier request for it; to allow it: substrat workspace allow ${describe(b)} ${target}.`
        const allowedNow = [...b.egress.presets.map((p) => `preset ${p}`), ...b.egress.hosts].join(", ") || "nothing"
        pending.set(`${host}:${port}`, item)
        return {
          allowed: false,
          reason,
          message: `substrat egress: ${reason} (it allows: ${allowedNow}).\n${how}\nThe agent cannot grant itself access.\n`
        }
      }

      const acquire = (): string | null => {
        const u = usageOf(wsId)
        if (u.open >= settings.maxConnections) {
          return `workspace ${describe(self)} has ${u.open} egress connections open, the most it may (egress.maxConnections = ${settings.maxConnections})`
        }
        u.open++
        return null
      }
      const release = () => {
        const u = usageOf(wsId)
        u.open = Math.max(0, u.open - 1)
      }
      /** The inbox item of this turn's reached limit (one per turn), once it is written. */
      let limitAsk: Promise<string | null> | null = null
      const limitItem = (text: string) => {
        if (turnBreached) return
        turnBreached = true
        limitAsk = run(ask(wsId, { host: "", kind: "limit", agent_id: t.agent_id, agent_name: t.agent_name, text }))
      }
      let turnNow = t.turn?.() ?? 0
      const count = (n: number): string | null => {
        const turn = t.turn?.() ?? 0
        if (turn !== turnNow) {
          turnNow = turn
          turnBytes = 0
          turnBreached = false
          limitAsk = null
        }
        turnBytes += n
        const u = usageOf(wsId)
        u.bytes += n
        if (u.bytes - u.saved >= PERSIST_EVERY) persist(wsId)
        if (settings.bytesPerTurn > 0 && turnBytes > settings.bytesPerTurn) {
          const m = `${t.agent_name}'s turn moved more than ${settings.bytesPerTurn} bytes through the egress proxy (egress.bytesPerTurn); the connection was ended`
          limitItem(m)
          return m
        }
        if (settings.bytesPerDay > 0 && u.bytes > settings.bytesPerDay) {
          const m = `workspace ${describe(self)} moved more than ${settings.bytesPerDay} bytes through the egress proxy today (egress.bytesPerDay); the connection was ended`
          limitItem(m)
          return m
        }
        return null
      }
      const record = (r: Proxy.EgressRecord) => {
        persist(wsId)
        // A connection a limit ended is logged after the limit's inbox item exists (and names it).
        const ended = r.allowed && r.reason !== null && limitAsk !== null ? limitAsk : Promise.resolve(null)
        void ended.then((limit) => {
          const item = r.allowed ? limit ?? undefined : pending.get(`${r.host}:${r.port}`) ?? undefined
          const event = makeEvent("egress.request", { workspace_id: wsId, ...r, ...(item === undefined ? {} : { item_id: item }) })
          const session = t.session_id
          return run(session === null
            ? Effect.logInfo(`egress (${t.agent_name} in workspace ${describe(self)}): ${JSON.stringify(event.data)}`)
            : log.append(session, event).pipe(Effect.catchAll((e) => Effect.logWarning(`egress.request not logged: ${e.message}`))))
        })
      }
      const resolve = (host: string) =>
        run(Effect.either(resolver.resolve(host))).then((e) =>
          Either.isRight(e) ? { ok: true as const, to: e.right } : { ok: false as const, reason: e.left }
        )
      /** Each request a span below the agent's running turn; refused or ended early: an error status. */
      const session = t.session_id
      const begin = (host: string, port: number, method: string) => {
        const span = run(tracing.egressRequest(session ?? "", {
          "server.address": host,
          "server.port": port,
          "http.request.method": method,
          "substrat.workspace_id": wsId
        }))
        return (r: Proxy.EgressRecord) => {
          void span.then((s) => {
            s.annotate({
              "substrat.egress.allowed": r.allowed,
              ...(r.rule === null ? {} : { "substrat.egress.rule": r.rule }),
              ...(r.status === null ? {} : { "http.response.status_code": r.status }),
              "substrat.egress.bytes_up": r.bytes_up,
              "substrat.egress.bytes_down": r.bytes_down
            })
            return run(s.end(r.reason === null ? undefined : { type: r.allowed ? "ended" : "denied", message: r.reason }))
          })
        }
      }
      yield* Proxy.serve({
        socketPath: t.socketPath,
        hooks: { check, resolve, acquire, release, count, record, ...(tracing.enabled && session !== null ? { begin } : {}) }
      })
      return true
    })

    const inbox = Effect.map(store.list().pipe(Effect.orElseSucceed(() => [] as ReadonlyArray<WorkspaceSpec>)), (specs) =>
      specs.flatMap((s) =>
        s.egress.asked.map((a): InboxItem => ({
          id: a.item_id,
          kind: "egress",
          agent_id: a.agent_id,
          agent_name: a.agent_name,
          text: a.kind === "limit"
            ? `${a.text}. Raise egress.bytesPerTurn / egress.bytesPerDay in config.toml; dismiss: substrat inbox answer ${a.item_id} dismiss`
            : `${a.text}. Allow it: substrat inbox answer ${a.item_id} approve; or dismiss`,
          ts: a.ts,
          answers: a.kind === "limit" ? ["dismiss"] : ["approve", "dismiss"]
        }))
      ))

    const answer = Effect.fn("Egress.answer")(function*(id: string, text: string) {
      const specs = yield* store.list().pipe(Effect.orElseSucceed(() => [] as ReadonlyArray<WorkspaceSpec>))
      const owner = specs.find((s) => s.egress.asked.some((a) => a.item_id === id))
      if (owner === undefined) return null
      const item = owner.egress.asked.find((a) => a.item_id === id)!
      const word = text.trim().toLowerCase()
      const approve = word === "approve" || word === "allow" || word === "yes"
      const dismiss = word === "dismiss" || word === "deny" || word === "no"
      if (!approve && !dismiss) {
        return yield* new InvalidInputError({ field: "answer", message: `item ${id} is an egress request for ${item.host || "a limit"}: answer "approve" or "dismiss"` })
      }
      if (approve && item.kind === "limit") {
        return yield* new InvalidInputError({ field: "answer", message: `item ${id} is a reached egress limit: raise it in the configuration, then answer "dismiss"` })
      }
      yield* store.updateEgress(owner.id, (p) => {
        const rest = p.asked.filter((a) => a.item_id !== id)
        if (item.kind === "limit") return Either.right(new EgressPolicy({ ...p, asked: rest }))
        return Either.right(new EgressPolicy(approve
          ? { ...p, asked: rest, hosts: p.hosts.includes(item.host) ? p.hosts : [...p.hosts, item.host], dismissed: p.dismissed.filter((h) => h !== item.host) }
          : { ...p, asked: rest, dismissed: p.dismissed.includes(item.host) ? p.dismissed : [...p.dismissed, item.host] }))
      }).pipe(Effect.mapError((e) => new InvalidInputError({ field: "answer", message: e.message })))
      const out: EgressAnswer = { id, kind: approve ? "approve" : "dismiss", agent_id: item.agent_id, agent_name: item.agent_name }
      return out
    })

    return Egress.of({ presets: table, serveTurn, inbox, answer })
  })

export const layer = (settings: EgressSettings): Layer.Layer<Egress, never, WorkspaceStore | EventLog | EgressResolver> =>
  Layer.effect(Egress, make(settings))
