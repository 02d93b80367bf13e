// requires: bwrap, git
// Repository workspaces (WorkspaceStore.create({ repo }), WorkspaceHistory's publish/merge/export)
// on a repository nobody here wrote: the clone, the refusals (nothing created), git inside the
// sandbox, every turn on substrat/<name> in the user's repository with its trailers (the agent's
// own commits kept), a locked ref retried, merge (clean, dirty, conflicting), the patch series,
// and the attacks an agent can plant in its clone's .git against the daemon's git.
import { NodeContext } from "@effect/platform-node"
import { Effect, Either, Layer, ManagedRuntime } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { SubstratPaths } from "../../src/config/Paths.js"
import { newTurnId } from "../../src/domain/ids.js"
import type { WorkspaceSpec } from "../../src/domain/workspace.js"
import { Durable } from "../../src/storage/Durable.js"
import { syncClone } from "../../src/sandbox/CloneSync.js"
import { Sandbox } from "../../src/sandbox/Sandbox.js"
import { layerBwrap } from "../../src/sandbox/SandboxBwrap.js"
import { WorkspaceHistory } from "../../src/sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../../src/sandbox/WorkspaceStore.js"
import { WorkspaceUsage } from "../../src/sandbox/WorkspaceUsage.js"
import { gitIn, makeForeignRepo, userState } from "../support/foreignRepo.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { sh } from "./sandbox.support.js"

const T = makeTmpDir("substrat-wsrepo-")
const home = join(T, "home")
let rt: ManagedRuntime.ManagedRuntime<WorkspaceStore | WorkspaceHistory | Sandbox | WorkspaceUsage, unknown>

beforeAll(() => {
  fs.mkdirSync(home, { recursive: true })
  const base = Layer.mergeAll(Durable.layer, SubstratPaths.layer(home), NodeContext.layer, WorkspaceUsage.layerRegistry)
  // As in the daemon, the store sees the sandbox: a clone belongs to the uid sandboxes run as.
  const sandbox = layerBwrap().pipe(Layer.provide(NodeContext.layer))
  const store = WorkspaceStore.Default.pipe(Layer.provide(Layer.mergeAll(base, sandbox)))
  const history = WorkspaceHistory.Default.pipe(Layer.provide(store), Layer.provide(Layer.mergeAll(base, sandbox)))
  rt = ManagedRuntime.make(Layer.mergeAll(store, history, sandbox, base))
})
afterAll(async () => {
  await rt?.dispose()
  removeDir(T)
})

const store = <A, E>(f: (s: WorkspaceStore) => Effect.Effect<A, E>) => rt.runPromise(Effect.flatMap(WorkspaceStore, f))
const storeE = <A, E>(f: (s: WorkspaceStore) => Effect.Effect<A, E>) => rt.runPromise(Effect.either(Effect.flatMap(WorkspaceStore, f)))
const hist = <A, E>(f: (h: WorkspaceHistory) => Effect.Effect<A, E>) => rt.runPromise(Effect.flatMap(WorkspaceHistory, f))
const histE = <A, E>(f: (h: WorkspaceHistory) => Effect.Effect<A, E>) => rt.runPromise(Effect.either(Effect.flatMap(WorkspaceHistory, f)))
const inSandbox = (ws: WorkspaceSpec, script: string) =>
  rt.runPromise(Effect.flatMap(Sandbox, (s) => s.run({ workspace: ws, command: sh(script) })))
const turn = (ws: WorkspaceSpec, agent: string) => hist((h) => h.commitTurn(ws.id, { agent, turnId: newTurnId(), summary: `turn of ${agent}` }))
const wsDirs = () => fs.existsSync(join(home, "workspaces")) ? fs.readdirSync(join(home, "workspaces")).sort() : []
const messageOf = (r: Either.Either<unknown, { readonly message: string; readonly _tag: string }>) => Either.isLeft(r) ? `${r.left._tag}: ${r.left.message}` : "ok"

