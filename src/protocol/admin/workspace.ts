// Admin methods `workspace.*` (docs/protocol.md, docs/cli.md "Workspaces").
import * as Rpc from "@effect/rpc/Rpc"
import * as RpcGroup from "@effect/rpc/RpcGroup"
import { Schema } from "effect"
import { TurnId, WorkspaceId } from "../../domain/ids.js"
import { BindMode, WorkspaceSpec } from "../../domain/workspace.js"
import { AdminMiddleware, CheckCommand, EgressHosts, EgressPresets, Mutation, RpcError, TurnRef, WorkspaceRef } from "./common.js"

export class WorkspaceCreateRpc extends Rpc.make("workspace.create", {
  payload: {
    name: Schema.optional(Schema.String),
    parent: Schema.optional(WorkspaceRef),
    network: Schema.optional(Schema.Boolean),
    /** A repository workspace: its root is a clone of this git repository (docs/sandbox.md, "Repository workspaces"). */
    repo: Schema.optional(Schema.String),
    /** With `repo`: the branch or commit to start from (default the repository's HEAD). */
    ref: Schema.optional(Schema.String),
    /** With `repo`: one ignored directory of it bound read-only at the same place (`--bind-ignored`). */
    bind_ignored: Schema.optional(Schema.String),
    /** With `repo`: the check its merge queue runs on a merged tree before the branch moves (`sh -c`, sandboxed). */
    check: Schema.optional(CheckCommand),
    /** Egress host patterns (`host`, `*.domain`, optionally `:port`) and presets (docs/sandbox.md "Egress"). */
    allow_hosts: Schema.optional(EgressHosts),
    allow_presets: Schema.optional(EgressPresets)
  },
  success: WorkspaceSpec,
  error: RpcError
}) {}

/** Add hosts/presets to a workspace's egress policy (never wider than its parent's). */
export class WorkspaceAllowRpc extends Rpc.make("workspace.allow", {
  payload: { workspace: WorkspaceRef, hosts: Schema.optional(EgressHosts), presets: Schema.optional(EgressPresets) },
  success: WorkspaceSpec,
  error: RpcError
}) {}

/** Remove hosts/presets from a workspace's egress policy (its children's too). */
export class WorkspaceDenyRpc extends Rpc.make("workspace.deny", {
  payload: { workspace: WorkspaceRef, hosts: Schema.optional(EgressHosts), presets: Schema.optional(EgressPresets) },
  success: WorkspaceSpec,
  error: RpcError
}) {}
export class WorkspaceListRpc extends Rpc.make("workspace.list", {
  success: Schema.Struct({ workspaces: Schema.Array(WorkspaceSpec) }),
  error: RpcError
}) {}
export class WorkspaceLinkRpc extends Rpc.make("workspace.link", {
  payload: {
    workspace: WorkspaceRef,
    host_path: Schema.String,
    mount_path: Schema.String,
    mode: Schema.optional(BindMode)
  },
  success: WorkspaceSpec,
  error: RpcError
}) {}
export class WorkspaceDeleteRpc extends Rpc.make("workspace.delete", {
  /** `force`: delete even while an agent uses it (or a descendant), and with child workspaces. */
  payload: { workspace: WorkspaceRef, force: Schema.optional(Schema.Boolean) },
  /** `removed`: every workspace deleted (children first, then this one). */
  success: Schema.Struct({
    workspace: WorkspaceId,
    deleted: Schema.Boolean,
    removed: Schema.optional(Schema.Array(WorkspaceId))
  }),
  error: RpcError
}) {}

/** One changed path of a turn (relative to the workspace's own root). */
export const ChangedPath = Schema.Struct({
  path: Schema.String,
  change: Schema.Literal("added", "modified", "deleted")
})

/** What one turn changed (with `turn`), or what changed since the last recorded turn (without). */
export class WorkspaceDiffRpc extends Rpc.make("workspace.diff", {
  payload: { workspace: WorkspaceRef, turn: Schema.optional(TurnRef) },
  success: Schema.Struct({
    workspace: WorkspaceId,
    turn: Schema.NullOr(TurnId),
    paths: Schema.Array(ChangedPath),
    /** Unified diff (git format), paths relative to the workspace root. */
    diff: Schema.String
  }),
  error: RpcError
}) {}

/** A history commit made for a turn: revert's, or record's. commit null: nothing to commit. */
const TurnCommitResult = Schema.Struct({
  workspace: WorkspaceId,
  turn: TurnId,
  commit: Schema.NullOr(Schema.String),
  paths: Schema.Array(ChangedPath)
})

/** Undo one recorded turn with a new history commit (null when there was nothing left to undo). */
export class WorkspaceRevertRpc extends Rpc.make("workspace.revert", {
  payload: { workspace: WorkspaceRef, turn: TurnRef },
  success: TurnCommitResult,
  error: RpcError
}) {}

