// requires: git
// The HTTP API of a real daemon (`daemon start --http 127.0.0.1:0`): http.sock without a token,
// TCP only with the bearer token, every /v1 route's status and body on a scripted team, errors as
// the CLI's wire errors, and SSE resumed with Last-Event-ID across a kill -9 and restart: every
// line of every event log arrives exactly once.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cli, cliJson, daemons, isAlive, modeOf, startDaemon, waitFor, waitQuiet } from "./daemon.support.js"
import { request, sse, type SseFrame, type Target } from "./http.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const owned = daemons()
const dir = makeTmpDir("substrat-http-")
const home = join(dir, "home")
const unix: Target = { socketPath: join(home, "http.sock") }
let tcp: Target = {}

interface Node {
  readonly id: string
  readonly name: string
  readonly session_id: string
  readonly parent_id: string | null
  readonly state: string
}

const start = async () => {
  const pid = await startDaemon(home, ["--http", "127.0.0.1:0"])
  owned.track(pid)
  const base = fs.readFileSync(join(home, "http.url"), "utf8").trim()
  tcp = { base, token: fs.readFileSync(join(home, "http.token"), "utf8").trim() }
  return pid
}

beforeAll(async () => {
  await start()
})

afterAll(async () => {
  await owned.killAll()
  removeDir(dir)
})

/** Every line of every events.jsonl under the home: `<session>:<line>` → the entry's event name. */
const linesOnDisk = (): Map<string, string> => {
  const out = new Map<string, string>()
  const agents = join(home, "agents")
  for (const sid of fs.readdirSync(agents)) {
    const file = join(agents, sid, "events.jsonl")
    if (!fs.existsSync(file)) continue
    const lines = fs.readFileSync(file, "utf8").split("\n").filter((l) => l !== "")
    lines.forEach((l, i) => out.set(`${sid}:${i + 1}`, (JSON.parse(l) as { event: string }).event))
  }
  return out
}

const entries = (frames: ReadonlyArray<SseFrame>) =>
  frames.filter((f) => f.event === "message").map((f) => JSON.parse(f.data) as { session_id: string; line: number; event: string })

