// Typed errors of the sandbox area (bwrap layer, limits, workspace store, history). They cross
// the RPC boundary (the CLI prints them), so they are Schema.TaggedErrors with plain fields.
import { Schema } from "effect"

/** A path in a spec or request that fails validation (pure checks, or existence/realpath checks). */
export class SandboxPathError extends Schema.TaggedError<SandboxPathError>()("SandboxPathError", {
  /** Which input: `root_path`, `symlinks[2].mount_path`, `extraBinds[0].host_path`, `cwd`, … */
  field: Schema.String,
  path: Schema.String,
  reason: Schema.Literal(
    "empty",
    "nul-byte",
    "not-absolute",
    "not-relative",
    "dot-dot",
    "not-normalized",
    "reserved",
    "duplicate",
    "missing",
    "not-a-directory",
    "symlink-swapped",
    "outside-parent"
  ),
  message: Schema.String
}) {}

/** The sandbox cannot run here at all. `fix` says what the operator should do. */
export class SandboxUnavailableError extends Schema.TaggedError<SandboxUnavailableError>()("SandboxUnavailableError", {
  reason: Schema.Literal("bwrap-missing", "userns-denied", "bwrap-broken", "prlimit-missing", "setpriv-missing"),
  message: Schema.String,
  fix: Schema.String
}) {}

/** Spawning, talking to or killing the sandboxed process failed (not a limit, not a policy). */
export class SandboxProcessError extends Schema.TaggedError<SandboxProcessError>()("SandboxProcessError", {
  /** `protocol`: the spawner process (Spawner.ts) broke its channel's protocol; the child, if any, was killed. */
  reason: Schema.Literal("spawn", "setup", "io", "kill", "protocol"),
  message: Schema.String
}) {}

export const LimitName = Schema.Literal("memory", "cpu", "processes", "file-size", "wall-clock", "tmp-size", "workspace-growth")
export type LimitName = typeof LimitName.Type

/**
 * A command was stopped by (or failed because of) a resource limit. `certainty` is honest about the
 * attribution: `certain` when a signal or our own timer can only mean that limit (SIGXCPU, SIGXFSZ,
 * wall clock, a cgroup event counter), `likely` when it is inferred from an exit code or stderr text
 * (ENOMEM, EAGAIN on fork, SIGSEGV under an address-space limit, …).
 */
export class LimitExceededError extends Schema.TaggedError<LimitExceededError>()("LimitExceededError", {
  limit: LimitName,
  certainty: Schema.Literal("certain", "likely"),
  /** The configured value of that limit (bytes, seconds or a count). */
  value: Schema.Number,
  exit_code: Schema.NullOr(Schema.Number),
  signal: Schema.NullOr(Schema.String),
  message: Schema.String
}) {}

/** A workspace operation was refused or failed. */
export class WorkspaceError extends Schema.TaggedError<WorkspaceError>()("WorkspaceError", {
  workspace_id: Schema.String,
  reason: Schema.Literal("wider-than-parent", "in-use", "has-children", "exists", "io", "decode", "invalid", "conflict"),
  message: Schema.String
}) {}

/** The per-workspace git history failed, or a revert conflicts with later changes. */
export class WorkspaceHistoryError extends Schema.TaggedError<WorkspaceHistoryError>()("WorkspaceHistoryError", {
  workspace_id: Schema.String,
  reason: Schema.Literal("git", "conflict"),
  message: Schema.String
}) {}
