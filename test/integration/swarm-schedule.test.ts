// Cron triggers and `swarm log` through a real daemon and CLI (docs/swarm.md, "Schedules" and
// "swarm log"): `swarm start --cron` wakes the root directory's agent on its ticks; a node's
// schedule survives kill -9, and a tick missed while the daemon was down fires once at start;
// bad expressions are refused with nothing changed; `swarm log` lists each node's turns; the same
// over HTTP (`/swarm/schedules`, `/swarm/agents/{id}/schedule`, `/swarm/log`); an orphaned node's
// schedule is dropped when the restarted daemon's reconcile orphans it.
import * as fs from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { cli, cliJson, kill9, sleep, startDaemon, waitFor } from "./daemon.support.js"
import { request } from "./http.support.js"
import { logOf, type SwarmAgent, swarmScope } from "./swarm.support.js"

const { owned, fresh: freshDirs } = swarmScope("substrat-swarm-cron-")
interface Schedule {
  readonly node: string
  readonly cron: string
  readonly last: string | null
  readonly next: string
}

/** The tick of every scheduled trigger in an agent's log, in order. */
const ticksIn = (home: string, session: string): Array<string> =>
  logOf(home, session).filter((l) => l.event === "message.enqueued" && l.data["sender"] === "SYSTEM")
    .flatMap((l) => /on schedule "[^"]*", tick (\S+)\)/.exec(String(l.data["payload"]))?.slice(1, 2) ?? [])

const fresh = () => {
  const { home, repo } = freshDirs()
  fs.mkdirSync(join(repo, "src"), { recursive: true })
  fs.writeFileSync(join(repo, "src", "a.ts"), "export function tick(): number {\n  return 1\n}\n")
  return { home, repo }
}

