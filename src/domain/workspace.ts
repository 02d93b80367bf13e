// Workspace specs: what a sandbox sees. Validation of paths (no `..`, relative mount paths,
// absolute existing host paths) happens in src/sandbox; these are the shapes.
import { Schema } from "effect"
import { EgressPolicy, noEgress } from "./egress.js"
import { WorkspaceId } from "./ids.js"

export const BindMode = Schema.Literal("ro", "rw")
export type BindMode = typeof BindMode.Type

export class SymlinkSpec extends Schema.Class<SymlinkSpec>("SymlinkSpec")({
  /** Absolute path on the host (or inside the parent workspace). */
  host_path: Schema.String,
  /** Relative path under /workspace inside the sandbox. */
  mount_path: Schema.String,
  mode: BindMode
}) {}

/** Per-command resource limits; null = unlimited. */
export class ResourceLimits extends Schema.Class<ResourceLimits>("ResourceLimits")({
  memory_bytes: Schema.NullOr(Schema.JsonNumber),
  cpu_seconds: Schema.NullOr(Schema.JsonNumber),
  max_processes: Schema.NullOr(Schema.JsonNumber),
  max_file_bytes: Schema.NullOr(Schema.JsonNumber),
  wall_clock_seconds: Schema.NullOr(Schema.JsonNumber)
}) {}

export const noLimits = new ResourceLimits({
  memory_bytes: null,
  cpu_seconds: null,
  max_processes: null,
  max_file_bytes: null,
  wall_clock_seconds: null
})

/** Where a repository workspace came from (`workspace create --repo`, docs/sandbox.md "Repository workspaces"). */
export class RepoSource extends Schema.Class<RepoSource>("RepoSource")({
  /** The user's working tree (top level, canonical). Never bound into a sandbox. */
  path: Schema.String,
  /** The branch in the user's repository the turns are published to: `substrat/<workspace name>`. */
  branch: Schema.String,
  /** The commit the clone started at. */
  base: Schema.String,
  /** The branch checked out in the user's repository at create (`workspace merge`'s default); null: detached. */
  target: Schema.NullOr(Schema.String)
}) {}

export class WorkspaceSpec extends Schema.Class<WorkspaceSpec>("WorkspaceSpec")({
  id: WorkspaceId,
  name: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }),
  parent_id: Schema.NullOr(WorkspaceId),
  /** Absolute host path of the workspace root (bound at /workspace). */
  root_path: Schema.String,
  network_access: Schema.Boolean,
  symlinks: Schema.Array(SymlinkSpec),
  limits: Schema.optionalWith(ResourceLimits, { default: () => noLimits }),
  /** The root agent this workspace was created for (`agent create` without `--workspace`); null otherwise. */
  default_for: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }),
  /** A repository workspace: its root is a clone of `repo.path` on branch `repo.branch`; null otherwise. */
  repo: Schema.optionalWith(Schema.NullOr(RepoSource), { default: () => null }),
  /** Which hosts its sandboxes may reach through the daemon's egress proxy (docs/sandbox.md "Egress"). */
  egress: Schema.optionalWith(EgressPolicy, { default: () => noEgress }),
  /**
   * A branch child's workspace (`spawn_agent(workspace: "branch")`): the repository workspace it
   * was forked from; its branch goes back there through the merge queue. Null otherwise.
   */
  fork_of: Schema.optionalWith(Schema.NullOr(WorkspaceId), { default: () => null }),
  /** The check command the merge queue runs on a merged tree before the branch moves (`--check`); null: none. */
  check: Schema.optionalWith(Schema.NullOr(Schema.String), { default: () => null }),
  created_at: Schema.String
}) {}
