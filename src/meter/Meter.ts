// Meter: the one owner of budgets, turn reservations, parked agents' reasons and the human inbox
// (docs/budgets.md). It meters every model request (ModelMeter: the per-agent forwarders and the
// openai provider call it), admits or refuses the next request, gates turns and spawns (TurnGate)
// and takes agents' questions (HumanDesk). Durable: `usage` (source "request"), `budget.set`,
// `budget.breached`, `human.asked` / `human.answered` in the agent's own log; recovery folds them
// back (src/recovery/Fold.ts) and hands them to `seed`.
//   - A budget covers its agent's subtree. Every budget on the path from an agent to its root
//     must have room: a child's own budget is carved out of its ancestors' (it can never spend
//     more than any of them has left); a child without one shares its parent's.
//   - Before a turn: a turn is reserved (the turn budget counts running turns); the agent is
//     parked instead when a budget on its path is spent or it waits for the human.
//   - Before a model request: refused once a budget on the path is spent (cache reads count).
//   - A spent budget opens one inbox item (`budget.breached` in the owner's log); `setBudget`
//     (a raise) closes it and unparks the subtree.
//
// Over 300 lines because it is the one owner of budgets, reservations, parked agents and the inbox:
// the rules above act on that one state, so they stay one service (its ports are thin views at the
// end).
import { Context, Deferred, Effect, Exit, FiberId, Layer } from "effect"
import { randomUUID } from "node:crypto"
import type { AgentNode } from "../domain/agent.js"
import { type Budget, exhaustedBy, heldFull, type InboxItem, type LimitsPatch, type Remaining, remainingOf, spentLimit } from "../domain/budget.js"
import { BudgetExceeded, InvalidInputError, NotFoundError } from "../domain/errors.js"
import { makeEvent } from "../domain/events.js"
import type { AgentId, MessageId, SessionId, TurnId } from "../domain/ids.js"
import type { MessageEnvelope } from "../domain/message.js"
import type { UsageWithTurns } from "../domain/usage.js"
import { Activity } from "../agent/Activity.js"
import { Mailbox } from "../agent/Mailbox.js"
import { Tree } from "../agent/Tree.js"
import { BudgetShares, HumanDesk, TurnGate } from "../agent/TurnGate.js"
import { Turns } from "../agent/Turns.js"
import { type Hold, ModelMeter } from "../provider/ModelMeter.js"
import { EventLog } from "../storage/EventLog.js"
import type { RequestEstimate } from "../domain/estimate.js"
import { costOf, maxCostOf, type PriceTable, priceTable } from "../domain/prices.js"
import type { RequestUsage } from "../domain/requestUsage.js"

/** The price table the Meter uses (the daemon builds it from `meter.prices`). */
export class MeterPrices extends Context.Tag("substrat/MeterPrices")<MeterPrices, PriceTable>() {
  static readonly layer = (overrides: PriceTable = {}): Layer.Layer<MeterPrices> => Layer.succeed(MeterPrices, priceTable(overrides))
}

interface Breach {
  readonly item_id: string
  readonly reason: string
  readonly ts: string
}
interface Question {
  readonly item_id: string
  readonly agent: AgentId
  readonly question: string
  readonly ts: string
}

/** What recovery rebuilt from the logs. */
export interface MeterSeed {
  readonly budgets: ReadonlyMap<AgentId, Budget>
  readonly breaches: ReadonlyMap<AgentId, Breach>
  readonly questions: ReadonlyArray<Question>
  /** Messages to USER the human has read (`user.read`). */
  readonly read?: ReadonlySet<MessageId> | undefined
}

/** One agent's budget view: its own budget (if any) and every budget on its path, with what is left. */
export interface BudgetReport {
  readonly agent_id: AgentId
  readonly budget: Budget | null
  readonly used: UsageWithTurns
  readonly remaining: Remaining | null
  /** Why the agent cannot work now (its own or an ancestor's budget spent), or null. */
  readonly exhausted: string | null
  readonly breach: { readonly item_id: string; readonly reason: string } | null
}

const newItemId = () => randomUUID()
/** `forwarder.refused` events per agent and minute (more are counted into the next one). */
const REFUSALS_PER_MINUTE = 20

/** A message to USER that waits to be read: a reply, or a root's own message (not a progress note). */
const isAnswer = (m: MessageEnvelope): boolean => m.kind === "response" || m.progress !== true

