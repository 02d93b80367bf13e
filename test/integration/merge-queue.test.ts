// requires: bwrap, git
// Branch children and the merge queue through the real daemon (scripted agents; the test writes
// the children's files during their turns, as their tools would):
//   - two `branch` children edit the same function: the first merges; the second gets a SYSTEM
//     message naming the file, merges `parent/head` in its clone and commits the resolution in its
//     next turn, then merges; both reach substrat/<lead> in the user's repository;
//   - `workspace queue`'s recent outcomes are read back from the parents' logs after a restart;
//   - a failing check blocks a merge and reaches the child with the output's tail; kill -9 during
//     the check: after the restart the item is retried and reported once;
//   - kill -9 after the branch moved but before the clone had the files: after the restart the
//     branch is the merged head (never half), the clone gets the files, one merge.merged;
//   - a child's turn that records changes while its parent's request is still open (woken by the
//     human) does not queue its branch; the turn answering the request does (even with no
//     changes of its own).
//   - those waiting changes survive kill -9 (`merge.held`): killed while the answering turn runs,
//     the restarted daemon queues them when that turn answers, and merges them once;
//   - rebase mode (`workspaces.merge_mode = "rebase"`): two children's parallel changes to
//     different files land as a straight history, each child's commits in order with their
//     authors and trailers; a third whose second commit overlaps is refused as a conflict with
//     none of its commits on the branch.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { agentEvents, dataNamed } from "../support/agentLogs.js"
import { gitIn, makeForeignRepo } from "../support/foreignRepo.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, daemons, kill9, rpcOnce, startDaemon, waitFor } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-mq-")
const home = join(dir, "home")
const repo = join(dir, "repo")
let pid = 0

const child = (name: string) => ({ tool: "spawn_agent", args: { name, instructions: name, workspace: "branch" } })
const work = (name: string) => ({ tool: "send_message", args: { recipient: name, text: "work", sync: true } })
// A child's turn ends when the test opens its gate (`wait_for`): after the test has written
// the files that turn stands for.
const gates = join(dir, "gates")
const gate = (name: string) => join(gates, name)
const open = (name: string) => fs.writeFileSync(gate(name), "")
const book = {
  lead: { steps: [{ tools: [child("c1"), child("c2"), work("c1"), work("c2")], text: "working" }], after: "silent" },
  c1: { steps: [{ wait_for: gate("c1"), text: "c1 done" }], after: "silent" },
  c2: { steps: [{ wait_for: gate("c2"), text: "c2 done" }, { wait_for: gate("c2-fixed"), text: "c2 fixed" }], after: "silent" },
  lead2: { steps: [{ tools: [child("c3"), work("c3")], text: "working" }], after: "silent" },
  c3: { steps: [{ wait_for: gate("c3"), text: "c3 done" }, { wait_for: gate("c3-fixed"), text: "c3 fixed" }], after: "silent" },
  lead3: { steps: [{ tools: [child("c4"), work("c4")], text: "working" }], after: "silent" },
  c4: { steps: [{ wait_for: gate("c4"), text: "c4 done" }], after: "silent" },
  lead4: { steps: [{ tools: [child("c5")], text: "spawned" }, { tools: [work("c5")], text: "asked" }], after: "silent" },
  c5: { steps: [{ wait_for: gate("c5"), text: "c5 started" }, { text: "c5 done" }], after: "silent" },
  lead5: { steps: [{ tools: [child("c6")], text: "spawned" }, { tools: [work("c6")], text: "asked" }], after: "silent" },
  lead6: { steps: [{ tools: [child("c7"), child("c8"), child("c9"), work("c7"), work("c8"), work("c9")], text: "working" }], after: "silent" },
  c7: { steps: [{ wait_for: gate("c7"), text: "c7 done" }], after: "silent" },
  c8: { steps: [{ wait_for: gate("c8"), text: "c8 done" }], after: "silent" },
  c9: { steps: [{ wait_for: gate("c9"), text: "c9 done" }], after: "silent" },
  c6: { steps: [{ wait_for: gate("c6"), text: "c6 started" }, { wait_for: gate("c6-answer"), text: "c6 done" }], after: "silent" }
}

const figures: Record<string, number> = {}

