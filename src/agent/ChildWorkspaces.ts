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
  /**
   * `spawn_agent(workspace: "branch")`: a new repository workspace for child `child`, a clone of
   * `parent`'s branch (a repository workspace) on `substrat/<parent>/<child>`; its work comes back
   * through `parent`'s merge queue.
   */
  readonly forBranch: (parent: WorkspaceId, child: string) => Effect.Effect<WorkspaceId, InvalidInputError>
  /** May `parent` have branch children (a top-level repository workspace)? */
  readonly branchable: (parent: WorkspaceId) => Effect.Effect<boolean>
  /** spawn_agent's `workspace` when the call does not say (config `workspaces.spawnMode`). */
  readonly spawnMode: "shared" | "branch"
}>() {}