export class Meter extends Effect.Service<Meter>()("substrat/Meter", {
  effect: Effect.gen(function*() {
    const tree = yield* Tree
    const activity = yield* Activity
    const turns = yield* Turns
    const mailbox = yield* Mailbox
    const log = yield* EventLog
    const prices = yield* MeterPrices

    const budgets = new Map<AgentId, Budget>()
    const breaches = new Map<AgentId, Breach>()
    const questions = new Map<string, Question>()
    /** Turns running now per agent (reserved by `mayStart`). */
    const reserved = new Map<AgentId, number>()

    const nodeOfSession = (session: SessionId): AgentNode | undefined => {
      for (const n of tree.current().nodes.values()) if (n.session_id === session) return n
      return undefined
    }
    const subtreeIds = (id: AgentId) => tree.current().subtree(id).map((n) => n.id)
    const usedBy = (id: AgentId): UsageWithTurns => activity.usageOf(id, subtreeIds(id)).subtree
    const reservedIn = (id: AgentId) => subtreeIds(id).reduce((n, a) => n + (reserved.get(a) ?? 0), 0)

    /** The agent and its ancestors, nearest first. */
    const path = (id: AgentId): ReadonlyArray<AgentNode> => {
      const out: Array<AgentNode> = []
      let n = tree.get(id)
      while (n !== undefined) {
        out.push(n)
        n = n.parent_id === null ? undefined : tree.get(n.parent_id)
      }
      return out
    }

    /** The first budget on the path that admits no more work: its owner and why. */
    const exhausted = (id: AgentId, turn: boolean): { readonly owner: AgentNode; readonly reason: string } | null => {
      const now = Date.now()
      for (const n of path(id)) {
        const b = budgets.get(n.id)
        if (b === undefined) continue
        const reason = exhaustedBy(b, usedBy(n.id), reservedIn(n.id), now, turn)
        if (reason !== null) return { owner: n, reason }
      }
      return null
    }

    /** Open the owner's inbox item for a spent budget (once, until it is raised). */
    const breach = (owner: AgentNode, reason: string) =>
      Effect.gen(function*() {
        if (breaches.has(owner.id)) return
        const item: Breach = { item_id: newItemId(), reason, ts: new Date().toISOString() }
        breaches.set(owner.id, item)
        yield* log.append(owner.session_id, makeEvent("budget.breached", { item_id: item.item_id, reason })).pipe(
          Effect.catchAll((e) => Effect.logWarning(`budget.breached of ${owner.name} not logged: ${e.message}`))
        )
      })

    const refusal = (owner: AgentNode, reason: string, agent: AgentId) =>
      `${owner.id === agent ? "this agent's" : `${owner.name}'s (an ancestor's)`} ${reason}`

    /** In-flight model requests' reservations, and what they hold per agent. */
    const holds = new Map<string, {
      readonly hold: Hold
      readonly agent: AgentId | null
      readonly turn_id: TurnId | null
      readonly model: string | null
      readonly logged: boolean
    }>()
    const heldBy = new Map<AgentId, { usd: number; tokens: number }>()
    const heldIn = (id: AgentId) => {
      const sum = { usd: 0, tokens: 0 }
      if (heldBy.size === 0) return sum
      for (const a of subtreeIds(id)) {
        const h = heldBy.get(a)
        if (h === undefined) continue
        sum.usd += h.usd
        sum.tokens += h.tokens
      }
      return sum
    }
    const addHeld = (agent: AgentId, h: Hold, sign: 1 | -1) => {
      const cur = heldBy.get(agent) ?? { usd: 0, tokens: 0 }
      cur.usd += sign * h.cost_usd
      cur.tokens += sign * h.tokens
      heldBy.set(agent, cur)
      // (Sums of floats: start from exact zeros once nothing is in flight.)
      if (holds.size === 0) heldBy.clear()
    }
    /** Completed when a hold is released or a budget changes: waiting requests look again. */
    let released = Deferred.unsafeMake<void>(FiberId.none)
    const wakeWaiters = () => {
      const d = released
      released = Deferred.unsafeMake<void>(FiberId.none)
      Deferred.unsafeDone(d, Exit.void)
    }

    /** Admit a request now (its hold placed), make it wait, or refuse it: one synchronous look. */
    const tryHold = (node: AgentNode | undefined, session: SessionId, estimate: RequestEstimate) => {
      if (node !== undefined) {
        const now = Date.now()
        for (const n of path(node.id)) {
          const b = budgets.get(n.id)
          if (b === undefined) continue
          const used = usedBy(n.id)
          const spent = spentLimit(b, used, reservedIn(n.id), now, false)
          if (spent !== null) return { _tag: "spent", owner: n, spent } as const
          if (heldFull(b, used, heldIn(n.id))) return { _tag: "wait" } as const
        }
      }
      const h: Hold = { id: randomUUID(), session, cost_usd: maxCostOf(prices, estimate), tokens: estimate.input_tokens + estimate.output_tokens }
      const logged = h.tokens > 0
      holds.set(h.id, { hold: h, agent: node?.id ?? null, turn_id: node === undefined ? null : turns.turnIdOf(node.id), model: estimate.model, logged })
      if (node !== undefined) addHeld(node.id, h, 1)
      return { _tag: "held", hold: h, logged } as const
    }

    const release = (id: string) => {
      const held = holds.get(id)
      if (held === undefined) return
      holds.delete(id)
      if (held.agent !== null) addHeld(held.agent, held.hold, -1)
      wakeWaiters()
    }

    /**
     * Reserve a model request's most expensive outcome (ModelMeter.reserve): admitted while every
     * budget on the path has room once the requests in flight are counted at their reservations;
     * waits while they fill it; refused (BudgetExceeded) once one is spent. Logged before it returns.
     */
    const reserve = Effect.fn("Meter.reserve")(function*(session: SessionId, estimate: RequestEstimate) {
      const node = nodeOfSession(session)
      for (;;) {
        const wake = released
        const r = tryHold(node, session, estimate)
        if (r._tag === "wait") {
          yield* Deferred.await(wake)
          continue
        }
        if (r._tag === "spent") {
          yield* breach(r.owner, r.spent.reason)
          const agent = node!
          return yield* new BudgetExceeded({
            agent_id: agent.id,
            owner_id: r.owner.id,
            owner_name: r.owner.name,
            limit: r.spent.limit,
            reason: r.spent.reason,
            message: `${refusal(r.owner, r.spent.reason, agent.id)}; the human was asked to raise it (substrat budget set). Stop and end your turn.`
          })
        }
        if (r.logged) {
          const held = holds.get(r.hold.id)!
          yield* log.append(session, makeEvent("usage.reserved", {
            reservation_id: r.hold.id,
            turn_id: held.turn_id,
            model: estimate.model,
            input_tokens: estimate.input_tokens,
            output_tokens: estimate.output_tokens,
            cost_usd: r.hold.cost_usd
          })).pipe(Effect.tapError(() => Effect.sync(() => release(r.hold.id))))
        }
        return r.hold
      }
    })

    /** The request is over (ModelMeter.settle): its usage logged and counted, then its hold released. */
    const settle = Effect.fn("Meter.settle")(function*(h: Hold, u: RequestUsage | null) {
      const held = holds.get(h.id)
      if (held === undefined) return 0
      const cost_usd = u === null ? 0 : costOf(prices, u)
      if (u !== null || held.logged) {
        const totals = {
          input_tokens: u?.input_tokens ?? 0,
          output_tokens: u?.output_tokens ?? 0,
          cache_read_tokens: u?.cache_read_tokens ?? 0,
          cache_write_tokens: u?.cache_write_tokens ?? 0,
          cost_usd
        }
        yield* log.append(h.session, makeEvent("usage", {
          turn_id: held.turn_id,
          ...totals,
          source: "request",
          model: u?.model ?? held.model,
          ...(held.logged ? { reservation_id: h.id } : {})
        })).pipe(Effect.catchAll((e) => Effect.logWarning(`usage of a model request of ${h.session} not logged: ${e.message}`)))
        // Counted before the hold goes, so what a budget sees never dips below what was spent.
        if (held.agent !== null && u !== null) activity.noteRequest(held.agent, held.turn_id, totals)
      }
      release(h.id)
      return cost_usd
    })

    /** Refusals at the forwarder's door, logged per session: a few a minute, the rest counted. */
    const refusals = new Map<SessionId, { minute: number; logged: number; suppressed: number }>()
    const refused = Effect.fn("Meter.refused")(function*(
      session: SessionId,
      r: { readonly method: string; readonly path: string; readonly reason: string }
    ) {
      const minute = Math.floor(Date.now() / 60_000)
      const cur = refusals.get(session)
      const c = cur === undefined || cur.minute !== minute ? { minute, logged: 0, suppressed: cur?.suppressed ?? 0 } : cur
      refusals.set(session, c)
      if (c.logged >= REFUSALS_PER_MINUTE) {
        c.suppressed++
        return
      }
      c.logged++
      const suppressed = c.suppressed
      c.suppressed = 0
      yield* log.append(session, makeEvent("forwarder.refused", {
        method: r.method.slice(0, 16),
        path: r.path.slice(0, 200),
        reason: r.reason,
        ...(suppressed > 0 ? { suppressed } : {})
      })).pipe(Effect.catchAll((e) => Effect.logWarning(`forwarder.refused of ${session} not logged: ${e.message}`)))
    })

    const asking = (agent: AgentId): boolean => {
      for (const q of questions.values()) if (q.agent === agent) return true
      return false
    }

    const openQuestions = (agent: AgentId): number => {
      let n = 0
      for (const q of questions.values()) if (q.agent === agent) n++
      return n
    }

    const mayStart = Effect.fn("Meter.mayStart")(function*(node: AgentNode) {
      if (asking(node.id)) return false
      const x = exhausted(node.id, true)
      if (x !== null) {
        yield* breach(x.owner, x.reason)
        return false
      }
      reserved.set(node.id, (reserved.get(node.id) ?? 0) + 1)
      return true
    })

    const turnEnded = (node: AgentNode) =>
      Effect.sync(() => {
        const n = (reserved.get(node.id) ?? 0) - 1
        if (n > 0) reserved.set(node.id, n)
        else reserved.delete(node.id)
      })

    const spent = (node: AgentNode): string | null => {
      const x = exhausted(node.id, false)
      return x === null ? null : refusal(x.owner, x.reason, node.id)
    }

    const maySpawn = Effect.fn("Meter.maySpawn")(function*(parent: AgentNode) {
      const x = exhausted(parent.id, false)
      if (x === null) return null
      yield* breach(x.owner, x.reason)
      return refusal(x.owner, x.reason, parent.id)
    })

    /** Unpark every agent of `id`'s subtree (they are gated again as their wakes run). */
    const unparkSubtree = (id: AgentId) => Effect.forEach(subtreeIds(id), (a) => mailbox.ungate(a), { discard: true })

    const nodeOf = (id: AgentId) =>
      Effect.suspend(() => {
        const n = tree.get(id)
        return n ? Effect.succeed(n) : Effect.fail(new NotFoundError({ kind: "agent", id, message: `no agent ${id}` }))
      })

    /**
     * Set (or raise, or lower) `agent`'s subtree budget. Fields left undefined keep their value;
     * null removes that limit. A child's budget may not exceed what its ancestors have left.
     */
    const setBudget = Effect.fn("Meter.setBudget")(function*(agent: AgentId, limits: LimitsPatch) {
      const node = yield* nodeOf(agent)
      const prev = budgets.get(agent)
      const now = Date.now()
      const next: Budget = {
        usd: limits.usd !== undefined ? limits.usd : prev?.usd ?? null,
        tokens: limits.tokens !== undefined ? limits.tokens : prev?.tokens ?? null,
        turns: limits.turns !== undefined ? limits.turns : prev?.turns ?? null,
        time_s: limits.time_s !== undefined ? limits.time_s : prev?.time_s ?? null,
        since: prev?.since ?? new Date(now).toISOString()
      }
      yield* log.append(node.session_id, makeEvent("budget.set", next))
      budgets.set(agent, next)
      breaches.delete(agent)
      wakeWaiters()
      yield* unparkSubtree(agent)
      return next
    })

    /**
     * What `owner`'s limit `k` promised to live descendants and they have not used yet: each
     * nearest descendant with its own limit `k` (a budget, or the share of a child not born yet)
     * counts what it has left (never below 0); its own descendants are inside that.
     */
    const promised = (
      owner: AgentId,
      k: "usd" | "tokens" | "turns",
      pendingOf: (child: AgentId) => LimitsPatch | undefined,
      now: number
    ): number => {
      let sum = 0
      const walk = (id: AgentId): void => {
        for (const c of tree.current().children(id)) {
          if (!tree.isLive(c.id)) continue
          const b = budgets.get(c.id)
          const pending = pendingOf(c.id)?.[k]
          if (b !== undefined && b[k] !== null) sum += Math.max(0, remainingOf(b, usedBy(c.id), reservedIn(c.id), now)[k] ?? 0)
          else if (pending !== undefined && pending !== null) sum += Math.max(0, pending)
          else walk(c.id)
        }
      }
      walk(owner)
      return sum
    }

    /**
     * A child's share, carved from what `parent`'s path has left now: each limit is at most the
     * smallest remainder on the path, and — USD, tokens, turns — at most what the nearest budget
     * with that limit has left once the unused shares of its other budgeted descendants are set
     * aside (a share is a reservation, not a second claim on the same money). Fails when a
     * requested share is more than is left.
     */
    const carve = Effect.fn("Meter.carve")(function*(
      parent: AgentId,
      share: LimitsPatch,
      pendingOf: (child: AgentId) => LimitsPatch | undefined = () => undefined
    ) {
      const now = Date.now()
      const left: Record<"usd" | "tokens" | "turns" | "time_s", number | null> = { usd: null, tokens: null, turns: null, time_s: null }
      const promisedLeft: Record<"usd" | "tokens" | "turns", number | null> = { usd: null, tokens: null, turns: null }
      for (const n of path(parent)) {
        const b = budgets.get(n.id)
        if (b === undefined) continue
        const r = remainingOf(b, usedBy(n.id), reservedIn(n.id), now)
        for (const k of ["usd", "tokens", "turns", "time_s"] as const) {
          const v = r[k]
          if (v !== null) left[k] = left[k] === null ? v : Math.min(left[k], v)
        }
        for (const k of ["usd", "tokens", "turns"] as const) {
          const v = r[k]
          if (v !== null && promisedLeft[k] === null) promisedLeft[k] = v - promised(n.id, k, pendingOf, now)
        }
      }
      for (const k of ["usd", "tokens", "turns", "time_s"] as const) {
        const want = share[k]
        const have = left[k]
        if (want !== undefined && want !== null && have !== null && want > have) {
          return yield* new InvalidInputError({
            field: `budget_${k}`,
            message: `a share of ${want} ${k} is more than the parent's budget has left (${Math.max(0, have)})`
          })
        }
        const free = k === "time_s" ? null : promisedLeft[k]
        if (want !== undefined && want !== null && free !== null && want > free) {
          return yield* new InvalidInputError({
            field: `budget_${k}`,
            message: `a share of ${want} ${k} is more than the parent's budget has left once its other children's unused shares are set aside (${
              Math.max(0, Math.round(free * 1e6) / 1e6)
            }); ask for less, or end a child that no longer needs its share (terminated children give theirs back)`
          })
        }
      }
      return share
    })

    const report = (agent: AgentId): BudgetReport => {
      const b = budgets.get(agent) ?? null
      const used = usedBy(agent)
      const x = exhausted(agent, true)
      const open = breaches.get(agent)
      return {
        agent_id: agent,
        budget: b,
        used,
        remaining: b === null ? null : remainingOf(b, used, reservedIn(agent), Date.now()),
        exhausted: x === null ? null : refusal(x.owner, x.reason, agent),
        breach: open === undefined ? null : { item_id: open.item_id, reason: open.reason }
      }
    }

    const ask = Effect.fn("Meter.ask")(function*(node: AgentNode, question: string) {
      const q: Question = { item_id: newItemId(), agent: node.id, question, ts: new Date().toISOString() }
      yield* log.append(node.session_id, makeEvent("human.asked", { item_id: q.item_id, question }))
      questions.set(q.item_id, q)
      return { item_id: q.item_id }
    })

    /** Everything waiting for the human, oldest first. */
    const inbox = (): ReadonlyArray<InboxItem> => {
      const items: Array<InboxItem> = []
      const nameOf = (id: AgentId) => tree.get(id)?.name ?? id
      for (const q of questions.values()) {
        if (!tree.has(q.agent)) continue
        items.push({ id: q.item_id, kind: "question", agent_id: q.agent, agent_name: nameOf(q.agent), text: q.question, ts: q.ts })
      }
      for (const [agent, b] of breaches) {
        if (!tree.has(agent)) continue
        items.push({
          id: b.item_id,
          kind: "budget",
          agent_id: agent,
          agent_name: nameOf(agent),
          text: `${b.reason}. Raise it (substrat budget set ${nameOf(agent)} …) or stop the subtree (substrat inbox answer ${b.item_id} stop).`,
          ts: b.ts
        })
      }
      for (const m of mailbox.userMessages()) {
        if (!isAnswer(m) || mailbox.isReadByUser(m.id) || typeof m.sender !== "string" || m.sender === "USER" || m.sender === "SYSTEM") continue
        const agent = m.sender as AgentId
        items.push({ id: m.id, kind: "answer", agent_id: agent, agent_name: m.sender_name ?? nameOf(agent), text: m.payload, ts: m.timestamp })
      }
      return items.sort((a, b) => a.ts.localeCompare(b.ts))
    }

    /**
     * The human read these messages to USER (`inbox read`, `agent send --wait`): `user.read` in
     * the sending root's log, then out of the inbox. Unknown or already read ids are skipped.
     */
    const markRead = Effect.fn("Meter.markRead")(function*(ids: ReadonlyArray<MessageId>) {
      const bySender = new Map<AgentId, Array<MessageId>>()
      const wanted = new Set(ids)
      for (const m of mailbox.userMessages()) {
        if (!wanted.has(m.id) || mailbox.isReadByUser(m.id) || m.sender === "USER" || m.sender === "SYSTEM") continue
        const list = bySender.get(m.sender as AgentId) ?? []
        list.push(m.id)
        bySender.set(m.sender as AgentId, list)
      }
      for (const [agent, list] of bySender) {
        const node = tree.get(agent)
        if (node !== undefined) yield* log.append(node.session_id, makeEvent("user.read", { message_ids: list }))
        mailbox.markReadByUser(list)
      }
      return [...bySender.values()].flat()
    })

    /**
     * The human answers item `id`. A question: `human.answered` is logged and the asker is
     * unparked (the caller delivers the answer as its next message). A budget item takes "stop"
     * (the caller terminates the subtree); raising is `setBudget`.
     */
    const answer = Effect.fn("Meter.answer")(function*(id: string, text: string) {
      const q = questions.get(id)
      if (q !== undefined) {
        const node = yield* nodeOf(q.agent)
        yield* log.append(node.session_id, makeEvent("human.answered", { item_id: id, answer: text }))
        questions.delete(id)
        return { kind: "question" as const, agent: node, question: q.question }
      }
      for (const [agent, b] of breaches) {
        if (b.item_id !== id) continue
        const node = yield* nodeOf(agent)
        if (text.trim().toLowerCase() !== "stop") {
          return yield* new InvalidInputError({
            field: "answer",
            message: `item ${id} is a spent budget: answer "stop" to stop ${node.name}'s subtree, or raise it with substrat budget set ${node.name} …`
          })
        }
        breaches.delete(agent)
        return { kind: "stop" as const, agent: node, question: b.reason }
      }
      return yield* new NotFoundError({ kind: "message", id, message: `no inbox item ${id}` })
    })

    const seed = (s: MeterSeed): void => {
      for (const [k, v] of s.budgets) budgets.set(k, v)
      for (const [k, v] of s.breaches) breaches.set(k, v)
      for (const q of s.questions) questions.set(q.item_id, q)
      mailbox.markReadByUser(s.read ?? [])
    }

    return {
      reserve,
      settle,
      refused,
      mayStart,
      turnEnded,
      maySpawn,
      spent,
      setBudget,
      carve,
      report,
      ask,
      asking,
      openQuestions,
      inbox,
      answer,
      markRead,
      seed,
      /** The turn `message` wakes runs before `agent`'s other queued turns. */
      promote: (agent: AgentId, message: MessageId) => Effect.sync(() => mailbox.promote(agent, message)),
      /** Wake `agent`'s parked turns again (they are gated anew). */
      unpark: (agent: AgentId) => mailbox.unpark(agent),
      budgetOf: (agent: AgentId): Budget | null => budgets.get(agent) ?? null
    } as const
  })
}) {}

/** The Meter as the ports the providers, the turn runner and the tool handler use. */
export const ports: Layer.Layer<ModelMeter | TurnGate | HumanDesk | BudgetShares, never, Meter> = Layer.effectContext(
  Effect.map(Meter, (m) =>
    Context.empty().pipe(
      Context.add(ModelMeter, { reserve: m.reserve, settle: m.settle, refused: m.refused }),
      Context.add(TurnGate, { mayStart: m.mayStart, turnEnded: m.turnEnded, maySpawn: m.maySpawn, spent: m.spent }),
      Context.add(HumanDesk, { ask: m.ask, asking: m.asking, openQuestions: m.openQuestions }),
      Context.add(BudgetShares, {
        carve: (parent, share, pendingOf) => Effect.asVoid(m.carve(parent.id, share, pendingOf)),
        give: (child, share) => Effect.asVoid(m.setBudget(child.id, share))
      })
    ))
)
