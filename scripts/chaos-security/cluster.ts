// Attacks on what cluster mode carries to the runner a tree moves to (src/daemon/ClusterCarry.ts):
// an agent's provider state is agent-written (its sandbox home), packed after each turn and
// unpacked on another runner; a repository workspace's recorded tree (agent-written files, links
// among them) is checked out into a fresh clone there, over a stale copy that may hold links. Replayed by `npm run chaos -- --only security` and by
// test/unit/cluster-carry.test.ts, against the packing and unpacking the daemon runs.
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect, Either } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { fetchRecorded, maxStateBytes, packState, restoreClone, unpackState } from "../../src/daemon/ClusterCarry.js"
import * as CommandExecutor from "@effect/platform/CommandExecutor"
import * as FileSystem from "@effect/platform/FileSystem"
import { RepoSource, SymlinkSpec, WorkspaceSpec } from "../../src/domain/workspace.js"
import { WorkspaceId } from "../../src/domain/ids.js"
import { makeTmpDir, removeDir } from "../../test/support/tmp.js"
import type { Attack, AttackResult } from "./attack.js"

const stateOf = (files: ReadonlyArray<{ readonly path: string; readonly data: string }>) =>
  JSON.stringify({ v: 1, files: files.map((f) => ({ path: f.path, mode: 0o644, data: Buffer.from(f.data).toString("base64") })) })

/** A fresh agent directory and an "outside" directory beside it; `f` attacks, the result says what got through. */
const inDirs = (f: (agentDir: string, outside: string) => Promise<AttackResult>): Promise<AttackResult> => {
  const dir = makeTmpDir("substrat-sec-carry-")
  const agentDir = join(dir, "agents", "s")
  const outside = join(dir, "outside")
  fs.mkdirSync(agentDir, { recursive: true })
  fs.mkdirSync(outside)
  return f(agentDir, outside).finally(() => removeDir(dir))
}

const unpack = (agentDir: string, state: string) => Effect.runPromise(Effect.either(unpackState(agentDir, state)))

/** A restored state naming `path` (after links planted by `plant`): breached if anything lands in `outside`, or the state was accepted. */
const escape = (name: string, path: (outside: string) => string, plant?: (agentDir: string, outside: string) => void): Attack => ({
  name,
  run: () =>
    inDirs(async (agentDir, outside) => {
      plant?.(agentDir, outside)
      const r = await unpack(agentDir, stateOf([{ path: path(outside), data: "pwned" }]))
      const landed = fs.readdirSync(outside).filter((n) => n !== "target")
      const target = fs.existsSync(join(outside, "target")) ? fs.readFileSync(join(outside, "target"), "utf8") : ""
      return {
        breached: landed.length > 0 || target === "pwned",
        detail: `${Either.isLeft(r) ? `refused (${r.left.reason})` : "accepted"}; outside holds ${landed.length === 0 ? "nothing new" : landed.join(", ")}${target === "pwned" ? ", its target overwritten" : ""}`
      }
    })
})

const gitQuiet = (cwd: string, args: ReadonlyArray<string>) =>
  execFileSync("git", ["-C", cwd, ...args], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
    env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: cwd, GIT_CONFIG_NOSYSTEM: "1", GIT_AUTHOR_NAME: "a", GIT_AUTHOR_EMAIL: "a@x", GIT_COMMITTER_NAME: "a", GIT_COMMITTER_EMAIL: "a@x" }
  }).trim()

/**
 * A moved repository workspace (restoreClone) whose recorded tree has links out — an absolute one
 * where a bound ignored directory's mount point goes, a relative one up out of the clone — restored
 * over a stale copy holding a link to outside: nothing is made, changed or removed outside.
 */
