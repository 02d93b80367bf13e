// requires: bwrap, git
// WorkspaceStore (persistence, nesting rules, delete/in-use) and WorkspaceHistory (per-turn diffs,
// revert), with real bwrap for "a child sees only its subtree and parent-granted links".
import { NodeContext } from "@effect/platform-node"
import { Effect, Either, Layer, ManagedRuntime, Schema, Scope, Exit } from "effect"
import * as fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SubstratPaths } from "../../src/config/Paths.js"
import { newTurnId } from "../../src/domain/ids.js"
import { noLimits, ResourceLimits, WorkspaceSpec } from "../../src/domain/workspace.js"
import { Durable } from "../../src/storage/Durable.js"
import { Sandbox } from "../../src/sandbox/Sandbox.js"
import { layerBwrap } from "../../src/sandbox/SandboxBwrap.js"
import { WorkspaceHistory } from "../../src/sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../../src/sandbox/WorkspaceStore.js"
import { WorkspaceUsage } from "../../src/sandbox/WorkspaceUsage.js"
import { sh } from "./sandbox.support.js"

let T = ""
let rt: ManagedRuntime.ManagedRuntime<WorkspaceStore | WorkspaceHistory | Sandbox | WorkspaceUsage, unknown>
const home = () => join(T, "home")

beforeAll(() => {
  T = fs.mkdtempSync(join(tmpdir(), "substrat-ws-"))
  const base = Layer.mergeAll(Durable.layer, SubstratPaths.layer(home()), NodeContext.layer, WorkspaceUsage.layerRegistry)
  const store = WorkspaceStore.Default.pipe(Layer.provide(base))
  const history = WorkspaceHistory.Default.pipe(Layer.provide(store), Layer.provide(base))
  rt = ManagedRuntime.make(Layer.mergeAll(store, history, layerBwrap().pipe(Layer.provide(NodeContext.layer)), base))
})
afterAll(async () => {
  await rt?.dispose()
  if (T !== "") fs.rmSync(T, { recursive: true, force: true })
})

const store = <A, E>(f: (s: WorkspaceStore) => Effect.Effect<A, E>) => rt.runPromise(Effect.flatMap(WorkspaceStore, f))
const storeE = <A, E>(f: (s: WorkspaceStore) => Effect.Effect<A, E>) => rt.runPromise(Effect.either(Effect.flatMap(WorkspaceStore, f)))
const hist = <A, E>(f: (h: WorkspaceHistory) => Effect.Effect<A, E>) => rt.runPromise(Effect.flatMap(WorkspaceHistory, f))
const sandboxRun = (ws: WorkspaceSpec, script: string) =>
  rt.runPromise(Effect.flatMap(Sandbox, (s) => s.run({ workspace: ws, command: sh(script) })))
const errTag = (r: Either.Either<unknown, { _tag: string; reason?: string | undefined }>) =>
  Either.isLeft(r) ? `${r.left._tag}${r.left.reason ? `:${r.left.reason}` : ""}` : "ok"

