// HTTP request bodies are bounded (docs/http.md "Limits"), against a real daemon over raw TCP with
// the token: a 600 MiB body (generated as it is sent, never allocated), chunked or with a
// Content-Length, gets 413 and the daemon stays up with its memory flat; a 64 MiB body whose
// JSON would be refused gets a small reply that echoes none of it; a body under the limit whose
// field is wrong gets a short message; a depth bomb is 400, not 500.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { daemons, isAlive, startDaemon } from "./daemon.support.js"
import { request, type Target } from "./http.support.js"
import { rawHttp, streamBody } from "./raw-http.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const owned = daemons()
const dir = makeTmpDir("substrat-http-limits-")
const home = join(dir, "home")
const unix: Target = { socketPath: join(home, "http.sock") }
let pid = 0
let port = 0
let token = ""

const MiB = 1024 * 1024

/** The daemon's resident memory (kB → bytes), from /proc. */
const rss = (): number => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))![1]) * 1024

beforeAll(async () => {
  pid = await startDaemon(home, ["--http", "127.0.0.1:0"])
  owned.track(pid)
  port = Number(new URL(fs.readFileSync(join(home, "http.url"), "utf8").trim()).port)
  token = fs.readFileSync(join(home, "http.token"), "utf8").trim()
  expect((await request(unix, "POST", "/v1/agents", { name: "lead", provider: "scripted:echo" })).status).toBe(201)
}, 60_000)

afterAll(async () => {
  await owned.killAll()
  removeDir(dir)
})

describe("HTTP body limits (real daemon, raw TCP)", () => {
  it("a 600 MiB body, chunked or declared, is 413 after at most a little of it was read; the daemon stays up, memory flat", async () => {
    const before = rss()
    for (const chunked of [true, false]) {
      const r = await streamBody(port, "/v1/agents", { token, totalBytes: 600 * MiB, chunked })
      expect({ chunked, status: r.status }).toEqual({ chunked, status: 413 })
      expect(r.body).toContain("PayloadTooLarge")
      expect(r.bytes).toBeLessThan(2048)
      expect(isAlive(pid)).toBe(true)
    }
    const after = rss()
    expect(after - before).toBeLessThan(64 * MiB)
    expect((await request(unix, "GET", "/v1/agents")).status).toBe(200)
    const message = await streamBody(port, "/v1/agents/lead/messages", { token, totalBytes: 8 * MiB, chunked: true })
    expect(message.status).toBe(413)
  }, 180_000)

  it("a 64 MiB body whose JSON is wrong gets a small reply that echoes none of it", async () => {
    const marker = "ZQXJ"
    const body = JSON.stringify({ text: { x: marker.repeat(16 * MiB) } })
    const r = await rawHttp(port, "POST", "/v1/agents/lead/messages", { token, body })
    expect(r.status).toBe(413)
    expect(r.bytes).toBeLessThan(2048)
    expect(r.body).not.toContain(marker)
  }, 60_000)

  it("under the limit, a wrong field's message is cut short (no echo of the body)", async () => {
    const marker = "ZQXJ"
    const body = JSON.stringify({ text: { x: marker.repeat(200_000) } })
    const r = await rawHttp(port, "POST", "/v1/agents/lead/messages", { token, body })
    expect(r.status).toBe(400)
    expect(r.bytes).toBeLessThan(2048)
    expect(r.body).toContain("InvalidInput")
  })

  it("a depth bomb is 400 (not 500), on every body-reading route family", async () => {
    const bomb = (n: number) => `{"name":${"[".repeat(n)}${"]".repeat(n)},"text":${"{\"a\":".repeat(n)}1${"}".repeat(n)}}`
    for (const target of ["/v1/agents", "/v1/agents/lead/messages", "/swarm/start", "/v1/workspaces"]) {
      for (const n of [200, 100_000]) {
        const r = await rawHttp(port, "POST", target, { token, body: bomb(n) })
        expect({ target, n, status: r.status }).toEqual({ target, n, status: 400 })
        expect(r.bytes).toBeLessThan(2048)
      }
    }
    expect(isAlive(pid)).toBe(true)
  })
})