const cloneRestore: Attack = {
  name: "cluster: a moved repository workspace with links out where its mount point goes, over a stale copy linking out",
  run: () =>
    inDirs(async (agentDir, outside) => {
      const base = join(agentDir, "..", "..")
      fs.writeFileSync(join(outside, "victim"), "keep me\n")
      const src = join(base, "src")
      fs.mkdirSync(src)
      gitQuiet(src, ["init", "-q", "-b", "substrat/x"])
      fs.writeFileSync(join(src, "a.txt"), "a\n")
      fs.symlinkSync(outside, join(src, "node_modules"))
      fs.symlinkSync("../../../outside", join(src, "up"))
      gitQuiet(src, ["add", "-A"])
      gitQuiet(src, ["commit", "-q", "-m", "links out"])
      const commit = gitQuiet(src, ["rev-parse", "HEAD"])
      const id = WorkspaceId.make("6ea98fe7-afb3-46ba-98f4-8cd43a29f324")
      const remote = join(base, "remote.git")
      execFileSync("git", ["init", "-q", "--bare", remote])
      gitQuiet(src, ["push", "-q", remote, `HEAD:refs/substrat/ws/${id}`])
      const dir = join(base, "workspaces", id)
      fs.mkdirSync(join(dir, "root"), { recursive: true })
      fs.symlinkSync(outside, join(dir, "root", "stale-link"))
      fs.symlinkSync(join(outside, "victim"), join(dir, "root", "victim-link"))
      const spec = new WorkspaceSpec({
        id,
        parent_id: null,
        root_path: "/elsewhere/workspaces/x/root",
        network_access: false,
        symlinks: [new SymlinkSpec({ host_path: "/nonexistent/node_modules", mount_path: "node_modules/dep", mode: "ro" })],
        repo: new RepoSource({ path: "/nonexistent/repo", branch: "substrat/x", base: commit, target: null }),
        created_at: new Date().toISOString()
      })
      const r = await Effect.runPromise(Effect.either(Effect.gen(function*() {
        const executor = yield* CommandExecutor.CommandExecutor
        const fsx = yield* FileSystem.FileSystem
        yield* restoreClone({ executor, fs: fsx, remote, dir, repo: { gitDir: join(dir, "history.git"), workTree: join(dir, "root") }, top: id, commit, spec, stale: true, owner: undefined })
      }).pipe(Effect.provide(NodeContext.layer))))
      const landed = fs.readdirSync(outside).filter((n) => n !== "victim")
      const victim = fs.existsSync(join(outside, "victim")) ? fs.readFileSync(join(outside, "victim"), "utf8") : "(gone)"
      const restored = fs.existsSync(join(dir, "root", "a.txt"))
      return {
        breached: landed.length > 0 || victim !== "keep me\n" || !restored,
        detail: `${Either.isLeft(r) ? `restore failed (${String(r.left)})` : "restored"}; a.txt ${restored ? "checked out" : "missing"}; outside holds ${landed.length === 0 ? "nothing new" : landed.join(", ")}; victim ${victim === "keep me\n" ? "intact" : victim}`
      }
    })
}

/**
 * A tree's own workspace brought up to date from the remote in place (its worktree is the agent's):
 * the recorded history has a gitlink the next turn moves, and the agent planted a nested repository
 * at its path lacking the new commit, whose config runs a program when git fetches into it
 * (`remote.origin.uploadpack`). A fetch that recurses into submodules runs it as the daemon's user,
 * outside the sandbox.
 */