describe("WorkspaceStore", () => {
  it("create persists workspace.json atomically; layout keeps spec and history outside root/", async () => {
    const ws = await store((s) => s.create({ name: "persist", network_access: true }))
    const dir = join(home(), "workspaces", ws.id)
    expect(fs.readdirSync(dir).sort()).toEqual(["history.git", "root", "workspace.json"])
    expect(ws.root_path).toBe(fs.realpathSync(join(dir, "root")))
    const onDisk = Schema.decodeUnknownSync(Schema.parseJson(WorkspaceSpec))(fs.readFileSync(join(dir, "workspace.json"), "utf8"))
    expect(onDisk).toEqual(ws)
    expect(fs.readdirSync(ws.root_path)).toEqual([]) // nothing of ours in the visible tree
    expect((await store((s) => s.get(ws.id))).name).toBe("persist")
    expect((await store((s) => s.find("persist"))).id).toBe(ws.id)
    expect((await store((s) => s.list())).map((w) => w.id)).toContain(ws.id)
    expect(errTag(await storeE((s) => s.create({ name: "persist" })))).toBe("WorkspaceError:exists")
  })

  it("create with an existing root (a code tree) uses it in place: history outside it, refusals, delete keeps the tree", async () => {
    const tree = join(T, "code-tree")
    fs.mkdirSync(join(tree, "src"), { recursive: true })
    fs.writeFileSync(join(tree, "src", "a.ts"), "export const a = 1\n")
    fs.writeFileSync(join(tree, "notes.txt"), "n\n")
    fs.mkdirSync(join(tree, "node_modules", "dep"), { recursive: true })
    fs.writeFileSync(join(tree, "node_modules", "dep", "index.js"), "x\n")
    const ws = await store((s) => s.create({ root: tree, exclude: ["node_modules"] }))
    expect(ws.root_path).toBe(fs.realpathSync(tree))
    expect(fs.readdirSync(join(home(), "workspaces", ws.id)).sort()).toEqual(["history.git", "workspace.json"])
    expect(fs.readdirSync(tree).sort()).toEqual(["node_modules", "notes.txt", "src"]) // nothing of ours in the tree
    // A baseline (never what is excluded), then a record limited to some paths leaves the others pending.
    const base = await hist((h) => h.commitTurn(ws.id, { agent: "USER", turnId: newTurnId() }))
    expect(base.paths.map((p) => p.path)).toEqual(["notes.txt", "src/a.ts"])
    fs.writeFileSync(join(tree, "src", "a.ts"), "export const a = 2\n")
    fs.writeFileSync(join(tree, "notes.txt"), "m\n")
    const some = await hist((h) => h.commitTurn(ws.id, { agent: "USER", turnId: newTurnId(), paths: ["src/a.ts"] }))
    expect(some.paths).toEqual([{ path: "src/a.ts", change: "modified" }])
    expect((await hist((h) => h.pendingChanges(ws.id))).map((p) => p.path)).toEqual(["notes.txt"])
    // Refused: missing, not a directory, $SUBSTRAT_HOME, a system tree.
    expect(errTag(await storeE((s) => s.create({ root: join(T, "nope") })))).toBe("SandboxPathError:missing")
    expect(errTag(await storeE((s) => s.create({ root: join(tree, "notes.txt") })))).toBe("SandboxPathError:not-a-directory")
    expect(errTag(await storeE((s) => s.create({ root: home() })))).toBe("SandboxPathError:reserved")
    expect(errTag(await storeE((s) => s.create({ root: "/etc" })))).toBe("SandboxPathError:reserved")
    // Delete removes the spec and history, never the tree.
    await store((s) => s.delete(ws.id))
    expect(fs.existsSync(join(home(), "workspaces", ws.id))).toBe(false)
    expect(fs.readFileSync(join(tree, "src", "a.ts"), "utf8")).toBe("export const a = 2\n")
  })

  it("link: canonicalises the host path, refuses $SUBSTRAT_HOME, `..`, duplicates, missing paths", async () => {
    const ws = await store((s) => s.create({}))
    fs.mkdirSync(join(T, "proj"), { recursive: true })
    fs.symlinkSync(join(T, "proj"), join(T, "proj-link"))
    const linked = await store((s) => s.link(ws.id, { host_path: join(T, "proj-link"), mount_path: "proj", mode: "rw" }))
    expect(linked.symlinks[0]).toMatchObject({ host_path: fs.realpathSync(join(T, "proj")), mount_path: "proj", mode: "rw" })
    expect((await store((s) => s.get(ws.id))).symlinks).toHaveLength(1)
    expect(errTag(await storeE((s) => s.link(ws.id, { host_path: home(), mount_path: "h", mode: "ro" })))).toBe("SandboxPathError:reserved")
    expect(errTag(await storeE((s) => s.link(ws.id, { host_path: "/", mount_path: "root", mode: "ro" })))).toBe("SandboxPathError:reserved")
    expect(errTag(await storeE((s) => s.link(ws.id, { host_path: join(T, "proj"), mount_path: "../x", mode: "ro" })))).toBe("SandboxPathError:dot-dot")
    expect(errTag(await storeE((s) => s.link(ws.id, { host_path: join(T, "proj"), mount_path: "proj", mode: "ro" })))).toBe("SandboxPathError:duplicate")
    expect(errTag(await storeE((s) => s.link(ws.id, { host_path: join(T, "nope"), mount_path: "n", mode: "ro" })))).toBe("SandboxPathError:missing")
  })

  it("nesting: a child is a subdirectory and is never wider than its parent", async () => {
    fs.mkdirSync(join(T, "data", "out"), { recursive: true })
    const parent = await store((s) =>
      Effect.gen(function*() {
        const p = yield* s.create({ name: "nest-parent", limits: new ResourceLimits({ ...noLimits, memory_bytes: 1e9 }) })
        return yield* s.link(p.id, { host_path: join(T, "data"), mount_path: "data", mode: "ro" })
      })
    )
    const child = await store((s) => s.create({ name: "team-a", parent: parent.id }))
    expect(child.root_path).toBe(join(parent.root_path, "team-a"))
    expect(child.parent_id).toBe(parent.id)
    expect(child.limits.memory_bytes).toBe(1e9) // inherited
    const wider = (e: Either.Either<unknown, { _tag: string; reason?: string | undefined }>) =>
      expect(errTag(e)).toBe("WorkspaceError:wider-than-parent")
    wider(await storeE((s) => s.create({ parent: parent.id, subdir: "net", network_access: true })))
    wider(await storeE((s) => s.create({ parent: parent.id, subdir: "mem", limits: new ResourceLimits({ ...noLimits, memory_bytes: 2e9 }) })))
    wider(await storeE((s) => s.create({ parent: parent.id, subdir: "data/x" }))) // under the parent's mount
    wider(await storeE((s) => s.link(child.id, { host_path: join(T, "data", "out"), mount_path: "out", mode: "rw" }))) // RW under RO
    wider(await storeE((s) => s.link(child.id, { host_path: join(T, "proj"), mount_path: "p", mode: "ro" }))) // not visible to parent
    // Allowed: RO of the parent's RO link, RW of a sibling dir inside the parent's root.
    fs.mkdirSync(join(parent.root_path, "shared"))
    fs.writeFileSync(join(parent.root_path, "shared", "note.txt"), "from parent\n")
    fs.writeFileSync(join(T, "data", "in.txt"), "data in\n")
    fs.writeFileSync(join(parent.root_path, "parent-only.txt"), "parent secret\n")
    await store((s) => s.link(child.id, { host_path: join(T, "data"), mount_path: "data", mode: "ro" }))
    const c2 = await store((s) => s.link(child.id, { host_path: join(parent.root_path, "shared"), mount_path: "shared", mode: "rw" }))
    expect(errTag(await storeE((s) => s.create({ parent: parent.id, subdir: "../escape" })))).toBe("SandboxPathError:dot-dot")

    // The child sandbox sees its subtree + the granted links, and nothing else of the parent.
    const r = await sandboxRun(
      c2,
      "ls -A /workspace; cat /workspace/data/in.txt; cat /workspace/shared/note.txt; echo child-wrote > /workspace/shared/back.txt; " +
        "cat /workspace/../parent-only.txt 2>&1; echo x > /workspace/data/nope.txt 2>&1; true"
    )
    expect(r.stdout.split("\n").slice(0, 2)).toEqual(["data", "shared"])
    expect(r.stdout).toContain("data in")
    expect(r.stdout).toContain("from parent")
    expect(r.stdout).not.toContain("parent secret")
    expect(r.stdout + r.stderr).toMatch(/Read-only file system/)
    expect(fs.readFileSync(join(parent.root_path, "shared", "back.txt"), "utf8")).toBe("child-wrote\n")
    expect(fs.existsSync(join(T, "data", "nope.txt"))).toBe(false)
    // ...while the parent sees the child's files inside its own tree.
    const pr = await sandboxRun(parent, "ls /workspace/team-a /workspace")
    expect(pr.stdout).toContain("team-a")
  })

  it("delete: refused while in use or with children unless forced; removes the tree", async () => {
    const top = await store((s) => s.create({ name: "del-top" }))
    const kid = await store((s) => s.create({ name: "del-kid", parent: top.id }))
    expect(errTag(await storeE((s) => s.delete(top.id)))).toBe("WorkspaceError:has-children")
    const scope = await rt.runPromise(Scope.make())
    await rt.runPromise(Effect.flatMap(WorkspaceUsage, (u) => u.use(kid.id)).pipe(Scope.extend(scope)))
    expect(errTag(await storeE((s) => s.delete(kid.id)))).toBe("WorkspaceError:in-use")
    await rt.runPromise(Scope.close(scope, Exit.void))
    await store((s) => s.delete(kid.id))
    expect(fs.existsSync(join(home(), "workspaces", kid.id))).toBe(false)
    expect(fs.existsSync(kid.root_path)).toBe(true) // a child's files belong to the parent's tree
    const kid2 = await store((s) => s.create({ name: "del-kid2", parent: top.id }))
    const scope2 = await rt.runPromise(Scope.make())
    await rt.runPromise(Effect.flatMap(WorkspaceUsage, (u) => u.use(kid2.id)).pipe(Scope.extend(scope2)))
    expect(errTag(await storeE((s) => s.delete(top.id)))).toBe("WorkspaceError:has-children")
    const res = await store((s) => s.delete(top.id, { force: true }))
    expect([...res.deleted].sort()).toEqual([kid2.id, top.id].sort())
    expect(fs.existsSync(join(home(), "workspaces", top.id))).toBe(false)
    expect(fs.existsSync(join(home(), "workspaces", kid2.id))).toBe(false)
    expect(errTag(await storeE((s) => s.get(top.id)))).toBe("NotFoundError")
    await rt.runPromise(Scope.close(scope2, Exit.void))
  })
})

