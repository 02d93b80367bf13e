// Handlers of the `session.*` methods (src/protocol/admin/session.ts): list (whole, or a page of the
// sessions oldest first), suspend, resume, delete.
import { Effect } from "effect"
import { Orchestrator } from "../../agent/Orchestrator.js"
import { SessionStore } from "../../storage/SessionStore.js"
import { makeResolver } from "../Resolver.js"
import type { Session } from "../../domain/session.js"
import { InvalidInput, SessionGroup } from "../../protocol/AdminRpcs.js"
import { handlersOf, served } from "./Middleware.js"
import { makeSessions } from "./Shared.js"

const byCreation = (a: Session, b: Session): number =>
  a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0

/** The index of the first record after `s` in `oldest` (sorted by `byCreation`): a binary search. */
const firstAfter = (oldest: ReadonlyArray<Session>, s: Session): number => {
  let lo = 0
  let hi = oldest.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (byCreation(oldest[mid]!, s) <= 0) lo = mid + 1
    else hi = mid
  }
  return lo
}

export const SessionHandlers = served(SessionGroup, Effect.gen(function*() {
  const orchestrator = yield* Orchestrator
  const store = yield* SessionStore
  const resolver = yield* makeResolver
  const sessions = yield* makeSessions
  // `scan`'s records oldest first, sorted again only when `scan` answers with another array (the
  // file store hands out the same one while nothing changed), so a page costs the page.
  let sorted: { readonly from: ReadonlyArray<Session>; readonly oldest: ReadonlyArray<Session> } | undefined
  const oldestFirst = (all: ReadonlyArray<Session>): ReadonlyArray<Session> => {
    if (sorted?.from !== all) sorted = { from: all, oldest: [...all].sort(byCreation) }
    return sorted.oldest
  }

  return handlersOf(SessionGroup)({
    "session.list": (p) =>
      Effect.gen(function*() {
        const all = oldestFirst(yield* store.scan)
        if (p?.limit === undefined && p?.after === undefined) return { sessions: yield* Effect.forEach(all, sessions.info) }
        const from = p.after === undefined ? 0 : yield* store.load(p.after).pipe(
          Effect.map((s) => firstAfter(all, s)),
          Effect.catchAll(() => new InvalidInput({ field: "after", message: `no session ${p.after} to continue after (an id from the previous page)` }))
        )
        const page = all.slice(from, p.limit === undefined ? undefined : from + p.limit)
        const more = from + page.length < all.length
        return { sessions: yield* Effect.forEach(page, sessions.info), ...(more && page.length > 0 ? { next: page[page.length - 1]!.id } : {}) }
      }),

    "session.suspend": (p) =>
      Effect.gen(function*() {
        const session = yield* resolver.session(p.session)
        yield* orchestrator.suspend(session)
        return yield* sessions.load(session)
      }),

    "session.resume": (p) =>
      Effect.gen(function*() {
        const session = yield* resolver.session(p.session)
        yield* orchestrator.resume(session)
        return yield* sessions.load(session)
      }),

    "session.delete": (p) =>
      Effect.gen(function*() {
        const session = yield* resolver.session(p.session)
        yield* orchestrator.deleteSession(session)
        return { session, deleted: true }
      })
  })
}))
