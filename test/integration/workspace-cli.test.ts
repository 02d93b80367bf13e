// requires: git
// Workspaces through the real CLI and daemon (child processes): every turn of an agent with a
// workspace is recorded in the workspace's history and logged as `workspace.diff` in the agent's
// log; `workspace diff|log|revert` show and undo turns; `workspace delete` is refused while a live
// agent (also one rebuilt by start-up recovery) uses the workspace, unless --force.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, daemons, startDaemon, waitQuiet } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-wscli-")
const home = join(dir, "home")

interface Workspace {
  readonly id: string
  readonly root_path: string
}
interface Changed {
  readonly path: string
  readonly change: "added" | "modified" | "deleted"
}
interface DiffEvent {
  readonly event: string
  readonly data: { readonly workspace_id: string; readonly turn_id: string; readonly commit: string; readonly paths: ReadonlyArray<Changed> }
}

const events = (a: Agent): ReadonlyArray<{ event: string; data: unknown }> =>
  fs.readFileSync(join(home, "agents", a.session_id, "events.jsonl"), "utf8").trimEnd().split("\n").map((l) => JSON.parse(l) as { event: string; data: unknown })
const diffEvents = (a: Agent): ReadonlyArray<DiffEvent> => events(a).filter((e): e is DiffEvent => e.event === "workspace.diff")
const sortPaths = (ps: ReadonlyArray<Changed>) => [...ps].sort((x, y) => (x.path < y.path ? -1 : 1))

/** One turn of `agent` (a USER request), then quiet. */
const turn = async (agent: Agent, text: string) => {
  await cliJson(home, ["agent", "send", agent.id, text])
  await waitQuiet(home)
}

beforeAll(async () => {
  owned.track(await startDaemon(home))
})

afterAll(async () => {
  await cli(home, ["daemon", "stop"])
  await owned.killAll()
  removeDir(dir)
})

