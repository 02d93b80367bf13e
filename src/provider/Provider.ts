// Provider (port): one live backend conversation (seed 000 §4 as an Effect service).
// A provider instance is made by a `ProviderFactory` inside a Scope; closing the scope stops it.
// Tools reach the daemon through `ProviderContext.tools` (the agent's ToolHandler): in-process
// providers (scripted, bare-LLM tool loops) call it directly; CLI providers reach the same
// handler through MCP and only *report* the calls they made as `ToolCall` output events.
import { Context, type Effect, type Option, Schema, type Scope, type Stream } from "effect"
import type { ProviderError } from "../domain/errors.js"
import type { AgentId, SessionId, WorkspaceId } from "../domain/ids.js"
import type { ApprovePolicy } from "../domain/agent.js"

/** What one turn streams back. */
export const TextChunk = Schema.TaggedStruct("TextChunk", { text: Schema.String })
export const ToolCall = Schema.TaggedStruct("ToolCall", {
  call_id: Schema.String,
  tool: Schema.String,
  arguments: Schema.Unknown,
  result: Schema.Unknown,
  is_error: Schema.Boolean,
  /**
   * `provider`: the backend's own tool (claude's Write/Bash/…, codex's exec_command), which no
   * ToolHandler saw — the TurnRunner logs it. Absent: one of our tools, already logged.
   */
  source: Schema.optional(Schema.Literal("provider"))
})
export const Usage = Schema.TaggedStruct("Usage", {
  input_tokens: Schema.Number,
  output_tokens: Schema.Number,
  cost_usd: Schema.Number
})
/** The turn's final response text. Absent: the concatenated `TextChunk`s are the response. */
export const Final = Schema.TaggedStruct("Final", { text: Schema.String })
export const ProviderOutput = Schema.Union(TextChunk, ToolCall, Usage, Final)
export type ProviderOutput = typeof ProviderOutput.Type

/** The outcome of one tool call: a JSON value, flagged when it is an error. */
export interface ToolResult {
  readonly is_error: boolean
  readonly result: unknown
}

/** The agent's tools as the provider sees them. Never fails: errors are JSON results. */
export interface ToolInvoker {
  readonly invoke: (tool: string, args: unknown) => Effect.Effect<ToolResult>
}

/** What a factory knows about the conversation it backs. */
export interface ProviderContext {
  readonly session_id: SessionId
  readonly agent_name: string
  readonly role: string
  /** The part after `:` in the provider string (`scripted:demo` → `demo`), else null. */
  readonly variant: string | null
  readonly tools: ToolInvoker
  /** The agent's id, when the caller knows it (CLI providers fall back to the event log). */
  readonly agent_id?: AgentId | undefined
  /**
   * The agent's workspace (null: none), when the caller knows it. Sandboxed (CLI) providers need
   * it; when absent they read it from the session's `agent.created` event.
   */
  readonly workspace_id?: WorkspaceId | null | undefined
  /** The agent's own ACP permission policy (its record's `approve`); absent: the config's. */
  readonly approve?: ApprovePolicy | undefined
}

export interface ProviderService {
  readonly name: string
  /** Begin a fresh conversation with these instructions (system prompt). */
  readonly start: (session: SessionId, instructions: string) => Effect.Effect<void, ProviderError>
  /** One turn: send `message`, stream the output. */
  readonly send: (message: string) => Stream.Stream<ProviderOutput, ProviderError>
  /** Serialise the conversation so a later instance can `resume` it. */
  readonly suspend: Effect.Effect<Uint8Array, ProviderError>
  /** Continue a conversation from a `suspend` blob (instead of `start`). */
  readonly resume: (state: Uint8Array) => Effect.Effect<void, ProviderError>
  /** Release the backend. Also run by the factory's finalizer; must be idempotent. */
  readonly stop: Effect.Effect<void, ProviderError>
}

/** One live provider instance. */
export class Provider extends Context.Tag("substrat/Provider")<Provider, ProviderService>() {}

/** Where a session's event log says its conversation stands (crash recovery, docs/recovery.md). */
export interface LogPosition {
  readonly agent_name: string
  /** `turn.start` events: messages sent to the provider so far. */
  readonly turnsStarted: number
  /** The last turn started and never ended: the crash interrupted it (it will be sent again). */
  readonly interrupted: boolean
}

/** name → scoped constructor. The instance is stopped when the scope closes. */
export interface ProviderFactory {
  readonly name: string
  readonly make: (ctx: ProviderContext) => Effect.Effect<ProviderService, ProviderError, Scope.Scope>
  /**
   * Optional readiness check (e.g. the CLI binary exists): `agent create` and `doctor` call it so
   * a missing binary is reported up front (`reason: "missing-binary"`), not at the first turn.
   */
  readonly check?: Effect.Effect<void, ProviderError>
  /**
   * Optional check of a provider string's variant (the part after `:`, null when absent), run by
   * the registry's `get` so a bad variant is refused wherever a provider string is resolved
   * (`agent create`, `spawn_agent(provider)`, acquire) — e.g. the scripted provider's book must
   * exist and decode. Fails with `reason: "unknown-provider"`.
   */
  readonly checkVariant?: (variant: string | null) => Effect.Effect<void, ProviderError>
  /**
   * Optional, for crash recovery: the resume state (`suspend` blob) a session should have, given
   * the one in its record (`state`, empty when none) and where its log says the conversation
   * stands. None: keep `state`. Pure. Providers whose state is saved every turn (or that replay
   * the log) need none: their record is already right.
   */
  readonly recoverState?: (state: Uint8Array, position: LogPosition) => Option.Option<Uint8Array>
}

/** `scripted:demo` → `{ name: "scripted", variant: "demo" }`. */
export const parseProviderName = (spec: string): { readonly name: string; readonly variant: string | null } => {
  const i = spec.indexOf(":")
  return i < 0 ? { name: spec, variant: null } : { name: spec.slice(0, i), variant: spec.slice(i + 1) }
}