beforeAll(async () => {
  fs.mkdirSync(join(home, "scripts"), { recursive: true })
  fs.mkdirSync(gates)
  fs.writeFileSync(join(home, "scripts", "mq.json"), JSON.stringify(book))
  makeForeignRepo(repo)
  pid = await startDaemon(home)
  owned.track(pid)
}, 60_000)

afterAll(async () => {
  await owned.killAll()
  if (process.env["SUBSTRAT_FIGURES"] !== undefined) fs.writeFileSync(process.env["SUBSTRAT_FIGURES"], JSON.stringify(figures, null, 2) + "\n")
  removeDir(dir)
})

type AgentWs = Agent & { readonly workspace_id: string | null }
interface Ws {
  readonly id: string
  readonly name: string | null
  readonly root_path: string
  readonly fork_of: string | null
  readonly repo: { readonly branch: string } | null
}

// Lookups and polls over the admin socket (agent.list, workspace.list: what `--json` prints).
const agentNamed = (name: string) =>
  waitFor(`${name} exists`, async () => (await rpcOnce<{ agents: ReadonlyArray<AgentWs> }>(home, "agent.list", { all: false })).agents.find((a) => a.name === name))
const wsOf = async (a: AgentWs) => (await rpcOnce<{ workspaces: ReadonlyArray<Ws> }>(home, "workspace.list")).workspaces.find((w) => w.id === a.workspace_id)!
const turnStarts = (a: AgentWs) => dataNamed(agentEvents(home, a.session_id), "turn.start").length
const events = (a: AgentWs, name: string) => dataNamed(agentEvents(home, a.session_id), name)
const notesTo = (a: AgentWs) =>
  agentEvents(home, a.session_id).filter((e) => e.event === "message.enqueued" && e.data["sender"] === "SYSTEM" && e.data["recipient"] === a.id).map((e) => String(e.data["payload"]))
const timed = (a: AgentWs) => agentEvents(home, a.session_id) as unknown as ReadonlyArray<{ readonly event: string; readonly ts: string }>
const tsOf = (a: AgentWs, name: string, nth = 0) => Date.parse(timed(a).filter((e) => e.event === name)[nth]!.ts)
const edit = (root: string, from: string, to: string) => {
  const f = join(root, "index.js")
  const text = fs.readFileSync(f, "utf8")
  expect(text).toContain(from)
  fs.writeFileSync(f, text.replace(from, to))
}
const showUser = (ref: string, path: string) => gitIn(repo, ["show", `${ref}:${path}`])
/** Files the test wrote into an agent's clone go back to the clone's owner. */
const giveBack = (root: string) => {
  const st = fs.statSync(root)
  const walk = (p: string) => {
    fs.lchownSync(p, st.uid, st.gid)
    if (fs.lstatSync(p).isDirectory()) for (const n of fs.readdirSync(p)) walk(join(p, n))
  }
  walk(root)
}

/** The daemon restarted with `config` as its config.toml. */
const restartWith = async (config: string) => {
  fs.writeFileSync(join(home, "config.toml"), config)
  expect((await cli(home, ["daemon", "stop"])).code).toBe(0)
  pid = await startDaemon(home)
  owned.track(pid)
}
/** A lead on the user's repository: its workspace, history repository and branch head. */
const leadOnRepo = async (name: string) => {
  const lead = await cliJson<AgentWs>(home, ["agent", "create", "--name", name, "--provider", "scripted:mq", "--repo", repo])
  const leadWs = await wsOf(lead)
  const gitDir = join(home, "workspaces", leadWs.id, "history.git")
  const before = gitIn(dir, ["--git-dir", gitDir, "rev-parse", `refs/heads/substrat/${name}`]).trim()
  return { lead, leadWs, gitDir, before }
}

