// requires: git
// Every CLI command through the real `substrat` binary in a child process, against one real
// daemon, asserting on `--json` output (and on files on disk where that is the outcome).
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import {
  type Agent,
  cli,
  cliJson,
  daemons,
  type Inspect,
  launcher,
  sleep,
  spawnCli,
  startDaemon,
  waitFor,
  waitQuiet
} from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-cli-")
const home = join(dir, "home")
let team: ReadonlyArray<Agent> = []
const byName = (n: string) => team.find((a) => a.name === n)!

interface SessionInfo {
  readonly id: string
  readonly state: string
  readonly agent_id: string | null
  readonly agent_name: string | null
}

beforeAll(async () => {
  owned.track(await startDaemon(home))
  const lead = await cliJson<Agent>(home, ["agent", "create", "--name", "lead", "--provider", "scripted:demo", "--instructions", "Lead the team."])
  expect(lead).toMatchObject({ name: "lead", provider: "scripted:demo", parent_id: null, instructions: "Lead the team." })
  const sent = await cliJson<{ message_id: string; agent_id: string }>(home, ["agent", "send", "lead", "Plan the project"])
  expect(sent.agent_id).toBe(lead.id)
  expect(sent.message_id).toMatch(/^[0-9a-f-]{36}$/)
  team = await waitQuiet(home)
})

afterAll(async () => {
  await cli(home, ["daemon", "stop"])
  await owned.killAll()
  removeDir(dir)
})

