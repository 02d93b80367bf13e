// Handlers of the `session.*` methods (src/protocol/admin/session.ts): list (whole, or a page of the
// sessions oldest first), suspend, resume, delete.
import { Effect } from "effect"
import { Orchestrator } from "../../agent/Orchestrator.js"
import { SessionStore } from "../../storage/SessionStore.js"
import { makeResolver } from "../Resolver.js"
import type { Session } from "../../domain/session.js"
import type { SessionId } from "../../domain/ids.js"
import { InvalidInput, SessionGroup } from "../../protocol/AdminRpcs.js"
import { handlersOf, served } from "./Middleware.js"
import { makeSessions } from "./Shared.js"

/** Where a session sits in the order of `session.list`: its creation time, then its id. */
type Place = Pick<Session, "created_at" | "id">

/** Pages' last sessions remembered (the newest), so that a page can follow one deleted since. */
const CURSORS = 4096

const byCreation = (a: Place, b: Place): number =>
  a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0

/** The index of the first record after `s` in `oldest` (sorted by `byCreation`): a binary search. */
const firstAfter = (oldest: ReadonlyArray<Session>, s: Place): number => {
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
  // Each page's last session (its `next` when more follow) with its place: a session deleted after
  // its page was read is no longer in the store, and the page after it starts where it was (ids
  // are random, so an id alone does not say where).
  const cursors = new Map<SessionId, Place>()
  const remember = (s: Session) => {
    cursors.delete(s.id)
    cursors.set(s.id, { created_at: s.created_at, id: s.id })
    if (cursors.size > CURSORS) cursors.delete(cursors.keys().next().value!)
  }

  return handlersOf(SessionGroup)({
    "session.list": (p) =>
      Effect.gen(function*() {
        const all = oldestFirst(yield* store.scan)
        if (p?.limit === undefined && p?.after === undefined) return { sessions: yield* Effect.forEach(all, sessions.info) }
        const after = p.after
        const from = after === undefined ? 0 : yield* store.load(after).pipe(
          Effect.catchAll((e) => {
            const place = cursors.get(after)
            return place !== undefined ? Effect.succeed(place) : new InvalidInput({
              field: "after",
              message: e.reason === "not-found"
                ? `no session ${after} to continue after: neither a session nor the last of a page this daemon answered (list again without after)`
                : `no session ${after} to continue after (${e.message})`
            })
          }),
          Effect.map((s) => firstAfter(all, s))
        )
        const page = all.slice(from, p.limit === undefined ? undefined : from + p.limit)
        const more = from + page.length < all.length
        const last = page[page.length - 1]
        if (last !== undefined) remember(last)
        return { sessions: yield* Effect.forEach(page, sessions.info), ...(more && last !== undefined ? { next: last.id } : {}) }
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