describe("branch children and the merge queue", () => {
  it("two branch children edit one function: the first merges, the second gets the conflict, resolves it and merges", async () => {
    const lead = await cliJson<AgentWs>(home, ["agent", "create", "--name", "lead", "--provider", "scripted:mq", "--repo", repo])
    const leadWs = await wsOf(lead)
    expect((await cli(home, ["agent", "send", "lead", "go"])).code).toBe(0)
    const c1 = await agentNamed("c1")
    const c2 = await agentNamed("c2")
    const w1 = await wsOf(c1)
    const w2 = await wsOf(c2)
    expect(w1.fork_of).toBe(leadWs.id)
    expect(w1.repo?.branch).toBe("substrat/lead/c1")
    expect(w2.repo?.branch).toBe("substrat/lead/c2")
    expect(w1.root_path).not.toBe(leadWs.root_path)
    // Written before or during each child's first turn: that turn's record takes it. c1's turn
    // ends first; c2's once c1 is merged, so c2's merge meets c1's change.
    edit(w1.root_path, "function fmtShort(ms) {", "function fmtShort(ms) { // c1")
    edit(w2.root_path, "function fmtShort(ms) {", "function fmtShort(ms) { // c2")
    fs.writeFileSync(join(w2.root_path, "c2.txt"), "from c2\n")
    open("c1")

    const merged1 = await waitFor("c1 merged", () => events(lead, "merge.merged")[0], 60_000)
    expect(merged1["paths"]).toEqual(["index.js"])
    expect(showUser("substrat/lead", "index.js")).toContain("// c1")
    figures["reply_to_merged_ms_no_check"] = tsOf(lead, "merge.merged") - tsOf(c1, "turn.complete")
    figures["queued_to_merged_ms_no_check"] = Number(merged1["queued_ms"])
    // The lead's own clone has the merged file (not only its history).
    await waitFor("the lead's clone has c1's change", () => fs.readFileSync(join(leadWs.root_path, "index.js"), "utf8").includes("// c1") || undefined)
    // The note follows the clone's update (the merge is reported once the clone has it).
    await waitFor("the lead's note", () => notesTo(lead).some((n) => n.startsWith("Merged c1's branch")) || undefined)
    expect(notesTo(lead).filter((n) => n.startsWith("Merged c1's branch"))).toHaveLength(1)
    open("c2")

    const failed = await waitFor("c2's conflict", () => events(lead, "merge.failed")[0], 60_000)
    expect(failed).toMatchObject({ reason: "conflict", paths: ["index.js"] })
    const told = await waitFor("c2 told", () => notesTo(c2).find((n) => n.includes("conflicts")))
    expect(told).toMatch(/index\.js/)
    expect(told).toMatch(/git merge parent\/head/)
    // c2's next turn: it merges its parent's branch and commits the resolution.
    await waitFor("c2's second turn", () => turnStarts(c2) > 1 || undefined)
    expect(() => gitIn(w2.root_path, ["merge", "-q", "parent/head"])).toThrow()
    const resolved = showUser("substrat/lead", "index.js").replace("function fmtShort(ms) { // c1", "function fmtShort(ms) { // c1 and c2")
    fs.writeFileSync(join(w2.root_path, "index.js"), resolved)
    gitIn(w2.root_path, ["add", "-A"])
    gitIn(w2.root_path, ["commit", "-q", "--no-edit"])
    giveBack(w2.root_path)
    open("c2-fixed")

    await waitFor("c2 merged", () => events(lead, "merge.merged")[1], 90_000)
    expect(showUser("substrat/lead", "index.js")).toContain("// c1 and c2")
    expect(showUser("substrat/lead", "c2.txt")).toBe("from c2\n")
    expect(events(lead, "merge.merged")).toHaveLength(2)
    expect(events(lead, "merge.failed")).toHaveLength(1)
    // Only substrat/ branches in the user's repository; the children's branches stay in the daemon.
    const branches = gitIn(repo, ["for-each-ref", "--format=%(refname)", "refs/heads"]).split("\n").filter((l) => l !== "")
    expect(branches).toEqual(["refs/heads/main", "refs/heads/substrat/lead"])
    const q = await cliJson<{ items: ReadonlyArray<unknown>; recent: ReadonlyArray<{ outcome: string; agent: string }> }>(home, ["workspace", "queue", "lead"])
    expect(q.items).toEqual([])
    expect(q.recent.map((r) => `${r.agent}:${r.outcome}`)).toEqual(["c2:merged", "c2:conflict", "c1:merged"])
  }, 240_000)

  it("a failing check blocks the merge and reaches the child; kill -9 during the check: retried, reported once", async () => {
    const check = "touch /workspace/.check-ran; sleep 3; if [ -e broken.txt ]; then echo BROKEN-CHECK-OUTPUT; exit 1; fi"
    const lead2 = await cliJson<AgentWs>(home, ["agent", "create", "--name", "lead2", "--provider", "scripted:mq", "--repo", repo, "--check", check])
    const leadWs = await wsOf(lead2)
    expect((await cli(home, ["agent", "send", "lead2", "go"])).code).toBe(0)
    const c3 = await agentNamed("c3")
    const w3 = await wsOf(c3)
    fs.writeFileSync(join(w3.root_path, "broken.txt"), "x\n")
    fs.writeFileSync(join(w3.root_path, "c3.txt"), "from c3\n")
    open("c3")
    const wsDir = join(home, "workspaces", leadWs.id)
    await waitFor("the check running", () => fs.readdirSync(wsDir).some((n) => n.startsWith("check-") && fs.existsSync(join(wsDir, n, ".check-ran"))) || undefined, 60_000)
    await kill9(pid)
    pid = await startDaemon(home)
    owned.track(pid)
    const failed = await waitFor("the check failed", () => events(lead2, "merge.failed")[0], 90_000)
    expect(failed["reason"]).toBe("check")
    expect(String(failed["output"])).toContain("BROKEN-CHECK-OUTPUT")
    const told = await waitFor("c3 told", () => notesTo(c3).find((n) => n.includes("the check failed")))
    expect(told).toContain("BROKEN-CHECK-OUTPUT")
    const leadGit = join(home, "workspaces", leadWs.id, "history.git")
    expect(() => gitIn(dir, ["--git-dir", leadGit, "show", "refs/heads/substrat/lead2:c3.txt"])).toThrow()
    await waitFor("c3's second turn", () => turnStarts(c3) > 1 || undefined)
    fs.rmSync(join(w3.root_path, "broken.txt"))
    open("c3-fixed")
    const merged = await waitFor("c3 merged", () => events(lead2, "merge.merged")[0], 90_000)
    expect(merged["checked"]).toBe(true)
    expect(showUser("substrat/lead2", "c3.txt")).toBe("from c3\n")
    figures["queued_to_merged_ms_with_check"] = Number(merged["queued_ms"])
    figures["reply_to_merged_ms_with_check"] = tsOf(lead2, "merge.merged") - tsOf(c3, "turn.complete", 1)
    expect(events(lead2, "merge.failed")).toHaveLength(1)
    expect(events(lead2, "merge.merged")).toHaveLength(1)
    // No scratch checkout is left behind.
    expect(fs.readdirSync(wsDir).filter((n) => n.startsWith("check-"))).toEqual([])
  }, 300_000)

  it("kill -9 after the branch moved, before the clone has the files: old or new head, never half; finished once after the restart", async () => {
    // A pause between moving the branch and updating the clone, for the kill to land in.
    await restartWith("[workspaces]\nmerge_move_delay_ms = 8000\n")
    const { lead: lead3, leadWs, gitDir, before } = await leadOnRepo("lead3")
    expect((await cli(home, ["agent", "send", "lead3", "go"])).code).toBe(0)
    const c4 = await agentNamed("c4")
    const w4 = await wsOf(c4)
    fs.writeFileSync(join(w4.root_path, "c4.txt"), "from c4\n")
    open("c4")
    const pending = () => {
      try {
        return gitIn(dir, ["--git-dir", gitDir, "rev-parse", "--verify", "-q", "refs/substrat/merge-pending"]).trim()
      } catch {
        return undefined
      }
    }
    const mergeCommit = await waitFor("the branch moving", pending, 60_000)
    await kill9(pid)
    const head = gitIn(dir, ["--git-dir", gitDir, "rev-parse", "refs/heads/substrat/lead3"]).trim()
    expect([before, mergeCommit]).toContain(head)
    expect(fs.existsSync(join(leadWs.root_path, "c4.txt"))).toBe(false)
    fs.rmSync(join(home, "config.toml"))
    pid = await startDaemon(home)
    owned.track(pid)
    await waitFor("the merge finished", () => events(lead3, "merge.merged")[0], 90_000)
    await waitFor("the marker cleared", () => pending() === undefined || undefined)
    expect(gitIn(dir, ["--git-dir", gitDir, "rev-parse", "refs/heads/substrat/lead3"]).trim()).toBe(mergeCommit)
    expect(fs.readFileSync(join(leadWs.root_path, "c4.txt"), "utf8")).toBe("from c4\n")
    expect(showUser("substrat/lead3", "c4.txt")).toBe("from c4\n")
    expect(events(lead3, "merge.merged")).toHaveLength(1)
    expect(events(lead3, "merge.queued")).toHaveLength(1)
    // Merged once: c4's commit is in the branch's history once, no second merge commit.
    expect(gitIn(repo, ["rev-list", "--merges", `${before}..substrat/lead3`]).trim()).toBe("")
    // `workspace queue` lists the outcomes logged before the restart (read back from the
    // parent's log, newest first): lead2's failed check, then its merge.
    const lead2Ws = await wsOf(await agentNamed("lead2"))
    const q = await cliJson<{ recent: ReadonlyArray<{ agent: string; outcome: string; paths: ReadonlyArray<string> }> }>(home, ["workspace", "queue", lead2Ws.id])
    expect(q.recent.map((o) => [o.agent, o.outcome])).toEqual([["c3", "merged"], ["c3", "check"]])
    expect(q.recent[0]!.paths).toContain("c3.txt")
  }, 300_000)

  it("a branch enters the queue when the child answers its parent's request, not while the request is open", async () => {
    const lead4 = await cliJson<AgentWs>(home, ["agent", "create", "--name", "lead4", "--provider", "scripted:mq", "--repo", repo])
    expect((await cli(home, ["agent", "send", "lead4", "go"])).code).toBe(0)
    const c5 = await agentNamed("c5")
    const w5 = await wsOf(c5)
    // c5's first turn (the human's message) changes a file and ends only once the lead's request is open.
    expect((await cli(home, ["agent", "send", "c5", "start"])).code).toBe(0)
    await waitFor("c5's first turn", () => turnStarts(c5) > 0 || undefined, 60_000)
    fs.writeFileSync(join(w5.root_path, "c5.txt"), "from c5\n")
    expect((await cli(home, ["agent", "send", "lead4", "ask c5"])).code).toBe(0)
    await waitFor("the lead's request to c5", () => events(c5, "message.enqueued").find((m) => m["payload"] === "work"), 60_000)
    open("c5")
    // The second turn answers the request (and changes nothing): the branch goes in then.
    const merged = await waitFor("c5 merged", () => events(lead4, "merge.merged")[0], 60_000)
    expect(merged["paths"]).toEqual(["c5.txt"])
    expect(events(c5, "workspace.diff").map((d) => d["paths"])).toEqual([[{ path: "c5.txt", change: "added" }]])
    expect(events(lead4, "merge.queued")).toHaveLength(1)
    // Queued by the answering turn (its hook runs after its start), not by the first one.
    expect(tsOf(lead4, "merge.queued")).toBeGreaterThanOrEqual(tsOf(c5, "turn.start", 1))
    expect(showUser("substrat/lead4", "c5.txt")).toBe("from c5\n")
  }, 120_000)

  it("changes waiting for the child's answer survive kill -9: the answering turn after the restart merges them once", async () => {
    const lead5 = await cliJson<AgentWs>(home, ["agent", "create", "--name", "lead5", "--provider", "scripted:mq", "--repo", repo])
    expect((await cli(home, ["agent", "send", "lead5", "go"])).code).toBe(0)
    const c6 = await agentNamed("c6")
    const w6 = await wsOf(c6)
    expect((await cli(home, ["agent", "send", "c6", "start"])).code).toBe(0)
    await waitFor("c6's first turn", () => turnStarts(c6) > 0 || undefined, 60_000)
    fs.writeFileSync(join(w6.root_path, "c6.txt"), "from c6\n")
    expect((await cli(home, ["agent", "send", "lead5", "ask c6"])).code).toBe(0)
    await waitFor("the lead's request to c6", () => events(c6, "message.enqueued").find((m) => m["payload"] === "work"), 60_000)
    open("c6")
    // The answering turn is running (held at its gate) when the daemon dies.
    await waitFor("c6's answering turn", () => turnStarts(c6) > 1 || undefined, 60_000)
    expect(events(lead5, "merge.queued")).toHaveLength(0)
    await kill9(pid)
    pid = await startDaemon(home)
    owned.track(pid)
    open("c6-answer")
    const merged = await waitFor("c6 merged", () => events(lead5, "merge.merged")[0], 90_000)
    expect(merged["paths"]).toEqual(["c6.txt"])
    expect(showUser("substrat/lead5", "c6.txt")).toBe("from c6\n")
    // Once: one item, one merge, the waiting changes recorded once.
    await waitFor("c6's answer delivered", () => turnStarts(lead5) > 2 || undefined, 60_000)
    expect(events(lead5, "merge.held")).toHaveLength(1)
    expect(events(lead5, "merge.queued")).toHaveLength(1)
    expect(events(lead5, "merge.merged")).toHaveLength(1)
    expect(events(lead5, "merge.failed")).toHaveLength(0)
  }, 180_000)

  it("rebase mode: parallel non-overlapping branches are replayed in order; an overlapping one is refused, nothing half-applied", async () => {
    await restartWith("[workspaces]\nmerge_mode = \"rebase\"\n")
    const { lead: lead6, leadWs, gitDir, before } = await leadOnRepo("lead6")
    expect((await cli(home, ["agent", "send", "lead6", "go"])).code).toBe(0)
    const [c7, c8, c9] = [await agentNamed("c7"), await agentNamed("c8"), await agentNamed("c9")]
    const [w7, w8, w9] = [await wsOf(c7), await wsOf(c8), await wsOf(c9)]
    const commitIn = (root: string, file: string, message: string) => {
      fs.writeFileSync(join(root, file), `${file}\n`)
      gitIn(root, ["add", file])
      gitIn(root, ["commit", "-q", "-m", message])
      giveBack(root)
    }
    edit(w7.root_path, "function fmtShort(ms) {", "function fmtShort(ms) { // c7")
    // c8: a commit of its own inside the turn, then the turn's changes.
    commitIn(w8.root_path, "r8a.txt", "c8: first")
    fs.writeFileSync(join(w8.root_path, "r8b.txt"), "r8b.txt\n")
    // c9: a commit that applies, then an edit of c7's line.
    commitIn(w9.root_path, "r9.txt", "c9: first")
    edit(w9.root_path, "function fmtShort(ms) {", "function fmtShort(ms) { // c9")
    open("c7")
    await waitFor("c7 merged", () => events(lead6, "merge.merged")[0], 60_000)
    const afterC7 = gitIn(repo, ["rev-parse", "substrat/lead6"]).trim()
    open("c8")
    const m8 = await waitFor("c8 rebased", () => events(lead6, "merge.merged")[1], 60_000)
    expect(m8["fast_forward"]).toBe(false)
    expect([...(m8["paths"] as ReadonlyArray<string>)].sort()).toEqual(["r8a.txt", "r8b.txt"])
    const afterC8 = gitIn(repo, ["rev-parse", "substrat/lead6"]).trim()
    expect(String(m8["commit"])).toBe(afterC8)
    // A straight line: c7's turn, c8's own commit, c8's turn — authors and trailers kept.
    expect(gitIn(repo, ["rev-list", "--merges", `${before}..substrat/lead6`]).trim()).toBe("")
    const line = gitIn(repo, ["log", "--reverse", "--format=%an|%s|%(trailers:key=Substrat-Agent,valueonly,separator=)", `${before}..substrat/lead6`])
      .split("\n").filter((l) => l !== "")
    expect(line).toHaveLength(3)
    expect(line[0]).toMatch(/\|c7$/)
    expect(line[1]).toBe("Maintainer|c8: first|")
    expect(line[2]).toMatch(/\|c8$/)
    expect(gitIn(repo, ["rev-parse", "substrat/lead6~2"]).trim()).toBe(afterC7)
    await waitFor("the lead's clone has c8's files", () => fs.existsSync(join(leadWs.root_path, "r8b.txt")) || undefined)
    expect(showUser("substrat/lead6", "index.js")).toContain("// c7")
    open("c9")
    const failed = await waitFor("c9 refused", () => events(lead6, "merge.failed")[0], 60_000)
    expect(failed).toMatchObject({ reason: "conflict", paths: ["index.js"] })
    await waitFor("c9 told", () => notesTo(c9).find((n) => n.includes("conflicts")))
    // Nothing of c9's is on the branch, in the user's repository or in the lead's clone.
    expect(gitIn(dir, ["--git-dir", gitDir, "rev-parse", "refs/heads/substrat/lead6"]).trim()).toBe(afterC8)
    expect(gitIn(repo, ["rev-parse", "substrat/lead6"]).trim()).toBe(afterC8)
    expect(fs.existsSync(join(leadWs.root_path, "r9.txt"))).toBe(false)
    expect(fs.readFileSync(join(leadWs.root_path, "index.js"), "utf8")).not.toContain("// c9")
    expect(events(lead6, "merge.merged")).toHaveLength(2)
  }, 180_000)
})