describe("substrat CLI ↔ daemon (real processes, --json)", () => {
  it("agent list: the demo tree (lead → alice, bob)", async () => {
    const { agents } = await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])
    const lead = agents.find((a) => a.name === "lead")!
    expect(agents.filter((a) => a.parent_id === lead.id).map((a) => a.name).sort()).toEqual(["alice", "bob"])
    expect(agents.every((a) => a.state === "idle")).toBe(true)
    const text = await cli(home, ["agent", "list"])
    expect(text.stdout).toMatch(/^lead .*\n├─ alice .*\n└─ bob /m)
  })

  it("agent inspect: parent, children, usage, recent activity", async () => {
    const i = await cliJson<Inspect & { usage: { own: { turns: number } }; recent_turns: ReadonlyArray<unknown> }>(home, ["agent", "inspect", "alice"])
    expect(i.agent.name).toBe("alice")
    expect(i.parent).toBe("lead")
    expect(i.usage.own.turns).toBeGreaterThanOrEqual(1)
    expect(i.recent_turns.length).toBeGreaterThanOrEqual(1)
    const lead = await cliJson<Inspect>(home, ["agent", "inspect", byName("lead").id])
    expect(lead.children.map((c) => c.name).sort()).toEqual(["alice", "bob"])
  })

  it("agent logs: transcript.txt in the seed 000 §9 format, for sender and recipient", async () => {
    const lead = await cli(home, ["agent", "logs", "lead"])
    expect(lead.code).toBe(0)
    expect(lead.stdout).toMatch(/^\[\d\d:\d\d:\d\d\] USER → lead: Plan the project$/m)
    expect(lead.stdout).toMatch(/^\[\d\d:\d\d:\d\d\] lead → alice: What should we build first\?$/m)
    expect(lead.stdout).toMatch(/^\[\d\d:\d\d:\d\d\] alice → lead: Build the parser first\.$/m)
    expect(lead.stdout).toMatch(/^\[\d\d:\d\d:\d\d\] lead → USER: Both workers answered; the team is done\.$/m)
    // The broadcast reached bob; both sides' transcripts show it.
    const bob = await cli(home, ["agent", "logs", "bob"])
    expect(bob.stdout).toMatch(/alice → bob: alice here: I am starting on the parser\./)
    expect((await cli(home, ["agent", "logs", "alice"])).stdout).toMatch(/alice → bob: alice here/)
    // The file on disk is what the command printed.
    expect(fs.readFileSync(join(home, "agents", byName("lead").session_id, "transcript.txt"), "utf8")).toBe(lead.stdout)
  })

  it("agent logs -f follows new lines until interrupted", async () => {
    const f = spawnCli(home, ["agent", "logs", "-f", "lead"])
    await waitFor("existing lines", () => (f.out().includes("USER → lead: Plan the project") ? true : undefined))
    await cliJson(home, ["agent", "send", "lead", "follow-me-1"])
    await waitFor("new line", () => (f.out().includes("USER → lead: follow-me-1") ? true : undefined))
    f.child.kill("SIGINT")
    expect(await f.exit).toBe(0)
    // No line printed twice.
    const lines = f.out().trim().split("\n")
    expect(new Set(lines).size).toBe(lines.length)
    await waitQuiet(home)
  })

  it("agent attach with piped stdin: output streams, each line is a message, /quit detaches, agent stays", async () => {
    const a = spawnCli(home, ["agent", "attach", "lead"])
    await waitFor("attached", () => (a.err().includes("attached to lead") ? true : undefined))
    a.child.stdin!.write("ping-from-attach\n")
    await waitFor("reply streamed", () => (/\] lead: echo: USER: ping-from-attach\n/.test(a.out()) ? true : undefined))
    expect(a.out()).toMatch(/▶ lead turn: USER: ping-from-attach\n/)
    // The daemon's prompt wrapper is not shown, and the reply is shown once (not as text and again as a message).
    expect(a.out()).not.toContain("Message from USER")
    expect(a.out().split("echo: USER: ping-from-attach").length - 1).toBe(1)
    a.child.stdin!.write("/quit\n")
    expect(await a.exit).toBe(0)
    expect(a.err()).toMatch(/detached/)
    const { agents } = await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])
    expect(agents.map((x) => x.name)).toContain("lead")
    expect((await cli(home, ["agent", "logs", "lead"])).stdout).toMatch(/USER → lead: ping-from-attach/)
    await waitQuiet(home)
  })

  it("agent attach --read-only: stdin at EOF does not detach; output streams until Ctrl-C", async () => {
    const a = spawnCli(home, ["agent", "attach", "lead", "--read-only"])
    a.child.stdin!.end()
    await waitFor("watching", () => (a.err().includes("watching lead") ? true : undefined))
    await cliJson(home, ["agent", "send", "lead", "ro-ping"])
    await waitFor("reply", () => (a.out().includes("lead: echo: USER: ro-ping") ? true : undefined))
    a.child.kill("SIGINT")
    expect(await a.exit).toBe(0)
    expect(a.err()).toMatch(/^detached$/m)
    await waitQuiet(home)
  })

  it("agent attach REPL through a pseudo-terminal: prompt, history, /status, /help, Ctrl-C detaches, agent stays", async () => {
    const script = "/usr/bin/script"
    if (!fs.existsSync(script)) return // util-linux `script` not installed: the piped-stdin test covers attach
    // `script -c` runs the command through $SHELL (or /bin/sh). dash stays as the parent of a
    // `-c` command and dies of the terminal's SIGINT itself (exit 130), so `exec` the CLI: the
    // process on the pty's foreground is then the CLI alone, as under an interactive shell.
    const a = spawnCli(home, ["-qefc", `exec ${JSON.stringify(process.execPath)} ${JSON.stringify(launcher)} agent attach lead`, "/dev/null"], script, [], { SHELL: "/bin/sh" })
    await waitFor("attached", () => (a.out().includes("attached to lead") ? true : undefined))
    await waitFor("prompt", () => (a.out().includes("lead> ") ? true : undefined))
    const count = (s: string) => a.out().split(s).length - 1
    a.child.stdin!.write("ping-from-pty\r")
    await waitFor("reply", () => (count("lead: echo: USER: ping-from-pty") === 1 ? true : undefined))
    // Up-arrow recalls the line (readline history), Enter sends it again: no "^[[A" reaches the agent.
    a.child.stdin!.write("\x1b[A")
    await sleep(300)
    a.child.stdin!.write("\r")
    await waitFor("second reply", () => (count("lead: echo: USER: ping-from-pty") === 2 ? true : undefined))
    a.child.stdin!.write("/status\r")
    await waitFor("status", () => (/lead \([0-9a-f]{8}\): (idle|busy)/.test(a.out()) ? true : undefined))
    a.child.stdin!.write("/help\r")
    await waitFor("help", () => (a.out().includes("/quit     detach") ? true : undefined))
    a.child.stdin!.write("\x03")
    expect(await a.exit).toBe(0)
    expect(a.out()).toMatch(/detached/)
    expect(a.out()).not.toContain("Message from USER")
    expect(count("▶ lead turn: USER: ping-from-pty")).toBe(2)
    const logs = (await cli(home, ["agent", "logs", "lead"])).stdout
    expect(logs.split("USER → lead: ping-from-pty\n").length - 1).toBe(2)
    expect(logs).not.toContain("\x1b")
    const { agents } = await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])
    expect(agents.map((x) => x.name)).toContain("lead")
    await waitQuiet(home)
  })

  it("session list / suspend / resume", async () => {
    const { sessions } = await cliJson<{ sessions: ReadonlyArray<SessionInfo> }>(home, ["session", "list"])
    expect(sessions.map((s) => s.agent_name).sort()).toEqual(["alice", "bob", "lead"])
    const alice = sessions.find((s) => s.agent_name === "alice")!
    expect(alice.agent_id).toBe(byName("alice").id)
    const suspended = await cliJson<SessionInfo>(home, ["session", "suspend", alice.id])
    expect(suspended).toMatchObject({ id: alice.id, state: "suspended" })
    const record = JSON.parse(fs.readFileSync(join(home, "agents", alice.id, "session.json"), "utf8")) as { state: string }
    expect(record.state).toBe("suspended")
    const resumed = await cliJson<SessionInfo>(home, ["session", "resume", alice.id])
    expect(resumed).toMatchObject({ id: alice.id, state: "active" })
  })

  it("agent terminate, then session delete of its session", async () => {
    const bob = byName("bob")
    const t = await cliJson<{ agent_id: string; terminated: ReadonlyArray<string> }>(home, ["agent", "terminate", "bob"])
    expect(t).toEqual({ agent_id: bob.id, terminated: [bob.id] })
    const { agents } = await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])
    expect(agents.map((a) => a.name)).not.toContain("bob")
    const log = fs.readFileSync(join(home, "agents", bob.session_id, "events.jsonl"), "utf8")
    expect(log).toMatch(/"event":"agent.terminated"/)
    const d = await cliJson<{ session: string; deleted: boolean }>(home, ["session", "delete", bob.session_id])
    expect(d).toEqual({ session: bob.session_id, deleted: true })
    expect(fs.existsSync(join(home, "agents", bob.session_id, "events.jsonl"))).toBe(false)
    const { sessions } = await cliJson<{ sessions: ReadonlyArray<SessionInfo> }>(home, ["session", "list"])
    expect(sessions.map((s) => s.id)).not.toContain(bob.session_id)
  })

  it("workspace create / list / link / delete", async () => {
    const w = await cliJson<{ id: string; root_path: string; network_access: boolean }>(home, ["workspace", "create", "--name", "ws1"])
    expect(fs.statSync(w.root_path).isDirectory()).toBe(true)
    expect(w.network_access).toBe(false)
    const { workspaces } = await cliJson<{ workspaces: ReadonlyArray<{ id: string }> }>(home, ["workspace", "list"])
    expect(workspaces.map((x) => x.id)).toContain(w.id)
    const hostDir = join(dir, "host-data")
    fs.mkdirSync(hostDir)
    const linked = await cliJson<{ symlinks: ReadonlyArray<{ host_path: string; mount_path: string; mode: string }> }>(home, ["workspace", "link", w.id, hostDir, "data", "--rw"])
    expect(linked.symlinks).toEqual([{ host_path: hostDir, mount_path: "data", mode: "rw" }])
    const spec = JSON.parse(fs.readFileSync(join(home, "workspaces", w.id, "workspace.json"), "utf8")) as { symlinks: ReadonlyArray<unknown> }
    expect(spec.symlinks).toHaveLength(1)
    expect(await cliJson(home, ["workspace", "delete", w.id])).toEqual({ workspace: w.id, deleted: true, removed: [w.id] })
    expect(fs.existsSync(join(home, "workspaces", w.id))).toBe(false)
  })

  it("daemon status --json counts agents and sessions", async () => {
    const s = await cliJson<{ agents: number; sessions: number; slots: number }>(home, ["daemon", "status"])
    expect(s.agents).toBe(2) // lead, alice (bob terminated)
    expect(s.sessions).toBe(2)
    expect(s.slots).toBe(4)
  })

  it("errors: one line, distinct exit codes (not found 4, invalid input 2)", async () => {
    const cases: ReadonlyArray<readonly [ReadonlyArray<string>, number]> = [
      [["agent", "inspect", "00000000-0000-4000-8000-000000000000"], 4],
      [["agent", "send", "nobody", "hi"], 4],
      [["agent", "terminate", "nobody"], 4],
      [["agent", "logs", "nobody"], 4],
      [["session", "suspend", "00000000-0000-4000-8000-000000000000"], 4],
      [["workspace", "delete", "00000000-0000-4000-8000-000000000000"], 4],
      // A reference that names nothing (not an id, name or id prefix of anything) is not found.
      [["session", "suspend", "not-a-uuid"], 4],
      [["agent", "create", "--name", "bad name!"], 2],
      [["agent", "create", "--name", "x", "--provider", "no-such-provider"], 2],
      [["agent", "create", "--name", "lead", "--provider", "scripted"], 2], // duplicate root name
      [["workspace", "link", "00000000-0000-4000-8000-000000000000", "/tmp", "x", "--ro", "--rw"], 2],
      [["agent", "frobnicate"], 2],
      // Arguments the daemon's Schemas would refuse are refused by the CLI: readable, exit 2.
      [["agent", "send", "", "hi"], 2],
      [["agent", "send", "x".repeat(300), "hi"], 2],
      [["agent", "inspect", "x".repeat(300)], 2],
      [["agent", "create", "--name", "w", "--workspace", "not-a-uuid"], 4],
      [["session", "list", "--after", "not-a-uuid"], 2],
      [["session", "list", "--limit", "0"], 2]
    ]
    for (const [args, code] of cases) {
      const r = await cli(home, args)
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(code)
      expect(r.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1)
      expect(r.stderr, args.join(" ")).toMatch(/^substrat: /)
      expect(r.stderr, args.join(" ")).not.toMatch(/internal error|ParseError/)
    }
  })

  it("--help on every command, and shell completions", async () => {
    const paths = [
      [], ["daemon"], ["daemon", "start"], ["daemon", "stop"], ["daemon", "status"], ["daemon", "run"],
      ["agent"], ["agent", "create"], ["agent", "list"], ["agent", "send"], ["agent", "attach"], ["agent", "inspect"],
      ["agent", "terminate"], ["agent", "logs"], ["session"], ["session", "list"], ["session", "suspend"],
      ["session", "resume"], ["session", "delete"], ["workspace"], ["workspace", "create"], ["workspace", "list"],
      ["workspace", "link"], ["workspace", "delete"]
    ]
    // A few at a time: two cores are shared with the other suites.
    for (let i = 0; i < paths.length; i += 4) {
      const batch = paths.slice(i, i + 4)
      const results = await Promise.all(batch.map((p) => cli(home, [...p, "--help"])))
      results.forEach((r, j) => {
        expect(r.code, batch[j]!.join(" ")).toBe(0)
        expect(r.stdout, batch[j]!.join(" ")).toContain(`USAGE\n  ${["substrat", ...batch[j]!].join(" ")}`)
      })
    }
    for (const shell of ["bash", "zsh", "fish"]) {
      const r = await cli(home, ["--completions", shell])
      expect(r.code).toBe(0)
      expect(r.stdout).toContain("substrat")
      expect(r.stdout).toContain(" __complete ")
    }
    expect((await cli(home, ["--version"])).stdout).toMatch(/^substrat \d+\.\d+\.\d+\n$/)
  })

  it("agent attach ends when its agent is terminated: the last line says so, exit 0", async () => {
    await cliJson(home, ["agent", "create", "--name", "doomed", "--provider", "scripted:echo"])
    const a = spawnCli(home, ["agent", "attach", "doomed", "--read-only"])
    a.child.stdin!.end()
    await waitFor("watching", () => (a.err().includes("watching doomed") ? true : undefined))
    expect((await cli(home, ["agent", "terminate", "doomed"])).code).toBe(0)
    expect(await a.exit).toBe(0)
    expect(a.out()).toMatch(/\* doomed terminated\n$/)
  })
})