describe("HTTP API (real daemon)", () => {
  it("http.sock and http.token are 0600; the Unix socket needs no token; TCP needs it (401 without or wrong)", async () => {
    expect(modeOf(join(home, "http.sock"))).toBe(0o600)
    expect(modeOf(join(home, "http.token"))).toBe(0o600)
    const viaUnix = await request(unix, "GET", "/v1/daemon")
    expect(viaUnix.status).toBe(200)
    expect(viaUnix.json<{ pid: number }>().pid).toBeGreaterThan(0)
    const none = await request({ base: tcp.base! }, "GET", "/v1/daemon")
    expect(none.status).toBe(401)
    expect(none.json<{ error: { _tag: string } }>().error._tag).toBe("Unauthorized")
    expect(none.headers["access-control-allow-origin"]).toBeUndefined()
    expect(none.headers["set-cookie"]).toBeUndefined()
    expect((await request({ base: tcp.base!, token: "x".repeat(43) }, "GET", "/v1/agents")).status).toBe(401)
    const sseNoToken = sse({ base: tcp.base! }, "/v1/events")
    expect(await sseNoToken.status).toBe(401)
    sseNoToken.close()
    const ok = await request(tcp, "GET", "/v1/daemon")
    expect(ok.status).toBe(200)
    // The dashboard's files need no token (they hold no data).
    const page = await request({ base: tcp.base! }, "GET", "/")
    expect(page.status).toBe(200)
    expect(page.headers["content-type"]).toContain("text/html")
  })

  it("agents: create 201, message with wait returns the answer, list (all=1 keeps terminated), get, inspect, terminate", async () => {
    const created = await request(unix, "POST", "/v1/agents", { name: "lead", provider: "scripted:demo", instructions: "Lead." })
    expect(created.status).toBe(201)
    const lead = created.json<Node>()
    expect(lead).toMatchObject({ name: "lead", parent_id: null, state: "idle" })

    const sent = await request(unix, "POST", "/v1/agents/lead/messages", { text: "Plan the project", wait: true })
    expect(sent.status).toBe(200)
    const answer = sent.json<{ agent_id: string; answer: { text: string } }>()
    expect(answer.agent_id).toBe(lead.id)
    expect(answer.answer.text).toBe("Both workers answered; the team is done.")
    await waitQuiet(home)

    const list = (await request(tcp, "GET", "/v1/agents")).json<{ agents: ReadonlyArray<Node> }>().agents
    expect(list.map((a) => a.name).sort()).toEqual(["alice", "bob", "lead"])
    const alice = list.find((a) => a.name === "alice")!
    expect(alice.parent_id).toBe(lead.id)
    expect((await request(unix, "GET", `/v1/agents/${alice.id}`)).json<Node>().name).toBe("alice")
    const inspect = await request(unix, "GET", "/v1/agents/lead/inspect")
    expect(inspect.status).toBe(200)
    expect(inspect.json<{ children: ReadonlyArray<Node> }>().children.map((c) => c.name).sort()).toEqual(["alice", "bob"])

    const notify = await request(unix, "POST", "/v1/agents/bob/messages", { text: "hello bob" })
    expect(notify.status).toBe(202)
    expect(notify.json<{ message_id: string }>().message_id).toMatch(/^[0-9a-f-]{36}$/)

    const gone = await request(unix, "DELETE", `/v1/agents/${alice.id}`)
    expect(gone.status).toBe(200)
    expect(gone.json<{ terminated: ReadonlyArray<string> }>().terminated).toEqual([alice.id])
    const live = (await request(unix, "GET", "/v1/agents")).json<{ agents: ReadonlyArray<Node> }>().agents
    expect(live.map((a) => a.name).sort()).toEqual(["bob", "lead"])
    const all = (await request(unix, "GET", "/v1/agents?all=1")).json<{ agents: ReadonlyArray<Node> }>().agents
    expect(all.find((a) => a.id === alice.id)).toMatchObject({ state: "terminated", parent_id: lead.id, name: "alice" })
  })

  it("GET /openapi.json describes every route from the RPC Schemas (token needed on TCP)", async () => {
    const doc = await request(unix, "GET", "/openapi.json")
    expect(doc.status).toBe(200)
    const d = doc.json<{ openapi: string; paths: Record<string, Record<string, { requestBody?: unknown }>> }>()
    expect(d.openapi).toBe("3.1.0")
    expect(Object.keys(d.paths)).toEqual(expect.arrayContaining([
      "/v1/daemon", "/v1/agents", "/v1/agents/{ref}", "/v1/agents/{ref}/inspect", "/v1/agents/{ref}/messages", "/v1/sessions",
      "/v1/workspaces", "/v1/workspaces/{workspace}/turns", "/v1/workspaces/{workspace}/turns/{turn}/diff",
      "/v1/workspaces/{workspace}/turns/{turn}/revert", "/v1/events"
    ]))
    expect(Object.keys(d.paths["/v1/agents"]!).sort()).toEqual(["get", "post"])
    expect(d.paths["/v1/agents/{ref}/messages"]!["post"]!.requestBody).toBeDefined()
    expect((await request({ base: tcp.base! }, "GET", "/openapi.json")).status).toBe(401)
  })

  it("errors: the CLI's wire errors as JSON (404 NotFound, 400 InvalidInput), in words", async () => {
    const nf = await request(unix, "GET", "/v1/agents/nobody")
    expect(nf.status).toBe(404)
    expect(nf.json()).toEqual({ error: { _tag: "NotFound", code: -32001, kind: "agent", id: "nobody", message: "no agent \"nobody\"" } })
    // Workspaces are named by id, name or unique id prefix (the daemon's Resolver): no Schema words.
    const bad = await request(unix, "GET", "/v1/workspaces/not-a-uuid/turns")
    expect(bad.status).toBe(404)
    const err = bad.json<{ error: { _tag: string; code: number; message: string } }>().error
    expect(err).toMatchObject({ _tag: "NotFound", code: -32001, message: "no workspace \"not-a-uuid\"" })
    const noText = await request(unix, "POST", "/v1/agents/lead/messages", { wait: true })
    expect(noText.status).toBe(400)
    expect((await request(unix, "POST", "/v1/agents", "not an object")).status).toBe(400)
    expect((await request(unix, "GET", "/v1/no-such-route")).status).toBe(404)
  })

  it("sessions and workspaces: list, create, turn log, diff, delete", async () => {
    const sessions = (await request(unix, "GET", "/v1/sessions")).json<{ sessions: ReadonlyArray<{ agent_name: string | null }> }>().sessions
    expect(sessions.map((s) => s.agent_name).sort()).toEqual(["alice", "bob", "lead"])
    const ws = await request(unix, "POST", "/v1/workspaces", { name: "w1" })
    expect(ws.status).toBe(201)
    const spec = ws.json<{ id: string; name: string }>()
    expect(spec.name).toBe("w1")
    const listed = (await request(unix, "GET", "/v1/workspaces")).json<{ workspaces: ReadonlyArray<{ id: string }> }>().workspaces
    expect(listed.map((w) => w.id)).toContain(spec.id)
    const turns = await request(unix, "GET", `/v1/workspaces/${spec.id}/turns`)
    expect(turns.status).toBe(200)
    expect(turns.json<{ workspace: string; turns: ReadonlyArray<unknown> }>()).toMatchObject({ workspace: spec.id })
    const diff = await request(unix, "GET", `/v1/workspaces/${spec.id}/diff`)
    expect(diff.status).toBe(200)
    expect(diff.json<{ turn: null; diff: string }>()).toMatchObject({ turn: null })
    const unknownTurn = await request(unix, "GET", `/v1/workspaces/${spec.id}/turns/00000000-0000-4000-8000-000000000000/diff`)
    expect([404, 400]).toContain(unknownTurn.status)
    const del = await request(unix, "DELETE", `/v1/workspaces/${spec.id}`)
    expect(del.status).toBe(200)
    expect(del.json<{ deleted: boolean }>().deleted).toBe(true)
    expect((await request(unix, "GET", `/v1/workspaces/${spec.id}/turns`)).status).toBe(404)
  })

  it("GET /v1/events resumes with Last-Event-ID across kill -9 + restart: every log line once, none repeated", async () => {
    // Some history exists (the tests above). Read part of the stream, then drop the connection.
    const first = sse(unix, "/v1/events")
    expect(await first.status).toBe(200)
    await waitFor("some events", () => (entries(first.frames).length >= 10 ? true : undefined))
    first.close()
    await first.ended
    const got1 = [...first.frames]
    const lastId = got1.filter((f) => f.id !== undefined).at(-1)!.id!
    // The id is the global position of the last event: one number, whatever the number of sessions.
    expect(lastId).toMatch(/^\d+$/)

    // Work goes on; then kill -9 the daemon in the middle of it and start another.
    await request(unix, "POST", "/v1/agents/lead/messages", { text: "again" })
    const pid = (await request(unix, "GET", "/v1/daemon")).json<{ pid: number }>().pid
    process.kill(pid, "SIGKILL")
    await waitFor(`pid ${pid} gone`, () => (isAlive(pid) ? undefined : true))
    await start()
    await request(unix, "POST", "/v1/agents/bob/messages", { text: "after the restart" })
    await waitQuiet(home)

    const second = sse(unix, "/v1/events", lastId)
    expect(await second.status).toBe(200)
    // `live` ends the backlog: every line on disk (nothing is written while all is quiet) has
    // been streamed by then, so a line not seen is named, not waited for.
    await waitFor("the resumed backlog (live)", () => (second.frames.some((f) => f.event === "live") ? true : undefined))
    const onDisk = linesOnDisk()
    second.close()
    const all = [...entries(got1), ...entries(second.frames)]
    const keys = all.map((e) => `${e.session_id}:${e.line}`)
    const seen = new Set(keys)
    expect([...onDisk].filter(([k]) => !seen.has(k)).map(([k, event]) => `${k} ${event}`), "lines on disk never streamed").toEqual([])
    // None repeated, none lost, and each is the entry at that line.
    expect(new Set(keys).size).toBe(keys.length)
    expect(keys.length).toBe(onDisk.size)
    for (const e of all) expect(onDisk.get(`${e.session_id}:${e.line}`)).toBe(e.event)
    // The resumed stream really resumed: it did not start again at the first line of the log.
    expect(entries(second.frames).length).toBeLessThan(keys.length)
    expect(second.frames.some((f) => f.event === "live")).toBe(true)
  })

  it("GET /v1/events?agent= follows one agent; an unknown agent is 404; a bad Last-Event-ID is 400", async () => {
    const bob = (await cliJson<{ agents: ReadonlyArray<Node> }>(home, ["agent", "list"])).agents.find((a) => a.name === "bob")!
    const one = sse(unix, "/v1/events?agent=bob")
    expect(await one.status).toBe(200)
    await waitFor("bob's backlog", () => (one.frames.some((f) => f.event === "live") ? true : undefined))
    one.close()
    const evs = entries(one.frames)
    expect(evs.length).toBeGreaterThan(3)
    expect(new Set(evs.map((e) => e.session_id))).toEqual(new Set([bob.session_id]))
    expect(evs.map((e) => e.line)).toEqual(evs.map((_, i) => i + 1))
    const nf = await request(unix, "GET", "/v1/events?agent=nobody")
    expect(nf.status).toBe(404)
    const bad = await request(unix, "GET", "/v1/events", undefined, { "last-event-id": "garbage" })
    expect(bad.status).toBe(400)
  })

  it("GET /v1/events: clients following the same events receive the same bytes", async () => {
    const clients = [sse(unix, "/v1/events?from=end"), sse(tcp, "/v1/events?from=end"), sse(unix, "/v1/events?from=end")]
    for (const c of clients) expect(await c.status).toBe(200)
    await waitFor("every client live", () => (clients.every((c) => c.frames.some((f) => f.event === "live")) ? true : undefined))
    const created = await request(unix, "POST", "/v1/agents", { name: "same-bytes", provider: "scripted:demo", instructions: "Lead." })
    expect(created.status).toBe(201)
    expect((await request(unix, "POST", "/v1/agents/same-bytes/messages", { text: "Plan the project", wait: true })).status).toBe(200)
    await waitQuiet(home)
    const n = () => clients[0]!.frames.length
    await waitFor("every client has every event", () => (clients.every((c) => c.frames.length === n()) ? true : undefined))
    for (const c of clients) c.close()
    // From the live marker on (all were live before the first event), keep-alive comments aside.
    const body = (c: typeof clients[number]) => {
      const all = c.raw.join("").split("\n\n").filter((b) => !b.startsWith(":"))
      return all.slice(all.findIndex((b) => b.includes("event: live"))).join("\n\n")
    }
    expect(entries(clients[0]!.frames).length).toBeGreaterThan(10)
    expect(body(clients[1]!)).toBe(body(clients[0]!))
    expect(body(clients[2]!)).toBe(body(clients[0]!))
  })

  it("daemon stop with SSE clients connected: streams end, the daemon exits, http.sock and http.url are removed", async () => {
    const a = sse(unix, "/v1/events")
    const b = sse(tcp, "/v1/events?from=end")
    expect(await a.status).toBe(200)
    expect(await b.status).toBe(200)
    const pid = (await request(unix, "GET", "/v1/daemon")).json<{ pid: number }>().pid
    const stop = await cli(home, ["daemon", "stop"])
    expect(stop.code).toBe(0)
    await a.ended
    await b.ended
    await waitFor(`pid ${pid} gone`, () => (isAlive(pid) ? undefined : true))
    expect(fs.existsSync(join(home, "http.sock"))).toBe(false)
    expect(fs.existsSync(join(home, "http.url"))).toBe(false)
  })
})