describe("per-turn workspace history through the CLI", () => {
  it("each turn's changes are logged as workspace.diff; diff, log and revert show and undo them", async () => {
    const ws = await cliJson<Workspace>(home, ["workspace", "create", "--name", "hist"])
    const agent = await cliJson<Agent>(home, ["agent", "create", "--name", "writer", "--provider", "scripted", "--workspace", ws.id])
    const root = ws.root_path
    const file = (p: string) => join(root, p)

    // Turn 1: two files appear while the turn runs (the scripted agent echoes; the files are
    // what the turn left in its workspace).
    fs.writeFileSync(file("a.txt"), "one\n")
    fs.writeFileSync(file("b.txt"), "bee\n")
    await turn(agent, "turn 1")
    let diffs = diffEvents(agent)
    expect(diffs).toHaveLength(1)
    const t1 = diffs[0]!.data
    expect(t1.workspace_id).toBe(ws.id)
    expect(sortPaths(t1.paths)).toEqual([{ path: "a.txt", change: "added" }, { path: "b.txt", change: "added" }])
    // The event's turn is the turn the agent just ran.
    const completes = events(agent).filter((e) => e.event === "turn.complete") as ReadonlyArray<{ data: { turn_id: string } }>
    expect(completes.map((c) => c.data.turn_id)).toContain(t1.turn_id)

    // Turn 2: create, edit and delete.
    fs.writeFileSync(file("a.txt"), "two\n")
    fs.rmSync(file("b.txt"))
    fs.mkdirSync(file("c"))
    fs.writeFileSync(file("c/d.txt"), "dee\n")
    // The directory is the workspace's owner's (the sandbox uid of a root daemon), as an agent's would be.
    const { uid, gid } = fs.statSync(root)
    fs.chownSync(file("c"), uid, gid)
    await turn(agent, "turn 2")
    diffs = diffEvents(agent)
    expect(diffs).toHaveLength(2)
    const t2 = diffs[1]!.data
    expect(sortPaths(t2.paths)).toEqual([
      { path: "a.txt", change: "modified" },
      { path: "b.txt", change: "deleted" },
      { path: "c/d.txt", change: "added" }
    ])

    // Turn 3 changes nothing: no event, no commit.
    await turn(agent, "turn 3")
    expect(diffEvents(agent)).toHaveLength(2)

    // log: newest first, attributed to the agent.
    const log = await cliJson<{ turns: ReadonlyArray<{ turn_id: string | null; agent: string; commit: string }> }>(home, ["workspace", "log", ws.id])
    expect(log.turns.filter((t) => t.turn_id !== null).map((t) => [t.turn_id, t.agent, t.commit])).toEqual([
      [t2.turn_id, "writer", t2.commit],
      [t1.turn_id, "writer", t1.commit]
    ])

    // diff of one turn: the same paths and the content change.
    const d2 = await cliJson<{ turn: string; paths: ReadonlyArray<Changed>; diff: string }>(home, ["workspace", "diff", ws.id, "--turn", t2.turn_id])
    expect(d2.turn).toBe(t2.turn_id)
    expect(sortPaths(d2.paths)).toEqual(sortPaths(t2.paths))
    expect(d2.diff).toContain("-one")
    expect(d2.diff).toContain("+two")
    expect(d2.diff).toContain("+++ b/c/d.txt")
    const text = await cli(home, ["workspace", "diff", ws.id, "--turn", t2.turn_id])
    expect(text.code).toBe(0)
    expect(text.stdout).toContain("diff --git a/a.txt b/a.txt")

    // diff without a turn: what is not recorded yet.
    fs.writeFileSync(file("e.txt"), "pending\n")
    const pending = await cliJson<{ turn: null; paths: ReadonlyArray<Changed>; diff: string }>(home, ["workspace", "diff", ws.id])
    expect(pending.turn).toBeNull()
    expect(pending.paths).toEqual([{ path: "e.txt", change: "added" }])
    expect(pending.diff).toContain("+pending")
    fs.rmSync(file("e.txt"))
    expect((await cliJson<{ paths: ReadonlyArray<Changed> }>(home, ["workspace", "diff", ws.id])).paths).toEqual([])

    // revert turn 2: the tree is back to what turn 1 left.
    const rev = await cliJson<{ commit: string | null; paths: ReadonlyArray<Changed> }>(home, ["workspace", "revert", ws.id, "--turn", t2.turn_id])
    expect(rev.commit).toMatch(/^[0-9a-f]{40}$/)
    expect(sortPaths(rev.paths)).toEqual([
      { path: "a.txt", change: "modified" },
      { path: "b.txt", change: "added" },
      { path: "c/d.txt", change: "deleted" }
    ])
    expect(fs.readFileSync(file("a.txt"), "utf8")).toBe("one\n")
    expect(fs.readFileSync(file("b.txt"), "utf8")).toBe("bee\n")
    expect(fs.existsSync(file("c/d.txt"))).toBe(false)
    // The revert is recorded, so the agent's next turn does not record it again.
    await turn(agent, "turn 4")
    expect(diffEvents(agent)).toHaveLength(2)

    // A later turn edits a.txt again: reverting turn 2 a second time now conflicts (exit 2) and changes nothing.
    fs.writeFileSync(file("a.txt"), "three\n")
    await turn(agent, "turn 5")
    expect(diffEvents(agent)).toHaveLength(3)
    const conflict = await cli(home, ["workspace", "revert", ws.id, "--turn", t1.turn_id])
    expect(conflict.code).toBe(2)
    expect(conflict.stderr).toMatch(/^substrat: cannot revert turn/)
    expect(fs.readFileSync(file("a.txt"), "utf8")).toBe("three\n")
    expect(fs.readFileSync(file("b.txt"), "utf8")).toBe("bee\n")

    // Errors: unknown turn (4), a turn reference that names no turn (4, in words), unknown workspace (4).
    expect((await cli(home, ["workspace", "diff", ws.id, "--turn", "00000000-0000-4000-8000-000000000000"])).code).toBe(4)
    const noTurn = await cli(home, ["workspace", "revert", ws.id, "--turn", "not-a-uuid"])
    expect(noTurn.code).toBe(4)
    expect(noTurn.stderr).toBe("substrat: no turn \"not-a-uuid\"\n")
    expect((await cli(home, ["workspace", "diff", "00000000-0000-4000-8000-000000000000"])).code).toBe(4)
  }, 120_000)

  it("an agent without a workspace records nothing", async () => {
    const plain = await cliJson<Agent>(home, ["agent", "create", "--name", "plain", "--provider", "scripted"])
    await turn(plain, "hello")
    expect(events(plain).some((e) => e.event === "turn.complete")).toBe(true)
    expect(diffEvents(plain)).toHaveLength(0)
  })
})

