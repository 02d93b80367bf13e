// Crash-loop quarantine with a real daemon (docs/recovery.md, "Crash loops"): an agent whose
// turn is slow (a scripted book with a long delay) is mid-turn each time the daemon is
// SIGKILLed. Start-up recovery re-runs the interrupted turn once; after the second death in a
// row with that agent's turn in flight it stops: the agent is quarantined durably
// (`agent.quarantined` in its log), `agent list` and `doctor` say so, USER gets a notice, and
// no turn of it starts — until `agent resume`, which runs the held turn again.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type Agent, cli, cliJson, daemons, isAlive, sleep, startDaemon, waitFor } from "../integration/daemon.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const owned = daemons()
const dir = makeTmpDir("substrat-crashloop-")
const home = join(dir, "home")

afterAll(async () => {
  await owned.killAll()
  removeDir(dir)
})

interface Line {
  readonly event: string
  readonly data: Record<string, unknown>
}

const logOf = (session: string): ReadonlyArray<Line> => {
  const file = join(home, "agents", session, "events.jsonl")
  if (!fs.existsSync(file)) return []
  return fs.readFileSync(file, "utf8").split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as Line)
}
const count = (session: string, event: string) => logOf(session).filter((l) => l.event === event).length

const start = async () => {
  const pid = await startDaemon(home)
  owned.track(pid)
  return pid
}
const kill9 = async (pid: number) => {
  process.kill(pid, "SIGKILL")
  await waitFor("daemon dead", () => (isAlive(pid) ? undefined : true))
}

describe("crash-loop quarantine", () => {
  it("stops re-running a turn the daemon keeps dying in, tells the user, and resumes on request", async () => {
    fs.mkdirSync(join(home, "scripts"), { recursive: true })
    // Every turn takes a minute: the daemon is always killed in the middle of one.
    fs.writeFileSync(
      join(home, "scripts", "slow.json"),
      JSON.stringify({ "*": { steps: [{ text: "done", delay_ms: 60_000 }], after: "repeat-last" } })
    )
    let pid = await start()
    const a = await cliJson<Agent>(home, ["agent", "create", "--name", "looper", "--provider", "scripted:slow"])
    await cliJson(home, ["agent", "send", "looper", "work"])
    const turnStarts = (n: number) =>
      waitFor(`${n} turn.start`, () => (count(a.session_id, "turn.start") >= n ? true : undefined), 60_000)

    // 1st death mid-turn: recovery re-runs it.
    await turnStarts(1)
    await kill9(pid)
    pid = await start()
    await turnStarts(2)
    // 2nd death in a row in that agent's turn: the next start quarantines it.
    await kill9(pid)
    pid = await start()

    const log = logOf(a.session_id)
    const q = log.filter((l) => l.event === "agent.quarantined")
    expect(q.length).toBe(1)
    expect(q[0]!.data["agent_id"]).toBe(a.id)
    expect(q[0]!.data["attempts"]).toBe(2)
    // The notice to USER, logged in the (root's) log as delivered.
    const notice = log.find((l) =>
      l.event === "message.enqueued" && l.data["recipient"] === "USER" && l.data["sender"] === "SYSTEM"
    )
    expect(String(notice?.data["payload"])).toContain("substrat agent resume looper")

    const listed = await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])
    expect(listed.agents.map((x) => [x.name, x.state])).toEqual([["looper", "quarantined"]])
    const human = await cli(home, ["agent", "list"])
    expect(human.stdout).toContain("looper is quarantined")
    const doctor = await cli(home, ["doctor", "--json"])
    const checks = (JSON.parse(doctor.stdout) as { checks: ReadonlyArray<{ name: string; status: string; detail: string }> }).checks
    expect(checks.find((c) => c.name === "quarantine")).toMatchObject({ status: "warn" })
    expect(checks.find((c) => c.name === "quarantine")?.detail).toContain("looper")

    // Held: a message still gets acknowledged (logged), but no turn starts.
    await cliJson(home, ["agent", "send", "looper", "more"])
    await sleep(1500)
    expect(count(a.session_id, "turn.start")).toBe(2)

    // A restart keeps the quarantine (it is in the log), without a second notice.
    await kill9(pid)
    pid = await start()
    await sleep(1000)
    expect(count(a.session_id, "turn.start")).toBe(2)
    expect(count(a.session_id, "agent.quarantined")).toBe(1)
    expect((await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])).agents[0]?.state).toBe("quarantined")

    // Resume: logged, and the held turns run again.
    const resumed = await cliJson<{ agent_id: string; turns: number }>(home, ["agent", "resume", "looper"])
    expect(resumed.agent_id).toBe(a.id)
    expect(resumed.turns).toBeGreaterThanOrEqual(1)
    expect(count(a.session_id, "agent.resumed")).toBe(1)
    await turnStarts(3)
    expect((await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])).agents[0]?.state).toBe("busy")
    // Not quarantined any more: resume refuses, as invalid input (exit 2).
    const again = await cli(home, ["agent", "resume", "looper"])
    expect(again.code).toBe(2)
    expect(again.stderr).toContain("not quarantined")

    // The count starts over after a resume: one more death re-runs the turn.
    await kill9(pid)
    pid = await start()
    await turnStarts(4)
    expect(count(a.session_id, "agent.quarantined")).toBe(1)
    await kill9(pid)
  }, 240_000)
})
