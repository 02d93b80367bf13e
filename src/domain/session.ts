// Session record and its state machine:
//   CREATED → ACTIVE ⇄ SUSPENDED, ACTIVE/SUSPENDED → TERMINATED.
import { Effect, Schema } from "effect"
import { SessionStateError } from "./errors.js"
import { SessionId } from "./ids.js"

export const SessionState = Schema.Literal("created", "active", "suspended", "terminated")
export type SessionState = typeof SessionState.Type

export class Session extends Schema.Class<Session>("Session")({
  id: SessionId,
  state: SessionState,
  provider_name: Schema.String,
  model: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  suspended_at: Schema.NullOr(Schema.String),
  /** Opaque provider blob from `suspend()`, base64 in JSON. */
  provider_state: Schema.Uint8ArrayFromBase64
}) {}

/** The one table that says which transitions exist. */
export const transitions: Readonly<Record<SessionState, ReadonlyArray<SessionState>>> = {
  created: ["active"],
  active: ["suspended", "terminated"],
  suspended: ["active", "terminated"],
  terminated: []
}

export const canTransition = (from: SessionState, to: SessionState): boolean => transitions[from].includes(to)

/** Pure transition: a new Session in state `to`, or a typed SessionStateError. */
export const transition = (
  session: Session,
  to: SessionState,
  now: string
): Effect.Effect<Session, SessionStateError> =>
  canTransition(session.state, to)
    ? Effect.succeed(
      new Session({
        ...session,
        state: to,
        suspended_at: to === "suspended" ? now : to === "active" ? null : session.suspended_at
      })
    )
    : Effect.fail(
      new SessionStateError({
        session_id: session.id,
        from: session.state,
        to,
        message: `session ${session.id}: cannot go from ${session.state} to ${to}`
      })
    )

export const makeSession = (args: {
  readonly id: SessionId
  readonly provider_name: string
  readonly model?: string | null
  readonly now: string
}): Session =>
  new Session({
    id: args.id,
    state: "created",
    provider_name: args.provider_name,
    model: args.model ?? null,
    created_at: args.now,
    suspended_at: null,
    provider_state: new Uint8Array()
  })