describe("swarm schedules and swarm log (real daemon)", () => {
  it("start --cron wakes the root directory's agent; bad expressions refused; swarm log lists the turns", async () => {
    const { home, repo } = fresh()
    owned.track(await startDaemon(home))
    const bad = await cli(home, ["swarm", "start", repo, "--provider", "scripted:echo", "--cron", "every minute"])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain("is not a cron expression")
    expect((await cliJson<{ swarm: unknown }>(home, ["swarm", "status"])).swarm).toBeNull()

    await cliJson(home, ["swarm", "start", repo, "--provider", "scripted:echo", "--cron", "*/2 * * * * *"])
    const agents = new Map((await cliJson<{ agents: ReadonlyArray<SwarmAgent> }>(home, ["swarm", "agents"])).agents.map((a) => [a.node_id, a]))
    const root = agents.get(".#dir")!
    const fn = agents.get("src/a.ts#function:tick")!
    await waitFor("two scheduled turns of the root's agent", () =>
      logOf(home, root.session_id).filter((l) => l.event === "turn.complete").length >= 2 ? true : undefined, 60_000)
    const ticks = ticksIn(home, root.session_id)
    expect(new Set(ticks).size).toBe(ticks.length)
    for (const t of ticks) expect(new Date(t).getUTCSeconds() % 2).toBe(0)
    const list = await cliJson<{ schedules: ReadonlyArray<Schedule> }>(home, ["swarm", "schedules"])
    expect(list.schedules).toMatchObject([{ node: ".#dir", cron: "*/2 * * * * *" }])

    const badNode = await cli(home, ["swarm", "schedule", fn.node_id, "nope"])
    expect(badNode.code).toBe(2)
    expect((await cliJson<{ schedules: ReadonlyArray<Schedule> }>(home, ["swarm", "schedules"])).schedules).toHaveLength(1)
    const unknown = await cli(home, ["swarm", "schedule", "src/zzz.ts#file", "* * * * *"])
    expect(unknown.code).toBe(4)
    const un = await cliJson<Schedule>(home, ["swarm", "unschedule", "."])
    expect(un.node).toBe(".#dir")
    expect((await cliJson<{ schedules: ReadonlyArray<Schedule> }>(home, ["swarm", "schedules"])).schedules).toEqual([])

    // swarm log: the root's turns; the dormant function has none (listed when asked for).
    await cliJson(home, ["swarm", "chat", fn.node_id, "hello", "--wait"])
    const log = await cliJson<{ nodes: ReadonlyArray<{ node_id: string; turns: ReadonlyArray<{ outcome: string; prompt: string; changes: ReadonlyArray<unknown> }> }> }>(home, ["swarm", "log"])
    const byNode = new Map(log.nodes.map((n) => [n.node_id, n]))
    expect(byNode.get(".#dir")!.turns.length).toBeGreaterThanOrEqual(2)
    expect(byNode.get(".#dir")!.turns[0]!.prompt).toContain("on schedule")
    expect(byNode.get(fn.node_id)!.turns).toMatchObject([{ outcome: "complete", prompt: expect.stringContaining("hello") }])
    expect(byNode.has("src/a.ts#file")).toBe(false) // materialized as the function's ancestor, no turn
    const one = await cliJson<{ nodes: ReadonlyArray<{ node_id: string; turns: ReadonlyArray<unknown> }> }>(home, ["swarm", "log", "src/a.ts#file"])
    expect(one.nodes).toMatchObject([{ node_id: "src/a.ts#file", turns: [] }])
    const text = await cli(home, ["swarm", "log", fn.node_id])
    expect(text.code).toBe(0)
    expect(text.stdout).toContain(`${fn.node_id}  func_tick`)
    expect(text.stdout).toContain("complete")
  }, 180_000)

  it("a node's schedule survives kill -9; the tick missed while the daemon was down fires once at start", async () => {
    const { home, repo } = fresh()
    let pid = await startDaemon(home)
    owned.track(pid)
    await cliJson(home, ["swarm", "start", repo, "--provider", "scripted:echo"])
    const fn = (await cliJson<SwarmAgent>(home, ["swarm", "agents"]) as unknown as { agents: ReadonlyArray<SwarmAgent> }).agents
      .find((a) => a.node_id === "src/a.ts#function:tick")!
    await cliJson(home, ["swarm", "schedule", fn.node_id, "*/5 * * * * *"])
    // The first tick fired and its `last` is saved: then kill -9.
    const schedulesFile = join(home, "swarm", "schedules.json")
    const first = await waitFor("the first tick saved", () => {
      const ticks = ticksIn(home, fn.session_id)
      const saved = JSON.parse(fs.readFileSync(schedulesFile, "utf8")) as { schedules: ReadonlyArray<Schedule> }
      return ticks.length >= 1 && saved.schedules[0]?.last === ticks[0] ? ticks[0] : undefined
    }, 60_000)
    await kill9(pid)
    // Killed before the next tick: that one is missed while the daemon is down.
    expect(ticksIn(home, fn.session_id)).toEqual([first])
    const missed = new Date(new Date(first).getTime() + 5_000)
    while (Date.now() < missed.getTime() + 1000) await sleep(200)

    pid = await startDaemon(home)
    owned.track(pid)
    await waitFor("the missed tick fired", () => ticksIn(home, fn.session_id).includes(missed.toISOString()) ? true : undefined, 60_000)
    await waitFor("its turn", () => logOf(home, fn.session_id).filter((l) => l.event === "turn.complete").length >= 2 ? true : undefined, 60_000)
    const ticks = ticksIn(home, fn.session_id)
    // Each tick once; the missed one exactly once; the first was not repeated.
    expect(new Set(ticks).size).toBe(ticks.length)
    expect(ticks.slice(0, 2)).toEqual([first, missed.toISOString()])
    const list = await cliJson<{ schedules: ReadonlyArray<Schedule> }>(home, ["swarm", "schedules"])
    expect(list.schedules).toMatchObject([{ node: fn.node_id, cron: "*/5 * * * * *" }])
  }, 180_000)

  it("swarm log: a node turn's edit in the code-tree workspace shows as that turn's changed files", async () => {
    const { home, repo } = fresh()
    fs.mkdirSync(join(home, "scripts"), { recursive: true, mode: 0o700 })
    // The function's first turn is slow: the test edits the function during it, in the workspace
    // (the in-process scripted provider has no file tools; a sandboxed CLI agent edits the same way).
    fs.writeFileSync(join(home, "scripts", "slow.json"), JSON.stringify({
      func_tick: { steps: [{ text: "edited tick", delay_ms: 1500 }], after: "echo" },
      "*": { steps: [], after: "echo" }
    }))
    owned.track(await startDaemon(home))
    await cliJson(home, ["swarm", "start", repo, "--provider", "scripted:slow"])
    const fn = (await cliJson<{ agents: ReadonlyArray<SwarmAgent> }>(home, ["swarm", "agents"])).agents.find((a) => a.node_id === "src/a.ts#function:tick")!
    await cliJson(home, ["swarm", "chat", fn.node_id, "return 2"])
    await waitFor("the function's turn", () => logOf(home, fn.session_id).some((l) => l.event === "turn.start") ? true : undefined)
    fs.writeFileSync(join(repo, "src", "a.ts"), "export function tick(): number {\n  return 2\n}\n")
    await waitFor("the turn's recorded diff", () => logOf(home, fn.session_id).some((l) => l.event === "workspace.diff") ? true : undefined, 60_000)

    const r = await cliJson<{ nodes: ReadonlyArray<{ node_id: string; turns: ReadonlyArray<{ turn_id: string; outcome: string; commit: string | null; changes: ReadonlyArray<{ path: string; change: string }> }> }> }>(home, ["swarm", "log"])
    const turnId = String(logOf(home, fn.session_id).find((l) => l.event === "turn.start")!.data["turn_id"])
    const mine = r.nodes.find((n) => n.node_id === fn.node_id)!
    expect(mine.turns).toMatchObject([{ turn_id: turnId, outcome: "complete", commit: expect.any(String), changes: [{ path: "src/a.ts", change: "modified" }] }])
    const text = await cli(home, ["swarm", "log", "func_tick"])
    expect(text.code).toBe(0)
    expect(text.stdout).toContain("1 file(s) changed")
    expect(text.stdout).toContain("M src/a.ts")
  }, 120_000)

  it("HTTP: schedules set/list/remove and swarm log as the CLI's --json; a bad cron 400; an orphaned node's schedule dropped at restart", async () => {
    const { home, repo } = fresh()
    fs.writeFileSync(join(repo, "src", "b.ts"), "export function gone(): number {\n  return 3\n}\n")
    let pid = await startDaemon(home)
    owned.track(pid)
    const t = { socketPath: join(home, "http.sock") }
    await cliJson(home, ["swarm", "start", repo, "--provider", "scripted:echo"])
    const fn = "src/a.ts#function:tick"
    const gone = "src/b.ts#function:gone"
    const at = (node: string, rest: string) => `/swarm/agents/${encodeURIComponent(node)}/${rest}`
    interface ErrorBody { readonly error: { readonly _tag: string; readonly code: number; readonly message: string } }
    const schedulesFile = join(home, "swarm", "schedules.json")

    // A bad cron: 400 with the CLI's words, nothing saved.
    const bad = await request(t, "PUT", at(fn, "schedule"), { cron: "every minute" })
    expect(bad.status).toBe(400)
    const badErr = bad.json<ErrorBody>().error
    expect(badErr).toMatchObject({ _tag: "InvalidInput", message: expect.stringContaining(`"every minute" is not a cron expression`) })
    const cliBad = await cli(home, ["swarm", "schedule", fn, "every minute"])
    expect(cliBad.code).toBe(2)
    expect(cliBad.stderr).toContain(badErr.message)
    expect((await request(t, "PUT", at(fn, "schedule"), {})).status).toBe(400)
    expect((await request(t, "PUT", at("src/zzz.ts#file", "schedule"), { cron: "* * * * *" })).status).toBe(404)
    expect(fs.existsSync(schedulesFile)).toBe(false)
    const none = await request(t, "GET", "/swarm/schedules")
    expect(none.status).toBe(200)
    expect(none.json()).toEqual({ schedules: [] })

    // Set (a tick far away: none fires during the test), list, remove.
    const yearly = "0 0 1 1 *"
    const set = await request(t, "PUT", at(fn, "schedule"), { cron: yearly })
    expect(set.status).toBe(200)
    expect(set.json()).toMatchObject({ node: fn, cron: yearly, last: null, next: expect.any(String) })
    expect((await request(t, "PUT", at(gone, "schedule"), { cron: yearly })).status).toBe(200)
    const listed = await request(t, "GET", "/swarm/schedules")
    expect(listed.status).toBe(200)
    expect(listed.json<{ schedules: ReadonlyArray<Schedule> }>().schedules.map((s) => s.node)).toEqual([fn, gone])
    expect(listed.json()).toEqual(await cliJson(home, ["swarm", "schedules"]))
    const del = await request(t, "DELETE", at(fn, "schedule"))
    expect(del.status).toBe(200)
    expect(del.json()).toMatchObject({ node: fn, cron: yearly })
    const again = await request(t, "DELETE", at(fn, "schedule"))
    expect(again.status).toBe(404)
    expect(again.json<ErrorBody>().error).toMatchObject({ _tag: "NotFound", message: expect.stringContaining(`no schedule for ${fn}`) })
    expect((await request(t, "GET", "/swarm/schedules")).json<{ schedules: ReadonlyArray<Schedule> }>().schedules.map((s) => s.node)).toEqual([gone])

    // swarm log: the same JSON as `swarm log --json`, whole and per node.
    await cliJson(home, ["swarm", "chat", fn, "hello", "--wait"])
    const log = await waitFor("the HTTP log as the CLI's", async () => {
      const r = await request(t, "GET", "/swarm/log")
      return r.status === 200 && JSON.stringify(r.json()) === JSON.stringify(await cliJson(home, ["swarm", "log"])) ? r.json<{ nodes: ReadonlyArray<{ node_id: string; turns: ReadonlyArray<unknown> }> }>() : undefined
    })
    expect(log.nodes.find((n) => n.node_id === fn)!.turns).toMatchObject([{ outcome: "complete", prompt: expect.stringContaining("hello") }])
    const one = await request(t, "GET", at(fn, "log"))
    expect(one.status).toBe(200)
    expect(one.json()).toEqual(await cliJson(home, ["swarm", "log", fn]))
    expect(one.json()).toMatchObject({ nodes: [{ node_id: fn, turns: [{ outcome: "complete" }] }] })
    expect((await request(t, "GET", at("src/zzz.ts#file", "log"))).status).toBe(404)

    // The function of b.ts goes while the daemon is down: the restart's reconcile orphans it and
    // its schedule is dropped (a daemon log line); a's schedule stays.
    expect((await request(t, "PUT", at(fn, "schedule"), { cron: yearly })).status).toBe(200)
    await kill9(pid)
    fs.rmSync(join(repo, "src", "b.ts"))
    pid = await startDaemon(home)
    owned.track(pid)
    const orphans = await cliJson<{ agents: ReadonlyArray<SwarmAgent> }>(home, ["swarm", "agents", "--status", "orphaned"])
    expect(orphans.agents.map((a) => a.node_id)).toContain(gone)
    const after = await request(t, "GET", "/swarm/schedules")
    expect(after.json<{ schedules: ReadonlyArray<Schedule> }>().schedules.map((s) => s.node)).toEqual([fn])
    const saved = JSON.parse(fs.readFileSync(schedulesFile, "utf8")) as { schedules: ReadonlyArray<Schedule> }
    expect(saved.schedules.map((s) => s.node)).toEqual([fn])
    expect(fs.readFileSync(join(home, "daemon.log"), "utf8")).toContain(`swarm schedule of ${gone} ("${yearly}") dropped: the node is orphaned`)

    // A save that orphans a scheduled node while the swarm runs: its next tick drops the schedule.
    expect((await request(t, "PUT", at(fn, "schedule"), { cron: "* * * * * *" })).status).toBe(200)
    fs.rmSync(join(repo, "src", "a.ts"))
    await waitFor("a's schedule dropped at its tick", async () =>
      (await request(t, "GET", "/swarm/schedules")).json<{ schedules: ReadonlyArray<Schedule> }>().schedules.length === 0 ? true : undefined)
    expect(fs.readFileSync(join(home, "daemon.log"), "utf8")).toContain(`swarm schedule of ${fn} ("* * * * * *") dropped: the node is orphaned`)
    expect(JSON.parse(fs.readFileSync(schedulesFile, "utf8"))).toMatchObject({ schedules: [] })
  }, 180_000)
})
