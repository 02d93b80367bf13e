// ChildWorkspaces over the WorkspaceStore: `spawn_agent(..., workspace_subdir: "a/b")` gives the
// child the child workspace of its parent's workspace rooted at `<parent root>/a/b` — the one that
// is already there, else a new one (WorkspaceStore.create({ parent, subdir }): never wider than
// the parent). One creation at a time, so two spawns asking for the same subdir share it.
// `spawn_agent(workspace: "branch")` gives the child a new repository workspace forked from its
// parent's (WorkspaceStore.create({ fork })); its work comes back through the merge queue.
import { Effect, Either, Layer } from "effect"
import { ChildWorkspaces } from "../agent/ChildWorkspaces.js"
import { InvalidInputError } from "../domain/errors.js"
import type { WorkspaceId } from "../domain/ids.js"
import { relativePath } from "../sandbox/PathPolicy.js"
import { WorkspaceStore } from "../sandbox/WorkspaceStore.js"

const invalid = (message: string) => new InvalidInputError({ field: "workspace_subdir", message })

const messageOf = (e: unknown): string =>
  typeof e === "object" && e !== null && "message" in e && typeof e.message === "string" ? e.message : String(e)

export const layer = (options: { readonly spawnMode: "shared" | "branch" } = { spawnMode: "shared" }): Layer.Layer<ChildWorkspaces, never, WorkspaceStore> => Layer.effect(
  ChildWorkspaces,
  Effect.gen(function*() {
    const store = yield* WorkspaceStore
    const lock = yield* Effect.makeSemaphore(1)

    const forSubdir = (parentId: WorkspaceId, subdir: string) =>
      Effect.gen(function*() {
        const sub = relativePath("workspace_subdir", subdir)
        if (Either.isLeft(sub)) return yield* invalid(sub.left.message)
        const parent = yield* store.get(parentId)
        const root = `${parent.root_path}/${sub.right}`
        const existing = (yield* store.children(parentId)).find((c) => c.root_path === root)
        if (existing !== undefined) return existing.id
        const created = yield* store.create({ parent: parentId, subdir: sub.right })
        return created.id
      }).pipe(
        lock.withPermits(1),
        Effect.mapError((e) => e instanceof InvalidInputError ? e : invalid(`workspace_subdir ${JSON.stringify(subdir)}: ${messageOf(e)}`)),
        Effect.withSpan("ChildWorkspaces.forSubdir")
      )

    const forRoot = (agent: string) =>
      store.create({ default_for: agent }).pipe(
        Effect.map((ws) => ws.id),
        Effect.mapError((e) => new InvalidInputError({ field: "workspace", message: `the default workspace of ${agent}: ${messageOf(e)}` })),
        Effect.withSpan("ChildWorkspaces.forRoot")
      )

    const forBranch = (parentId: WorkspaceId, child: string) =>
      store.create({ fork: { parent: parentId, child } }).pipe(
        Effect.map((ws) => ws.id),
        Effect.mapError((e) => new InvalidInputError({ field: "workspace", message: `a branch workspace for ${child}: ${messageOf(e)}` })),
        Effect.withSpan("ChildWorkspaces.forBranch")
      )

    const branchable = (parentId: WorkspaceId) =>
      store.get(parentId).pipe(
        Effect.map((ws) => ws.parent_id === null && ws.repo !== null),
        Effect.orElseSucceed(() => false)
      )

    return ChildWorkspaces.of({ forSubdir, forRoot, forBranch, branchable, spawnMode: options.spawnMode })
  })
)