describe("WorkspaceHistory", () => {
  it("a scripted turn that creates, edits and deletes yields exactly those paths; revert restores them", async () => {
    const ws = await store((s) => s.create({ name: "diffs" }))
    await sandboxRun(ws, "mkdir -p src && echo one > src/keep.txt && echo edit-me > src/edit.txt && echo bye > gone.txt && ln -s /etc/passwd link")
    const t1 = newTurnId()
    const c1 = await hist((h) => h.commitTurn(ws.id, { agent: "alice", turnId: t1 }))
    expect(c1.paths).toEqual([
      { path: "gone.txt", change: "added" },
      { path: "link", change: "added" },
      { path: "src/edit.txt", change: "added" },
      { path: "src/keep.txt", change: "added" }
    ])
    // The turn, run inside the sandbox.
    await sandboxRun(ws, "echo edited >> src/edit.txt && rm gone.txt && mkdir -p new/deep && echo hi > new/deep/file.txt")
    const pending = await hist((h) => h.diff(ws.id))
    expect(pending).toContain("+edited")
    const t2 = newTurnId()
    const c2 = await hist((h) => h.commitTurn(ws.id, { agent: "bob", turnId: t2 }))
    expect(c2.commit).toMatch(/^[0-9a-f]{40}$/)
    expect(c2.paths).toEqual([
      { path: "gone.txt", change: "deleted" },
      { path: "new/deep/file.txt", change: "added" },
      { path: "src/edit.txt", change: "modified" }
    ])
    expect(await hist((h) => h.changes(ws.id, t2))).toEqual(c2.paths)
    const d = await hist((h) => h.diff(ws.id, t2))
    expect(d).toContain("+edited")
    expect(d).toContain("deleted file mode")
    expect(d).toContain("+++ b/new/deep/file.txt")
    // Nothing changed → no commit.
    expect(await hist((h) => h.commitTurn(ws.id, { agent: "bob", turnId: newTurnId() }))).toEqual({ commit: null, paths: [] })
    const log = await hist((h) => h.log(ws.id))
    expect(log[0]).toMatchObject({ agent: "bob", turn_id: t2 })

    const rv = await hist((h) => h.revert(ws.id, t2, { agent: "human" }))
    expect(rv.paths.map((p) => p.path)).toEqual(["gone.txt", "new/deep/file.txt", "src/edit.txt"])
    expect(fs.readFileSync(join(ws.root_path, "src", "edit.txt"), "utf8")).toBe("edit-me\n")
    expect(fs.readFileSync(join(ws.root_path, "gone.txt"), "utf8")).toBe("bye\n")
    expect(fs.existsSync(join(ws.root_path, "new", "deep", "file.txt"))).toBe(false)
    expect(fs.readlinkSync(join(ws.root_path, "link"))).toBe("/etc/passwd") // stored as a link, never followed
    const unknown = await rt.runPromise(Effect.either(Effect.flatMap(WorkspaceHistory, (h) => h.diff(ws.id, newTurnId()))))
    expect(errTag(unknown)).toBe("NotFoundError")
  })

  it("revert of a turn overlapped by later changes is a typed conflict and changes nothing", async () => {
    const ws = await store((s) => s.create({}))
    fs.writeFileSync(join(ws.root_path, "f.txt"), "v1\n")
    const t1 = newTurnId()
    await hist((h) => h.commitTurn(ws.id, { agent: "a", turnId: t1 }))
    fs.writeFileSync(join(ws.root_path, "f.txt"), "v2\n")
    const t2 = newTurnId()
    await hist((h) => h.commitTurn(ws.id, { agent: "a", turnId: t2 }))
    fs.writeFileSync(join(ws.root_path, "f.txt"), "v3\n")
    await hist((h) => h.commitTurn(ws.id, { agent: "a", turnId: newTurnId() }))
    const r = await rt.runPromise(Effect.either(Effect.flatMap(WorkspaceHistory, (h) => h.revert(ws.id, t2))))
    expect(errTag(r)).toBe("WorkspaceHistoryError:conflict")
    expect(fs.readFileSync(join(ws.root_path, "f.txt"), "utf8")).toBe("v3\n")
    expect(await hist((h) => h.diff(ws.id))).toBe("")
  })

  it("a child's turn records only its subtree, with paths relative to its own root", async () => {
    const top = await store((s) => s.create({}))
    const kid = await store((s) => s.create({ parent: top.id, subdir: "teams/a" }))
    fs.writeFileSync(join(top.root_path, "parent.txt"), "p\n")
    fs.writeFileSync(join(kid.root_path, "kid.txt"), "k\n")
    const tk = newTurnId()
    const ck = await hist((h) => h.commitTurn(kid.id, { agent: "kid", turnId: tk }))
    expect(ck.paths).toEqual([{ path: "kid.txt", change: "added" }])
    expect(await hist((h) => h.diff(kid.id, tk))).toContain("+++ b/kid.txt")
    const cp = await hist((h) => h.commitTurn(top.id, { agent: "parent", turnId: newTurnId() }))
    expect(cp.paths).toEqual([{ path: "parent.txt", change: "added" }])
  })
})
