// ChildWorkspaces: how agents get workspaces. `spawn_agent(..., workspace_subdir)` gets the child a
// child workspace rooted at that subdirectory of the parent's (created, or reused when one already
// sits there); a root created without a workspace gets a new one of its own (`forRoot`). A port so the orchestration core stays free of the sandbox; the daemon provides it
// (src/daemon/ChildWorkspacesLive.ts). Without it, `workspace_subdir` is refused.
import { Context, type Effect } from "effect"
import type { InvalidInputError } from "../domain/errors.js"
import type { WorkspaceId } from "../domain/ids.js"

export class ChildWorkspaces extends Context.Tag("substrat/ChildWorkspaces")<ChildWorkspaces, {
  /** The workspace for `subdir` (validated: relative, normalised, no `..`) under `parent`. */
  readonly forSubdir: (parent: WorkspaceId, subdir: string) => Effect.Effect<WorkspaceId, InvalidInputError>
  /** A new top-level workspace (with its history) of its own for root agent `agent`. */
  readonly forRoot: (agent: string) => Effect.Effect<WorkspaceId, InvalidInputError>
}>() {}
