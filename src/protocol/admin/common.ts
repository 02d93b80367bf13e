// The admin protocol's shared pieces: its wire errors and the shapes several areas use.
// Each area's methods are in a module of their own (this directory) so a CLI command evaluates
// only the Schemas of the methods it calls; src/protocol/AdminRpcs.ts gathers them into the one
// group the daemon serves.
import * as RpcMiddleware from "@effect/rpc/RpcMiddleware"
import { Context, Schema } from "effect"
import { UsageWithTurns } from "../../domain/usage.js"

// ---------------------------------------------------------------------------------------------
// Wire errors. `code` is what a JSON-RPC client sees as `error.code` (@effect/rpc copies a
// failure's `code` field there); the CLI maps `_tag` to its exit codes (docs/cli.md).

export const ErrorCode = {
  internal: -32000,
  notFound: -32001,
  invalidInput: -32002,
  unavailable: -32003
} as const

export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {
  code: Schema.optionalWith(Schema.Number, { default: () => ErrorCode.notFound }),
  kind: Schema.Literal("agent", "session", "workspace", "message", "provider", "turn"),
  id: Schema.String,
  message: Schema.String
}) {}

/**
 * Why the service refused, when it says (its error's `reason` or storage fault: `in-use`,
 * `has-children`, `disk_full`, …; docs/protocol.md "Errors"): what a client decides on, never
 * the message's words.
 */
const reason = Schema.optional(Schema.String)

export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  code: Schema.optionalWith(Schema.Number, { default: () => ErrorCode.invalidInput }),
  field: Schema.String,
  message: Schema.String,
  reason
}) {}

/** The daemon cannot do this now (feature not available yet, shutting down, …). */
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", {
  code: Schema.optionalWith(Schema.Number, { default: () => ErrorCode.unavailable }),
  message: Schema.String,
  reason
}) {}

/** Anything else that went wrong inside the daemon; the daemon keeps running. */
export class Internal extends Schema.TaggedError<Internal>()("Internal", {
  code: Schema.optionalWith(Schema.Number, { default: () => ErrorCode.internal }),
  message: Schema.String
}) {}

export const RpcError = Schema.Union(NotFound, InvalidInput, Unavailable, Internal)
export type RpcError = typeof RpcError.Type

// ---------------------------------------------------------------------------------------------
// What every admin method passes through on the daemon's side (src/daemon/handlers/Middleware.ts):
// the services' typed errors become the wire errors above, a mutation is refused in read-only
// mode and runs to completion once begun, and a traced method opens its request span.

export class AdminMiddleware extends RpcMiddleware.Tag<AdminMiddleware>()("substrat/AdminMiddleware", {
  wrap: true,
  failure: RpcError
}) {}

/** The method changes something: refused while the daemon is read-only; not interrupted once begun. */
export class Mutation extends Context.Reference<Mutation>()("substrat/rpc/Mutation", { defaultValue: () => false }) {}

/** With tracing on, the method's request is the root span of its trace (`user.<method>`). */
export class Traced extends Context.Reference<Traced>()("substrat/rpc/Traced", { defaultValue: () => false }) {}

// ---------------------------------------------------------------------------------------------
// Shapes

/** What a person types for a thing: its id, its name or a unique id prefix (src/daemon/Refs.ts). */
const ref = (what: string) =>
  Schema.String.pipe(Schema.filter((s) => s.trim().length >= 1 && s.length <= 256, {
    message: () => `expected ${what}: a name, an id or a unique id prefix (1-256 characters)`
  }))

/** An agent: id, name, unique id prefix, or its session's id. */
export const AgentRef = ref("an agent")
/** A workspace: id, name or unique id prefix. */
export const WorkspaceRef = ref("a workspace")
/** A session: id or unique id prefix, or an agent reference (that agent's session). */
export const SessionRef = ref("a session")
/** A recorded turn of a workspace: id or unique id prefix (`substrat workspace log`). */
export const TurnRef = ref("a turn")

/** The text of one message from USER. */
export const MessageText = Schema.String.pipe(Schema.maxLength(512 * 1024))

export const Usage = UsageWithTurns
export type Usage = typeof Usage.Type

/** Budget limits to set: absent keeps a limit, null removes it (docs/budgets.md). */
const Limit = Schema.NullOr(Schema.Number.pipe(Schema.nonNegative()))

export const BudgetPatch = Schema.Struct({
  usd: Schema.optional(Limit),
  tokens: Schema.optional(Limit),
  turns: Schema.optional(Limit),
  time_s: Schema.optional(Limit)
})
export type BudgetPatch = typeof BudgetPatch.Type

/** Egress host patterns of one request (checked by the daemon: src/domain/egress.ts). */
export const EgressHosts = Schema.Array(Schema.String.pipe(Schema.maxLength(300))).pipe(Schema.maxItems(100))
/** Egress preset names (`npm`, `pypi`, `crates`, `go`, `github`; the configuration's). */
export const EgressPresets = Schema.Array(Schema.String.pipe(Schema.maxLength(64))).pipe(Schema.maxItems(20))

/** A merge queue's check command (`--check`): run with `sh -c` in a sandbox. */
export const CheckCommand = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(4096))
