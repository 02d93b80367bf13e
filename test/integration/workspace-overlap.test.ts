// requires: git
// Overlap detection through the real daemon: lead spawns a and b in its (shared) workspace and
// sets both working; while both turns run, shared.txt is changed during a's turn (recorded by a's
// turn) and again after a's record, during b's (recorded by b's turn). Then: exactly one
// `workspace.overlap` (paths [shared.txt], both turns), and a, b and their nearest common
// ancestor (lead) each get exactly one SYSTEM note naming the path and the other agent. A path
// only one of them changed (a.txt) is no overlap.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { agentEvents, dataNamed } from "../support/agentLogs.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, daemons, rpcOnce, startDaemon, waitFor, waitQuiet } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-overlap-")
const home = join(dir, "home")

// Each turn that must stay in flight is held on a gate file the test creates when it is time.
const gates = join(dir, "gates")
const gate = (name: string) => join(gates, name)
const release = (name: string) => fs.writeFileSync(gate(name), "")

const book = {
  lead: {
    steps: [{
      tools: [
        { tool: "spawn_agent", args: { name: "a", instructions: "a" } },
        { tool: "spawn_agent", args: { name: "b", instructions: "b" } },
        { tool: "send_message", args: { recipient: "a", text: "work", sync: true } },
        { tool: "send_message", args: { recipient: "b", text: "work", sync: true } }
      ],
      text: "both working"
    }, {
      // Woken by a's answer: still running (recording nothing) while b works, so the change made
      // during b's turn is b's to record (a change is recorded by the first record after it).
      wait_for: gate("lead"),
      text: ""
    }],
    after: "silent"
  },
  a: { steps: [{ wait_for: gate("a"), text: "a done" }], after: "silent" },
  b: { steps: [{ wait_for: gate("b"), text: "b done" }], after: "silent" }
}

beforeAll(async () => {
  fs.mkdirSync(join(home, "scripts"), { recursive: true })
  fs.mkdirSync(gates)
  fs.writeFileSync(join(home, "scripts", "overlap.json"), JSON.stringify(book))
  owned.track(await startDaemon(home))
}, 60_000)

afterAll(async () => {
  await owned.killAll()
  removeDir(dir)
})

type AgentWs = Agent & { readonly workspace_id: string | null }

describe("overlap detection", () => {
  it("two agents' concurrent turns changing one path: one event, one note each to both and to their common ancestor", async () => {
    const lead = await cliJson<AgentWs>(home, ["agent", "create", "--name", "lead", "--provider", "scripted:overlap"])
    const ws = (await cliJson<{ workspaces: ReadonlyArray<{ id: string; root_path: string }> }>(home, ["workspace", "list"]))
      .workspaces.find((w) => w.id === lead.workspace_id)!
    expect((await cli(home, ["agent", "send", "lead", "go"])).code).toBe(0)
    // Both children exist (polled over the admin socket: what `agent list --json` prints), then only their logs are read.
    const kids = await waitFor("a and b spawned", async () => {
      const ags = (await rpcOnce<{ agents: ReadonlyArray<AgentWs> }>(home, "agent.list", { all: false })).agents
      const a = ags.find((x) => x.name === "a")
      const b = ags.find((x) => x.name === "b")
      return a !== undefined && b !== undefined ? { a, b } : undefined
    })
    const { a, b } = kids
    const startedTurn = (x: AgentWs) => () => dataNamed(agentEvents(home, x.session_id), "turn.start")[0]
    await waitFor("a's turn started", startedTurn(a))
    await waitFor("b's turn started", startedTurn(b))
    fs.writeFileSync(join(ws.root_path, "shared.txt"), "from a\n")
    fs.writeFileSync(join(ws.root_path, "a.txt"), "only a\n")
    release("a")
    await waitFor("a's record", () => dataNamed(agentEvents(home, a.session_id), "workspace.diff")[0])
    // b's turn is still running (its turn.complete not logged yet): this change is its.
    expect(dataNamed(agentEvents(home, b.session_id), "turn.complete")).toEqual([])
    fs.writeFileSync(join(ws.root_path, "shared.txt"), "from b\n")
    release("b")
    await waitFor("b's record", () => dataNamed(agentEvents(home, b.session_id), "workspace.diff")[0], 60_000)
    release("lead")
    const agents = (await waitQuiet(home)) as ReadonlyArray<AgentWs>
    const all = agents.flatMap((x) => agentEvents(home, x.session_id))
    const overlaps = all.filter((e) => e.event === "workspace.overlap").map((e) => e.data)
    expect(overlaps).toHaveLength(1)
    expect(overlaps[0]).toMatchObject({ workspace_id: ws.id, paths: ["shared.txt"] })
    expect((overlaps[0]!["turns"] as ReadonlyArray<{ agent: string }>).map((t) => t.agent)).toEqual(["a", "b"])
    const notes = all.filter((e) => e.event === "message.enqueued" && e.data["sender"] === "SYSTEM" && String(e.data["payload"]).startsWith("Overlap"))
      .map((e) => e.data)
    const to = (x: AgentWs) => notes.filter((n) => n["recipient"] === x.id).map((n) => String(n["payload"]))
    expect(to(a)).toHaveLength(1)
    expect(to(a)[0]).toMatch(/you and b changed shared\.txt/)
    expect(to(b)).toHaveLength(1)
    expect(to(b)[0]).toMatch(/you and a changed shared\.txt/)
    expect(to(lead)).toHaveLength(1)
    expect(to(lead)[0]).toMatch(/a and b changed shared\.txt/)
    expect(notes).toHaveLength(3)
  }, 240_000)
})
