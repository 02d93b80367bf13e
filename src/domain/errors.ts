// Tagged errors shared across services and the RPC boundary. Module-local errors live with
// their module; these are the ones more than one layer speaks.
import { Schema } from "effect"

/**
 * Why the file system under the home refused a write: full (ENOSPC, EDQUOT), failing (EIO) or
 * mounted read-only (EROFS). Set where the failure happens, from the errno code; the daemon goes
 * read-only on it (docs/reliability.md "A full disk") and answers `Unavailable`.
 */
export const StorageFault = Schema.Literal("disk_full", "io", "read_only")
export type StorageFault = typeof StorageFault.Type

const faults: Record<string, StorageFault> = { ENOSPC: "disk_full", EDQUOT: "disk_full", EIO: "io", EROFS: "read_only" }

/** The storage fault of a thrown Node error, by its errno `code`; undefined for any other failure. */
export const storageFault = (e: unknown): StorageFault | undefined =>
  typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? faults[e.code] : undefined

/** `{ fault }` when there is one (for the optional `fault` field of the storage errors). */
export const withFault = (fault: StorageFault | undefined): { readonly fault?: StorageFault } =>
  fault === undefined ? {} : { fault }

/** An illegal session state transition (see session.ts). */
export class SessionStateError extends Schema.TaggedError<SessionStateError>()("SessionStateError", {
  session_id: Schema.String,
  from: Schema.String,
  to: Schema.String,
  message: Schema.String
}) {}

/** A message that breaks the one-hop rule, or names nobody. Returned to the calling agent. */
export class RoutingError extends Schema.TaggedError<RoutingError>()("RoutingError", {
  from: Schema.String,
  to: Schema.String,
  reason: Schema.Literal("not-one-hop", "unknown-recipient", "unknown-sender", "self", "terminated", "ambiguous"),
  message: Schema.String
}) {}

/** Something named by id or name does not exist. */
export class NotFoundError extends Schema.TaggedError<NotFoundError>()("NotFoundError", {
  kind: Schema.Literal("agent", "session", "workspace", "message", "turn", "provider"),
  id: Schema.String,
  message: Schema.String
}) {}

/** Input that fails validation (bad arguments, path traversal, name collisions, …). */
export class InvalidInputError extends Schema.TaggedError<InvalidInputError>()("InvalidInputError", {
  field: Schema.String,
  /** `name_taken`: the name is in use (the `spawn_agent` tool answers `name_taken`). */
  code: Schema.optional(Schema.Literal("name_taken")),
  message: Schema.String
}) {}

/** A durable file operation failed (or a crash was injected). */
export class DurableError extends Schema.TaggedError<DurableError>()("DurableError", {
  op: Schema.Literal(
    "open",
    "write",
    "fsync",
    "rename",
    "unlink",
    "dirsync",
    "truncate",
    "mkdir",
    "read",
    "close",
    "remove"
  ),
  path: Schema.String,
  /** The file system is full, failing or read-only (from the errno code); absent for any other failure. */
  fault: Schema.optional(StorageFault),
  message: Schema.String
}) {}

/** The event log could not be read, repaired or appended. `line` is 1-based when known. */
export class EventLogError extends Schema.TaggedError<EventLogError>()("EventLogError", {
  reason: Schema.Literal("io", "decode", "closed", "encode"),
  file: Schema.String,
  line: Schema.optional(Schema.Number),
  /** With `reason: "io"`: the file system is full, failing or read-only. */
  fault: Schema.optional(StorageFault),
  message: Schema.String
}) {}

/** A session record could not be read or written. */
export class SessionStoreError extends Schema.TaggedError<SessionStoreError>()("SessionStoreError", {
  reason: Schema.Literal("io", "decode", "not-found"),
  session_id: Schema.String,
  /** With `reason: "io"`: the file system is full, failing or read-only. */
  fault: Schema.optional(StorageFault),
  message: Schema.String
}) {}

/** A provider failed: it could not start, a turn failed, resume failed, its binary is missing. */
export class ProviderError extends Schema.TaggedError<ProviderError>()("ProviderError", {
  provider: Schema.String,
  reason: Schema.Literal("start", "turn", "suspend", "resume", "stop", "missing-binary", "unknown-provider"),
  message: Schema.String
}) {}

/**
 * A budget on an agent's path has no room for the model request (or turn) it asked for: the
 * request is refused before it leaves. `owner` holds the budget (the agent itself or an
 * ancestor), `limit` is the limit that is spent; callers may park the agent instead of failing.
 */
export class BudgetExceeded extends Schema.TaggedError<BudgetExceeded>()("BudgetExceeded", {
  agent_id: Schema.String,
  owner_id: Schema.String,
  owner_name: Schema.String,
  limit: Schema.Literal("usd", "tokens", "turns", "time_s"),
  /** What the budget says, e.g. `USD budget spent ($0.5012 of $0.5000)`. */
  reason: Schema.String,
  message: Schema.String
}) {}

const isStorageError = Schema.is(Schema.Union(DurableError, EventLogError, SessionStoreError))

/** The storage fault a failure of unknown type carries (a storage error's `fault`), if any. */
export const faultOf = (e: unknown): StorageFault | undefined => isStorageError(e) ? e.fault : undefined