const plantedSubmodule: Attack = {
  name: "cluster: a workspace updated in place from the remote, with a gitlink and a planted nested repository whose config runs a program on fetch",
  run: () =>
    inDirs(async (agentDir, outside) => {
      const base = join(agentDir, "..", "..")
      const mark = join(outside, "ran")
      const nested = join(base, "nested-src")
      fs.mkdirSync(nested)
      gitQuiet(nested, ["init", "-q", "-b", "main"])
      fs.writeFileSync(join(nested, "f"), "1\n")
      gitQuiet(nested, ["add", "f"])
      gitQuiet(nested, ["commit", "-q", "-m", "n1"])
      const n1 = gitQuiet(nested, ["rev-parse", "HEAD"])
      gitQuiet(nested, ["branch", "one", n1])
      fs.writeFileSync(join(nested, "f"), "2\n")
      gitQuiet(nested, ["commit", "-q", "-a", "-m", "n2"])
      const n2 = gitQuiet(nested, ["rev-parse", "HEAD"])
      const src = join(base, "src")
      fs.mkdirSync(src)
      gitQuiet(src, ["init", "-q", "-b", "master"])
      fs.writeFileSync(join(src, ".gitmodules"), `[submodule "sub"]\n\tpath = sub\n\turl = ${nested}\n`)
      gitQuiet(src, ["add", ".gitmodules"])
      gitQuiet(src, ["update-index", "--add", "--cacheinfo", `160000,${n1},sub`])
      gitQuiet(src, ["commit", "-q", "-m", "c1"])
      const c1 = gitQuiet(src, ["rev-parse", "HEAD"])
      gitQuiet(src, ["update-index", "--cacheinfo", `160000,${n2},sub`])
      gitQuiet(src, ["commit", "-q", "-m", "c2"])
      const id = "2f0e7c1a-5b4d-4e7a-9c1e-3d2b1a0f9e8d"
      const remote = join(base, "remote.git")
      execFileSync("git", ["init", "-q", "--bare", remote])
      gitQuiet(src, ["push", "-q", remote, `${c1}:refs/substrat/ws/${id}`])
      const history = join(base, "history.git")
      const wt = join(base, "wt")
      execFileSync("git", ["init", "-q", "--bare", history])
      fs.mkdirSync(wt)
      gitQuiet(history, ["fetch", "-q", remote, `refs/substrat/ws/${id}:refs/heads/master`])
      execFileSync("git", ["reset", "-q", "--hard", "master"], { env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", GIT_DIR: history, GIT_WORK_TREE: wt } })
      // The agent's nested repository at the gitlink's path, without the commit the next turn records.
      execFileSync("git", ["clone", "-q", "-b", "one", "--single-branch", nested, join(wt, "sub")], { stdio: "ignore" })
      gitQuiet(join(wt, "sub"), ["config", "remote.origin.uploadpack", `touch ${mark}; git-upload-pack`])
      gitQuiet(src, ["push", "-q", remote, `HEAD:refs/substrat/ws/${id}`])
      const r = await Effect.runPromise(Effect.either(Effect.gen(function*() {
        const executor = yield* CommandExecutor.CommandExecutor
        yield* fetchRecorded(executor, { gitDir: history, workTree: wt }, remote, id)
      }).pipe(Effect.provide(NodeContext.layer))))
      const ran = fs.existsSync(mark)
      const fetched = gitQuiet(history, ["rev-parse", "master"]) === gitQuiet(src, ["rev-parse", "HEAD"])
      return {
        breached: ran || !fetched,
        detail: `${Either.isLeft(r) ? `fetch failed (${String(r.left)})` : "fetched"}; the recorded commit ${fetched ? "is" : "is NOT"} in the history; the planted repository's program ${ran ? "RAN" : "did not run"}`
      }
    })
}

export const attacks: ReadonlyArray<Attack> = [
  plantedSubmodule,
  escape("cluster: a provider state path with ..", () => "home/../../../outside/dotdot"),
  escape("cluster: a provider state with an absolute path", (outside) => join(outside, "absolute")),
  escape("cluster: a provider state path outside home/", () => "../outside/sibling"),
  escape("cluster: home/ itself a link to outside", () => "home/through-home", (agentDir, outside) => fs.symlinkSync(outside, join(agentDir, "home"))),
  escape("cluster: a directory in home/ a link to outside", () => "home/.claude/through-dir", (agentDir, outside) => {
    fs.mkdirSync(join(agentDir, "home"))
    fs.symlinkSync(outside, join(agentDir, "home", ".claude"))
  }),
  escape("cluster: the restored file a link to a file outside", () => "home/target", (agentDir, outside) => {
    fs.mkdirSync(join(agentDir, "home"))
    fs.writeFileSync(join(outside, "target"), "original")
    fs.symlinkSync(join(outside, "target"), join(agentDir, "home", "target"))
  }),
  {
    name: "cluster: a provider state over the size limit",
    run: () =>
      inDirs(async (agentDir) => {
        const big = "x".repeat(maxStateBytes / 2 + 1)
        const r = await unpack(agentDir, stateOf([{ path: "home/a", data: big }, { path: "home/b", data: big }]))
        const written = fs.existsSync(join(agentDir, "home", "a"))
        return { breached: Either.isRight(r) || written, detail: `${Either.isLeft(r) ? `refused (${r.left.reason})` : "accepted"}; ${written ? "a file was written" : "nothing written"}` }
      })
  },
  {
    name: "cluster: packing an agent home with a link to a host file, a FIFO and too many bytes",
    run: () =>
      inDirs(async (agentDir, outside) => {
        fs.mkdirSync(join(agentDir, "home", "d"), { recursive: true })
        fs.writeFileSync(join(outside, "secret"), "host secret")
        fs.symlinkSync(join(outside, "secret"), join(agentDir, "home", "leak"))
        fs.symlinkSync(outside, join(agentDir, "home", "d", "dirlink"))
        execFileSync("mkfifo", [join(agentDir, "home", "fifo")])
        fs.writeFileSync(join(agentDir, "home", "own"), "the agent's own")
        const packed = await Effect.runPromise(Effect.either(packState(agentDir)))
        const text = Either.isRight(packed) && packed.right._tag === "Some" ? packed.right.value : ""
        const leaked = text.includes(Buffer.from("host secret").toString("base64")) || text.includes("dirlink") || text.includes("fifo")
        fs.writeFileSync(join(agentDir, "home", "big"), Buffer.alloc(maxStateBytes + 1))
        const over = await Effect.runPromise(Effect.either(packState(agentDir)))
        return {
          breached: leaked || !text.includes("home/own") || Either.isRight(over),
          detail: `${leaked ? "the link's target or the FIFO was packed" : "links and the FIFO left out"}; over the limit: ${Either.isLeft(over) ? `refused (${over.left.reason})` : "PACKED"}`
        }
      })
  },
  cloneRestore
]
