// Handlers of the `session.*` methods (src/protocol/admin/session.ts): list, suspend, resume, delete.
import { Effect } from "effect"
import { Orchestrator } from "../../agent/Orchestrator.js"
import { SessionStore } from "../../storage/SessionStore.js"
import { makeResolver } from "../Resolver.js"
import { SessionGroup } from "../../protocol/AdminRpcs.js"
import { handlersOf, served } from "./Middleware.js"
import { makeSessions } from "./Shared.js"

export const SessionHandlers = served(SessionGroup, Effect.gen(function*() {
  const orchestrator = yield* Orchestrator
  const store = yield* SessionStore
  const resolver = yield* makeResolver
  const sessions = yield* makeSessions

  return handlersOf(SessionGroup)({
    "session.list": () =>
      Effect.gen(function*() {
        const all = yield* store.scan
        const list = yield* Effect.forEach([...all].sort((a, b) => a.created_at.localeCompare(b.created_at)), sessions.info)
        return { sessions: list }
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
