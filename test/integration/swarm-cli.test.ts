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
