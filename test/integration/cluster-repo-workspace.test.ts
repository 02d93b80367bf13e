// requires: postgres, bwrap, git
// Cluster mode with `cluster.workspace_remote` and a repository workspace (`agent create --repo`,
// docs/cluster.md "What moves with a tree"): two runners with their own homes, one Postgres, one
// shared bare remote, one user repository on this machine. A tree whose workspace is a clone of
// the user's repository lives on B; a turn is recorded (pushed: the branch's commit on the remote,
// published to the user's repository), a second turn writes a file and is held; B is killed -9;
// A takes the tree over: A's own clone is on the same branch at the last recorded turn (not the
// interrupted turn's file), the held turn re-runs on A, the next turn continues the branch (on the
// remote and in the user's repository), and `workspace merge` on A takes the branch out into the
// user's `main`. A branch child's workspace (`spawn_agent(workspace: "branch")`) moves the same
// way: on A it is a clone on its own branch at its last recorded turn, and its held turn re-runs.
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { type Agent, cli, cliJson, kill9, rpcOnce, waitFor } from "./daemon.support.js"
import { clusterFile, createOn, runnerOf, startRunner, waitRunnerReady, waitTurnStarted } from "../support/cluster.js"
import { gitIn, makeForeignRepo } from "../support/foreignRepo.js"
import { freePort, freshDatabase } from "../support/postgres.js"

interface Ws {
  readonly id: string
  readonly default_for: string | null
  readonly root_path: string
}

const { pg, owned, dir } = clusterFile("substrat-cluster-repo-", (dir) => ({ SUBSTRAT_CLUSTER_WORKSPACE_REMOTE: join(dir, "remote.git") }))
const remote = join(dir, "remote.git")
const user = join(dir, "repo")

