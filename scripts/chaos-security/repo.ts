// Attacks on the repository surface (docs/sandbox.md "Repository workspaces"), replayed by
// `npm run chaos -- --only security` and by test/integration/repo-attacks.test.ts: an agent owns
// every file of its workspace — its clone's `.git` (config, hooks, refs, objects, alternates),
// `.gitattributes`, nested repositories, links — and the daemon runs git on that tree on the host
// (recording a turn, diff, pending changes, log, revert, export, publishing to the user's
// repository, `workspace merge`). None of it may run a program the agent chose, read or write
// outside the workspace, or move a ref of the user's repository outside `refs/heads/substrat/`.
// Each attack runs the daemon's own code paths (WorkspaceStore, WorkspaceHistory, CloneSync) in a
// temporary home with bwrap, against a repository nobody here wrote (test/support/foreignRepo.ts).
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import type * as FileSystem from "@effect/platform/FileSystem"
import { NodeContext } from "@effect/platform-node"
import { Effect, Layer, Logger, ManagedRuntime } from "effect"
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { SubstratPaths } from "../../src/config/Paths.js"
import { newTurnId } from "../../src/domain/ids.js"
import type { WorkspaceSpec } from "../../src/domain/workspace.js"
import { syncClone } from "../../src/sandbox/CloneSync.js"
import { Sandbox } from "../../src/sandbox/Sandbox.js"
import { layerBwrap } from "../../src/sandbox/SandboxBwrap.js"
import { WorkspaceHistory } from "../../src/sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../../src/sandbox/WorkspaceStore.js"
import { WorkspaceUsage } from "../../src/sandbox/WorkspaceUsage.js"
import { Durable } from "../../src/storage/Durable.js"
import { gitIn, makeForeignRepo, userState } from "../../test/support/foreignRepo.js"
import { makeTmpDir, removeDir } from "../../test/support/tmp.js"
import type { Attack, AttackResult } from "./attack.js"

type Services = WorkspaceStore | WorkspaceHistory | Sandbox | WorkspaceUsage | CommandExecutor.CommandExecutor | FileSystem.FileSystem

/** One attack's world: a home, the daemon's services over it, the user's repository and a secret one outside every workspace. */
export interface RepoWorld {
  readonly dir: string
  readonly home: string
  /** The user's repository (`--repo`). */
  readonly repo: string
  /** Another repository on the host no agent may read (its HEAD commit: `secretHead`). */
  readonly secret: string
  readonly secretHead: string
  /** Written by the planted program when anything runs it. */
  readonly pwned: string
  /** An executable that appends its name and arguments to `pwned`. */
  readonly evil: string
  readonly run: <A, E>(f: Effect.Effect<A, E, Services>) => Promise<A>
  readonly workspace: (name: string) => Promise<WorkspaceSpec>
  /** Record a turn of `agent` in `ws` (what the daemon does after every turn), then sync the clone. */
  readonly turn: (ws: WorkspaceSpec, agent?: string) => Promise<{ readonly commit: string | null; readonly paths: ReadonlyArray<{ readonly path: string }> }>
  /** Run `script` in `ws`'s sandbox (as the agent's tools would). */
  readonly agent: (ws: WorkspaceSpec, script: string) => Promise<string>
  /** Does the daemon's history of `ws`, or the user's repository, hold `commit`? */
  readonly holds: (ws: WorkspaceSpec, commit: string) => { readonly history: boolean; readonly user: boolean }
}

