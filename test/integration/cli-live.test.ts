// The CLI's live view and references, through the real `substrat` binary against a real daemon:
// names and unique id prefixes everywhere (resolved by the daemon), terminated agents still
// reachable, `substrat logs [-f] [--tree] [--since]`, `agent list -w` and busy agents' steps, and
// what a follow does when the daemon goes away (exit 3, and where to resume).
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, daemons, launcher, rpcOnce, spawnCli, startDaemon, waitFor, waitQuiet } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-live-")
const home = join(dir, "home")
const script = "/usr/bin/script"

beforeAll(async () => {
  fs.mkdirSync(join(home, "scripts"), { recursive: true })
  // Every turn of a `scripted:slow` agent waits 3 s for "the model" before it answers.
  // slowpoke's first turn waits until the test writes `slowpoke-go` (it is looked at mid-turn).
  fs.writeFileSync(join(home, "scripts", "slow.json"), JSON.stringify({
    slowpoke: { steps: [{ text: "done slowly", wait_for: join(dir, "slowpoke-go") }], after: "echo" },
    "*": { steps: [{ text: "done slowly", delay_ms: 3000 }], after: "repeat-last" }
  }))
  owned.track(await startDaemon(home))
  await cliJson(home, ["agent", "create", "--name", "lead", "--provider", "scripted:demo"])
  await cliJson(home, ["agent", "send", "lead", "Plan the project"])
  await waitQuiet(home)
})

afterAll(async () => {
  await cli(home, ["daemon", "stop"])
  await owned.killAll()
  removeDir(dir)
})

interface Workspace {
  readonly id: string
  readonly name: string | null
  readonly root_path: string
}

describe("references: names and unique id prefixes (resolved by the daemon)", () => {
  it("workspaces, agents and sessions by name or id prefix; an ambiguous prefix lists the candidates (exit 2); errors in words", async () => {
    const ws: Array<Workspace> = []
    // 17 ids: at least two share their first hex digit. The first through the CLI, the others over
    // the admin socket (what `workspace create --json` prints): the commands under test are the lookups.
    ws.push(await cliJson<Workspace>(home, ["workspace", "create", "--name", "w0"]))
    for (let i = 1; i < 17; i++) ws.push(await rpcOnce<Workspace>(home, "workspace.create", { name: `w${i}`, network: false }))
    expect((await cli(home, ["workspace", "log", "w3"])).stdout).toBe("(no recorded turns)\n")
    // Prefixes are judged against every workspace the daemon has (lead's default one too).
    const all = (await cliJson<{ workspaces: ReadonlyArray<Workspace> }>(home, ["workspace", "list"])).workspaces
    expect(all).toHaveLength(ws.length + 1)
    const uniquePrefix = (id: string) => {
      for (let n = 1; n <= id.length; n++) {
        const p = id.slice(0, n)
        if (all.filter((w) => w.id.startsWith(p)).length === 1) return p
      }
      return id
    }
    const w0 = ws[0]!
    const byPrefix = await cliJson<{ workspace: string }>(home, ["workspace", "log", uniquePrefix(w0.id)])
    expect(byPrefix.workspace).toBe(w0.id)

    const digit = "0123456789abcdef".split("").find((d) => all.filter((w) => w.id.startsWith(d)).length >= 2)!
    const shared = all.filter((w) => w.id.startsWith(digit))
    const amb = await cli(home, ["workspace", "log", digit])
    expect(amb.code).toBe(2)
    expect(amb.stderr).toMatch(new RegExp(`^substrat: workspace "${digit}" is ambiguous: ${shared.length} workspace ids start with it: .*; use more of the id\\n$`))
    for (const w of shared) expect(amb.stderr).toContain(`${w.id.slice(0, 12)} ${w.name ?? w.root_path}`)

    const none = await cli(home, ["workspace", "log", "nope"])
    expect([none.code, none.stderr]).toEqual([4, "substrat: no workspace \"nope\"\n"])
    const badWs = await cli(home, ["agent", "create", "--name", "x1", "--workspace", "nope"])
    expect([badWs.code, badWs.stderr]).toEqual([4, "substrat: no workspace \"nope\"\n"])
    const empty = await cli(home, ["workspace", "log", ""])
    expect(empty.code).toBe(2)
    expect(empty.stderr).toContain("expected a workspace: a name, an id or a unique id prefix")
    for (const r of [amb, none, badWs, empty]) expect(r.stderr).not.toMatch(/Brand<|Universally Unique Identifier/)

    const { agents } = await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])
    const lead = agents.find((a) => a.name === "lead")!
    const inspected = await cliJson<{ agent: Agent }>(home, ["agent", "inspect", lead.id.slice(0, 8)])
    expect(inspected.agent.name).toBe("lead")
    const alice = agents.find((a) => a.name === "alice")!
    // A session by id prefix, or by its agent's name.
    expect(await cliJson<{ id: string; state: string }>(home, ["session", "suspend", alice.session_id.slice(0, 8)]))
      .toMatchObject({ id: alice.session_id, state: "suspended" })
    expect(await cliJson<{ id: string; state: string }>(home, ["session", "resume", "alice"])).toMatchObject({ id: alice.session_id })
  })

  it("terminated agents stay reachable: agent list --all, inspect and logs; send says it is terminated", async () => {
    await cliJson(home, ["agent", "create", "--name", "temp", "--provider", "scripted:echo"])
    await cliJson(home, ["agent", "send", "temp", "hi"])
    await waitQuiet(home)
    await cliJson(home, ["agent", "terminate", "temp"])
    expect((await cli(home, ["agent", "list"])).stdout).not.toContain("temp")
    expect((await cli(home, ["agent", "list", "--all"])).stdout).toMatch(/^temp +terminated +scripted:echo /m)
    const inspect = await cli(home, ["agent", "inspect", "temp"])
    expect(inspect.code).toBe(0)
    expect(inspect.stdout).toMatch(/^state +terminated$/m)
    expect(inspect.stdout).toMatch(/^usage +1 turns/m)
    expect((await cli(home, ["agent", "logs", "temp"])).stdout).toMatch(/USER → temp: hi\n/)
    const send = await cli(home, ["agent", "send", "temp", "more"])
    expect(send.code).toBe(4)
    expect(send.stderr).toMatch(/^substrat: agent temp \([0-9a-f]{8}\) is terminated; /)
  })
})

