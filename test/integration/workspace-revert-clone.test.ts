// requires: bwrap, git
// A CLI `workspace revert` on a repository workspace: the clone's branch, index and status follow
// at once (not only at the next turn): HEAD is the revert's commit, `git status` is clean.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { agentEvents, dataNamed } from "../support/agentLogs.js"
import { gitIn, makeForeignRepo } from "../support/foreignRepo.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, daemons, startDaemon, waitFor } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-revclone-")
const home = join(dir, "home")
const repo = join(dir, "repo")

beforeAll(async () => {
  fs.mkdirSync(join(home, "scripts"), { recursive: true })
  fs.writeFileSync(join(home, "scripts", "rev.json"), JSON.stringify({ lead: { steps: [{ delay_ms: 1500, text: "done" }], after: "silent" } }))
  makeForeignRepo(repo)
  owned.track(await startDaemon(home))
}, 60_000)

afterAll(async () => {
  await owned.killAll()
  removeDir(dir)
})

describe("workspace revert on a repository workspace", () => {
  it("brings the clone's branch and index to the revert at once", async () => {
    const lead = await cliJson<Agent & { readonly workspace_id: string }>(home, ["agent", "create", "--name", "lead", "--provider", "scripted:rev", "--repo", repo])
    const ws = (await cliJson<{ workspaces: ReadonlyArray<{ id: string; root_path: string }> }>(home, ["workspace", "list"])).workspaces.find((w) => w.id === lead.workspace_id)!
    fs.writeFileSync(join(ws.root_path, "added.txt"), "by the turn\n")
    expect((await cli(home, ["agent", "send", "lead", "go"])).code).toBe(0)
    const diff = await waitFor("the turn's record", () => dataNamed(agentEvents(home, lead.session_id), "workspace.diff")[0], 60_000)
    const r = await cli(home, ["workspace", "revert", "--turn", String(diff["turn_id"]), "lead"])
    expect(r.code).toBe(0)
    const published = gitIn(repo, ["rev-parse", "substrat/lead"]).trim()
    expect(fs.existsSync(join(ws.root_path, "added.txt"))).toBe(false)
    expect(gitIn(ws.root_path, ["rev-parse", "HEAD"]).trim()).toBe(published)
    expect(gitIn(ws.root_path, ["status", "--porcelain"])).toBe("")
  }, 120_000)
})
