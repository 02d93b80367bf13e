// requires: postgres
// Cluster mode with `cluster.workspace_remote` (docs/cluster.md "What moves with a tree"): two
// runners with their own homes, one Postgres and one shared bare repository. A tree on B records
// a turn while the remote is missing (the push fails, the turn completes, the log says so), then
// a turn (its workspace's file pushed to the remote, its agent's provider state saved in Postgres),
// starts a second turn that writes a file and is held; B is killed -9; A takes the tree over and
// its workspace holds the last recorded turn (not the interrupted turn's file), the provider state
// is back in the agent's home on A (links and FIFOs the agent planted were never packed), the
// held turn re-runs on A, and A's next recorded turn continues B's history on the remote.
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { cli, cliJson, kill9, waitFor } from "./daemon.support.js"
import { clusterFile, createOn, query, runnerOf, startRunner, waitRunnerReady, waitTurnStarted } from "../support/cluster.js"
import { freePort, freshDatabase } from "../support/postgres.js"

interface Ws {
  readonly id: string
  readonly default_for: string | null
  readonly root_path: string
}

const { pg, owned, dir } = clusterFile("substrat-cluster-ws-", (dir) => ({ SUBSTRAT_CLUSTER_WORKSPACE_REMOTE: join(dir, "remote.git") }))
const remote = join(dir, "remote.git")