describe("live view", () => {
  it("substrat logs: every agent interleaved, plain when not a terminal; --tree; colours on a terminal unless NO_COLOR", async () => {
    const all = await cli(home, ["logs"])
    expect(all.code).toBe(0)
    expect(all.stdout).toMatch(/^\[\d\d:\d\d:\d\d\] USER +→ lead \(request\): Plan the project$/m)
    expect(all.stdout).toMatch(/^\[\d\d:\d\d:\d\d\] lead +▶ turn: USER: Plan the project$/m)
    expect(all.stdout).toMatch(/^\[\d\d:\d\d:\d\d\] lead +→ alice \(request\): What should we build first\?$/m)
    // Said once: alice's turn shows its text; the reply carrying it says so instead of repeating it.
    expect(all.stdout).toMatch(/^\[\d\d:\d\d:\d\d\] alice +■ turn done: Build the parser first\.$/m)
    expect(all.stdout).toMatch(/^\[\d\d:\d\d:\d\d\] alice +→ lead: ↑ \(the turn's text above\)$/m)
    expect(all.stdout.split("\n").filter((l) => /\] alice +/.test(l) && l.includes("Build the parser first"))).toHaveLength(1)
    expect(all.stdout).not.toContain("\x1b")
    expect(all.stdout).not.toContain("Message from USER")
    // --raw: prompts as the agent read them, and every message's text.
    const raw = await cli(home, ["logs", "--raw"])
    expect(raw.stdout).toMatch(/^\[\d\d:\d\d:\d\d\] lead +▶ turn: Message from USER \(message [0-9a-f-]{36}, reply expected\): ↵ Plan the project$/m)
    expect(raw.stdout).toMatch(/^\[\d\d:\d\d:\d\d\] alice +→ lead: Build the parser first\.$/m)
    // agent inspect: who said what; --raw the prompt as read.
    expect((await cli(home, ["agent", "inspect", "lead"])).stdout).toMatch(/^ {2}> USER: Plan the project/m)
    expect((await cli(home, ["agent", "inspect", "lead", "--raw"])).stdout).toMatch(/^ {2}> Message from USER \(message [0-9a-f-]{36}, reply expected\): ↵ Plan the project/m)
    const tree = await cli(home, ["logs", "--tree", "alice"])
    expect(tree.stdout).toMatch(/^\[\d\d:\d\d:\d\d\] alice +▶ turn: lead: What should we build first\?$/m)
    expect(tree.stdout).not.toMatch(/\] lead +▶/)
    expect(tree.stdout).not.toMatch(/\] bob +▶/)
    const bad = await cli(home, ["logs", "--since", "yesterday-ish"])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toMatch(/^substrat: --since wants start, now, a duration/)

    if (!fs.existsSync(script)) return // util-linux `script` missing: no terminal to test colours under
    const underPty = async (env: Record<string, string>) => {
      const p = spawnCli(home, ["-qefc", `exec ${JSON.stringify(process.execPath)} ${JSON.stringify(launcher)} logs --tree alice`, "/dev/null"], script, [], { SHELL: "/bin/sh", ...env })
      expect(await p.exit).toBe(0)
      return p.out()
    }
    const coloured = await underPty({ TERM: "xterm" })
    expect(coloured).toMatch(/\x1b\[\d+malice +\x1b\[0m ▶ turn/)
    expect(await underPty({ TERM: "xterm", NO_COLOR: "1" })).not.toContain("\x1b[")
    expect(await underPty({ TERM: "dumb" })).not.toContain("\x1b[")
  })

  it("logs -f prints new events; when the daemon goes away it says so and exits 3; --since resumes there after a restart", async () => {
    const f = spawnCli(home, ["logs", "-f", "--since", "1h"])
    await waitFor("backlog", () => (f.out().includes("Plan the project") ? true : undefined))
    await cliJson(home, ["agent", "send", "lead", "live-1"])
    await waitFor("live line", () => (/\] USER +→ lead \(request\): live-1\n/.test(f.out()) ? true : undefined))
    await waitQuiet(home)
    await cli(home, ["daemon", "stop"])
    expect(await f.exit).toBe(3)
    const m = /^substrat: the daemon stopped \(.*daemon\.sock\); once it is back, continue with: substrat logs -f --since (\d+)\n$/.exec(f.err())
    expect(m, f.err()).not.toBeNull()
    owned.track(await startDaemon(home))
    await cliJson(home, ["agent", "send", "lead", "live-2"])
    await waitQuiet(home)
    const resumed = await cli(home, ["logs", "--since", m![1]!])
    expect(resumed.stdout).toMatch(/\] USER +→ lead \(request\): live-2\n/)
    expect(resumed.stdout).not.toContain("live-1")
    expect(resumed.stdout).not.toContain("Plan the project")
  })

  it("agent logs -f: exit 3 with a line when the daemon goes away (not 0 in silence)", async () => {
    const f = spawnCli(home, ["agent", "logs", "-f", "lead"])
    await waitFor("lines", () => (f.out().includes("USER → lead: live-2") ? true : undefined))
    await cli(home, ["daemon", "stop"])
    expect(await f.exit).toBe(3)
    expect(f.err()).toMatch(/^substrat: the daemon stopped \(.*daemon\.sock\)\n$/)
    owned.track(await startDaemon(home))
  })

  it("agent list -w redraws on change; a busy agent shows its elapsed time and step (list, inspect); exit 3 when the daemon goes away", async () => {
    const w = spawnCli(home, ["agent", "list", "-w"])
    await waitFor("first table", () => (/^lead +idle/m.test(w.out()) ? true : undefined))
    await cliJson(home, ["agent", "create", "--name", "slowpoke", "--provider", "scripted:slow"])
    await waitFor("redrawn with slowpoke", () => (/^slowpoke +idle/m.test(w.out()) ? true : undefined))
    await cliJson(home, ["agent", "send", "slowpoke", "take your time"])
    await waitFor("busy in -w", () => (/^slowpoke +busy .* \d+s · waiting for the model$/m.test(w.out()) ? true : undefined))
    const list = await cli(home, ["agent", "list"])
    // USED: the tokens/$ of the agents that used any (the earlier tests' agents did).
    expect(list.stdout).toMatch(/^NAME +STATE +PROVIDER +ROLE +USED +ID +DOING$/m)
    expect(list.stdout).toMatch(/^slowpoke +busy +scripted:slow +\S+ +[0-9a-f-]{36} +\d+s · waiting for the model$/m)
    expect((await cli(home, ["agent", "inspect", "slowpoke"])).stdout).toMatch(/^state +busy \(\d+s · waiting for the model\)$/m)
    fs.writeFileSync(join(dir, "slowpoke-go"), "")
    await waitQuiet(home)
    await waitFor("idle again in -w", () => (w.out().trimEnd().split("\n\n").at(-1)!.match(/^slowpoke +idle/m) ? true : undefined))
    expect(w.out()).not.toContain("\x1b")
    await cli(home, ["daemon", "stop"])
    expect(await w.exit).toBe(3)
    expect(w.err()).toMatch(/^substrat: the daemon stopped/)
    owned.track(await startDaemon(home))
  })
})
