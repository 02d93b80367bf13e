// Quotas: the one owner of the per-agent counters behind the quotas on what an agent sends
// (docs/tools.md, "Quotas"; limits in src/domain/quota.ts). Every tool call passes `guard`
// before it runs (the ToolHandler: the MCP server over agent.sock and the in-process tool loops
// alike). A call past a limit is not run and not logged (the log stays bounded): its result is a
// `quota_exceeded` error with the quota, the limit and when to retry. Refusals that keep coming
// (`park_after` within 10 minutes) park the agent — the quarantine's parking: its queued turns
// wait, every tool call is refused — with an inbox item; `inbox answer <id> resume` (or
// `agent resume`) lifts it, `stop` terminates the agent.
// Windows are sliding, kept in at most 60 buckets each, so the state per agent is bounded. The
// open questions are counted from the human inbox (durable: recovery rebuilds it); the rate
// counters and a park start afresh with the daemon.
// Over 300 lines because it is the one owner of the counters: the guard, the parking and its
// answers read and change the same per-agent state.
import { Context, Effect, Option } from "effect"
import { randomUUID } from "node:crypto"
import type { InboxItem } from "../domain/budget.js"
import type { AgentId } from "../domain/ids.js"
import type { QuotaLimits, QuotaName, QuotaView } from "../domain/quota.js"
import type { ToolName } from "../domain/tools.js"
import type { ToolResult } from "../provider/Provider.js"
import { Mailbox } from "./Mailbox.js"
import { SpawnQueue } from "./SpawnQueue.js"
import { Tree } from "./Tree.js"
import { HumanDesk } from "./TurnGate.js"
import { Turns } from "./Turns.js"

/** The daemon's defaults (`quotas.*`); without this service there are no quotas (tests, embedders). */
export class QuotaConfig extends Context.Tag("substrat/QuotaConfig")<QuotaConfig, {
  readonly limits: QuotaLimits
  /** Refusals within 10 minutes that park the agent (0: never parked). */
  readonly parkAfter: number
}>() {}

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const BREACH_SPAN = 10 * MINUTE

/** A sliding window of `span` ms in at most 60 buckets: amounts added, summed, and when room frees. */
class Window {
  private readonly buckets: Array<{ t: number; n: number }> = []
  constructor(private readonly span: number) {}
  private prune(now: number) {
    while (this.buckets.length > 0 && this.buckets[0]!.t + this.span <= now) this.buckets.shift()
  }
  sum(now: number): number {
    this.prune(now)
    return this.buckets.reduce((s, b) => s + b.n, 0)
  }
  add(now: number, n: number) {
    const step = this.span / 60
    const last = this.buckets.at(-1)
    if (last !== undefined && now - last.t < step) last.n += n
    else this.buckets.push({ t: now, n })
  }
  /** Ms until `need` more fits under `limit` (null: it never will, `need` alone is over it). */
  retryAfter(now: number, need: number, limit: number): number | null {
    if (need > limit) return null
    let left = this.sum(now)
    for (const b of this.buckets) {
      if (left + need <= limit) break
      left -= b.n
      if (left + need <= limit) return Math.max(1, b.t + this.span - now)
    }
    return left + need <= limit ? 0 : null
  }
}

interface Use {
  readonly messages: Window
  readonly messageBytes: Window
  readonly spawns: Window
  readonly logBytes: Window
  readonly breaches: Window
  turn: string | null
  calls: number
}

interface Park {
  readonly item_id: string
  readonly reason: string
  readonly ts: string
}

/** A refused call: the quota, its limit, and when to try again (null: not by waiting). */
export interface QuotaRefusal {
  readonly quota: QuotaName | "parked"
  readonly limit: number
  readonly retry_after_s: number | null
  readonly message: string
}

const noLimits: QuotaLimits = {
  messages_per_minute: 0,
  message_bytes_per_hour: 0,
  open_questions: 0,
  spawns_per_minute: 0,
  tool_calls_per_turn: 0,
  log_bytes_per_hour: 0
}

const bytesOf = (u: unknown): number => {
  try {
    return Buffer.byteLength(JSON.stringify(u ?? null) ?? "", "utf8")
  } catch {
    return 0
  }
}

/** The text a message tool sends (send_message, broadcast); 0 for other tools. */
const messageBytes = (args: unknown): number => {
  const text = typeof args === "object" && args !== null ? (args as { readonly text?: unknown }).text : undefined
  return typeof text === "string" ? Buffer.byteLength(text, "utf8") : 0
}

