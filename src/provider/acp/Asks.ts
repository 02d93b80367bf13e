// The human's side of ACP permission requests under `approve = ask` (Permissions.ts): each
// request is one item of kind `permission` in the one human inbox (`substrat inbox`, the
// dashboard) while the agent's turn waits on it; `substrat inbox answer <id> allow|allow-always|reject`
// answers it. The open items live in memory; each question and each answer is also logged in the
// agent's own log (`permission.asked` with the question's `key`, `permission.answered`; the
// answer is logged before the agent gets it), so a turn cut by a daemon kill -9 and re-run by
// recovery finds its questions again. Recovery's fold of each log (src/recovery/Fold.ts,
// `SessionLog.permissions`: the questions after the agent's last `turn.complete`) seeds them here
// at start-up; the ask path reads no log. The first time the re-run asks a question with the same
// key as one of the interrupted turn, an answered one is answered at once with the human's
// logged choice (nobody is asked twice), an unanswered one comes back as the same inbox item (the
// same id). Each logged question serves once, and only the first turn the agent runs after a
// (re)start: its records are dropped when that turn ends. A request the agent withdraws (cancel, crash, eviction) leaves the inbox with it.
import { Context, Effect, Layer, Runtime } from "effect"
import { randomUUID } from "node:crypto"
import type { InboxItem } from "../../domain/budget.js"
import { type EventLogError, InvalidInputError } from "../../domain/errors.js"
import { type LoggedPermission, makeEvent } from "../../domain/events.js"
import type { SessionId } from "../../domain/ids.js"
import { EventLog } from "../../storage/EventLog.js"

export type Choice = "allow" | "allow-always" | "reject"

export interface PermissionAnswer {
  readonly id: string
  readonly kind: Choice
  readonly agent_id: string
  readonly agent_name: string
}

export interface PermissionQuestion {
  readonly agent_id: string
  readonly agent_name: string
  /** The asking agent's session: its log holds the question and the answer. */
  readonly session_id: SessionId
  readonly text: string
  /** The same question asked again (a re-run turn) has the same key. */
  readonly key: string
}

/** The human's choice, and whether it was given before a restart (a re-run turn's same question). */
export interface Answered {
  readonly choice: Choice
  readonly earlier: boolean
}

/** A question of the interrupted turn, as recovery's fold found it in the log. */
type Logged = LoggedPermission

const choiceOf = (text: string): Choice | null => {
  const w = text.trim().toLowerCase()
  return w === "allow" || w === "allow-always" || w === "reject" ? w : null
}

export const make = Effect.gen(function*() {
  const log = yield* EventLog
  const runtime = yield* Effect.runtime<never>()
  const run = <A, E>(eff: Effect.Effect<A, E>): Promise<A> => Runtime.runPromise(runtime)(eff)
  const pending = new Map<string, { readonly item: InboxItem; readonly session: SessionId; readonly settle: (c: Choice | null) => void; answering: boolean }>()
  /** Per agent session: the interrupted turn's logged questions not yet asked again (seeded by recovery). */
  const earlier = new Map<SessionId, Array<Logged>>()

  /** The human's choice; null when the signal aborts first (the agent withdrew the request). */
  const ask = async (q: PermissionQuestion, signal: AbortSignal): Promise<Answered | null> => {
    if (signal.aborted) return null
    const logged = earlier.get(q.session_id)
    const i = logged === undefined ? -1 : logged.findIndex((x) => x.key === q.key)
    const again = i < 0 ? undefined : logged!.splice(i, 1)[0]
    if (again !== undefined && again.choice !== null) return { choice: again.choice, earlier: true }
    const id = again?.item_id ?? randomUUID()
    if (again === undefined) {
      await run(log.append(q.session_id, makeEvent("permission.asked", { item_id: id, key: q.key, question: q.text })))
    }
    if (signal.aborted) return null
    return new Promise((resolve) => {
      const settle = (c: Choice | null) => {
        if (!pending.delete(id)) return
        signal.removeEventListener("abort", onAbort)
        resolve(c === null ? null : { choice: c, earlier: false })
      }
      const onAbort = () => settle(null)
      signal.addEventListener("abort", onAbort)
      pending.set(id, {
        item: { id, kind: "permission", agent_id: q.agent_id, agent_name: q.agent_name, text: q.text, ts: new Date().toISOString() },
        session: q.session_id,
        settle,
        answering: false
      })
    })
  }

  return {
    ask,
    /** Recovery, at start-up: each agent's interrupted turn's logged questions (its log's fold). */
    seed: (logged: ReadonlyMap<SessionId, ReadonlyArray<Logged>>): Effect.Effect<void> =>
      Effect.sync(() => {
        for (const [session, l] of logged) if (l.length > 0) earlier.set(session, [...l])
      }),
    /** The agent's turn ended: its interrupted turn's questions no longer answer anything. */
    turnEnded: (session: SessionId): void => {
      earlier.delete(session)
    },
    inbox: Effect.sync(() => [...pending.values()].map((p) => p.item)),
    answer: (id: string, text: string): Effect.Effect<PermissionAnswer | null, InvalidInputError | EventLogError> =>
      Effect.suspend((): Effect.Effect<PermissionAnswer | null, InvalidInputError | EventLogError> => {
        const p = pending.get(id)
        if (p === undefined || p.answering) return Effect.succeed(null)
        const c = choiceOf(text)
        if (c === null) {
          return Effect.fail(new InvalidInputError({ field: "answer", message: `item ${id} is a permission request of ${p.item.agent_name}: answer "allow", "allow-always" or "reject"` }))
        }
        p.answering = true
        // Logged first: an answer the agent got is one a re-run turn finds.
        return log.append(p.session, makeEvent("permission.answered", { item_id: id, choice: c })).pipe(
          Effect.tapError(() => Effect.sync(() => (p.answering = false))),
          Effect.zipRight(Effect.sync(() => p.settle(c))),
          Effect.as({ id, kind: c, agent_id: p.item.agent_id, agent_name: p.item.agent_name })
        )
      })
  }
})

export class AcpAsks extends Context.Tag("substrat/provider/AcpAsks")<AcpAsks, Effect.Effect.Success<typeof make>>() {
  static readonly layer: Layer.Layer<AcpAsks, never, EventLog> = Layer.effect(AcpAsks, make)
}
