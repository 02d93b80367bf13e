// Swarm commands from the user's side: `swarm start --provider` on a swarm made with another
// provider is refused in words (its node agents keep theirs), and nothing changes.
import { describe, expect, it } from "vitest"
import { cli, cliJson, startDaemon } from "./daemon.support.js"
import { type SwarmAgent, swarmScope, write } from "./swarm.support.js"

const { owned, fresh } = swarmScope("substrat-swarm-cli-")

describe("swarm start --provider on an existing swarm", () => {
  it("another provider is refused (exit 2, nothing changed); the same one or none restarts it", async () => {
    const { home, repo } = fresh()
    write(repo, "m.py", "def host_from_uri():\n    return 1\n")
    owned.track(await startDaemon(home))
    await cliJson(home, ["swarm", "start", repo, "--provider", "scripted:echo"])
    await cliJson(home, ["swarm", "stop"])

    const other = await cli(home, ["swarm", "start", repo, "--provider", "scripted:demo"])
    expect(other.code).toBe(2)
    expect(other.stderr).toContain("was made with provider scripted:echo and its node agents keep it")
    const status = await cliJson<{ swarm: { provider: string; running: boolean } }>(home, ["swarm", "status"])
    expect(status.swarm).toMatchObject({ provider: "scripted:echo", running: false })

    expect((await cliJson<{ provider: string }>(home, ["swarm", "start", repo, "--provider", "scripted:echo"])).provider).toBe("scripted:echo")
    await cliJson(home, ["swarm", "stop"])
    expect((await cliJson<{ provider: string }>(home, ["swarm", "start", repo])).provider).toBe("scripted:echo")
    const agents = await cliJson<{ agents: ReadonlyArray<SwarmAgent & { provider?: string }> }>(home, ["swarm", "agents"])
    expect(agents.agents.length).toBeGreaterThan(0)
  })
})

describe("agent ls with a swarm", () => {
  it("hides the swarm's node agents unless --swarm or --all; dormant ones show as dormant; names fit a 40-column NAME", async () => {
    const { home, repo } = fresh()
    const long = "a_function_whose_name_is_too_long_for_a_table"
    write(repo, "m.py", `def host_from_uri():\n    return 1\n\ndef ${long}():\n    return 2\n`)
    owned.track(await startDaemon(home))
    await cliJson(home, ["swarm", "start", repo, "--provider", "scripted:echo"])
    await cliJson(home, ["agent", "create", "--name", "lead", "--provider", "scripted:echo"])
    const nodes = (await cliJson<{ agents: ReadonlyArray<SwarmAgent> }>(home, ["swarm", "agents"])).agents
    const hidden = nodes.filter((n) => n.parent !== null)
    expect(hidden.length).toBe(3) // the file and its two functions

    const rows = (text: string) => text.split("\n").filter((l) => l.length > 0)
    const ls = await cli(home, ["agent", "ls"])
    expect(ls.code).toBe(0)
    const names = rows(ls.stdout).slice(1, 3).map((l) => l.split(/ +/)[0])
    expect(names.sort()).toEqual(["lead", "repo"].sort())
    for (const n of hidden) expect(ls.stdout).not.toContain(n.agent_id)
    expect(ls.stdout).toContain("3 swarm node agent(s) not shown: substrat swarm agents lists them, agent ls --swarm shows them here")
    expect((await cli(home, ["agent", "ls", "--quiet"])).stdout.trim().split("\n")).toHaveLength(2)

    for (const flag of ["--swarm", "--all"]) {
      const shown = await cli(home, ["agent", "ls", flag])
      expect(shown.code).toBe(0)
      for (const n of hidden) {
        const row = rows(shown.stdout).find((l) => l.includes(n.agent_id))
        expect(row, `${flag}: ${n.node_id}`).toBeDefined()
        // NAME, then STATE: the node agents never ran.
        expect(row!.slice(0, 40).trimEnd().length).toBeLessThanOrEqual(40)
        expect(row!.slice(40).trim().split(/ +/)[0]).toBe("dormant")
      }
      const longRow = rows(shown.stdout).find((l) => l.includes("func_a_function_whose"))!
      expect(longRow.slice(0, 40)).toMatch(/…$/)
      expect(longRow).not.toContain(long)
      expect(shown.stdout).not.toContain("not shown")
    }

    // --json: every agent, names whole, the dormant ones marked.
    const json = await cliJson<{ agents: ReadonlyArray<{ id: string; name: string }>; details: ReadonlyArray<{ agent_id: string; dormant?: boolean }> }>(
      home,
      ["agent", "ls"]
    )
    expect(json.agents.map((a) => a.name)).toContain(`func_${long}`)
    const dormant = new Set(json.details.filter((d) => d.dormant === true).map((d) => d.agent_id))
    expect(hidden.every((n) => dormant.has(n.agent_id))).toBe(true)
  })
})

describe("addressing a swarm node by symbol", () => {
  it("swarm chat and agent send find: take the symbol or path:symbol; a miss says did you mean (exit 2)", async () => {
    const { home, repo } = fresh()
    write(repo, "net/uri.py", "def host_from_uri():\n    return 1\n\ndef port_from_uri():\n    return 2\n")
    owned.track(await startDaemon(home))
    await cliJson(home, ["swarm", "start", repo, "--provider", "scripted:echo"])
    const nodes = (await cliJson<{ agents: ReadonlyArray<SwarmAgent> }>(home, ["swarm", "agents"])).agents
    const fn = nodes.find((n) => n.node_id === "net/uri.py#function:host_from_uri")!

    const chat = await cli(home, ["swarm", "chat", "host_from_uri", "who are you?", "--wait"])
    expect([chat.code, chat.stderr]).toEqual([0, ""])
    expect(chat.stdout).toContain("who are you?")
    expect((await cliJson<{ agent_id: string }>(home, ["swarm", "chat", "net/uri.py:host_from_uri", "again"])).agent_id).toBe(fn.agent_id)
    expect((await cliJson<{ agent_id: string }>(home, ["agent", "send", "find:host_from_uri", "from the CLI"])).agent_id).toBe(fn.agent_id)
    expect((await cliJson<{ agent_id: string }>(home, ["agent", "send", "find:net/uri.py:host_from_uri", "by path"])).agent_id).toBe(fn.agent_id)

    const miss = await cli(home, ["swarm", "chat", "host_from_url", "hi"])
    expect(miss.code).toBe(2)
    expect(miss.stderr).toContain("no swarm node host_from_url; did you mean host_from_uri")
    const sendMiss = await cli(home, ["agent", "send", "find:port_form_uri", "hi"])
    expect(sendMiss.code).toBe(2)
    expect(sendMiss.stderr).toContain("did you mean port_from_uri")
  })
})
