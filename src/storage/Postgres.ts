// Postgres connection for cluster mode: `@effect/sql-pg`'s client as the SqlClient the storage
// layers (EventLog.layerSql, SessionStore.layerSql) and the cluster engine's SQL storage use.
// Connecting is checked when the layer starts; failing that is one typed error naming the URL
// (password hidden) and the driver's cause, which `daemon start --cluster` prints before exiting.
import { PgClient } from "@effect/sql-pg"
import { type SqlClient } from "@effect/sql"
import { Duration, Layer, Redacted, Schema } from "effect"
import { sqlMessage } from "./internal/sqlSchema.js"

export class PostgresUnreachable extends Schema.TaggedError<PostgresUnreachable>()("PostgresUnreachable", {
  /** The URL with its password replaced by `***`. */
  url: Schema.String,
  message: Schema.String
}) {}

/** `url` with any password replaced by `***` (for messages and logs). */
export const redactUrl = (url: string): string => {
  try {
    const u = new URL(url)
    if (u.password !== "") u.password = "***"
    return u.toString()
  } catch {
    return "<not a URL>"
  }
}

export interface PostgresOptions {
  readonly url: Redacted.Redacted<string>
  /** How long the first connection may take (default 5 s). */
  readonly connectTimeout?: Duration.DurationInput
  /** Pool size (default 10). */
  readonly maxConnections?: number
}

/** A pooled Postgres client; fails with PostgresUnreachable when the first connection fails. */
export const layer = (options: PostgresOptions): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, PostgresUnreachable> =>
  PgClient.layer({
    url: options.url,
    connectTimeout: options.connectTimeout ?? Duration.seconds(5),
    maxConnections: options.maxConnections ?? 10
  }).pipe(
    Layer.mapError((e) =>
      new PostgresUnreachable({
        url: redactUrl(Redacted.value(options.url)),
        message: `cannot connect to Postgres at ${redactUrl(Redacted.value(options.url))}: ${sqlMessage(e)}`
      })
    )
  )
