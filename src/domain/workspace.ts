// Workspace specs: what a sandbox sees. Validation of paths (no `..`, relative mount paths,
// absolute existing host paths) happens in src/sandbox; these are the shapes.
import { Schema } from "effect"
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
  created_at: Schema.String
}) {}