const makeRemote = () => {
  if (!fs.existsSync(remote)) execFileSync("git", ["init", "--quiet", "--bare", remote])
}
const inRemote = (args: ReadonlyArray<string>) => execFileSync("git", ["--git-dir", remote, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim()
const workspaceOf = async (home: string, pick: (w: Ws) => boolean) =>
  (await cliJson<{ workspaces: ReadonlyArray<Ws> }>(home, ["workspace", "list"])).workspaces.find(pick)

describe("cluster repository workspaces", () => {
  it("kill -9 of the runner holding a --repo tree: the survivor clones its branch at the last recorded turn, continues it, and merges it back", async () => {
    const url = await freshDatabase(pg.server())
    const [pa, pb] = [await freePort(), await freePort()]
    const [homeA, homeB] = [join(dir, "a"), join(dir, "b")]
    const gate = join(dir, "gate")
    makeForeignRepo(user)
    makeRemote()
    for (const home of [homeA, homeB]) {
      fs.mkdirSync(join(home, "scripts"), { recursive: true })
      fs.writeFileSync(
        join(home, "scripts", "gated.json"),
        JSON.stringify({ "*": { steps: [{ text: "first" }, { text: "second, after the move", wait_for: gate }], after: "echo" } })
      )
    }
    await startRunner(owned, homeA, url, pa, 1)
    const b = await startRunner(owned, homeB, url, pb, 2)
    await waitRunnerReady(homeA, 2)
    const tree = await createOn(url, homeA, `127.0.0.1:${pb}`, "r", ["--provider", "scripted:gated", "--repo", user])
    const ws = await workspaceOf(homeB, (w) => w.default_for === tree.name)
    expect(ws?.root_path.startsWith(homeB)).toBe(true)
    const spec = JSON.parse(fs.readFileSync(join(homeB, "workspaces", ws!.id, "workspace.json"), "utf8")) as { repo: { branch: string; path: string } }
    const branch = spec.repo.branch
    expect(branch).toBe(`substrat/${tree.name}`)

    // Turn 1 on B writes one.txt (as the agent in its clone would): recorded, pushed, published.
    fs.writeFileSync(join(ws!.root_path, "one.txt"), "written in turn 1 on B\n")
    const first = await cli(homeA, ["agent", "send", tree.name, "turn one", "--wait"])
    expect(first.code, first.stderr).toBe(0)
    expect(first.stdout).toContain("first")
    expect(inRemote(["show", `refs/substrat/ws/${ws!.id}:one.txt`])).toBe("written in turn 1 on B")
    expect(gitIn(user, ["show", `${branch}:one.txt`])).toBe("written in turn 1 on B\n")
    const fromB = inRemote(["rev-parse", `refs/substrat/ws/${ws!.id}`])

    // Turn 2 writes two.txt and is held at the gate when B dies: never recorded.
    fs.writeFileSync(join(ws!.root_path, "two.txt"), "written by the interrupted turn\n")
    const sent = await cliJson<{ message_id: string }>(homeA, ["agent", "send", tree.name, "turn two"])
    await waitTurnStarted(url, tree.session_id, 2, "turn 2 started on B")
    await kill9(b)

    await waitFor("the tree recorded on A", async () => (await runnerOf(url, tree.id)) === `127.0.0.1:${pa}` ? true : undefined, 90_000)
    // A's own clone, on the same branch at the last recorded turn: one.txt, not two.txt.
    const wsA = await workspaceOf(homeA, (w) => w.id === ws!.id)
    expect(wsA?.root_path.startsWith(homeA)).toBe(true)
    const rootA = wsA!.root_path
    expect(fs.readFileSync(join(rootA, "one.txt"), "utf8")).toBe("written in turn 1 on B\n")
    expect(fs.existsSync(join(rootA, "index.js"))).toBe(true)
    expect(fs.existsSync(join(rootA, "two.txt"))).toBe(false)
    expect(gitIn(rootA, ["symbolic-ref", "--short", "HEAD"]).trim()).toBe(branch)
    expect(gitIn(rootA, ["rev-parse", "HEAD"]).trim()).toBe(fromB)
    expect(gitIn(rootA, ["status", "--porcelain"]).trim()).toBe("")

    // The held turn re-runs on A and is answered.
    fs.writeFileSync(gate, "")
    const answered = await cli(homeA, ["agent", "wait", tree.name, sent.message_id])
    expect(answered.code, answered.stderr).toBe(0)

    // The next turn on A continues the branch: on the remote, in the user's repository, in A's clone.
    fs.writeFileSync(join(rootA, "three.txt"), "written in turn 3 on A\n")
    const third = await cli(homeA, ["agent", "send", tree.name, "turn three", "--wait"])
    expect(third.code, third.stderr).toBe(0)
    const fromA = inRemote(["rev-parse", `refs/substrat/ws/${ws!.id}`])
    expect(fromA).not.toBe(fromB)
    execFileSync("git", ["--git-dir", remote, "merge-base", "--is-ancestor", fromB, fromA])
    expect(gitIn(user, ["rev-parse", branch]).trim()).toBe(fromA)
    expect(gitIn(user, ["show", `${branch}:three.txt`])).toBe("written in turn 3 on A\n")
    await waitFor("A's clone follows its branch", async () => gitIn(rootA, ["rev-parse", "HEAD"]).trim() === fromA ? true : undefined, 30_000)

    // The user takes the branch out: merged into main (checked out, clean) from A.
    const merged = await cli(homeA, ["workspace", "merge", ws!.id])
    expect(merged.code, merged.stderr).toBe(0)
    expect(fs.readFileSync(join(user, "one.txt"), "utf8")).toBe("written in turn 1 on B\n")
    expect(fs.readFileSync(join(user, "three.txt"), "utf8")).toBe("written in turn 3 on A\n")
    expect(fs.existsSync(join(user, "two.txt"))).toBe(false)
    execFileSync("git", ["-C", user, "merge-base", "--is-ancestor", fromA, "main"])
  }, 300_000)
  it("kill -9 with a branch child's turn held: its workspace is cloned on A on its branch at its last recorded turn", async () => {
    const url = await freshDatabase(pg.server())
    const [pa, pb] = [await freePort(), await freePort()]
    const [homeA, homeB] = [join(dir, "a2"), join(dir, "b2")]
    const repo2 = join(dir, "repo2")
    const [g1, g2] = [join(dir, "gate-c1"), join(dir, "gate-c1-again")]
    makeForeignRepo(repo2)
    makeRemote()
    const book = {
      "*": { steps: [{ tools: [{ tool: "spawn_agent", args: { name: "c1", instructions: "c1", workspace: "branch" } }, { tool: "send_message", args: { recipient: "c1", text: "work", sync: true } }], text: "working" }], after: "silent" },
      c1: { steps: [{ wait_for: g1, text: "c1 done" }, { wait_for: g2, text: "c1 again, after the move" }], after: "echo" }
    }
    for (const home of [homeA, homeB]) {
      fs.mkdirSync(join(home, "scripts"), { recursive: true })
      fs.writeFileSync(join(home, "scripts", "branchy.json"), JSON.stringify(book))
    }
    await startRunner(owned, homeA, url, pa, 1)
    const b = await startRunner(owned, homeB, url, pb, 2)
    await waitRunnerReady(homeA, 2)
    const lead = await createOn(url, homeA, `127.0.0.1:${pb}`, "f", ["--provider", "scripted:branchy", "--repo", repo2])
    expect((await cli(homeA, ["agent", "send", lead.name, "go"])).code).toBe(0)
    type AgentWs = Agent & { readonly workspace_id: string | null }
    const c1 = await waitFor("c1 spawned on B", async () =>
      (await rpcOnce<{ agents: ReadonlyArray<AgentWs> }>(homeB, "agent.list", { all: false })).agents.find((a) => a.name === "c1"), 60_000)
    const ws = await workspaceOf(homeB, (w) => w.id === c1.workspace_id)
    expect(ws?.root_path.startsWith(homeB)).toBe(true)
    const spec = JSON.parse(fs.readFileSync(join(homeB, "workspaces", ws!.id, "workspace.json"), "utf8")) as { repo: { branch: string }; fork_of: string | null }
    expect(spec.fork_of).not.toBeNull()
    const branch = spec.repo.branch
    expect(branch).toBe(`substrat/${lead.name}/c1`)

    // c1's first turn writes c1.txt in its clone and is recorded: its branch is on the remote.
    await waitTurnStarted(url, c1.session_id, 1, "c1's first turn started")
    fs.writeFileSync(join(ws!.root_path, "c1.txt"), "c1's recorded work\n")
    fs.writeFileSync(g1, "")
    const recorded = await waitFor("c1's turn on the remote", async () => {
      try {
        return inRemote(["show", `refs/substrat/ws/${ws!.id}:c1.txt`]) === "c1's recorded work" ? inRemote(["rev-parse", `refs/substrat/ws/${ws!.id}`]) : undefined
      } catch {
        return undefined
      }
    }, 60_000)

    // Its second turn writes c1-two.txt and is held when B dies.
    const again = await cliJson<{ message_id: string }>(homeB, ["agent", "send", "c1", "again"])
    await waitTurnStarted(url, c1.session_id, 2, "c1's second turn started")
    fs.writeFileSync(join(ws!.root_path, "c1-two.txt"), "written by the interrupted turn\n")
    await kill9(b)

    await waitFor("the tree recorded on A", async () => (await runnerOf(url, lead.id)) === `127.0.0.1:${pa}` ? true : undefined, 90_000)
    const wsA = await workspaceOf(homeA, (w) => w.id === ws!.id)
    expect(wsA?.root_path.startsWith(homeA)).toBe(true)
    const rootA = wsA!.root_path
    expect(fs.readFileSync(join(rootA, "c1.txt"), "utf8")).toBe("c1's recorded work\n")
    expect(fs.existsSync(join(rootA, "c1-two.txt"))).toBe(false)
    expect(gitIn(rootA, ["symbolic-ref", "--short", "HEAD"]).trim()).toBe(branch)
    expect(gitIn(rootA, ["rev-parse", "HEAD"]).trim()).toBe(recorded)
    expect(gitIn(rootA, ["status", "--porcelain"]).trim()).toBe("")

    // The held turn re-runs on A (the tree's runner now) and is answered.
    fs.writeFileSync(g2, "")
    const answered = await cli(homeA, ["agent", "wait", "c1", again.message_id])
    expect(answered.code, answered.stderr).toBe(0)
    expect(answered.stdout).toContain("c1 again, after the move")
  }, 300_000)
})
