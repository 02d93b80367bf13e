// Default workspaces through the real CLI and daemon: a root created without `--workspace` gets a
// top-level workspace of its own (with history: `workspace log` works), shown in `workspace list`
// as that agent's; its children work in it by default, or in a child workspace at
// `workspace_subdir`; it cannot be deleted while the agents live, and can once they are gone.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, daemons, startDaemon, waitQuiet } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-defws-")
const home = join(dir, "home")

type AgentWs = Agent & { readonly workspace_id: string | null }
interface Workspace {
  readonly id: string
  readonly parent_id: string | null
  readonly root_path: string
  readonly default_for: string | null
}

const book = {
  lead: {
    steps: [{
      tools: [
        { tool: "spawn_agent", args: { name: "coder", instructions: "code" } },
        { tool: "spawn_agent", args: { name: "reviewer", instructions: "review", workspace_subdir: "review" } }
      ],
      text: "team spawned"
    }],
    after: "silent"
  }
}

beforeAll(async () => {
  fs.mkdirSync(join(home, "scripts"), { recursive: true })
  fs.writeFileSync(join(home, "scripts", "team.json"), JSON.stringify(book))
  owned.track(await startDaemon(home))
}, 60_000)

afterAll(async () => {
  await owned.killAll()
  removeDir(dir)
})

describe("default workspaces", () => {
  it("a root without --workspace gets its own; children share it (or a subdir of it); delete waits for the agents", async () => {
    const lead = await cliJson<AgentWs>(home, ["agent", "create", "--name", "lead", "--provider", "scripted:team"])
    expect(lead.workspace_id).not.toBeNull()
    const sent = await cli(home, ["agent", "send", "lead", "go", "--wait"])
    expect(sent.code).toBe(0)
    const agents = (await waitQuiet(home)) as ReadonlyArray<AgentWs>
    const byName = Object.fromEntries(agents.map((a) => [a.name, a]))
    expect(byName["coder"]!.workspace_id).toBe(lead.workspace_id)
    const list = await cliJson<{ workspaces: ReadonlyArray<Workspace> }>(home, ["workspace", "list"])
    const own = list.workspaces.find((w) => w.id === lead.workspace_id)!
    expect(own).toMatchObject({ parent_id: null, default_for: "lead" })
    expect(fs.statSync(own.root_path).isDirectory()).toBe(true)
    const review = list.workspaces.find((w) => w.id === byName["reviewer"]!.workspace_id)!
    expect(review).toMatchObject({ parent_id: lead.workspace_id, root_path: `${own.root_path}/review` })
    const table = await cli(home, ["workspace", "list"])
    expect(table.stdout).toContain("(lead's)")
    // With history: the turn log answers (every turn of the team is recorded there).
    expect((await cli(home, ["workspace", "log", own.id])).code).toBe(0)

    // Refused while the team lives (in use, and the reviewer's child workspace is in it).
    const refused = await cli(home, ["workspace", "delete", own.id])
    expect(refused.code).not.toBe(0)
    expect(refused.stderr).toMatch(/in use|child/)
    expect(fs.existsSync(own.root_path)).toBe(true)
    expect((await cli(home, ["agent", "terminate", "lead"])).code).toBe(0)
    const deleted = await cli(home, ["workspace", "delete", own.id, "--force"])
    expect(deleted.code).toBe(0)
    expect(fs.existsSync(own.root_path)).toBe(false)
  }, 90_000)

  it("--workspace still names the workspace to run in (no default one is made)", async () => {
    const ws = await cliJson<Workspace>(home, ["workspace", "create", "--name", "mine"])
    const before = (await cliJson<{ workspaces: ReadonlyArray<Workspace> }>(home, ["workspace", "list"])).workspaces.length
    const a = await cliJson<AgentWs>(home, ["agent", "create", "--name", "solo", "--provider", "scripted:echo", "--workspace", ws.id])
    expect(a.workspace_id).toBe(ws.id)
    expect((await cliJson<{ workspaces: ReadonlyArray<Workspace> }>(home, ["workspace", "list"])).workspaces.length).toBe(before)
  }, 60_000)
})
