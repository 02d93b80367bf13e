// The human's side of ACP permission requests under `acp.approve = "ask"` (Permissions.ts): each
// request is one item of kind `permission` in the one human inbox (`substrat inbox`, the
// dashboard) while the agent's turn waits on it; `substrat inbox answer <id> allow|allow-always|reject`
// answers it. Items live in memory only: they belong to a turn in flight, and a turn cut by a
// daemon kill -9 is re-run after recovery, so its agent asks again (a new item). A request the
// agent withdraws (cancel, crash, eviction) leaves the inbox with it.
import { Context, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"
import type { InboxItem } from "../../domain/budget.js"
import { InvalidInputError } from "../../domain/errors.js"

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
  readonly text: string
}

const choiceOf = (text: string): Choice | null => {
  const w = text.trim().toLowerCase()
  return w === "allow" || w === "allow-always" || w === "reject" ? w : null
}

export const make = () => {
  const pending = new Map<string, { readonly item: InboxItem; readonly settle: (c: Choice | null) => void }>()
  /** The human's choice; null when the signal aborts first (the agent withdrew the request). */
  const ask = (q: PermissionQuestion, signal: AbortSignal): Promise<Choice | null> =>
    new Promise((resolve) => {
      if (signal.aborted) return resolve(null)
      const id = randomUUID()
      const settle = (c: Choice | null) => {
        if (!pending.delete(id)) return
        signal.removeEventListener("abort", onAbort)
        resolve(c)
      }
      const onAbort = () => settle(null)
      signal.addEventListener("abort", onAbort)
      pending.set(id, {
        item: { id, kind: "permission", agent_id: q.agent_id, agent_name: q.agent_name, text: q.text, ts: new Date().toISOString() },
        settle
      })
    })
  return {
    ask,
    inbox: Effect.sync(() => [...pending.values()].map((p) => p.item)),
    answer: (id: string, text: string): Effect.Effect<PermissionAnswer | null, InvalidInputError> =>
      Effect.suspend(() => {
        const p = pending.get(id)
        if (p === undefined) return Effect.succeed(null)
        const c = choiceOf(text)
        if (c === null) {
          return Effect.fail(new InvalidInputError({ field: "answer", message: `item ${id} is a permission request of ${p.item.agent_name}: answer "allow", "allow-always" or "reject"` }))
        }
        p.settle(c)
        return Effect.succeed({ id, kind: c, agent_id: p.item.agent_id, agent_name: p.item.agent_name })
      })
  }
}

export class AcpAsks extends Context.Tag("substrat/provider/AcpAsks")<AcpAsks, ReturnType<typeof make>>() {
  static readonly layer: Layer.Layer<AcpAsks> = Layer.sync(AcpAsks, make)
}
