// SessionStore (port): `agents/<session-id>/session.json` records, written atomically.
// File layer: SessionStoreFile.ts. In-memory layer: SessionStoreMemory.ts.
import { Context, type Effect } from "effect"
import type { SessionStoreError } from "../domain/errors.js"
import type { SessionId } from "../domain/ids.js"
import type { Session } from "../domain/session.js"

export interface SessionStoreService {
  readonly save: (session: Session) => Effect.Effect<void, SessionStoreError>
  readonly load: (id: SessionId) => Effect.Effect<Session, SessionStoreError>
  /** Every readable record; `.tmp` leftovers are ignored. */
  readonly scan: Effect.Effect<ReadonlyArray<Session>, SessionStoreError>
  readonly delete: (id: SessionId) => Effect.Effect<void, SessionStoreError>
  /** ACTIVE → SUSPENDED for every record (persisted); returns all sessions. */
  readonly recover: Effect.Effect<ReadonlyArray<Session>, SessionStoreError>
}

export class SessionStore extends Context.Tag("substrat/SessionStore")<SessionStore, SessionStoreService>() {}