describe("repository workspaces", () => {
  it("refuses a non-repository, an unknown ref, a repository in $SUBSTRAT_HOME, submodules, LFS, a taken branch: nothing created", async () => {
    const repo = join(T, "refuse")
    makeForeignRepo(repo)
    const before = userState(repo)
    const plain = join(T, "plain")
    fs.mkdirSync(plain)
    const inHome = join(home, "inner-repo")
    makeForeignRepo(inHome)
    const withSub = join(T, "withsub")
    makeForeignRepo(withSub)
    fs.writeFileSync(join(withSub, ".gitmodules"), "[submodule \"x\"]\n\tpath = x\n\turl = ../x\n")
    gitIn(withSub, ["add", ".gitmodules"])
    gitIn(withSub, ["commit", "-q", "-m", "submodule"])
    const withLfs = join(T, "withlfs")
    makeForeignRepo(withLfs)
    fs.mkdirSync(join(withLfs, "assets"))
    fs.writeFileSync(join(withLfs, "assets", ".gitattributes"), "*.bin filter=lfs diff=lfs merge=lfs -text\n")
    gitIn(withLfs, ["add", "-A"])
    gitIn(withLfs, ["commit", "-q", "-m", "lfs"])
    gitIn(repo, ["branch", "substrat/taken"])
    const dirsBefore = wsDirs()
    const cases: ReadonlyArray<[Parameters<WorkspaceStore["create"]>[0], RegExp]> = [
      [{ name: "a", repo: { path: plain } }, /not a git repository/],
      [{ name: "b", repo: { path: join(T, "missing") } }, /does not exist/],
      [{ name: "c", repo: { path: "relative/path" } }, /absolute/],
      [{ name: "d", repo: { path: repo, ref: "no-such-branch" } }, /--ref no-such-branch: no such branch or commit/],
      [{ name: "e", repo: { path: repo, ref: "--upload-pack=touch" } }, /not a branch or commit/],
      [{ name: "f", repo: { path: inHome } }, /overlaps \$SUBSTRAT_HOME/],
      [{ name: "g", repo: { path: withSub } }, /submodules/],
      [{ name: "h", repo: { path: withLfs } }, /LFS/],
      [{ name: "taken", repo: { path: repo } }, /substrat\/taken already exists/],
      [{ name: "bad..name", repo: { path: repo } }, /not a valid branch name/]
    ]
    for (const [input, want] of cases) {
      const r = await storeE((s) => s.create(input))
      expect(messageOf(r)).toMatch(/^WorkspaceError: /)
      expect(Either.isLeft(r) && r.left._tag === "WorkspaceError" ? r.left.reason : "").toBe("invalid")
      expect(messageOf(r)).toMatch(want)
    }
    expect(wsDirs()).toEqual(dirsBefore)
    expect({ ...userState(repo), branches: [] }).toEqual({ ...before, branches: [] })
  })

  it("the root is a clone on substrat/<name> (ignored files not in it); git works inside the sandbox; the user's checkout is untouched", async () => {
    const repo = join(T, "clone")
    const head = makeForeignRepo(repo)
    gitIn(repo, ["checkout", "-q", "-b", "feature"])
    fs.writeFileSync(join(repo, "feature.txt"), "user work in progress\n") // untracked in the user's tree
    const before = userState(repo)
    const ws = await store((s) => s.create({ name: "clone-ws", repo: { path: repo, ref: "main" } }))
    expect(ws.repo).toMatchObject({ path: fs.realpathSync(repo), branch: "substrat/clone-ws", base: head, target: "feature" })
    expect(fs.readdirSync(ws.root_path).sort()).toEqual([".git", ".gitignore", "index.js", "license.md", "package.json", "readme.md"])
    expect(fs.lstatSync(join(ws.root_path, ".git")).isDirectory()).toBe(true)
    expect(gitIn(ws.root_path, ["symbolic-ref", "HEAD"]).trim()).toBe("refs/heads/substrat/clone-ws")
    expect(gitIn(ws.root_path, ["remote"]).trim()).toBe("")
    // Objects are copies, not hardlinks into the user's repository.
    const packs = (d: string) => fs.readdirSync(d, { recursive: true }).map(String).filter((f) => f.endsWith(".pack") || /^[0-9a-f]{2}\/[0-9a-f]{38}$/.test(f))
    for (const f of packs(join(ws.root_path, ".git", "objects"))) expect(fs.statSync(join(ws.root_path, ".git", "objects", f)).nlink).toBe(1)
    const r = await inSandbox(ws, "cd /workspace && git status --porcelain && echo '// x' >> index.js && git diff --stat && git commit -qam 'agent commit' && git log --format=%s -2")
    expect(r.exit.code, r.stderr + r.stdout).toBe(0)
    expect(r.stdout).toContain("index.js | 1 +")
    expect(r.stdout).toContain("agent commit\ndocs")
    expect(userState(repo)).toEqual(before)
  })

  it("each recorded turn is on substrat/<name> in the user's repository with its trailers, the agent's own commits kept; diff/log/revert work", async () => {
    const repo = join(T, "publish")
    const head = makeForeignRepo(repo)
    const before = userState(repo)
    const ws = await store((s) => s.create({ name: "pub", repo: { path: repo } }))
    // Turn 1: a plain write.
    fs.writeFileSync(join(ws.root_path, "index.js"), fs.readFileSync(join(ws.root_path, "index.js"), "utf8") + "\n// turn one\n")
    const t1 = await turn(ws, "coder")
    expect(t1.paths).toEqual([{ path: "index.js", change: "modified" }])
    expect(gitIn(repo, ["rev-parse", "substrat/pub"]).trim()).toBe(t1.commit)
    const body = gitIn(repo, ["log", "-1", "--format=%an%n%B", "substrat/pub"])
    expect(body).toMatch(/^coder\n/)
    expect(body).toContain(`Substrat-Workspace: ${ws.id}`)
    expect(body).toContain("Substrat-Agent: coder")
    expect(body).toMatch(/Substrat-Turn: \S+/)
    expect(gitIn(repo, ["rev-parse", "substrat/pub~1"]).trim()).toBe(head)
    // Turn 2: the agent commits itself (inside the sandbox), then leaves one more change uncommitted.
    const clone = ws.root_path
    // The clone follows the recorded turn (inside the sandbox): its status is clean, its log has the turn.
    await rt.runPromise(Effect.flatMap(Effect.flatMap(WorkspaceStore, (s) => s.historyLocation(ws.id)), syncClone))
    expect(gitIn(clone, ["rev-parse", "HEAD"]).trim()).toBe(t1.commit)
    expect(gitIn(clone, ["symbolic-ref", "HEAD"]).trim()).toBe("refs/heads/substrat/pub")
    const st = await inSandbox(ws, "cd /workspace && git status --porcelain && git log -1 --format=%an")
    expect(st.stdout).toBe("coder\n")
    const r = await inSandbox(ws, "cd /workspace && echo 'new file' > added.txt && git add added.txt && git commit -qm 'agent: add added.txt' && echo more >> readme.md")
    expect(r.exit.code).toBe(0)
    const agentCommit = gitIn(clone, ["rev-parse", "HEAD"]).trim()
    const t2 = await turn(ws, "coder")
    expect(t2.paths.map((p) => p.path)).toEqual(["added.txt", "readme.md"])
    const subjects = gitIn(repo, ["log", "--format=%H %s", `${head}..substrat/pub`]).trim().split("\n")
    expect(subjects.length).toBe(3)
    expect(subjects[1]).toBe(`${agentCommit} agent: add added.txt`)
    const turns = await hist((h) => h.log(ws.id))
    const t2id = turns[0]!.turn_id!
    const d = await hist((h) => h.changes(ws.id, t2id as never))
    expect(d.map((p) => p.path)).toEqual(["added.txt", "readme.md"])
    const rev = await hist((h) => h.revert(ws.id, t2id as never))
    expect(rev.paths.map((p) => p.path)).toEqual(["added.txt", "readme.md"])
    expect(fs.existsSync(join(clone, "added.txt"))).toBe(false)
    expect(gitIn(repo, ["log", "-1", "--format=%s", "substrat/pub"]).trim()).toBe(`revert turn ${t2id}`)
    // The user's checkout: only the new branch.
    const after = userState(repo)
    expect({ ...after, branches: [] }).toEqual({ ...before, branches: [] })
    expect(after.branches).toEqual(["refs/heads/main", "refs/heads/substrat/pub"])
  })

  it("a locked ref in the user's repository is waited for, never broken", async () => {
    const repo = join(T, "locked")
    makeForeignRepo(repo)
    const ws = await store((s) => s.create({ name: "locked", repo: { path: repo } }))
    const lock = join(repo, ".git", "refs", "heads", "substrat", "locked.lock")
    fs.mkdirSync(join(repo, ".git", "refs", "heads", "substrat"), { recursive: true })
    fs.writeFileSync(lock, "")
    fs.writeFileSync(join(repo, ".git", "index.lock"), "")
    setTimeout(() => fs.rmSync(lock), 400)
    fs.writeFileSync(join(ws.root_path, "new.txt"), "x\n")
    const t = await turn(ws, "coder")
    expect(gitIn(repo, ["rev-parse", "substrat/locked"]).trim()).toBe(t.commit)
    expect(fs.existsSync(join(repo, ".git", "index.lock"))).toBe(true) // not ours to touch
    fs.rmSync(join(repo, ".git", "index.lock"))
  })

  it("merge: refuses a dirty tree and a conflict (paths named, nothing changed); merges into the checked-out branch; squash; export writes the series", async () => {
    const repo = join(T, "merge")
    makeForeignRepo(repo)
    const ws = await store((s) => s.create({ name: "m", repo: { path: repo } }))
    fs.writeFileSync(join(ws.root_path, "index.js"), fs.readFileSync(join(ws.root_path, "index.js"), "utf8").replace("var s = 1000;", "var s = 1000; // seconds"))
    fs.writeFileSync(join(ws.root_path, "NOTES.md"), "notes\n")
    await turn(ws, "coder")
    // Dirty working tree: refused, nothing changed.
    fs.appendFileSync(join(repo, "readme.md"), "local edit\n")
    const dirty = userState(repo)
    const r1 = await histE((h) => h.merge(ws.id, {}))
    expect(messageOf(r1)).toMatch(/uncommitted changes/)
    expect(userState(repo)).toEqual(dirty)
    gitIn(repo, ["checkout", "-q", "--", "readme.md"])
    // The user's branch moved in a conflicting way: refused with the path, nothing changed.
    fs.writeFileSync(join(repo, "index.js"), fs.readFileSync(join(repo, "index.js"), "utf8").replace("var s = 1000;", "var s = 1e3;"))
    gitIn(repo, ["commit", "-qam", "user edit"])
    const moved = userState(repo)
    const r2 = await histE((h) => h.merge(ws.id, {}))
    expect(messageOf(r2)).toMatch(/conflicts in: index\.js/)
    expect(userState(repo)).toEqual(moved)
    expect(gitIn(repo, ["status", "--porcelain"])).toBe("")
    // Resolve by reverting the user's edit; now it merges (a real merge: main moved).
    gitIn(repo, ["revert", "--no-edit", "HEAD"])
    const m = await hist((h) => h.merge(ws.id, { message: "Merge the team's work" }))
    expect(m.fast_forward).toBe(false)
    expect(m.worktree_updated).toBe(true)
    expect([...m.paths].sort()).toEqual(["NOTES.md", "index.js"])
    expect(gitIn(repo, ["rev-parse", "main"]).trim()).toBe(m.commit)
    expect(gitIn(repo, ["status", "--porcelain"])).toBe("")
    expect(fs.readFileSync(join(repo, "NOTES.md"), "utf8")).toBe("notes\n")
    expect(gitIn(repo, ["log", "-1", "--format=%P%n%s", "main"]).trim().split("\n")[1]).toBe("Merge the team's work")
    expect(messageOf(await histE((h) => h.merge(ws.id, {})))).toMatch(/already merged/)
    // A second turn, squashed into another branch (not checked out: the work tree stays).
    gitIn(repo, ["branch", "release", "main~3"])
    fs.writeFileSync(join(ws.root_path, "NOTES.md"), "notes\nmore\n")
    await turn(ws, "coder")
    const before = userState(repo)
    const sq = await hist((h) => h.merge(ws.id, { into: "release", squash: true }))
    expect(sq.worktree_updated).toBe(false)
    expect(gitIn(repo, ["log", "-1", "--format=%P", "release"]).trim().split(" ").length).toBe(1)
    expect({ ...userState(repo), branches: [] }).toEqual({ ...before, branches: [] })
    for (const bad of ["no-such", "-x", "a..b", "substrat/m"]) {
      expect(messageOf(await histE((h) => h.merge(ws.id, { into: bad })))).toMatch(/^WorkspaceError: /)
    }
    const patches = await hist((h) => h.exportPatches(ws.id))
    expect(patches.map((p) => p.name)).toEqual(["0001-turn-of-coder.patch", "0002-turn-of-coder.patch"])
    expect(patches[0]!.text).toContain("+notes")
    // Not a repository workspace: refused.
    const plain = await store((s) => s.create({ name: "plain-ws" }))
    expect(messageOf(await histE((h) => h.merge(plain.id, {})))).toMatch(/not made from a repository/)
  })

  it("attack: hooks, fsmonitor, filters, alternates and a .git link planted in the clone run nothing and read nothing of the daemon's", async () => {
    const repo = join(T, "attack")
    makeForeignRepo(repo)
    const ws = await store((s) => s.create({ name: "attack", repo: { path: repo } }))
    const pwned = join(T, "pwned")
    const payload = `#!/bin/sh\necho "$0" >> ${pwned}\ncat\n`
    const git = join(ws.root_path, ".git")
    fs.mkdirSync(join(git, "hooks"), { recursive: true })
    for (const h of ["pre-commit", "post-commit", "reference-transaction", "post-checkout", "pre-receive", "post-update", "update", "fsmonitor"]) {
      fs.writeFileSync(join(git, "hooks", h), payload, { mode: 0o755 })
    }
    fs.writeFileSync(join(T, "evil.sh"), payload, { mode: 0o755 })
    fs.appendFileSync(join(git, "config"), [
      "[core]", `\tfsmonitor = ${T}/evil.sh`, `\thooksPath = ${git}/hooks`, `\tpager = ${T}/evil.sh`,
      "[filter \"x\"]", `\tclean = ${T}/evil.sh`, `\tsmudge = ${T}/evil.sh`, `\tprocess = ${T}/evil.sh`,
      "[uploadpack]", `\tpackObjectsHook = ${T}/evil.sh`,
      "[diff \"x\"]", `\ttextconv = ${T}/evil.sh`, `\tcommand = ${T}/evil.sh`,
      "[commit]", "\tgpgSign = true", "[gpg]", `\tprogram = ${T}/evil.sh`, ""
    ].join("\n"))
    fs.writeFileSync(join(ws.root_path, ".gitattributes"), "* filter=x diff=x\n")
    fs.writeFileSync(join(ws.root_path, "index.js"), "changed by the agent\n")
    const t = await turn(ws, "coder")
    expect(t.paths.map((p) => p.path)).toEqual([".gitattributes", "index.js"])
    await hist((h) => h.diff(ws.id))
    await hist((h) => h.log(ws.id))
    // The agent's clone commits, then plants alternates pointing at another repository: not read.
    const secret = join(T, "secret")
    makeForeignRepo(secret)
    fs.writeFileSync(join(secret, "secret.txt"), "not for agents\n")
    gitIn(secret, ["add", "secret.txt"])
    gitIn(secret, ["commit", "-q", "-m", "secret"])
    const secretHead = gitIn(secret, ["rev-parse", "HEAD"]).trim()
    fs.writeFileSync(join(git, "objects", "info", "alternates"), join(secret, ".git", "objects") + "\n")
    fs.writeFileSync(join(git, "refs", "heads", "substrat", "attack"), secretHead + "\n")
    fs.writeFileSync(join(ws.root_path, "index.js"), "changed again\n")
    await turn(ws, "coder")
    expect(() => gitIn(repo, ["cat-file", "-e", secretHead])).toThrow()
    // .git replaced by a link to that repository: not read either.
    fs.rmSync(git, { recursive: true })
    fs.symlinkSync(join(secret, ".git"), git)
    fs.writeFileSync(join(ws.root_path, "index.js"), "third\n")
    const t3 = await turn(ws, "coder")
    expect(gitIn(repo, ["rev-parse", "substrat/attack"]).trim()).toBe(t3.commit)
    expect(() => gitIn(repo, ["cat-file", "-e", secretHead])).toThrow()
    await hist((h) => h.merge(ws.id, {}))
    expect(fs.existsSync(pwned)).toBe(false)
  }, 30_000)
})
