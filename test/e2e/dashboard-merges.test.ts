// requires: chromium, bwrap, git
// The dashboard's merge view, in headless chromium against a real daemon running a scripted team
// on a repository nobody here wrote: lead (its workspace made from the repository) spawns two
// `branch` children that edit the same function; while lead has a turn running, both children's
// branches wait in its workspace's merge queue and the page shows them waiting and the overlap of
// their pending changes (index.js); once lead's turn ends, c1 merges (the page names its merged
// commit, the one published to the user's repository) and c2 is refused for a conflict in index.js.
// Then two agents in one shared workspace change shared.txt in overlapping turns: the page shows the
// `workspace.overlap`.
import * as fs from "node:fs"
import { join } from "node:path"
import type { Page } from "playwright-core"
import { beforeAll, describe, expect, it } from "vitest"
import { agentEvents, dataNamed } from "../support/agentLogs.js"
import { gitIn, makeForeignRepo } from "../support/foreignRepo.js"
import { type Agent, cli, cliJson, rpcOnce, waitFor } from "../integration/daemon.support.js"
import { dashboardSuite } from "./browser.support.js"

const suite = dashboardSuite("substrat-dash-merges-")
const { home, dir, shots } = suite
const repo = join(dir, "repo")
const gates = join(dir, "gates")
const gate = (name: string) => join(gates, name)
const open = (name: string) => fs.writeFileSync(gate(name), "")
const child = (name: string) => ({ tool: "spawn_agent", args: { name, instructions: name, workspace: "branch" } })
const work = (name: string) => ({ tool: "send_message", args: { recipient: name, text: "work", sync: true } })
const book = {
  lead: { steps: [{ tools: [child("c1"), child("c2"), work("c1"), work("c2")], text: "working" }, { wait_for: gate("hold"), text: "held" }], after: "silent" },
  c1: { steps: [{ wait_for: gate("c1"), text: "c1 done" }], after: "silent" },
  c2: { steps: [{ wait_for: gate("c2"), text: "c2 done" }], after: "silent" },
  // A shared workspace: sa's and sb's turns run at once and both change shared.txt.
  shlead: {
    steps: [{
      tools: [
        { tool: "spawn_agent", args: { name: "sa", instructions: "sa" } },
        { tool: "spawn_agent", args: { name: "sb", instructions: "sb" } },
        { tool: "send_message", args: { recipient: "sa", text: "work", sync: true } },
        { tool: "send_message", args: { recipient: "sb", text: "work", sync: true } }
      ],
      text: "both working"
    }, { wait_for: gate("shlead"), text: "" }],
    after: "silent"
  },
  sa: { steps: [{ wait_for: gate("sa"), text: "sa done" }], after: "silent" },
  sb: { steps: [{ wait_for: gate("sb"), text: "sb done" }], after: "silent" }
}
// Before the suite's daemon starts (the scripted provider reads its book from the home).
fs.mkdirSync(join(home, "scripts"), { recursive: true })
fs.mkdirSync(gates, { recursive: true })
fs.writeFileSync(join(home, "scripts", "dash.json"), JSON.stringify(book))

let page: Page
beforeAll(() => {
  page = suite.page
  makeForeignRepo(repo)
})

type AgentWs = Agent & { readonly workspace_id: string | null }
interface Ws {
  readonly id: string
  readonly root_path: string
}
const agentNamed = (name: string) =>
  waitFor(`${name} exists`, async () => (await rpcOnce<{ agents: ReadonlyArray<AgentWs> }>(home, "agent.list", { all: false })).agents.find((a) => a.name === name))
const wsOf = async (a: AgentWs) => (await rpcOnce<{ workspaces: ReadonlyArray<Ws> }>(home, "workspace.list")).workspaces.find((w) => w.id === a.workspace_id)!
const events = (a: AgentWs, name: string) => dataNamed(agentEvents(home, a.session_id), name)
const edit = (root: string, from: string, to: string) => {
  const f = join(root, "index.js")
  const text = fs.readFileSync(f, "utf8")
  expect(text).toContain(from)
  fs.writeFileSync(f, text.replace(from, to))
}
const attrs = (sel: string, name: string) => page.locator(sel).evaluateAll((ns, n) => ns.map((x) => x.getAttribute(n)), name)

