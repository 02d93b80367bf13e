// The HTTP token cannot be got around by spelling a path (docs/http.md "Paths"): against a real
// daemon over TCP with raw sockets (the target sent byte for byte, as `curl --path-as-is` does),
// every route family — list, transcript, SSE, inbox, create, message, terminate, swarm start —
// under every odd spelling gets no 2xx without the token, and nothing changed; ambiguous
// spellings are 400 before routing; every route of /openapi.json and the swarm table is 401
// without the token.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { daemons, startDaemon, waitQuiet } from "./daemon.support.js"
import { request, type Target } from "./http.support.js"
import { rawHttp, type RawReply } from "./raw-http.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const owned = daemons()
const dir = makeTmpDir("substrat-http-sec-")
const home = join(dir, "home")
const repo = join(dir, "repo")
const unix: Target = { socketPath: join(home, "http.sock") }
let port = 0
let token = ""

beforeAll(async () => {
  fs.mkdirSync(repo, { recursive: true })
  fs.writeFileSync(join(repo, "x.py"), "def a():\n    return 1\n")
  owned.track(await startDaemon(home, ["--http", "127.0.0.1:0"]))
  port = Number(new URL(fs.readFileSync(join(home, "http.url"), "utf8").trim()).port)
  token = fs.readFileSync(join(home, "http.token"), "utf8").trim()
  expect((await request(unix, "POST", "/v1/agents", { name: "lead", provider: "scripted:echo" })).status).toBe(201)
}, 60_000)

afterAll(async () => {
  await owned.killAll()
  removeDir(dir)
})

interface Family {
  readonly name: string
  readonly method: string
  readonly path: string
  readonly body?: string
  readonly sse?: boolean
}

const families: ReadonlyArray<Family> = [
  { name: "list", method: "GET", path: "/v1/agents" },
  { name: "transcript", method: "GET", path: "/v1/agents/lead/inspect" },
  { name: "SSE", method: "GET", path: "/v1/events", sse: true },
  { name: "swarm SSE", method: "GET", path: "/swarm/events", sse: true },
  { name: "inbox", method: "GET", path: "/v1/inbox" },
  { name: "create", method: "POST", path: "/v1/agents", body: JSON.stringify({ name: "intruder", provider: "scripted:echo" }) },
  { name: "message", method: "POST", path: "/v1/agents/lead/messages", body: JSON.stringify({ text: "pwned" }) },
  { name: "terminate", method: "DELETE", path: "/v1/agents/lead" },
  { name: "swarm start", method: "POST", path: "/swarm/start", body: JSON.stringify({ path: "/", provider: "scripted:echo" }) }
]

/** Spellings of `p` that some reader (client, proxy, WHATWG URL, the router) takes for another path. */
const ambiguous = (p: string): ReadonlyArray<string> => {
  const depth = p.split("/").length - 1
  const [first, ...rest] = p.slice(1).split("/")
  return [
    `${p};/${"../".repeat(depth)}`,
    `${p};`,
    `${p};jsessionid=1`,
    `${p}/x/..`,
    `${p}/.`,
    `/x/..${p}`,
    `/.${p}`,
    `/${p}`,
    `${p.replace(/\/([^/]*)$/, "//$1")}`,
    `/${first}%2f${rest.join("/")}`,
    `/${first}%2F${rest.join("/")}`,
    `${p}%2f..%2f..`,
    `${p}/%2e%2e/%2e%2e/`,
    `${p}/%2E`,
    `/${first}\\${rest.join("\\")}`,
    `${p}%5c..`,
    `${p}%00`,
    `${p}%252e%252e`,
    `${p}#x`
  ]
}

/** Spellings the router takes for `p` itself (case, a trailing slash, an escaped letter): 401 without the token. */
const equivalent = (p: string): ReadonlyArray<string> => [p, p.toUpperCase(), `${p}/`, p.replace("v", "%76").replace("s", "%73")]