const git = (args: ReadonlyArray<string>) => execFileSync("git", ["--git-dir", remote, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim()

describe("cluster workspaces and provider state", () => {
  it("kill -9 of the runner holding a tree: the survivor checks out its last recorded turn and gets its provider state back", async () => {
    const url = await freshDatabase(pg.server())
    const [pa, pb] = [await freePort(), await freePort()]
    const [homeA, homeB] = [join(dir, "a"), join(dir, "b")]
    const gate = join(dir, "gate")
    for (const home of [homeA, homeB]) {
      fs.mkdirSync(join(home, "scripts"), { recursive: true })
      fs.writeFileSync(
        join(home, "scripts", "gated.json"),
        JSON.stringify({ "*": { steps: [{ text: "zeroth" }, { text: "first" }, { text: "second, after the move", wait_for: gate }], after: "echo" } })
      )
    }
    await startRunner(owned, homeA, url, pa, 1)
    const b = await startRunner(owned, homeB, url, pb, 2)
    await waitRunnerReady(homeA, 2)
    const tree = await createOn(url, homeA, `127.0.0.1:${pb}`, "w", ["--provider", "scripted:gated"])
    const wsB = (await cliJson<{ workspaces: ReadonlyArray<Ws> }>(homeB, ["workspace", "list"])).workspaces.find((w) => w.default_for === tree.name)
    expect(wsB?.root_path.startsWith(homeB)).toBe(true)
    const ws = wsB!

    // Turn 0 on B, the remote not made yet: the push fails, the turn completes, B's log says so.
    fs.writeFileSync(join(ws.root_path, "zero.txt"), "written in turn 0 on B\n")
    const zeroth = await cli(homeA, ["agent", "send", tree.name, "turn zero", "--wait"])
    expect(zeroth.code, zeroth.stderr).toBe(0)
    expect(zeroth.stdout).toContain("zeroth")
    expect(fs.readFileSync(join(homeB, "daemon.log"), "utf8")).toContain(`workspace ${ws.id}: turn `)
    expect(fs.readFileSync(join(homeB, "daemon.log"), "utf8")).toContain(`not pushed to ${remote} (pushed again after the next turn)`)
    execFileSync("git", ["init", "--quiet", "--bare", remote])

    // Turn 1 on B writes one.txt (written here, as the agent's sandbox would); the agent's CLI
    // keeps a session file and its resume id; it also planted a link to a file outside its home and a FIFO.
    fs.writeFileSync(join(ws.root_path, "one.txt"), "written in turn 1 on B\n")
    const agentB = join(homeB, "agents", tree.session_id)
    fs.mkdirSync(join(agentB, "home", ".claude", "projects", "-workspace"), { recursive: true })
    fs.writeFileSync(join(agentB, "home", ".claude", "projects", "-workspace", "s1.jsonl"), "{\"said\":\"the password is swordfish\"}\n")
    fs.writeFileSync(join(agentB, "cli-resume.json"), JSON.stringify({ provider: "claude", resume_id: "s1", cost_total: 0.5 }))
    const secret = join(dir, "outside-secret")
    fs.writeFileSync(secret, "not the agent's\n")
    fs.symlinkSync(secret, join(agentB, "home", "leak"))
    execFileSync("mkfifo", [join(agentB, "home", "fifo")])
    const first = await cli(homeA, ["agent", "send", tree.name, "turn one", "--wait"])
    expect(first.code, first.stderr).toBe(0)
    expect(first.stdout).toContain("first")
    // Recorded: the remote's ref names the workspace and holds the file; the state is in Postgres.
    expect(git(["show", `refs/substrat/ws/${ws.id}:one.txt`])).toBe("written in turn 1 on B")
    // The missed push is carried by this one: turn 0's commit is there too.
    expect(git(["show", `refs/substrat/ws/${ws.id}:zero.txt`])).toBe("written in turn 0 on B")
    const state = await query(url, `SELECT state FROM substrat_provider_state WHERE session_id = '${tree.session_id}'`)
    expect(state).toHaveLength(1)
    expect(String(state[0]?.["state"])).not.toContain("leak")
    expect(String(state[0]?.["state"])).not.toContain("fifo")

    // Turn 2 writes two.txt and is held at the gate when B dies: never recorded.
    fs.writeFileSync(join(ws.root_path, "two.txt"), "written by the interrupted turn\n")
    const sent = await cliJson<{ message_id: string }>(homeA, ["agent", "send", tree.name, "turn two"])
    await waitTurnStarted(url, tree.session_id, 3, "turn 2 started on B")
    await kill9(b)

    await waitFor("the tree recorded on A", async () => (await runnerOf(url, tree.id)) === `127.0.0.1:${pa}` ? true : undefined, 90_000)
    // A's workspace is the last recorded turn: one.txt, not the interrupted turn's two.txt.
    const wsA = (await cliJson<{ workspaces: ReadonlyArray<Ws> }>(homeA, ["workspace", "list"])).workspaces.find((w) => w.id === ws.id)
    expect(wsA?.root_path.startsWith(homeA)).toBe(true)
    expect(fs.readFileSync(join(wsA!.root_path, "one.txt"), "utf8")).toBe("written in turn 1 on B\n")
    expect(fs.readFileSync(join(wsA!.root_path, "zero.txt"), "utf8")).toBe("written in turn 0 on B\n")
    expect(fs.existsSync(join(wsA!.root_path, "two.txt"))).toBe(false)
    // The provider state is back in the agent's directory on A; the link and the FIFO are not.
    const agentA = join(homeA, "agents", tree.session_id)
    expect(fs.readFileSync(join(agentA, "home", ".claude", "projects", "-workspace", "s1.jsonl"), "utf8")).toBe("{\"said\":\"the password is swordfish\"}\n")
    expect(JSON.parse(fs.readFileSync(join(agentA, "cli-resume.json"), "utf8"))).toEqual({ provider: "claude", resume_id: "s1", cost_total: 0.5 })
    expect(fs.existsSync(join(agentA, "home", "leak"))).toBe(false)
    expect(fs.existsSync(join(agentA, "home", "fifo"))).toBe(false)

    // The held turn re-runs on A and is answered; A's next turn records on top of B's history.
    fs.writeFileSync(gate, "")
    const answered = await cli(homeA, ["agent", "wait", tree.name, sent.message_id])
    expect(answered.code, answered.stderr).toBe(0)
    const fromB = git(["rev-parse", `refs/substrat/ws/${ws.id}`])
    fs.writeFileSync(join(wsA!.root_path, "three.txt"), "written in turn 3 on A\n")
    const third = await cli(homeA, ["agent", "send", tree.name, "turn three", "--wait"])
    expect(third.code, third.stderr).toBe(0)
    const fromA = git(["rev-parse", `refs/substrat/ws/${ws.id}`])
    expect(fromA).not.toBe(fromB)
    execFileSync("git", ["--git-dir", remote, "merge-base", "--is-ancestor", fromB, fromA])
    expect(git(["ls-tree", "--name-only", fromA]).split("\n").sort()).toEqual(["one.txt", "three.txt", "zero.txt"])
    // A terminated tree's saved provider states go with it.
    expect((await cli(homeA, ["agent", "terminate", tree.name])).code).toBe(0)
    expect(await query(url, `SELECT session_id FROM substrat_provider_state WHERE tree_root = '${tree.id}'`)).toEqual([])
  }, 240_000)
})
