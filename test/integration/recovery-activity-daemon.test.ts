// `agent inspect`'s recent activity through real processes: the scripted demo tree talks, every
// agent is inspected, the daemon is stopped and started (then SIGKILLed and started), and the
// recent turns and messages start-up recovery rebuilds from the logs equal what was shown before.
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { type Agent, cliJson, daemons, isAlive, startDaemon, waitFor, waitQuiet } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-activity-")
const home = join(dir, "home")

afterAll(async () => {
  await owned.killAll()
  removeDir(dir)
})

interface Recent {
  readonly recent_turns: ReadonlyArray<{ turn_id: string; prompt: string; response: string; error: string | null }>
  readonly recent_messages: ReadonlyArray<{ direction: string; peer: string; kind: string; message_id: string; text: string }>
}

const recentOf = async (agents: ReadonlyArray<Agent>) => {
  const out: Record<string, Recent> = {}
  for (const a of agents) {
    const i = await cliJson<Recent>(home, ["agent", "inspect", a.id])
    out[a.name] = { recent_turns: i.recent_turns, recent_messages: i.recent_messages }
  }
  return out
}

describe("recent activity across daemon restarts (real processes)", () => {
  it("agent inspect shows the same recent turns and messages after stop/start and after kill -9", async () => {
    owned.track(await startDaemon(home))
    const lead = await cliJson<Agent>(home, ["agent", "create", "--name", "lead", "--provider", "scripted:demo"])
    await cliJson(home, ["agent", "send", "lead", "Plan the project"])
    await waitQuiet(home)
    await cliJson(home, ["agent", "send", lead.id, "status?", "--notify"])
    const agents = await waitQuiet(home)
    expect(agents.map((a) => a.name).sort()).toEqual(["alice", "bob", "lead"])
    const before = await recentOf(agents)
    // The demo exercises both directions, agents and USER (so equality below means something).
    const dirs = (name: string) => before[name]!.recent_messages.map((m) => `${m.direction}:${m.peer}:${m.kind}`)
    expect(dirs("lead")).toEqual(expect.arrayContaining(["in:alice:response", "in:bob:response", "out:USER:response"]))
    expect(dirs("alice")).toEqual(expect.arrayContaining(["in:lead:request"]))
    expect(before["lead"]!.recent_turns.length).toBe(3)

    await cliJson(home, ["daemon", "stop"])
    owned.track(await startDaemon(home))
    expect(await recentOf(await waitQuiet(home))).toEqual(before)

    const { pid } = await cliJson<{ pid: number }>(home, ["daemon", "status"])
    process.kill(pid, "SIGKILL")
    await waitFor("the daemon gone", () => (isAlive(pid) ? undefined : true), 10_000)
    owned.track(await startDaemon(home))
    expect(await recentOf(await waitQuiet(home))).toEqual(before)
    await cliJson(home, ["daemon", "stop"])
  })
})
