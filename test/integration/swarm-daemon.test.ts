// Swarm mode through real processes: a real daemon driven by the real CLI, a real code tree on
// disk, the real @parcel/watcher, the scripted provider; kill -9 and restart.
import * as fs from "node:fs"
import * as http from "node:http"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { cli, cliJson, kill9, rpcOnce, sleep, startDaemon, waitFor } from "./daemon.support.js"
import { type LogLine, logOf, type SwarmAgent, swarmScope, write } from "./swarm.support.js"

const { owned, fresh } = swarmScope("substrat-swarm-")

const A_TS = `export class User {
  format(): string {
    return "u"
  }
}

export function formatDate(d: Date): string {
  return d.toISOString()
}

export function other(): number {
  return 1
}
`
const MAIN_PY = `def hello():
    return 1
`

const agentsOf = async (home: string): Promise<Map<string, SwarmAgent>> => {
  const r = await cliJson<{ agents: ReadonlyArray<SwarmAgent> }>(home, ["swarm", "agents"])
  return new Map(r.agents.map((a) => [a.node_id, a]))
}

const count = (log: ReadonlyArray<LogLine>, event: string) => log.filter((l) => l.event === event).length
const sessionsOnDisk = (home: string) => fs.existsSync(join(home, "agents")) ? fs.readdirSync(join(home, "agents")) : []


/** One HTTP request over the daemon's http.sock; the SSE stream is read for `ms` then closed. */
const request = (home: string, method: string, path: string, body?: unknown, ms?: number) =>
  new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = http.request({ socketPath: join(home, "http.sock"), method, path, headers: { "content-type": "application/json" } }, (res) => {
      let text = ""
      res.on("data", (d: Buffer) => (text += d.toString("utf8")))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }))
      if (ms !== undefined) setTimeout(() => { req.destroy(); resolve({ status: res.statusCode ?? 0, text }) }, ms)
    })
    req.on("error", (e) => ms === undefined ? reject(e) : undefined)
    req.end(body === undefined ? undefined : JSON.stringify(body))
  })