/**
 * Record what changed in a workspace since its last recorded turn as one turn of `author`
 * (`substrat workspace shell`: the human's changes). commit null: nothing changed.
 */
export class WorkspaceRecordRpc extends Rpc.make("workspace.record", {
  payload: {
    workspace: WorkspaceId,
    author: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64)),
    summary: Schema.optional(Schema.String.pipe(Schema.maxLength(200)))
  },
  success: TurnCommitResult,
  error: RpcError
}) {}

/**
 * The egress proxy of a human's shell in a workspace (`substrat workspace shell`), served while
 * the stream is open: one item, the host socket to bind at /run/substrat/egress.sock (null: the
 * workspace has network access or no egress policy — nothing is served). The caller keeps the
 * stream open while the shell runs; closing it stops the proxy and removes the socket.
 */
export class WorkspaceShellEgressRpc extends Rpc.make("workspace.shell_egress", {
  payload: { workspace: WorkspaceId },
  success: Schema.Struct({ socket: Schema.NullOr(Schema.String) }),
  error: RpcError,
  stream: true
}) {}

/** Recorded turns touching a workspace, newest first. */
export class WorkspaceLogRpc extends Rpc.make("workspace.log", {
  payload: { workspace: WorkspaceRef, limit: Schema.optional(Schema.Number) },
  success: Schema.Struct({
    workspace: WorkspaceId,
    turns: Schema.Array(Schema.Struct({
      commit: Schema.String,
      turn_id: Schema.NullOr(Schema.String),
      agent: Schema.String,
      time: Schema.String,
      subject: Schema.String
    }))
  }),
  error: RpcError
}) {}

/** Merge a repository workspace's branch into a branch of the user's repository (docs/cli.md, "Repository workspaces"). */
export class WorkspaceMergeRpc extends Rpc.make("workspace.merge", {
  payload: {
    workspace: WorkspaceRef,
    /** The branch to merge into (default: the one checked out when the workspace was made). */
    into: Schema.optional(Schema.String),
    squash: Schema.optional(Schema.Boolean),
    message: Schema.optional(Schema.String.pipe(Schema.maxLength(10_000)))
  },
  success: Schema.Struct({
    workspace: WorkspaceId,
    branch: Schema.String,
    into: Schema.String,
    commit: Schema.String,
    previous: Schema.String,
    fast_forward: Schema.Boolean,
    paths: Schema.Array(Schema.String),
    /** The branch was checked out: its working tree was updated too. */
    worktree_updated: Schema.Boolean
  }),
  error: RpcError
}) {}

/** A repository workspace's recorded work since it was made, as a patch series (`git format-patch`). */
export class WorkspaceExportRpc extends Rpc.make("workspace.export", {
  payload: { workspace: WorkspaceRef },
  success: Schema.Struct({
    workspace: WorkspaceId,
    patches: Schema.Array(Schema.Struct({ name: Schema.String, text: Schema.String }))
  }),
  error: RpcError
}) {}

/** A repository workspace's merge queue: what waits (the one merging first) and recent outcomes. */
export class WorkspaceQueueRpc extends Rpc.make("workspace.queue", {
  payload: { workspace: WorkspaceRef },
  success: Schema.Struct({
    workspace: WorkspaceId,
    check: Schema.NullOr(Schema.String),
    items: Schema.Array(Schema.Struct({
      item_id: Schema.String,
      from_workspace: WorkspaceId,
      branch: Schema.String,
      agent_id: Schema.String,
      agent: Schema.String,
      head: Schema.String,
      queued_at: Schema.String,
      state: Schema.Literal("queued", "merging")
    })),
    recent: Schema.Array(Schema.Struct({
      item_id: Schema.String,
      agent: Schema.String,
      branch: Schema.String,
      outcome: Schema.Literal("merged", "conflict", "check", "error"),
      commit: Schema.NullOr(Schema.String),
      paths: Schema.Array(Schema.String),
      at: Schema.String
    }))
  }),
  error: RpcError
}) {}

export const WorkspaceGroup = RpcGroup.make(
  WorkspaceCreateRpc.annotate(Mutation, true),
  WorkspaceListRpc,
  WorkspaceLinkRpc.annotate(Mutation, true),
  WorkspaceDeleteRpc.annotate(Mutation, true),
  WorkspaceDiffRpc,
  WorkspaceRevertRpc.annotate(Mutation, true),
  WorkspaceLogRpc,
  WorkspaceRecordRpc.annotate(Mutation, true),
  WorkspaceShellEgressRpc,
  WorkspaceMergeRpc.annotate(Mutation, true),
  WorkspaceExportRpc,
  WorkspaceAllowRpc.annotate(Mutation, true),
  WorkspaceDenyRpc.annotate(Mutation, true),
  WorkspaceQueueRpc
).middleware(AdminMiddleware)
