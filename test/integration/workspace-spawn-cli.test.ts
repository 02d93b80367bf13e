// requires: git
// Through the real CLI and daemon (child processes): scripted books loaded from
// $SUBSTRAT_HOME/scripts/<name>.json (`--provider scripted:<name>`, bad books refused at
// `agent create`), and the book driving `spawn_agent(..., workspace_subdir)` — the child gets the
// child workspace at `<parent root>/team-a`, `workspace delete` of the parent is refused while it
// is in use — and `spawn_agent(..., provider)`: another provider for the child, unknown providers,
// missing books and missing CLI binaries answered as tool errors with nothing created.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, daemons, startDaemon, waitQuiet } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-wsspawn-")
const home = join(dir, "home")
const savedCodexBin = process.env["SUBSTRAT_CODEX_BIN"]

interface Workspace {
  readonly id: string
  readonly parent_id: string | null
  readonly root_path: string
}
type AgentWs = Agent & { readonly workspace_id: string | null }
type Entry = { readonly event: string; readonly data: Record<string, unknown> }

const events = (a: Agent): ReadonlyArray<Entry> =>
  fs.readFileSync(join(home, "agents", a.session_id, "events.jsonl"), "utf8").trimEnd().split("\n").map((l) => JSON.parse(l) as Entry)
const of = (es: ReadonlyArray<Entry>, name: string) => es.filter((e) => e.event === name).map((e) => e.data)

const spawn = (name: string, extra: Record<string, unknown> = {}) => ({
  tool: "spawn_agent",
  args: { name, instructions: `You are ${name}.`, ...extra }
})

/** The book: the lead spawns into team-a, tries three bad providers and one good one, asks "a". */
const team = {
  lead: {
    steps: [{
      tools: [
        spawn("a", { role: "worker", workspace_subdir: "team-a" }),
        spawn("ghost1", { provider: "nope" }),
        spawn("ghost2", { provider: "scripted:missing-book" }),
        spawn("ghost3", { provider: "codex" }),
        spawn("ghost4", { provider: "scripted:../scripts/team" }),
        spawn("echoer", { provider: "scripted:echo" }),
        { tool: "send_message", args: { recipient: "a", text: "hello a", sync: true } }
      ],
      text: "spawned"
    }, { text: "lead heard: {{prompt}}" }],
    after: "silent"
  },
  a: { steps: [{ text: "a here, in team-a" }], after: "echo" }
}

const writeBook = (name: string, content: string) => fs.writeFileSync(join(home, "scripts", `${name}.json`), content)

beforeAll(async () => {
  fs.mkdirSync(join(home, "scripts"), { recursive: true })
  writeBook("team", JSON.stringify(team))
  // A typo'd key ("txt") must not pass silently.
  writeBook("typo", JSON.stringify({ lead: { steps: [{ txt: "hi" }] } }))
  writeBook("garbage", "{ not json")
  // No codex binary for this daemon: spawn_agent(provider: "codex") must be refused.
  process.env["SUBSTRAT_CODEX_BIN"] = join(dir, "no-such-codex")
  owned.track(await startDaemon(home))
})

afterAll(async () => {
  if (savedCodexBin === undefined) delete process.env["SUBSTRAT_CODEX_BIN"]
  else process.env["SUBSTRAT_CODEX_BIN"] = savedCodexBin
  await cli(home, ["daemon", "stop"])
  await owned.killAll()
  removeDir(dir)
})

describe("scripted books from $SUBSTRAT_HOME/scripts", () => {
  it("a missing, undecodable or unnamed book is invalid input at agent create; nothing is created", async () => {
    const cases: ReadonlyArray<readonly [string, RegExp]> = [
      ["scripted:typo", /typo\.json.*invalid script book.*txt/],
      ["scripted:garbage", /garbage\.json.*invalid script book/],
      ["scripted:absent", /no scripted book named "absent".*absent\.json/],
      ["scripted:../home/scripts/team", /not a scripted book name/]
    ]
    for (const [provider, message] of cases) {
      const r = await cli(home, ["agent", "create", "--name", "bad", "--provider", provider])
      expect(r.code, `${provider}: ${r.stderr}`).toBe(2)
      expect(r.stderr).toMatch(message)
    }
    expect((await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])).agents).toEqual([])
  })
})

