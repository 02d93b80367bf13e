// The one mapping of the services' typed errors to the admin protocol's four wire errors
// (NotFound, InvalidInput, Unavailable, Internal; docs/protocol.md "Errors"). `fromServiceError`
// is typed and exhaustive (a new error in the union does not compile until it is mapped here);
// the admin middleware (handlers/Middleware.ts) and the HTTP errors hold failures of unknown type
// and use `classify` / `toRpcError`, recognising the same errors by their Schemas.
import { Match, Schema } from "effect"
import { BirthError } from "../agent/Orchestrator.js"
import {
  DurableError,
  faultOf,
  type StorageFault,
  EventLogError,
  InvalidInputError,
  NotFoundError,
  ProviderError,
  RoutingError,
  SessionStateError,
  SessionStoreError
} from "../domain/errors.js"
import { SandboxPathError, WorkspaceError, WorkspaceHistoryError } from "../sandbox/errors.js"
import { SessionBusyError } from "../session/Multiplexer.js"
import { DiscoveryError } from "../swarm/Grammars.js"
import { SwarmError } from "../swarm/SwarmRecord.js"
import { SwarmStoreError } from "../swarm/SwarmStore.js"
import { Internal, InvalidInput, NotFound, type RpcError, Unavailable } from "./AdminRpcs.js"

/** A failure's message, for any value. */
export const message = (e: unknown): string => {
  try {
    return typeof e === "object" && e !== null && "message" in e && typeof e.message === "string" ? e.message : String(e)
  } catch {
    return "unprintable error"
  }
}

/** Every typed failure the services below can answer a handler with. */
export type ServiceError =
  | RpcError
  | NotFoundError
  | InvalidInputError
  | RoutingError
  | SessionStateError
  | SessionStoreError
  | SessionBusyError
  | EventLogError
  | DurableError
  | ProviderError
  | BirthError
  | SandboxPathError
  | WorkspaceError
  | WorkspaceHistoryError
  | SwarmError
  | SwarmStoreError
  | DiscoveryError

/**
 * Internal, unless the file system under the home is full, failing or read-only (the error's
 * storage `fault`): then Unavailable, saying so — the change was not acknowledged, and may
 * succeed once space returns.
 */
const internal = (e: { readonly message: string; readonly fault?: StorageFault | undefined }) =>
  e.fault !== undefined
    ? new Unavailable({ message: `storage unavailable (disk full or failing), nothing was acknowledged: ${e.message}`, reason: e.fault })
    : new Internal({ message: e.message })

/** The one mapping of service errors to the four wire errors (docs/protocol.md, "Errors"). */
export const fromServiceError: (e: ServiceError) => RpcError = Match.type<ServiceError>().pipe(
  Match.tagsExhaustive({
    NotFound: (e) => e,
    InvalidInput: (e) => e,
    Unavailable: (e) => e,
    Internal: (e) => e,
    NotFoundError: (e) => new NotFound({ kind: e.kind, id: e.id, message: e.message }),
    InvalidInputError: (e) => new InvalidInput({ field: e.field, message: e.message }),
    RoutingError: (e) => new InvalidInput({ field: "", message: e.message }),
    SessionStateError: (e) => new InvalidInput({ field: "", message: e.message }),
    SandboxPathError: (e) => new InvalidInput({ field: e.field, message: e.message }),
    SessionStoreError: (e) =>
      e.reason === "not-found" ? new NotFound({ kind: "session", id: e.session_id, message: e.message }) : internal(e),
    SessionBusyError: (e) => new Unavailable({ message: e.message, reason: "busy" }),
    // An unknown provider or a missing CLI binary is the caller's to fix.
    ProviderError: (e) =>
      e.reason === "unknown-provider" || e.reason === "missing-binary"
        ? new InvalidInput({ field: "provider", message: e.message, reason: e.reason })
        : internal(e),
    WorkspaceError: (e) =>
      e.reason === "io" || e.reason === "decode"
        ? internal(e)
        : e.reason === "in-use"
        ? new Unavailable({ message: e.message, reason: e.reason })
        : new InvalidInput({ field: "workspace", message: e.message, reason: e.reason }),
    // A revert whose turn overlaps later changes: nothing was changed.
    WorkspaceHistoryError: (e) => e.reason === "conflict" ? new InvalidInput({ field: "turn", message: e.message, reason: e.reason }) : internal(e),
    EventLogError: internal,
    DurableError: internal,
    BirthError: internal,
    SwarmError: (e) =>
      e.reason === "running" || e.reason === "not-running" ? new Unavailable({ message: e.message, reason: e.reason }) : internal(e),
    SwarmStoreError: (e) => e.reason === "other-root" ? new InvalidInput({ field: "path", message: e.message, reason: e.reason }) : internal(e),
    DiscoveryError: internal
  })
)

const isServiceError = Schema.is(Schema.Union(
  NotFound,
  InvalidInput,
  Unavailable,
  Internal,
  NotFoundError,
  InvalidInputError,
  RoutingError,
  SessionStateError,
  SessionStoreError,
  SessionBusyError,
  EventLogError,
  DurableError,
  ProviderError,
  BirthError,
  SandboxPathError,
  WorkspaceError,
  WorkspaceHistoryError,
  SwarmError,
  SwarmStoreError,
  DiscoveryError
))

/** For callers holding a failure of unknown type (HTTP routes): a service error as above, anything else Internal. */
export const toRpcError = (e: unknown): RpcError => isServiceError(e) ? fromServiceError(e) : new Internal({ message: message(e) })

/** A failure of unknown type as its wire error, and the storage fault it carries (if any). */
export const classify = (e: unknown): { readonly wire: RpcError; readonly fault: StorageFault | undefined } => ({
  wire: toRpcError(e),
  fault: faultOf(e)
})