describe("workspace link policy", () => {
  it("refuses /proc, /sys, /dev, /run, RW system dirs and mounts over .git or tool files: exit 2, why, spec unchanged", async () => {
    const ws = await cliJson<Workspace>(home, ["workspace", "create", "--name", "policy"])
    const proj = join(dir, "proj")
    fs.mkdirSync(proj, { recursive: true })
    const refused: ReadonlyArray<readonly [ReadonlyArray<string>, RegExp]> = [
      [["/proc", "p"], /\/proc cannot be linked: it exposes every host process/],
      [["/proc/self", "p"], /\/proc cannot be linked/],
      [["/sys", "s"], /\/sys cannot be linked/],
      [["/dev", "d"], /\/dev cannot be linked/],
      [["/run", "r"], /\/run cannot be linked: it holds host daemons' sockets/],
      [["/", "all"], /refused: it contains \/proc/],
      [["--rw", "/etc", "etc"], /\/etc is a system directory; link it read-only/],
      [["--rw", "/usr/lib", "lib"], /\/usr is a system directory/],
      [["--rw", "/var", "var"], /\/var is a system directory/],
      [["--rw", "/root", "root"], /a whole home directory/],
      [[proj, ".git"], /mount_path: refused: it would shadow the workspace's git metadata/],
      [[proj, ".git/hooks"], /shadow the workspace's git metadata/],
      [[proj, ".cursor"], /it would cover \.cursor\/mcp\.json/]
    ]
    for (const [args, why] of refused) {
      const r = await cli(home, ["workspace", "link", ws.id, ...args])
      expect(r.code, args.join(" ")).toBe(2)
      expect(r.stderr, args.join(" ")).toMatch(why)
    }
    const spec = JSON.parse(fs.readFileSync(join(home, "workspaces", ws.id, "workspace.json"), "utf8")) as { symlinks: ReadonlyArray<unknown> }
    expect(spec.symlinks).toEqual([])
    // Still allowed: system dirs read-only, a project read-write, a dot-dir that is no tool file.
    await cliJson(home, ["workspace", "link", ws.id, "/etc", "etc"])
    await cliJson(home, ["workspace", "link", ws.id, "--rw", proj, "proj"])
    await cliJson(home, ["workspace", "link", ws.id, proj, ".cache"])
    const after = JSON.parse(fs.readFileSync(join(home, "workspaces", ws.id, "workspace.json"), "utf8")) as { symlinks: ReadonlyArray<{ mount_path: string }> }
    expect(after.symlinks.map((l) => l.mount_path)).toEqual(["etc", "proj", ".cache"])
  })
})

describe("workspace delete while in use", () => {
  it("refused (exit 5) while a live agent uses it; allowed once it is terminated; --force overrides", async () => {
    const ws = await cliJson<Workspace>(home, ["workspace", "create", "--name", "busy"])
    const agent = await cliJson<Agent>(home, ["agent", "create", "--name", "user1", "--provider", "scripted", "--workspace", ws.id])
    const refused = await cli(home, ["workspace", "delete", ws.id])
    expect(refused.code).toBe(5)
    expect(refused.stderr).toMatch(/in use/)
    expect(fs.existsSync(join(home, "workspaces", ws.id, "workspace.json"))).toBe(true)
    await cliJson(home, ["agent", "terminate", agent.id])
    expect(await cliJson(home, ["workspace", "delete", ws.id])).toEqual({ workspace: ws.id, deleted: true, removed: [ws.id] })
    expect(fs.existsSync(join(home, "workspaces", ws.id))).toBe(false)

    const ws2 = await cliJson<Workspace>(home, ["workspace", "create", "--name", "busy2"])
    await cliJson<Agent>(home, ["agent", "create", "--name", "user2", "--provider", "scripted", "--workspace", ws2.id])
    expect((await cli(home, ["workspace", "delete", ws2.id])).code).toBe(5)
    expect(await cliJson(home, ["workspace", "delete", ws2.id, "--force"])).toEqual({ workspace: ws2.id, deleted: true, removed: [ws2.id] })
    expect(fs.existsSync(join(home, "workspaces", ws2.id))).toBe(false)
  })

  it("the tree rebuilt by start-up recovery still holds its workspaces (after a stop/start and after kill -9)", async () => {
    const ws = await cliJson<Workspace>(home, ["workspace", "create", "--name", "kept"])
    await cliJson<Agent>(home, ["agent", "create", "--name", "keeper", "--provider", "scripted", "--workspace", ws.id])
    await cliJson(home, ["daemon", "stop"])
    await owned.killAll()
    owned.track(await startDaemon(home))
    expect((await cli(home, ["workspace", "delete", ws.id])).code).toBe(5)
    const pid = (await cliJson<{ pid: number }>(home, ["daemon", "status"])).pid
    process.kill(pid, "SIGKILL")
    await owned.killAll()
    owned.track(await startDaemon(home))
    expect((await cli(home, ["workspace", "delete", ws.id])).code).toBe(5)
    expect(fs.existsSync(join(home, "workspaces", ws.id, "workspace.json"))).toBe(true)
  })
})
