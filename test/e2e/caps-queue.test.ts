// Tree caps and queued spawns through the REAL daemon process and CLI (scripted agents):
//   - a root that fans out past `--max-children 2`: the extra spawns are queued (the tool result
//     says so, with the position; the inbox lists them), start in order as live children finish
//     their work, and stay queued across kill -9 + restart;
//   - the inbox lists the root's answer to USER until `inbox read`;
//   - `--max-depth` refuses a nested spawn; `caps.policy = refuse` (config.toml) refuses a spawn
//     past max_children with a clear error; a spawn's budget share is carved from the parent's;
//   - `caps set` (CLI and PUT /v1/agents/{ref}/caps) on a running tree: a raise starts a queued
//     spawn at once, a lowering stops nothing, the caps survive kill -9; bad values and non-roots
//     are refused (exit 2 / 400) with nothing changed;
//   - budget shares are reservations: a second share beyond what the first left is refused.
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type Agent, cli, cliJson, daemons, inboxItems, kill9, rpcOnce, startDaemon, waitFor } from "../integration/daemon.support.js"
import { request } from "../integration/http.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

type Entry = { readonly event: string; readonly data: Record<string, unknown> }
const events = (home: string, sid: string): ReadonlyArray<Entry> =>
  Fs.readFileSync(Path.join(home, "agents", sid, "events.jsonl"), "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Entry)
const of = (es: ReadonlyArray<Entry>, name: string) => es.filter((e) => e.event === name).map((e) => e.data)
const spawnResults = (home: string, sid: string) =>
  of(events(home, sid), "tool_call.result").filter((d) => d["tool"] === "spawn_agent") as unknown as ReadonlyArray<{
    readonly result: Record<string, unknown> & { readonly error?: Record<string, unknown> }
    readonly is_error: boolean
  }>

interface Item {
  readonly id: string
  readonly kind: string
  readonly agent_name: string
  readonly text: string
}

const owned = daemons()
const dirs: Array<string> = []
afterAll(async () => {
  await owned.killAll()
  for (const d of dirs) removeDir(d)
})

const home = (book: unknown, toml?: string) => {
  const h = makeTmpDir("scq-")
  dirs.push(h)
  Fs.mkdirSync(Path.join(h, "scripts"), { recursive: true })
  Fs.writeFileSync(Path.join(h, "scripts", "b.json"), JSON.stringify(book))
  if (toml !== undefined) Fs.writeFileSync(Path.join(h, "config.toml"), toml)
  return h
}
const inbox = async (h: string) => (await cliJson<{ items: ReadonlyArray<Item> }>(h, ["inbox"])).items
const agents = async (h: string) => (await cliJson<{ agents: ReadonlyArray<Agent> }>(h, ["agent", "list"])).agents
/** The live agents over the admin socket: polls do not start a CLI process each. */
const liveAgents = async (h: string) => (await rpcOnce<{ agents: ReadonlyArray<Agent> }>(h, "agent.list")).agents
const spawn = (name: string, extra: Record<string, unknown> = {}) => ({
  tool: "spawn_agent",
  args: { name, instructions: `You are ${name}.`, ...extra }
})

describe("tree caps and queued spawns (daemon + CLI)", () => {
  it("spawns past --max-children queue in order, survive kill -9, and start as children finish", async () => {
    const h = home({
      lead: { steps: [{ tools: ["w1", "w2", "w3", "w4"].map((n) => spawn(n)), text: "spawned" }], after: "echo" },
      "*": { steps: [{ text: "worked" }], after: "repeat-last" }
    })
    owned.track(await startDaemon(h))
    const lead = await cliJson<Agent>(h, ["agent", "create", "--provider", "scripted:b", "--name", "lead", "--max-children", "2"])
    expect(of(events(h, lead.session_id), "caps.set")).toEqual([{ max_depth: null, max_children: 2, max_live: null }])
    const sent = await cliJson<{ answer: { text: string } }>(h, ["agent", "send", "lead", "go", "--wait"])
    expect(sent.answer.text).toBe("spawned")

    // w1 and w2 exist; w3 and w4 wait, and the tool results said so with their positions.
    const results = spawnResults(h, lead.session_id)
    expect(results.map((r) => [r.result["status"], r.result["name"], r.result["position"] ?? null])).toEqual([
      ["created", "w1", null],
      ["created", "w2", null],
      ["queued", "w3", 1],
      ["queued", "w4", 2]
    ])
    expect(String(results[2]!.result["reason"])).toContain("2 of at most 2 live children (max_children)")
    await waitFor("w1 and w2 born", async () => ((await liveAgents(h)).length === 3 ? true : undefined))
    expect((await agents(h)).map((a) => a.name).sort()).toEqual(["lead", "w1", "w2"])
    const queued = (await inbox(h)).filter((i) => i.kind === "queued_spawn")
    expect(queued.map((i) => [i.agent_name, i.text.slice(0, 40)])).toEqual([
      ["lead", "lead's spawn of w3 waits (position 1 in "],
      ["lead", "lead's spawn of w4 waits (position 2 in "]
    ])
    // The answer `--wait` returned is read: not in the inbox.
    expect((await inbox(h)).filter((i) => i.kind === "answer")).toEqual([])

    // w1 finishes its work: w3 starts (the first queued), w4 still waits (w2 and w3 are live).
    expect((await cli(h, ["agent", "send", "w1", "task one", "--wait"])).code).toBe(0)
    const started = await waitFor("w3 started", () => {
      const s = of(events(h, lead.session_id), "spawn.started")
      return s.length === 1 ? s : undefined
    })
    const byName = new Map((await agents(h)).map((a) => [a.name, a] as const))
    expect(started[0]!["agent_id"]).toBe(byName.get("w3")!.id)
    expect(byName.has("w4")).toBe(false)
    // The lead was told (a SYSTEM message woke it).
    await waitFor("lead told", () =>
      of(events(h, lead.session_id), "turn.start").some((d) => String(d["prompt"]).includes("queued spawn_agent of \"w3\" has started"))
        ? true
        : undefined)
    expect((await inbox(h)).filter((i) => i.kind === "queued_spawn").map((i) => i.text.slice(0, 40))).toEqual([
      "lead's spawn of w4 waits (position 1 in "
    ])

    // kill -9 while w4 is queued; after the restart it is still queued, nothing started twice.
    const status = await cliJson<{ pid: number }>(h, ["daemon", "status"])
    await kill9(status.pid)
    owned.track(await startDaemon(h))
    const after = (await inbox(h)).filter((i) => i.kind === "queued_spawn")
    expect(after.map((i) => i.text.slice(0, 40))).toEqual(["lead's spawn of w4 waits (position 1 in "])
    expect((await agents(h)).map((a) => a.name).sort()).toEqual(["lead", "w1", "w2", "w3"])

    // w2 finishes: w4 starts now, after w3 — in the order they were queued.
    expect((await cli(h, ["agent", "send", "w2", "task two", "--wait"])).code).toBe(0)
    await waitFor("w4 started", () => (of(events(h, lead.session_id), "spawn.started").length === 2 ? true : undefined))
    const all = new Map((await agents(h)).map((a) => [a.name, a] as const))
    expect(of(events(h, lead.session_id), "spawn.started").map((d) => d["agent_id"])).toEqual([all.get("w3")!.id, all.get("w4")!.id])
    expect((await inbox(h)).filter((i) => i.kind === "queued_spawn")).toEqual([])
    expect(all.get("w4")!.parent_id).toBe(lead.id)
  })

  it("the inbox lists an unread answer to USER until `inbox read`", async () => {
    const h = home({ "*": { steps: [{ text: "the report is ready" }], after: "repeat-last" } })
    owned.track(await startDaemon(h))
    const solo = await cliJson<Agent>(h, ["agent", "create", "--provider", "scripted:b", "--name", "solo"])
    expect((await cli(h, ["agent", "send", "solo", "write it"])).code).toBe(0)
    const item = await waitFor("the answer in the inbox", async () => (await inboxItems<Item>(h)).find((i) => i.kind === "answer"))
    expect(item).toMatchObject({ agent_name: "solo", text: "the report is ready" })
    const http = await request({ socketPath: Path.join(h, "http.sock") }, "GET", "/v1/inbox")
    expect(http.json<{ items: ReadonlyArray<Item> }>().items.filter((i) => i.kind === "answer").map((i) => i.id)).toEqual([item.id])
    const bad = await cli(h, ["inbox", "read", "nope"])
    expect(bad.code).toBe(2)
    const r = await cli(h, ["inbox", "read", item.id])
    expect(r.code).toBe(0)
    expect(await inbox(h)).toEqual([])
    expect(of(events(h, solo.session_id), "user.read")).toEqual([{ message_ids: [item.id] }])
    // Still read after a restart.
    const status = await cliJson<{ pid: number }>(h, ["daemon", "status"])
    await kill9(status.pid)
    owned.track(await startDaemon(h))
    expect(await inbox(h)).toEqual([])
  })

  it("--max-depth refuses a nested spawn; caps.policy = refuse refuses past max_children; budget shares are carved", async () => {
    const h = home(
      {
        top: {
          steps: [{ tools: [spawn("mid", { budget_usd: 5 }), spawn("mid", { budget_usd: 0.25, budget_turns: 3 }), spawn("extra")], text: "ok" }],
          after: "echo"
        },
        mid: { steps: [{ tools: [spawn("deep")], text: "tried" }], after: "echo" }
      },
      "[caps]\npolicy = \"refuse\"\nmax_children = 1\n"
    )
    owned.track(await startDaemon(h))
    const top = await cliJson<Agent>(h, ["agent", "create", "--provider", "scripted:b", "--name", "top", "--max-depth", "1", "--budget-usd", "1"])
    expect((await cli(h, ["agent", "send", "top", "go", "--wait"])).code).toBe(0)
    const r = spawnResults(h, top.session_id)
    // A share larger than what is left is refused, nothing made; a fitting one is the child's own budget.
    expect(r[0]!.is_error).toBe(true)
    expect(r[0]!.result.error).toMatchObject({ type: "invalid_arguments", field: "budget_usd" })
    expect(String(r[0]!.result.error!["message"])).toContain("more than the parent's budget has left")
    expect(r[1]!.result).toMatchObject({ status: "created", name: "mid" })
    // Past max_children with the refuse policy: a clear error, nothing queued.
    expect(r[2]!.is_error).toBe(true)
    expect(r[2]!.result.error).toMatchObject({ type: "cap_reached", cap: "max_children" })
    expect(String(r[2]!.result.error!["message"])).toContain("caps.policy = refuse")
    expect(of(events(h, top.session_id), "spawn.queued")).toEqual([])
    expect((await inbox(h)).filter((i) => i.kind === "queued_spawn")).toEqual([])

    const mid = (await agents(h)).find((a) => a.name === "mid")!
    expect(of(events(h, mid.session_id), "budget.set")).toMatchObject([{ usd: 0.25, turns: 3, tokens: null }])
    // mid is at level 1 = max_depth: its own spawn is refused, whatever the policy.
    expect((await cli(h, ["agent", "send", "mid", "go", "--wait"])).code).toBe(0)
    const deep = spawnResults(h, mid.session_id)
    expect(deep).toHaveLength(1)
    expect(deep[0]!.result.error).toMatchObject({ type: "cap_reached", cap: "max_depth" })
    expect(String(deep[0]!.result.error!["message"])).toContain("at most 1 level(s) deep")
    expect((await agents(h)).map((a) => a.name).sort()).toEqual(["mid", "top"])
  })

  it("caps set raises a running tree's caps (a queued spawn starts), survives kill -9, refuses bad input", async () => {
    const h = home({
      lead: { steps: [{ tools: ["w1", "w2", "w3"].map((n) => spawn(n)), text: "spawned" }], after: "echo" },
      "*": { steps: [{ text: "worked" }], after: "repeat-last" }
    })
    owned.track(await startDaemon(h))
    const lead = await cliJson<Agent>(h, ["agent", "create", "--provider", "scripted:b", "--name", "lead", "--max-children", "1"])
    expect((await cli(h, ["agent", "send", "lead", "go", "--wait"])).code).toBe(0)
    expect(spawnResults(h, lead.session_id).map((r) => [r.result["status"], r.result["name"]])).toEqual([
      ["created", "w1"],
      ["queued", "w2"],
      ["queued", "w3"]
    ])
    await waitFor("w1 born", async () => ((await liveAgents(h)).length === 2 ? true : undefined))

    // Refused, nothing changed: a negative value, no value, a child instead of its root.
    const negative = await cli(h, ["caps", "set", "lead", "--max-children", "-1"])
    expect(negative.code).toBe(2)
    expect(negative.stderr).toContain("--max-children cannot be negative")
    expect((await cli(h, ["caps", "set", "lead"])).code).toBe(2)
    const child = await cli(h, ["caps", "set", "w1", "--max-children", "5"])
    expect(child.code).toBe(2)
    expect(child.stderr).toContain("set them on lead")
    const unix = { socketPath: Path.join(h, "http.sock") }
    expect((await request(unix, "PUT", "/v1/agents/lead/caps", { max_children: -1 })).status).toBe(400)
    expect(of(events(h, lead.session_id), "caps.set")).toHaveLength(1)
    expect(of(events(h, lead.session_id), "spawn.started")).toEqual([])

    // The raise: w2 starts at once (no child finished its work), w3 still waits.
    const raised = await cliJson<{ own: Record<string, unknown>; in_force: Record<string, number> }>(h, ["caps", "set", "lead", "--max-children", "2"])
    expect(raised.own).toEqual({ max_depth: null, max_children: 2, max_live: null })
    const started = await waitFor("w2 started", () => {
      const s = of(events(h, lead.session_id), "spawn.started")
      return s.length === 1 ? s : undefined
    })
    const byName = new Map((await agents(h)).map((a) => [a.name, a] as const))
    expect(started[0]!["agent_id"]).toBe(byName.get("w2")!.id)
    expect(byName.has("w3")).toBe(false)
    expect(of(events(h, lead.session_id), "caps.set")).toEqual([
      { max_depth: null, max_children: 1, max_live: null },
      { max_depth: null, max_children: 2, max_live: null }
    ])
    // `caps show` of any agent of the tree shows its root's.
    const shown = await cliJson<{ root_name: string; in_force: Record<string, number>; queued: number }>(h, ["caps", "show", "w1"])
    expect(shown).toMatchObject({ root_name: "lead", in_force: { max_children: 2, max_depth: 0, max_live: 0 }, queued: 1 })

    // kill -9: the raised caps are recovered, w3 still queued.
    const status = await cliJson<{ pid: number }>(h, ["daemon", "status"])
    await kill9(status.pid)
    owned.track(await startDaemon(h))
    const back = await request(unix, "GET", "/v1/agents/lead/caps")
    expect(back.status).toBe(200)
    expect(back.json<{ own: unknown; queued: number }>()).toMatchObject({ own: { max_children: 2 }, queued: 1 })

    // Lowering stops no live agent; raising again over HTTP starts w3.
    expect((await request(unix, "PUT", "/v1/agents/lead/caps", { max_children: 1 })).status).toBe(200)
    expect((await agents(h)).map((a) => a.name).sort()).toEqual(["lead", "w1", "w2"])
    const put = await request(unix, "PUT", "/v1/agents/lead/caps", { max_children: 3 })
    expect(put.json<{ in_force: Record<string, number> }>().in_force.max_children).toBe(3)
    await waitFor("w3 started", () => (of(events(h, lead.session_id), "spawn.started").length === 2 ? true : undefined))
    expect((await agents(h)).map((a) => a.name).sort()).toEqual(["lead", "w1", "w2", "w3"])
  })

  it("budget shares are reserved: a second share beyond what the first left is refused", async () => {
    const h = home({
      boss: {
        steps: [{ tools: [spawn("a", { budget_usd: 0.6 }), spawn("b", { budget_usd: 0.6 }), spawn("c", { budget_usd: 0.3 })], text: "ok" }],
        after: "echo"
      }
    })
    owned.track(await startDaemon(h))
    const boss = await cliJson<Agent>(h, ["agent", "create", "--provider", "scripted:b", "--name", "boss", "--budget-usd", "1"])
    expect((await cli(h, ["agent", "send", "boss", "go", "--wait"])).code).toBe(0)
    const r = spawnResults(h, boss.session_id)
    expect(r[0]!.result).toMatchObject({ status: "created", name: "a" })
    expect(r[1]!.is_error).toBe(true)
    expect(r[1]!.result.error).toMatchObject({ type: "invalid_arguments", field: "budget_usd" })
    expect(String(r[1]!.result.error!["message"])).toContain("other children's unused shares")
    expect(r[2]!.result).toMatchObject({ status: "created", name: "c" })
    await waitFor("a and c born", async () => ((await liveAgents(h)).length === 3 ? true : undefined))
    const by = new Map((await agents(h)).map((a) => [a.name, a] as const))
    expect(by.has("b")).toBe(false)
    expect(of(events(h, by.get("a")!.session_id), "budget.set")).toMatchObject([{ usd: 0.6 }])
    expect(of(events(h, by.get("c")!.session_id), "budget.set")).toMatchObject([{ usd: 0.3 }])
  })
})
