import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { newSessionId } from "../../src/domain/ids.js"
import { canTransition, makeSession, Session, type SessionState, transition, transitions } from "../../src/domain/session.js"

const states: ReadonlyArray<SessionState> = ["created", "active", "suspended", "terminated"]
const valid = new Set(["created>active", "active>suspended", "active>terminated", "suspended>active", "suspended>terminated"])

describe("session state machine", () => {
  for (const from of states) {
    for (const to of states) {
      const ok = valid.has(`${from}>${to}`)
      it.effect(`${from} → ${to} is ${ok ? "allowed" : "rejected"}`, () =>
        Effect.gen(function*() {
          const base = makeSession({ id: newSessionId(), provider_name: "scripted", now: "2026-01-01T00:00:00.000Z" })
          const result = yield* Effect.either(transition(new Session({ ...base, state: from }), to, "2026-01-01T00:00:01.000Z"))
          expect(canTransition(from, to)).toBe(ok)
          if (ok) {
            expect(Either.isRight(result)).toBe(true)
            if (Either.isRight(result)) expect(result.right.state).toBe(to)
          } else {
            expect(Either.isLeft(result)).toBe(true)
            if (Either.isLeft(result)) {
              expect(result.left._tag).toBe("SessionStateError")
              expect(result.left.from).toBe(from)
              expect(result.left.to).toBe(to)
            }
          }
        }))
    }
  }
  it("the table has exactly five edges", () => {
    expect(Object.values(transitions).flat().length).toBe(5)
  })
})
