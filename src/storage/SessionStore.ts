// SessionStore (port): `agents/<session-id>/session.json` records, written atomically, and its
// layers: `SessionStore.layerFile` (internal/sessionStoreFile.ts), `SessionStore.layerSql`
// (internal/sessionStoreSql.ts, cluster mode's Postgres), `SessionStore.layerMemory`.
import type { SqlClient } from "@effect/sql"
import { Context, type Effect, Layer } from "effect"
import type { SubstratPaths } from "../config/Paths.js"
import type { SessionStoreError } from "../domain/errors.js"
import type { SessionId } from "../domain/ids.js"
import type { Session } from "../domain/session.js"
import type { Durable } from "./Durable.js"
import { make as makeFile } from "./internal/sessionStoreFile.js"
import { makeMemory } from "./internal/sessionStoreMemory.js"
import { makeSql } from "./internal/sessionStoreSql.js"

export interface SessionStoreService {
  readonly save: (session: Session) => Effect.Effect<void, SessionStoreError>
  readonly load: (id: SessionId) => Effect.Effect<Session, SessionStoreError>
  /**
   * The records of `ids` that exist, in the order of `ids` (one that is not there is left out):
   * Postgres reads them in a few queries rather than one each.
   */
  readonly loadMany: (ids: ReadonlyArray<SessionId>) => Effect.Effect<ReadonlyArray<Session>, SessionStoreError>
  /** Every readable record; `.tmp` leftovers are ignored. */
  readonly scan: Effect.Effect<ReadonlyArray<Session>, SessionStoreError>
  /** How many records `scan` returns. */
  readonly count: Effect.Effect<number, SessionStoreError>
  readonly delete: (id: SessionId) => Effect.Effect<void, SessionStoreError>
  /** ACTIVE → SUSPENDED for every record (persisted); returns all sessions. */
  readonly recover: Effect.Effect<ReadonlyArray<Session>, SessionStoreError>
}

export class SessionStore extends Context.Tag("substrat/SessionStore")<SessionStore, SessionStoreService>() {
  /** File-backed; creates `$SUBSTRAT_HOME/agents` (0700) when it starts. */
  static readonly layerFile: Layer.Layer<SessionStore, SessionStoreError, Durable | SubstratPaths> = Layer.effect(
    SessionStore,
    makeFile
  )
  /** In Postgres (cluster mode), same contract; creates its table when it starts. */
  static readonly layerSql: Layer.Layer<SessionStore, SessionStoreError, SqlClient.SqlClient> = Layer.effect(
    SessionStore,
    makeSql
  )
  /** In memory, same contract, no durability. */
  static readonly layerMemory: Layer.Layer<SessionStore> = Layer.effect(SessionStore, makeMemory)
}

export { ioError, parseRecord, readRecord } from "./internal/sessionStoreFile.js"