describe("dashboard: merge queue, outcomes and overlaps", () => {
  it("shows two branch children waiting with their overlap, then one merged as its commit and one refused for a conflict in index.js", async () => {
    const lead = await cliJson<AgentWs>(home, ["agent", "create", "--name", "lead", "--provider", "scripted:dash", "--repo", repo])
    expect((await cli(home, ["agent", "send", "lead", "go"])).code).toBe(0)
    const c1 = await agentNamed("c1")
    const c2 = await agentNamed("c2")
    await waitFor("lead's first turn ends", () => events(lead, "turn.complete").length >= 1 || undefined, 30_000)
    // lead's second turn holds until the gate opens: the queue waits while it runs.
    expect((await cli(home, ["agent", "send", "lead", "hold"])).code).toBe(0)
    await waitFor("lead's second turn runs", () => events(lead, "turn.start").length >= 2 || undefined, 30_000)
    edit((await wsOf(c1)).root_path, "function fmtShort(ms) {", "function fmtShort(ms) { // c1")
    edit((await wsOf(c2)).root_path, "function fmtShort(ms) {", "function fmtShort(ms) { // c2")
    // c1 first: the queue takes its items in order, so c1's merges and c2's meets it.
    open("c1")
    await waitFor("c1's branch queued", () => events(lead, "merge.queued").length >= 1 || undefined, 60_000)
    open("c2")
    await waitFor("both branches queued", () => events(lead, "merge.queued").length >= 2 || undefined, 60_000)
    expect(events(lead, "merge.queued").map((q) => q["agent"])).toEqual(["c1", "c2"])
    expect(events(lead, "merge.merged")).toHaveLength(0)

    await page.goto(suite.url)
    await expect.poll(() => attrs("#merge-waiting li", "data-agent").then((a) => [...a].sort()), { timeout: 20_000 }).toEqual(["c1", "c2"])
    const pending = page.locator('#overlaps li[data-kind="pending"]')
    await expect.poll(() => pending.count(), { timeout: 20_000 }).toBe(1)
    expect(await pending.getAttribute("data-agents")).toBe("c1,c2")
    expect(await pending.getAttribute("data-paths")).toBe("index.js")
    expect(await pending.textContent()).toBe("c1 and c2 both change index.js (not merged yet)")
    expect(await page.locator("#merge-outcomes li").count()).toBe(0)
    await page.screenshot({ path: join(shots, "merges-waiting.png") })

    open("hold")
    const merged = await waitFor("c1 merged", () => events(lead, "merge.merged")[0], 60_000)
    const failed = await waitFor("c2 refused", () => events(lead, "merge.failed")[0], 60_000)
    expect(failed).toMatchObject({ reason: "conflict", paths: ["index.js"] })
    const commit = String(merged["commit"])
    await waitFor("the merged commit published", () => gitIn(repo, ["rev-parse", "refs/heads/substrat/lead"]).trim() === commit || undefined)

    // Live, through the feed: the waiting list empties, the outcomes name the commit and the conflict.
    const ok = page.locator('#merge-outcomes li[data-outcome="merged"]')
    const refused = page.locator('#merge-outcomes li[data-outcome="conflict"]')
    await expect.poll(() => ok.count(), { timeout: 20_000 }).toBe(1)
    await expect.poll(() => refused.count(), { timeout: 20_000 }).toBe(1)
    expect(await ok.getAttribute("data-agent")).toBe("c1")
    expect(await ok.getAttribute("data-commit")).toBe(commit)
    expect(await ok.textContent()).toContain(`c1 merged as ${commit.slice(0, 12)}: index.js`)
    expect(await refused.getAttribute("data-agent")).toBe("c2")
    expect(await refused.getAttribute("data-paths")).toBe("index.js")
    expect(await refused.textContent()).toContain("c2 refused: conflict in index.js")
    await expect.poll(() => page.locator("#merge-waiting li").count(), { timeout: 20_000 }).toBe(0)
    // c1's changes are merged: no pending overlap is left (c2's alone wait for its fix).
    expect(await pending.count()).toBe(0)
    expect(await page.locator("#merges-empty").isHidden()).toBe(true)
    await page.screenshot({ path: join(shots, "merges-outcomes.png") })

    // A fresh page reads the same from the feed's backlog.
    await page.reload()
    await expect.poll(() => page.locator("#merge-outcomes li").evaluateAll((ns) => ns.map((n) => n.getAttribute("data-outcome"))), { timeout: 20_000 }).toEqual(["conflict", "merged"])
  }, 240_000)

  it("shows two agents' overlapping turns in one shared workspace", async () => {
    const shlead = await cliJson<AgentWs>(home, ["agent", "create", "--name", "shlead", "--provider", "scripted:dash"])
    const ws = await wsOf(shlead)
    expect((await cli(home, ["agent", "send", "shlead", "go"])).code).toBe(0)
    const sa = await agentNamed("sa")
    const sb = await agentNamed("sb")
    await waitFor("sa's turn runs", () => events(sa, "turn.start")[0])
    await waitFor("sb's turn runs", () => events(sb, "turn.start")[0])
    // Changed during sa's turn (sa's record takes it), then again during sb's (sb's record).
    fs.writeFileSync(join(ws.root_path, "shared.txt"), "from sa\n")
    open("sa")
    await waitFor("sa's record", () => events(sa, "workspace.diff")[0], 60_000)
    fs.writeFileSync(join(ws.root_path, "shared.txt"), "from sb\n")
    open("sb")
    await waitFor("sb's record", () => events(sb, "workspace.diff")[0], 60_000)
    open("shlead")
    const row = page.locator('#overlaps li[data-kind="turns"]')
    await expect.poll(() => row.count(), { timeout: 20_000 }).toBe(1)
    expect(await row.getAttribute("data-agents")).toBe("sa,sb")
    expect(await row.getAttribute("data-paths")).toBe("shared.txt")
    expect(await row.textContent()).toMatch(/^\d\d:\d\d:\d\d sa and sb changed shared\.txt in overlapping turns \(one workspace\)$/)
    // Shared-workspace turns are not branch merges: the queue's parts are as the first test left them.
    expect(await page.locator("#merge-outcomes li").count()).toBe(2)
  }, 240_000)
})