const refusedResult = (r: QuotaRefusal): ToolResult => ({
  is_error: true,
  result: { error: { type: "quota_exceeded", quota: r.quota, limit: r.limit, retry_after_s: r.retry_after_s, message: r.message } }
})

export class Quotas extends Effect.Service<Quotas>()("substrat/Quotas", {
  effect: Effect.gen(function*() {
    const tree = yield* Tree
    const turns = yield* Turns
    const mailbox = yield* Mailbox
    const spawns = yield* SpawnQueue
    const config = Option.getOrNull(yield* Effect.serviceOption(QuotaConfig))
    const desk = Option.getOrNull(yield* Effect.serviceOption(HumanDesk))

    const uses = new Map<AgentId, Use>()
    const parks = new Map<AgentId, Park>()

    const useOf = (agent: AgentId): Use => {
      let u = uses.get(agent)
      if (u === undefined) {
        u = {
          messages: new Window(MINUTE),
          messageBytes: new Window(HOUR),
          spawns: new Window(MINUTE),
          logBytes: new Window(HOUR),
          breaches: new Window(BREACH_SPAN),
          turn: null,
          calls: 0
        }
        uses.set(agent, u)
      }
      return u
    }

    /** The limits in force for `agent`: its root's own over the config's. */
    const limitsOf = (agent: AgentId): QuotaLimits => {
      if (config === null) return noLimits
      const root = spawns.rootOf(agent)
      const own = root === undefined ? undefined : spawns.capsOf(root.id).quotas
      return own === undefined ? config.limits : { ...config.limits, ...own }
    }

    /** A park lifted by `agent resume` (the mailbox's parking) is lifted here too. */
    const parkOf = (agent: AgentId): Park | undefined => {
      const p = parks.get(agent)
      if (p !== undefined && !mailbox.isParked(agent)) {
        parks.delete(agent)
        uses.delete(agent)
        return undefined
      }
      return p
    }

    const seconds = (ms: number | null) => (ms === null ? null : Math.max(1, Math.ceil(ms / 1000)))

    /** The first quota the call would pass, or null; a call that fits is counted. */
    const check = (agent: AgentId, tool: ToolName, args: unknown, now: number): QuotaRefusal | null => {
      const limits = limitsOf(agent)
      const u = useOf(agent)
      const over = (quota: QuotaName, retryMs: number | null, what: string): QuotaRefusal => ({
        quota,
        limit: limits[quota],
        retry_after_s: seconds(retryMs),
        message: `quota ${quota} (${limits[quota]}) reached: ${what}. ${
          retryMs === null ? "Waiting will not help: stop and end your turn." : `Try again in ${seconds(retryMs)} s, or end your turn.`
        }`
      })
      const turn = turns.turnIdOf(agent)
      if (turn !== u.turn) {
        u.turn = turn
        u.calls = 0
      }
      if (limits.tool_calls_per_turn > 0 && u.calls >= limits.tool_calls_per_turn) {
        return over("tool_calls_per_turn", null, `${u.calls} tool calls in this turn`)
      }
      const logBytes = bytesOf(args)
      if (limits.log_bytes_per_hour > 0 && u.logBytes.sum(now) + logBytes > limits.log_bytes_per_hour) {
        return over("log_bytes_per_hour", u.logBytes.retryAfter(now, logBytes, limits.log_bytes_per_hour), "your tool calls logged that much in the last hour")
      }
      const isMessage = tool === "send_message" || tool === "broadcast"
      const text = isMessage ? messageBytes(args) : 0
      if (isMessage) {
        if (limits.messages_per_minute > 0 && u.messages.sum(now) + 1 > limits.messages_per_minute) {
          return over("messages_per_minute", u.messages.retryAfter(now, 1, limits.messages_per_minute), "messages sent in the last minute")
        }
        if (limits.message_bytes_per_hour > 0 && u.messageBytes.sum(now) + text > limits.message_bytes_per_hour) {
          return over(
            "message_bytes_per_hour",
            u.messageBytes.retryAfter(now, text, limits.message_bytes_per_hour),
            `message bytes sent in the last hour (this one: ${text})`
          )
        }
      }
      if (tool === "spawn_agent" && limits.spawns_per_minute > 0 && u.spawns.sum(now) + 1 > limits.spawns_per_minute) {
        return over("spawns_per_minute", u.spawns.retryAfter(now, 1, limits.spawns_per_minute), "agents spawned in the last minute")
      }
      if (tool === "ask_human" && limits.open_questions > 0 && desk !== null) {
        const open = desk.openQuestions(agent)
        if (open >= limits.open_questions) return over("open_questions", null, `${open} questions to the human still open; wait for the answers`)
      }
      u.calls++
      u.logBytes.add(now, logBytes)
      if (isMessage) {
        u.messages.add(now, 1)
        u.messageBytes.add(now, text)
      }
      if (tool === "spawn_agent") u.spawns.add(now, 1)
      return null
    }

    /** A refusal counts as a breach; `parkAfter` of them within 10 minutes park the agent. */
    const breach = (agent: AgentId, r: QuotaRefusal, now: number) =>
      Effect.suspend(() => {
        if (config === null || config.parkAfter === 0) return Effect.void
        const u = useOf(agent)
        u.breaches.add(now, 1)
        if (u.breaches.sum(now) < config.parkAfter || parks.has(agent)) return Effect.void
        const node = tree.get(agent)
        if (node === undefined) return Effect.void
        const reason = `${config.parkAfter} tool calls refused by quotas within 10 minutes (last: ${r.quota}, limit ${r.limit})`
        parks.set(agent, { item_id: randomUUID(), reason, ts: new Date(now).toISOString() })
        mailbox.park(agent)
        return Effect.logWarning(`agent ${node.name} parked: ${reason}`)
      })

    /** Run `call` if `agent`'s quotas admit it; else the `quota_exceeded` result (nothing run, nothing logged). */
    const guard = (agent: AgentId, tool: ToolName, args: unknown, call: Effect.Effect<ToolResult>): Effect.Effect<ToolResult> =>
      Effect.suspend(() => {
        if (config === null) return call
        const now = Date.now()
        const park = parkOf(agent)
        if (park !== undefined) {
          return Effect.succeed(refusedResult({
            quota: "parked",
            limit: config.parkAfter,
            retry_after_s: null,
            message: `this agent is parked: ${park.reason}. The human was asked (inbox item ${park.item_id}); stop and end your turn.`
          }))
        }
        const refused = check(agent, tool, args, now)
        if (refused !== null) return Effect.as(breach(agent, refused, now), refusedResult(refused))
        return Effect.tap(call, (out) => Effect.sync(() => useOf(agent).logBytes.add(Date.now(), bytesOf(out.result))))
      })

    const view = (agent: AgentId): QuotaView => {
      const now = Date.now()
      const limits = limitsOf(agent)
      const u = useOf(agent)
      const park = parkOf(agent)
      return {
        limits,
        used: {
          messages_per_minute: u.messages.sum(now),
          message_bytes_per_hour: u.messageBytes.sum(now),
          open_questions: desk?.openQuestions(agent) ?? 0,
          spawns_per_minute: u.spawns.sum(now),
          tool_calls_per_turn: u.turn !== null && u.turn === turns.turnIdOf(agent) ? u.calls : 0,
          log_bytes_per_hour: u.logBytes.sum(now)
        },
        breaches: u.breaches.sum(now),
        park_after: config?.parkAfter ?? 0,
        parked: park === undefined ? null : { item_id: park.item_id, reason: park.reason }
      }
    }

    /** Parked agents as inbox items, oldest first. */
    const inbox = (): ReadonlyArray<InboxItem> =>
      [...parks.keys()].flatMap((agent) => {
        const node = tree.get(agent)
        const p = parkOf(agent)
        if (node === undefined || p === undefined) return []
        return [{
          id: p.item_id,
          kind: "quota" as const,
          agent_id: agent,
          agent_name: node.name,
          text: `${node.name} is parked: ${p.reason}. Resume it (substrat inbox answer ${p.item_id} resume) or stop it (substrat inbox answer ${p.item_id} stop).`,
          ts: p.ts
        }]
      })

    /** The agent parked under inbox item `id` (undefined: no such item). */
    const parkedBy = (id: string): AgentId | undefined => {
      for (const [agent, p] of parks) if (p.item_id === id && parkOf(agent) !== undefined) return agent
      return undefined
    }

    /** Lift a quota park: counters start afresh, the queued turns run (how many). */
    const release = (agent: AgentId): Effect.Effect<number> =>
      Effect.suspend(() => {
        if (!parks.delete(agent)) return Effect.succeed(0)
        uses.delete(agent)
        return mailbox.unpark(agent)
      })

    return { guard, view, inbox, parkedBy, release, enabled: config !== null } as const
  })
}) {}