const send = (f: Family, target: string, withToken = false): Promise<RawReply> =>
  rawHttp(port, f.method, target, {
    ...(f.body === undefined ? {} : { body: f.body }),
    ...(withToken ? { token } : {}),
    // An SSE stream that was let through never ends: its head is enough.
    ...(f.sse === true ? { timeoutMs: 3_000 } : {})
  })

describe("HTTP paths and the token (real daemon, raw TCP)", () => {
  it("the reported bypass: GET /v1/agents;/../../ without a token does not list agents (400)", async () => {
    const r = await rawHttp(port, "GET", "/v1/agents;/../../")
    expect(r.status).toBe(400)
    expect(r.body).not.toContain("lead")
    expect(r.body).toContain("InvalidInput")
  })

  for (const f of families) {
    it(`${f.name}: ${f.method} ${f.path} — every ambiguous spelling is 400, every equivalent one 401, without the token`, async () => {
      for (const target of ambiguous(f.path)) {
        const r = await send(f, target)
        expect({ target, status: r.status }).toEqual({ target, status: 400 })
      }
      for (const target of equivalent(f.path)) {
        const r = await send(f, target)
        expect({ target, status: r.status }).toEqual({ target, status: 401 })
      }
    })
  }

  it("nothing happened: lead alive, no intruder, no message delivered, no swarm", async () => {
    await waitQuiet(home)
    const agents = (await request(unix, "GET", "/v1/agents?all=1")).json<{ agents: ReadonlyArray<{ name: string; state: string }> }>().agents
    expect(agents.map((a) => `${a.name}:${a.state}`)).toEqual(["lead:idle"])
    expect((await request(unix, "GET", "/swarm")).json<{ swarm: unknown }>().swarm).toBeNull()
    const log = fs.readdirSync(join(home, "agents")).map((s) => {
      const f = join(home, "agents", s, "events.jsonl")
      return fs.existsSync(f) ? fs.readFileSync(f, "utf8") : ""
    }).join("")
    expect(log).not.toContain("pwned")
  })

  it("with the token the same routes answer; path rules hold for the token holder and http.sock too", async () => {
    const list = await send(families[0]!, "/v1/agents", true)
    expect(list.status).toBe(200)
    expect(list.body).toContain("lead")
    expect((await send(families[0]!, "/v1/agents;/../../", true)).status).toBe(400)
    expect((await request(unix, "GET", "/v1/agents/./")).status).toBe(400)
  })

  it("every route in /openapi.json and the swarm table needs the token on TCP", async () => {
    const doc = (await request(unix, "GET", "/openapi.json")).json<{ paths: Record<string, Record<string, unknown>> }>()
    const swarm: ReadonlyArray<readonly [string, string]> = [
      ["post", "/swarm/start"], ["post", "/swarm/stop"], ["get", "/swarm"], ["get", "/swarm/agents"], ["get", "/swarm/agents/{id}"],
      ["post", "/swarm/agents/{id}/chat"], ["post", "/swarm/agents/{id}/trigger"], ["get", "/swarm/events"], ["get", "/swarm/schedules"],
      ["put", "/swarm/agents/{id}/schedule"], ["delete", "/swarm/agents/{id}/schedule"], ["get", "/swarm/log"], ["get", "/swarm/agents/{id}/log"]
    ]
    const routes = [...Object.entries(doc.paths).flatMap(([p, ms]) => Object.keys(ms).map((m) => [m, p] as const)), ["get", "/openapi.json"] as const, ...swarm]
    expect(routes.length).toBeGreaterThan(30)
    for (const [method, path] of routes) {
      const target = path.replace(/\{[^}]+\}/g, "lead")
      const r = await rawHttp(port, method.toUpperCase(), target, { ...(method === "get" ? {} : { body: "{}" }), timeoutMs: 3_000 })
      expect({ method, target, status: r.status }).toEqual({ method, target, status: 401 })
    }
  })
})