const hasObject = (gitDir: string, commit: string) => {
  try {
    execFileSync("git", ["--git-dir", gitDir, "cat-file", "-e", `${commit}^{commit}`], { stdio: "ignore", env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" } })
    return true
  } catch {
    return false
  }
}

/** The branch `workspace merge` is asked to merge into (the user's own request: it may move). */
const MERGE_TARGET = "merge-target"

/** The user's refs outside refs/heads/substrat/ and the merge target (what no attack may move). */
const userRefs = (repo: string) =>
  gitIn(repo, ["for-each-ref", "--format=%(refname) %(objectname)"]).split("\n")
    .filter((l) => l !== "" && !l.startsWith("refs/heads/substrat/") && !l.startsWith(`refs/heads/${MERGE_TARGET} `)).join("\n")

export const withRepoWorld = async (f: (w: RepoWorld) => Promise<AttackResult>): Promise<AttackResult> => {
  const dir = Fs.realpathSync(makeTmpDir("substrat-chaos-repo-"))
  const home = Path.join(dir, "home")
  Fs.mkdirSync(home, { recursive: true })
  const base = Layer.mergeAll(Durable.layer, SubstratPaths.layer(home), NodeContext.layer, WorkspaceUsage.layerRegistry)
  const sandbox = layerBwrap().pipe(Layer.provide(NodeContext.layer))
  const store = WorkspaceStore.Default.pipe(Layer.provide(Layer.mergeAll(base, sandbox)))
  const history = WorkspaceHistory.Default.pipe(Layer.provide(store), Layer.provide(Layer.mergeAll(base, sandbox)))
  // The daemon's warnings (a refused clone, a sync that failed) are outcomes here, not noise on the report.
  const rt = ManagedRuntime.make(Layer.mergeAll(store, history, sandbox, base, Logger.replace(Logger.defaultLogger, Logger.none)))
  try {
    const repo = Path.join(dir, "user-repo")
    makeForeignRepo(repo)
    const secret = Path.join(dir, "secret-repo")
    makeForeignRepo(secret)
    Fs.writeFileSync(Path.join(secret, "secret.txt"), "not for agents\n")
    gitIn(secret, ["add", "secret.txt"])
    gitIn(secret, ["commit", "-q", "-m", "secret"])
    gitIn(secret, ["gc", "-q"])
    gitIn(secret, ["update-ref", "refs/heads/loose", "HEAD"])
    const secretHead = gitIn(secret, ["rev-parse", "HEAD"]).trim()
    gitIn(repo, ["branch", MERGE_TARGET])
    const pwned = Path.join(dir, "pwned")
    const evil = Path.join(dir, "evil.sh")
    Fs.writeFileSync(evil, `#!/bin/sh\necho "$0 $*" >> ${pwned}\ncat\n`, { mode: 0o755 })
    const run = <A, E>(e: Effect.Effect<A, E, Services>) => rt.runPromise(e)
    const before = { state: userState(repo), refs: userRefs(repo) }
    const world: RepoWorld = {
      dir,
      home,
      repo,
      secret,
      secretHead,
      pwned,
      evil,
      run,
      workspace: (name) => run(Effect.flatMap(WorkspaceStore, (s) => s.create({ name, repo: { path: repo } }))),
      turn: (ws, agent = "intruder") =>
        run(Effect.gen(function*() {
          const r = yield* Effect.flatMap(WorkspaceHistory, (h) => h.commitTurn(ws.id, { agent, turnId: newTurnId(), summary: `turn of ${agent}` }))
          if (r.commit !== null) yield* Effect.flatMap(Effect.flatMap(WorkspaceStore, (s) => s.historyLocation(ws.id)), syncClone)
          return r
        })),
      agent: (ws, script) =>
        run(Effect.flatMap(Sandbox, (s) => s.run({ workspace: ws, command: ["sh", "-c", `cd /workspace && ${script}`] }))).then((r) => {
          if (r.exit.code !== 0) throw new Error(`the agent's script failed (${r.exit.code}): ${r.stderr}`)
          return r.stdout
        }),
      holds: (ws, commit) => ({ history: hasObject(Path.join(home, "workspaces", ws.id, "history.git"), commit), user: hasObject(Path.join(repo, ".git"), commit) })
    }
    const r = await f(world)
    // Whatever the attack tried: nothing ran, the user's checkout and refs outside substrat/ are as they were.
    const ran = Fs.existsSync(pwned) ? Fs.readFileSync(pwned, "utf8").trim().split("\n") : []
    const after = { state: userState(repo), refs: userRefs(repo) }
    const moved = after.refs !== before.refs
    const touched = JSON.stringify({ ...after.state, branches: [] }) !== JSON.stringify({ ...before.state, branches: [] })
    return {
      breached: r.breached || ran.length > 0 || moved || touched,
      detail: `${r.detail}; programs run: ${ran.length === 0 ? "none" : ran.join(" | ")}; user refs outside substrat/ moved: ${moved}; user checkout changed: ${touched}`
    }
  } finally {
    await rt.dispose()
    removeDir(dir)
  }
}

/** Every git operation the daemon runs on a repository workspace, one after another (errors are outcomes, not failures). */
const everyOperation = async (w: RepoWorld, ws: WorkspaceSpec) => {
  const outcomes: Array<string> = []
  const op = async (name: string, e: Effect.Effect<unknown, unknown, Services>) => {
    const r = await w.run(Effect.either(e))
    outcomes.push(`${name} ${r._tag === "Right" ? "ok" : "refused"}`)
  }
  await op("diff", Effect.flatMap(WorkspaceHistory, (h) => h.diff(ws.id)))
  await op("pending", Effect.flatMap(WorkspaceHistory, (h) => h.pendingChanges(ws.id)))
  const t = await w.turn(ws)
  outcomes.push(`record ${t.commit === null ? "nothing" : t.paths.map((p) => p.path).join(",")}`)
  await op("log", Effect.flatMap(WorkspaceHistory, (h) => h.log(ws.id)))
  const turns = await w.run(Effect.flatMap(WorkspaceHistory, (h) => h.log(ws.id)))
  const last = turns[0]?.turn_id
  if (last !== undefined && last !== null) {
    await op("turn diff", Effect.flatMap(WorkspaceHistory, (h) => h.diff(ws.id, last as never)))
    await op("revert", Effect.flatMap(WorkspaceHistory, (h) => h.revert(ws.id, last as never)))
  }
  await op("export", Effect.flatMap(WorkspaceHistory, (h) => h.exportPatches(ws.id)))
  await op("merge", Effect.flatMap(WorkspaceHistory, (h) => h.merge(ws.id, { into: MERGE_TARGET })))
  return outcomes.join(", ")
}

const plantedPrograms: Attack = {
  name: "24.1 programs planted in the clone (hooks, core.fsmonitor, core.hooksPath, pager, filter/diff/textconv/merge drivers, packObjectsHook, gpg) and .gitattributes, through record, diff, log, revert, export, publish and merge",
  run: () =>
    withRepoWorld(async (w) => {
      const ws = await w.workspace("planted")
      // The agent commits the attributes itself, so they are in the trees every later git call reads.
      await w.agent(ws, `printf '* filter=x diff=x merge=x\\n' > .gitattributes && echo 'changed' >> index.js && git add -A && git commit -qm attributes`)
      const git = Path.join(ws.root_path, ".git")
      Fs.mkdirSync(Path.join(git, "hooks"), { recursive: true })
      for (const h of ["pre-commit", "post-commit", "commit-msg", "reference-transaction", "post-checkout", "post-merge", "pre-receive", "post-update", "update", "fsmonitor-watchman", "pre-auto-gc", "post-index-change"]) {
        Fs.writeFileSync(Path.join(git, "hooks", h), `#!/bin/sh\n${w.evil} hook-${h}\n`, { mode: 0o755 })
      }
      Fs.appendFileSync(Path.join(git, "config"), [
        "[core]", `\tfsmonitor = ${w.evil}`, `\thooksPath = ${git}/hooks`, `\tpager = ${w.evil}`, `\tsshCommand = ${w.evil}`, `\talternateRefsCommand = ${w.evil}`,
        "[filter \"x\"]", `\tclean = ${w.evil}`, `\tsmudge = ${w.evil}`, `\tprocess = ${w.evil}`, "\trequired = true",
        "[uploadpack]", `\tpackObjectsHook = ${w.evil}`,
        "[diff \"x\"]", `\ttextconv = ${w.evil}`, `\tcommand = ${w.evil}`,
        "[merge \"x\"]", `\tdriver = ${w.evil} %O %A %B`,
        "[diff]", `\texternal = ${w.evil}`,
        "[commit]", "\tgpgSign = true", "[gpg]", `\tprogram = ${w.evil}`,
        "[include]", `\tpath = ${w.dir}/included.config`, ""
      ].join("\n"))
      Fs.writeFileSync(Path.join(w.dir, "included.config"), `[core]\n\tfsmonitor = ${w.evil}\n`)
      Fs.appendFileSync(Path.join(ws.root_path, "readme.md"), "agent edit\n")
      const outcomes = await everyOperation(w, ws)
      return { breached: false, detail: outcomes }
    })
}

const linkedGitDir: Attack = {
  name: "24.2 the clone's .git replaced by a link, a gitfile or a commondir pointing at another repository on the host",
  run: () =>
    withRepoWorld(async (w) => {
      const found: Array<string> = []
      for (const how of ["link", "gitfile", "commondir"] as const) {
        const ws = await w.workspace(`gitdir-${how}`)
        const git = Path.join(ws.root_path, ".git")
        if (how === "link") {
          Fs.rmSync(git, { recursive: true })
          Fs.symlinkSync(Path.join(w.secret, ".git"), git)
        } else if (how === "gitfile") {
          Fs.rmSync(git, { recursive: true })
          Fs.writeFileSync(git, `gitdir: ${Path.join(w.secret, ".git")}\n`)
        } else {
          Fs.writeFileSync(Path.join(git, "commondir"), Path.join(w.secret, ".git") + "\n")
          Fs.writeFileSync(Path.join(git, "HEAD"), "ref: refs/heads/main\n")
        }
        Fs.appendFileSync(Path.join(ws.root_path, "readme.md"), `${how}\n`)
        await w.turn(ws)
        const held = w.holds(ws, w.secretHead)
        if (held.history || held.user) found.push(`${how}: secret commit in ${held.history ? "the history" : ""} ${held.user ? "the user's repository" : ""}`)
      }
      return { breached: found.length > 0, detail: found.length === 0 ? "the secret repository's commit reached neither the history nor the user's repository (link, gitfile, commondir)" : found.join("; ") }
    })
}

const linkedObjects: Attack = {
  name: "24.3 links inside the clone's .git (objects/info/alternates, objects/pack, packed-refs, a ref file) to another repository's objects and refs",
  run: () =>
    withRepoWorld(async (w) => {
      const found: Array<string> = []
      const secretGit = Path.join(w.secret, ".git")
      for (const how of ["alternates", "pack-link", "packed-refs-link", "ref-link"] as const) {
        const ws = await w.workspace(`objects-${how}`)
        const git = Path.join(ws.root_path, ".git")
        const branch = Path.join(git, "refs", "heads", "substrat", `objects-${how}`)
        if (how === "alternates") {
          Fs.writeFileSync(Path.join(git, "objects", "info", "alternates"), Path.join(secretGit, "objects") + "\n")
          Fs.writeFileSync(branch, w.secretHead + "\n")
        } else {
          // The secret repository's packs in place of the clone's.
          const pack = Path.join(git, "objects", "pack")
          Fs.rmSync(pack, { recursive: true, force: true })
          Fs.symlinkSync(Path.join(secretGit, "objects", "pack"), pack)
          if (how === "pack-link") Fs.writeFileSync(branch, w.secretHead + "\n")
          else if (how === "packed-refs-link") {
            Fs.rmSync(branch, { force: true })
            Fs.writeFileSync(Path.join(git, "HEAD"), "ref: refs/heads/main\n")
            Fs.rmSync(Path.join(git, "packed-refs"), { force: true })
            Fs.symlinkSync(Path.join(secretGit, "packed-refs"), Path.join(git, "packed-refs"))
          } else {
            Fs.rmSync(branch, { force: true })
            Fs.symlinkSync(Path.join(secretGit, "refs", "heads", "loose"), branch)
          }
        }
        Fs.appendFileSync(Path.join(ws.root_path, "readme.md"), `${how}\n`)
        await w.turn(ws).catch(() => null)
        const held = w.holds(ws, w.secretHead)
        if (held.history || held.user) found.push(`${how}: secret commit in${held.history ? " the history" : ""}${held.user ? " the user's repository" : ""}`)
      }
      return { breached: found.length > 0, detail: found.length === 0 ? "the secret commit reached neither the history nor the user's repository" : found.join("; ") }
    })
}

const malformedTree: Attack = {
  name: "24.4 a commit the agent crafts in its clone with a tree entry `.git` (a config with core.fsmonitor in it) reaches the history or the user's repository",
  run: () =>
    withRepoWorld(async (w) => {
      const ws = await w.workspace("malformed")
      const evil = (await w.agent(ws, [
        `cfg=$(printf '[core]\\n\\tfsmonitor = ${w.evil}\\n' | git hash-object -w --stdin)`,
        `sub=$(printf '100644 blob %s\\tconfig\\n' "$cfg" | git mktree)`,
        `tree=$( (git ls-tree HEAD; printf '040000 tree %s\\t.git\\n' "$sub") | git mktree)`,
        `c=$(git commit-tree "$tree" -p HEAD -m 'a tree with .git in it')`,
        `git update-ref HEAD "$c"`,
        `echo "$c"`
      ].join(" && "))).trim()
      Fs.appendFileSync(Path.join(ws.root_path, "readme.md"), "agent edit\n")
      const outcomes = await everyOperation(w, ws)
      const held = w.holds(ws, evil)
      return {
        breached: held.history || held.user,
        detail: `crafted commit ${evil.slice(0, 12)} in the history: ${held.history}, in the user's repository: ${held.user}; ${outcomes}`
      }
    })
}

const nestedRepository: Attack = {
  name: "24.5 a nested repository in the workspace (a gitfile or a .git link in a subdirectory, new or where a recorded gitlink is) pointing at the user's repository, another repository or $SUBSTRAT_HOME",
  run: () =>
    withRepoWorld(async (w) => {
      const other = await w.workspace("other")
      Fs.appendFileSync(Path.join(other.root_path, "readme.md"), "other's work\n")
      await w.turn(other, "someone")
      const otherGit = Path.join(w.home, "workspaces", other.id, "history.git")
      const otherHead = gitIn(otherGit, ["rev-parse", "HEAD"]).trim()
      const userHead = gitIn(w.repo, ["rev-parse", "HEAD"]).trim()
      const ws = await w.workspace("nested")
      // A gitlink the agent commits itself (any id it likes), recorded; its directory gets a gitfile below.
      await w.agent(ws, `mkdir tracked && git update-index --add --cacheinfo 160000,${userHead},tracked && git commit -qm 'a gitlink'`)
      await w.turn(ws)
      const targets = { user: Path.join(w.repo, ".git"), secret: Path.join(w.secret, ".git"), home: otherGit }
      const plant = (sub: string, target: string, link: boolean) => {
        Fs.mkdirSync(Path.join(ws.root_path, sub), { recursive: true })
        if (link) Fs.symlinkSync(target, Path.join(ws.root_path, sub, ".git"))
        else Fs.writeFileSync(Path.join(ws.root_path, sub, ".git"), `gitdir: ${target}\n`)
        Fs.writeFileSync(Path.join(ws.root_path, sub, "file.txt"), "inside\n")
      }
      plant("nested-user", targets.user, false)
      plant("nested-secret", targets.secret, true)
      plant("nested-home", targets.home, false)
      Fs.writeFileSync(Path.join(ws.root_path, "tracked", ".git"), `gitdir: ${targets.secret}\n`)
      Fs.appendFileSync(Path.join(ws.root_path, "readme.md"), "agent edit\n")
      const pending = await w.run(Effect.flatMap(WorkspaceHistory, (h) => h.diff(ws.id)))
      const outcomes = await everyOperation(w, ws)
      const gitDir = Path.join(w.home, "workspaces", ws.id, "history.git")
      const recorded = gitIn(gitDir, ["log", "-p", "--raw", "--format=%H", "--all"]) + gitIn(w.repo, ["log", "-p", "--raw", "--format=%H", "refs/heads/substrat/nested"]) + pending
      const clone = gitIn(ws.root_path, ["ls-files", "-s"])
      const leaked = [["the secret repository's HEAD", w.secretHead], ["another workspace's history HEAD", otherHead]]
        .filter(([, sha]) => recorded.includes(sha!) || clone.includes(sha!)).map(([what]) => what!)
      // The user's HEAD is the gitlink the agent committed itself: it must not appear anywhere else.
      const userSeen = (gitIn(gitDir, ["ls-tree", "-r", "HEAD"]).match(new RegExp(userHead, "g")) ?? []).length
      if (userSeen > 1 || gitIn(gitDir, ["ls-tree", "-r", "HEAD"]).includes("nested-user")) leaked.push("the user's repository's HEAD")
      return {
        breached: leaked.length > 0,
        detail: `${leaked.length === 0 ? "no commit id from behind a nested .git recorded, published, shown in a diff or put in the clone" : `recorded from behind a nested .git: ${leaked.join(", ")}`}; ${outcomes}`
      }
    })
}

export const attacks: ReadonlyArray<Attack> = [plantedPrograms, linkedGitDir, linkedObjects, malformedTree, nestedRepository]