describe("spawn_agent from a loaded book, through the CLI", () => {
  it("workspace_subdir gives the child <parent root>/team-a; provider picks the child's provider; bad providers are tool errors", async () => {
    const ws = await cliJson<Workspace>(home, ["workspace", "create", "--name", "parentws"])
    const lead = await cliJson<AgentWs>(home, ["agent", "create", "--name", "lead", "--provider", "scripted:team", "--workspace", ws.id])
    expect(lead.provider).toBe("scripted:team")
    expect((await cli(home, ["agent", "send", "lead", "go"])).code).toBe(0)
    await waitQuiet(home)

    // The tree: the good children only.
    const agents = (await cliJson<{ agents: ReadonlyArray<AgentWs> }>(home, ["agent", "list"])).agents
    expect(agents.map((a) => a.name).sort()).toEqual(["a", "echoer", "lead"])
    const a = agents.find((x) => x.name === "a")!
    const echoer = agents.find((x) => x.name === "echoer")!
    expect([a.parent_id, echoer.parent_id]).toEqual([lead.id, lead.id])
    expect(a.provider).toBe("scripted:team") // inherited
    expect(echoer.provider).toBe("scripted:echo")
    expect(echoer.workspace_id).toBe(ws.id) // no subdir: the parent's workspace

    // The child workspace: a child of the parent's, rooted at <parent root>/team-a, on disk.
    const workspaces = (await cliJson<{ workspaces: ReadonlyArray<Workspace> }>(home, ["workspace", "list"])).workspaces
    const kids = workspaces.filter((w) => w.parent_id === ws.id)
    expect(kids).toHaveLength(1)
    const kid = kids[0]!
    expect(kid.root_path).toBe(join(ws.root_path, "team-a"))
    expect(fs.statSync(kid.root_path).isDirectory()).toBe(true)
    expect(a.workspace_id).toBe(kid.id)
    const inspected = await cliJson<{ agent: AgentWs }>(home, ["agent", "inspect", "a"])
    expect(inspected.agent.workspace_id).toBe(kid.id)
    expect(of(events(a), "agent.created")[0]!["workspace"]).toBe(kid.id)

    // a ran its own script from the book (keyed by name), and its answer came back to the lead.
    expect(of(events(a), "turn.complete").map((d) => d["response"])).toEqual(["a here, in team-a"])
    const leadLog = events(lead)
    const responses = of(leadLog, "turn.complete").map((d) => String(d["response"]))
    expect(responses[0]).toBe("spawned")
    expect(responses[1]).toMatch(/^lead heard: Reply from a \(to message [0-9a-f-]{36}\): a here, in team-a$/)

    // The refused spawns: JSON tool errors naming the provider, in the lead's log.
    const results = of(leadLog, "tool_call.result").filter((r) => r["tool"] === "spawn_agent")
    const errors = results.filter((r) => r["is_error"] === true).map((r) => (r["result"] as { error: Record<string, string> }).error)
    expect(errors.map((e) => [e["type"], e["field"]])).toEqual(Array(4).fill(["invalid_arguments", "provider"]))
    expect(errors[0]!["message"]).toMatch(/unknown provider "nope"/)
    expect(errors[1]!["message"]).toMatch(/no scripted book named "missing-book"/)
    expect(errors[2]!["message"]).toMatch(/codex/)
    expect(errors[2]!["message"]).toContain(join(dir, "no-such-codex"))
    expect(errors[3]!["message"]).toMatch(/not a scripted book name/)
    expect(results.filter((r) => r["is_error"] === false)).toHaveLength(2)

    // Neither can be deleted while the agents live: the parent has a child workspace (exit 2,
    // checked first), the child's is in use by "a" (exit 5).
    const refused = await cli(home, ["workspace", "delete", ws.id])
    expect([refused.code, refused.stderr]).toEqual([2, expect.stringMatching(/1 child workspace/)])
    const inUse = await cli(home, ["workspace", "delete", kid.id])
    expect([inUse.code, inUse.stderr]).toEqual([5, expect.stringMatching(/in use/)])
    expect(fs.existsSync(join(home, "workspaces", ws.id, "workspace.json"))).toBe(true)
    expect(fs.existsSync(join(home, "workspaces", kid.id, "workspace.json"))).toBe(true)

    // Once the tree is terminated both can go (the child workspace first).
    await cliJson(home, ["agent", "terminate", "lead"])
    expect(await cliJson(home, ["workspace", "delete", kid.id])).toMatchObject({ workspace: kid.id, deleted: true })
    expect(await cliJson(home, ["workspace", "delete", ws.id])).toMatchObject({ workspace: ws.id, deleted: true })
    expect(fs.existsSync(join(home, "workspaces", ws.id))).toBe(false)
  })
})
