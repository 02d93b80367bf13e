// In-memory SessionStore: same contract as the file layer, no durability.
import { Effect, Ref } from "effect"
import { SessionStoreError } from "../../domain/errors.js"
import type { SessionId } from "../../domain/ids.js"
import { Session } from "../../domain/session.js"
import type { SessionStoreService } from "../SessionStore.js"

export const makeMemory = Effect.gen(function*() {
  const records = yield* Ref.make(new Map<SessionId, Session>())
  const scan = Ref.get(records).pipe(Effect.map((m) => [...m.values()]))
  const service: SessionStoreService = {
    save: (session) => Ref.update(records, (m) => new Map(m).set(session.id, session)),
    load: (id) =>
      Ref.get(records).pipe(
        Effect.flatMap((m) => {
          const s = m.get(id)
          return s
            ? Effect.succeed(s)
            : Effect.fail(new SessionStoreError({ reason: "not-found", session_id: id, message: `no session ${id}` }))
        })
      ),
    loadMany: (ids) => Effect.map(Ref.get(records), (m) => ids.flatMap((id) => m.get(id) ?? [])),
    scan,
    count: Effect.map(Ref.get(records), (m) => m.size),
    delete: (id) =>
      Ref.update(records, (m) => {
        const next = new Map(m)
        next.delete(id)
        return next
      }),
    recover: Ref.updateAndGet(records, (m) => {
      const now = new Date().toISOString()
      const next = new Map<SessionId, Session>()
      for (const [id, s] of m) {
        next.set(id, s.state === "active" ? new Session({ ...s, state: "suspended", suspended_at: now }) : s)
      }
      return next
    }).pipe(Effect.map((m) => [...m.values()]))
  }
  return service
})
