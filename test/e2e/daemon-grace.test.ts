// Shutdown with a turn in flight (real daemon process, scripted provider with a slow step):
//   - within the grace period the turn finishes and is logged before the session is suspended;
//   - past the grace period the daemon suspends anyway, and the interrupted message is not lost:
//     after a restart it is handed to the agent again and answered.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, daemons, isAlive, startDaemon, waitFor, waitQuiet } from "../integration/daemon.support.js"

const owned = daemons()
const homes: Array<string> = []

afterAll(async () => {
  await owned.killAll()
  for (const h of homes) removeDir(join(h, ".."))
})

interface Line {
  readonly event: string
  readonly data: Record<string, unknown>
}

const newHome = (book: unknown): string => {
  const h = join(makeTmpDir("substrat-grace-"), "home")
  homes.push(h)
  fs.mkdirSync(join(h, "scripts"), { recursive: true, mode: 0o700 })
  fs.chmodSync(h, 0o700)
  fs.writeFileSync(join(h, "scripts", "slow.json"), JSON.stringify(book))
  return h
}

const eventsOf = (home: string, session: string): ReadonlyArray<Line> => {
  const file = join(home, "agents", session, "events.jsonl")
  if (!fs.existsSync(file)) return []
  return fs.readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l) as Line)
}

const sessionState = (home: string, session: string): unknown =>
  (JSON.parse(fs.readFileSync(join(home, "agents", session, "session.json"), "utf8")) as { state: unknown }).state

/** Start a daemon in `home`, create agent `w` on scripted:slow, send it `text`, wait for its turn to start. */
const turnInFlight = async (home: string, graceMs: number, text: string) => {
  const pid = await startDaemon(home, ["--grace-ms", String(graceMs)])
  owned.track(pid)
  const agent = await cliJson<Agent>(home, ["agent", "create", "--name", "w", "--provider", "scripted:slow"])
  await cliJson(home, ["agent", "send", "--notify", "w", text])
  const start = await waitFor("turn.start", () =>
    eventsOf(home, agent.session_id).find((e) => e.event === "turn.start" && String(e.data["prompt"]).includes(text)))
  return { pid, agent, turnId: String(start.data["turn_id"]) }
}

describe("daemon shutdown with a turn in flight", () => {
  it("waits for a running turn within the grace period: the turn completes, then the session is suspended", async () => {
    const home = newHome({ w: { steps: [{ text: "slow turn done", delay_ms: 1500 }], after: "silent" } })
    const { pid, agent, turnId } = await turnInFlight(home, 30_000, "work-before-stop")

    const stop = await cliJson<{ pid: number; stopped: boolean }>(home, ["daemon", "stop"])
    expect(stop).toEqual({ pid, stopped: true })
    expect(isAlive(pid)).toBe(false)

    const events = eventsOf(home, agent.session_id)
    const complete = events.findIndex((e) => e.event === "turn.complete" && e.data["turn_id"] === turnId)
    expect(complete).toBeGreaterThan(-1)
    expect(events[complete]!.data["response"]).toBe("slow turn done")
    // The suspension comes after the turn, and nothing failed on the way down.
    const suspended = events.findIndex((e) => e.event === "suspend.result")
    expect(suspended).toBeGreaterThan(complete)
    expect(events.filter((e) => e.event === "provider.error")).toEqual([])
    expect(sessionState(home, agent.session_id)).toBe("suspended")
    expect(fs.readFileSync(join(home, "daemon.log"), "utf8")).not.toMatch(/grace period of \d+ ms over/)
  })

  it("past the grace period it suspends anyway; after a restart the interrupted message is answered", async () => {
    // First life: the step takes a minute; the daemon gets 300 ms of grace.
    const home = newHome({ w: { steps: [{ text: "never seen", delay_ms: 60_000 }], after: "silent" } })
    const { pid, agent, turnId } = await turnInFlight(home, 300, "work-cut-short")

    const stop = await cliJson<{ pid: number; stopped: boolean }>(home, ["daemon", "stop"])
    expect(stop).toEqual({ pid, stopped: true })
    expect(isAlive(pid)).toBe(false)
    expect(fs.readFileSync(join(home, "daemon.log"), "utf8")).toMatch(/grace period of 300 ms over/)
    const before = eventsOf(home, agent.session_id)
    expect(before.some((e) => e.event === "turn.complete" && e.data["turn_id"] === turnId)).toBe(false)
    expect(sessionState(home, agent.session_id)).toBe("suspended")

    // Second life: the same agent answers at once. The message it never answered comes back.
    fs.writeFileSync(join(home, "scripts", "slow.json"), JSON.stringify({ w: { steps: [], after: "echo" } }))
    owned.track(await startDaemon(home))
    // Recovery first tells the agent its turn was cut short, then hands it the message again.
    await waitFor("the interrupted message run again, to completion", () => {
      const after = eventsOf(home, agent.session_id).slice(before.length)
      const rerun = after.find((e) =>
        e.event === "turn.start" && String(e.data["prompt"]).includes("work-cut-short") && e.data["turn_id"] !== turnId
      )
      return rerun !== undefined &&
          after.some((e) => e.event === "turn.complete" && e.data["turn_id"] === rerun.data["turn_id"])
        ? true
        : undefined
    })
    await waitQuiet(home)
    const { agents } = await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])
    expect(agents.map((a) => a.name)).toEqual(["w"])
    expect((await cli(home, ["daemon", "stop"])).code).toBe(0)
  })
})