describe("swarm mode (real daemon, real files, real watcher)", () => {
  it("HTTP: /swarm/start, /swarm/agents, chat with wait, trigger, /swarm/events", async () => {
    const { home, repo } = fresh()
    write(repo, "x.py", "def a():\n    return 1\n\nclass K:\n    def m(self):\n        return 2\n")
    owned.track(await startDaemon(home))
    const started = await request(home, "POST", "/swarm/start", { path: repo, provider: "scripted:echo" })
    expect(started.status).toBe(200)
    expect(JSON.parse(started.text)).toMatchObject({ nodes: 5, running: true })
    const bad = await request(home, "POST", "/swarm/start", { path: "relative/path" })
    expect(bad.status).toBe(400)
    const dormant = JSON.parse((await request(home, "GET", "/swarm/agents?status=dormant")).text) as { agents: ReadonlyArray<SwarmAgent> }
    expect(dormant.agents.map((a) => a.node_id).sort()).toEqual(["x.py#class:K", "x.py#file", "x.py#function:a", "x.py#method:K.m"])
    const one = JSON.parse((await request(home, "GET", `/swarm/agents/${encodeURIComponent("x.py#function:a")}`)).text) as SwarmAgent
    expect(one).toMatchObject({ node_id: "x.py#function:a", status: "dormant", parent: "x.py#file" })
    const chat = await request(home, "POST", `/swarm/agents/${encodeURIComponent("x.py#method:K.m")}/chat`, { text: "hi", wait: true })
    expect(JSON.parse(chat.text)).toMatchObject({ node_id: "x.py#method:K.m", reply: expect.stringMatching(/^echo: /) })
    const trig = JSON.parse((await request(home, "POST", `/swarm/agents/${one.agent_id}/trigger`)).text) as { message_id: string }
    await waitFor("the trigger's turn", () => count(logOf(home, one.session_id), "turn.complete") >= 1 ? true : undefined)
    const sse = await request(home, "GET", "/swarm/events", undefined, 1500)
    expect(sse.text).toContain(`"event":"turn.start"`)
    expect(sse.text).toContain(trig.message_id)
  }, 120_000)

  it("dormant node agents; a burst of saves wakes only the changed node's agent once; chat --wait; kill -9 → restart reconciles", async () => {
    const { home, repo } = fresh()
    write(repo, "src/a.ts", A_TS)
    write(repo, "main.py", MAIN_PY)
    owned.track(await startDaemon(home))

    const started = await cliJson<{ nodes: number; dormant: number; running: boolean }>(home, ["swarm", "start", repo, "--provider", "scripted:echo"])
    const expected = [
      ".#dir",
      "src#dir",
      "main.py#file",
      "main.py#function:hello",
      "src/a.ts#file",
      "src/a.ts#class:User",
      "src/a.ts#method:User.format",
      "src/a.ts#function:formatDate",
      "src/a.ts#function:other"
    ]
    // Every node an agent; all dormant but the root's (its session carries the swarm's event stream).
    expect(started).toMatchObject({ nodes: expected.length, dormant: expected.length - 1, running: true })
    let agents = await agentsOf(home)
    expect([...agents.keys()].sort()).toEqual([...expected].sort())
    expect([...agents.values()].filter((a) => a.status !== "dormant").map((a) => a.node_id)).toEqual([".#dir"])
    // Dormant: nothing on disk per agent.
    expect(sessionsOnDisk(home)).toEqual([agents.get(".#dir")!.session_id])
    // The node agents are agents of the one tree: the code tree's parents are the agents' parents.
    const tree = await cliJson<{ agents: ReadonlyArray<{ id: string; parent_id: string | null }> }>(home, ["agent", "list"])
    const parentOf = new Map(tree.agents.map((a) => [a.id, a.parent_id]))
    for (const a of agents.values()) {
      expect(parentOf.get(a.agent_id)).toBe(a.parent === null ? null : agents.get(a.parent)!.agent_id)
    }

    // A burst of saves of one function body: one batch, one wake of that function's agent only.
    const fn = agents.get("src/a.ts#function:formatDate")!
    for (let i = 0; i < 3; i++) {
      write(repo, "src/a.ts", A_TS.replace("d.toISOString()", `d.toISOString() + "${i}"`))
    }
    await waitFor("the changed function's turn", () => count(logOf(home, fn.session_id), "turn.complete") >= 1 ? true : undefined)
    await sleep(1500) // anything else the burst could have triggered would have started by now
    const fnLog = logOf(home, fn.session_id)
    expect(fnLog.filter((l) => l.event === "message.enqueued" && l.data["sender"] === "SYSTEM")).toHaveLength(1)
    expect(count(fnLog, "turn.start")).toBe(1)
    // A dormant record holds only the shared rules; materialized, the agent has its own line too
    // (derived from its node), in its session and in what recovery rebuilds it from.
    const created = fnLog.find((l) => l.event === "agent.created")!
    expect(created.data["instructions"]).toMatch(/^You own the function formatDate in src\/a\.ts \(lines \d+-\d+\); node id src\/a\.ts#function:formatDate\.\nYou are one agent of a swarm/)
    expect(fnLog.find((l) => l.event === "session.created")!.data["system_prompt"]).toBe(created.data["instructions"])
    agents = await agentsOf(home)
    const fileLog = logOf(home, agents.get("src/a.ts#file")!.session_id)
    expect(fileLog.find((l) => l.event === "agent.created")!.data["instructions"]).toMatch(/^You own the file src\/a\.ts \(lines 1-\d+\); node id src\/a\.ts#file\./)
    const withTurns = [...agents.values()].filter((a) => count(logOf(home, a.session_id), "turn.start") > 0).map((a) => a.node_id)
    expect(withTurns).toEqual(["src/a.ts#function:formatDate"])
    // Its ancestors were materialized with it (recovery rebuilds a child under its parent); the rest stay dormant.
    expect(agents.get("src/a.ts#function:other")!.status).toBe("dormant")
    expect(agents.get("main.py#file")!.status).toBe("dormant")
    expect(agents.get("src/a.ts#file")!.status).toBe("idle")

    // Chat with a dormant method's agent, waiting for its answer.
    const chat = await cliJson<{ reply: string | null }>(home, ["swarm", "chat", "src/a.ts#method:User.format", "what do you do?", "--wait"])
    expect(chat.reply).toMatch(/^echo: .*USER.*what do you do\?/)

    // kill -9, then edit while the daemon is down: rename, delete a file, add a class, edit a method.
    const pid = JSON.parse(fs.readFileSync(join(home, "daemon.pid"), "utf8").trim().split("\n")[0]!) as number
    await kill9(pid)
    write(
      repo,
      "src/a.ts",
      A_TS.replace("other()", "other2()").replace('return "u"', 'return "user"') + "\nexport class Admin {\n  ban(): void {}\n}\n"
    )
    fs.rmSync(join(repo, "main.py"))
    owned.track(await startDaemon(home))
    const status = await cliJson<{ swarm: { running: boolean; orphaned: number } }>(home, ["swarm", "status"])
    expect(status.swarm.running).toBe(true)
    agents = await agentsOf(home)
    const statusOf = (id: string) => agents.get(id)?.status
    expect(statusOf("src/a.ts#function:other")).toBe("orphaned")
    expect(statusOf("src/a.ts#function:other2")).toBe("dormant")
    expect(statusOf("main.py#file")).toBe("orphaned")
    expect(statusOf("main.py#function:hello")).toBe("orphaned")
    expect(statusOf("src/a.ts#class:Admin")).toBe("dormant")
    expect(statusOf("src/a.ts#method:Admin.ban")).toBe("dormant")
    expect(status.swarm.orphaned).toBe(3)
    // The edited method (materialized by the chat) has its update notice queued, durably.
    const method = agents.get("src/a.ts#method:User.format")!
    const notices = logOf(home, method.session_id).filter((l) => l.event === "message.enqueued" && l.data["sender"] === "SYSTEM")
    expect(notices).toHaveLength(1)
    expect(notices[0]!.data["kind"]).toBe("notification")
    // The function's agent came back with its history.
    expect(statusOf("src/a.ts#function:formatDate")).toBe("idle")
    expect(count(logOf(home, fn.session_id), "turn.complete")).toBe(1)
    // Chat to an orphan is refused (exit 2, words).
    const refused = await cli(home, ["swarm", "chat", "src/a.ts#function:other", "hi"])
    expect(refused.code).toBe(2)
    expect(refused.stderr).toMatch(/orphaned/)
  }, 180_000)

  it("a trigger acknowledged before a kill -9 mid-turn is answered after the restart", async () => {
    const { home, repo } = fresh()
    write(repo, "lib.py", "def slow():\n    return 1\n")
    fs.mkdirSync(join(home, "scripts"), { recursive: true, mode: 0o700 })
    // The function's turn is held until the test creates `go` (after the restart).
    const go = join(home, "go")
    fs.writeFileSync(join(home, "scripts", "slow.json"), JSON.stringify({
      func_slow: { steps: [{ text: "slow", wait_for: go }], after: "echo" },
      "*": { steps: [{ text: "slow", delay_ms: 4000 }], after: "echo" }
    }))
    owned.track(await startDaemon(home))
    await cliJson(home, ["swarm", "start", repo, "--provider", "scripted:slow"])
    const t = await cliJson<{ message_id: string }>(home, ["swarm", "trigger", "lib.py#function:slow"])
    const agent = (await agentsOf(home)).get("lib.py#function:slow")!
    await waitFor("the turn to start", () => count(logOf(home, agent.session_id), "turn.start") >= 1 ? true : undefined)
    const pid = JSON.parse(fs.readFileSync(join(home, "daemon.pid"), "utf8").trim().split("\n")[0]!) as number
    await kill9(pid)
    expect(count(logOf(home, agent.session_id), "turn.complete")).toBe(0)
    owned.track(await startDaemon(home))
    fs.writeFileSync(go, "")
    await waitFor("the trigger's turn after the restart", () => {
      const log = logOf(home, agent.session_id)
      const done = log.filter((l) => l.event === "turn.complete")
      return done.length >= 1 ? true : undefined
    }, 60_000)
    const starts = logOf(home, agent.session_id).filter((l) => l.event === "turn.start")
    expect(String(starts[starts.length - 1]!.data["prompt"])).toContain(t.message_id)
  }, 120_000)

  it("node agents work in a workspace on the code tree: a turn's edit is recorded as that agent's and does not wake it again; a user's save is the user's", async () => {
    const { home, repo } = fresh()
    write(repo, "src/a.ts", A_TS)
    fs.mkdirSync(join(home, "scripts"), { recursive: true, mode: 0o700 })
    // The function's agent answers its first turn slowly: the test edits its function during that
    // turn, in its workspace (the in-process scripted provider has no file tools; a sandboxed CLI
    // agent edits /workspace the same way).
    fs.writeFileSync(join(home, "scripts", "editor.json"), JSON.stringify({
      func_format_date: { steps: [{ text: "edited formatDate", delay_ms: 1500 }], after: "echo" },
      "*": { steps: [], after: "echo" }
    }))
    owned.track(await startDaemon(home))
    const started = await cliJson<{ workspace_id: string | null }>(home, ["swarm", "start", repo, "--provider", "scripted:editor"])
    expect(started.workspace_id).not.toBeNull()
    const ws = started.workspace_id!
    const listed = await cliJson<{ workspaces: ReadonlyArray<{ id: string; root_path: string }> }>(home, ["workspace", "list"])
    expect(listed.workspaces.find((w) => w.id === ws)?.root_path).toBe(fs.realpathSync(repo))
    const status = await cli(home, ["swarm", "status"])
    expect(status.stdout).toContain(`workspace ${ws}`)

    const agents = await agentsOf(home)
    const fn = agents.get("src/a.ts#function:formatDate")!
    // The node agents have the swarm's workspace (agent list shows each agent's workspace).
    const tree = await cliJson<{ agents: ReadonlyArray<{ id: string; workspace_id: string | null }> }>(home, ["agent", "list"])
    expect(tree.agents.find((a) => a.id === fn.agent_id)?.workspace_id).toBe(ws)

    // A chat to the function's node; during its turn its function body is edited in the workspace.
    await cliJson(home, ["swarm", "chat", "src/a.ts#function:formatDate", "make it return the date only"])
    await waitFor("the function's turn", () => count(logOf(home, fn.session_id), "turn.start") >= 1 ? true : undefined)
    write(repo, "src/a.ts", A_TS.replace("return d.toISOString()", "return d.toISOString().slice(0, 10)"))
    await waitFor("the turn's recorded diff", () => logOf(home, fn.session_id).find((l) => l.event === "workspace.diff")?.data)
    const diff = logOf(home, fn.session_id).find((l) => l.event === "workspace.diff")!.data
    expect(diff["workspace_id"]).toBe(ws)
    expect(diff["paths"]).toEqual([{ path: "src/a.ts", change: "modified" }])
    // Attributed to the node agent and its turn in the workspace's history.
    const turnId = logOf(home, fn.session_id).find((l) => l.event === "turn.start")!.data["turn_id"]
    const log1 = await cliJson<{ turns: ReadonlyArray<{ agent: string; turn_id: string | null }> }>(home, ["workspace", "log", ws])
    expect(log1.turns[0]).toMatchObject({ agent: fn.name, turn_id: turnId })
    // Its own edit did not wake it again, nor anyone else (only formatDate's own text changed).
    await sleep(1500)
    expect(count(logOf(home, fn.session_id), "turn.start")).toBe(1)
    expect(logOf(home, fn.session_id).filter((l) => l.event === "message.enqueued" && l.data["sender"] === "SYSTEM")).toHaveLength(0)

    // The user saves the same function: its agent wakes once, and the save is recorded as the user's.
    write(repo, "src/a.ts", A_TS.replace("return d.toISOString()", "return d.toDateString()"))
    await waitFor("the save's turn", () => count(logOf(home, fn.session_id), "turn.complete") >= 2 ? true : undefined)
    const log2 = await cliJson<{ turns: ReadonlyArray<{ agent: string; subject: string }> }>(home, ["workspace", "log", ws])
    expect(log2.turns[0]).toMatchObject({ agent: "USER", subject: expect.stringContaining("src/a.ts") })
    expect(logOf(home, fn.session_id).filter((l) => l.event === "workspace.diff")).toHaveLength(1)
    expect(logOf(home, fn.session_id).filter((l) => l.event === "message.enqueued" && l.data["sender"] === "SYSTEM")).toHaveLength(1)
  }, 120_000)
  it("a save made the moment swarm.start answers is seen (the watch is in place before the answer)", async () => {
    const { home, repo } = fresh()
    write(repo, "main.py", MAIN_PY)
    // Many directories: the OS watch is set on each, which takes a while after the tree is read.
    for (let i = 0; i < 1500; i++) fs.mkdirSync(join(repo, "data", `d${Math.floor(i / 50)}`, `e${i}`), { recursive: true })
    owned.track(await startDaemon(home))

    await rpcOnce(home, "swarm.start", { path: repo, provider: "scripted:echo" })
    write(repo, "main.py", MAIN_PY.replace("return 1", "return 2"))
    const py = await waitFor("hello's agent woken by the save", async () => {
      const a = (await agentsOf(home)).get("main.py#function:hello")
      return a !== undefined && count(logOf(home, a.session_id), "turn.complete") >= 1 ? a : undefined
    })
    expect(logOf(home, py.session_id).filter((l) => l.event === "message.enqueued" && l.data["sender"] === "SYSTEM")).toHaveLength(1)
  }, 120_000)
})
