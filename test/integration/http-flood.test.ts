// A flood of token-less TCP connections cannot lock the owner out (docs/http.md "Limits"): with
// 3,000 connections opened to the HTTP port (127.0.0.1, nothing sent), the daemon holds at most
// `http_limits.max_unauthenticated` of them (its open file handles stay bounded), `daemon status`
// over the admin socket and an HTTP request with the token both succeed, and the open-file soft
// limit is the hard one.
import * as fs from "node:fs"
import * as net from "node:net"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { cliJson, daemons, startDaemon, waitFor } from "./daemon.support.js"
import { rawHttp } from "./raw-http.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const owned = daemons()
const dir = makeTmpDir("substrat-http-flood-")
const home = join(dir, "home")
const flood: Array<net.Socket> = []
let pid = 0
let port = 0
let token = ""

const openFiles = () => fs.readdirSync(`/proc/${pid}/fd`).length

beforeAll(async () => {
  pid = await startDaemon(home, ["--http", "127.0.0.1:0"])
  owned.track(pid)
  port = Number(new URL(fs.readFileSync(join(home, "http.url"), "utf8").trim()).port)
  token = fs.readFileSync(join(home, "http.token"), "utf8").trim()
}, 60_000)

afterAll(async () => {
  for (const s of flood) s.destroy()
  await owned.killAll()
  removeDir(dir)
})

describe("HTTP connection flood (real daemon, 127.0.0.1)", () => {
  it("3,000 token-less connections: the daemon keeps at most 64 of them; daemon status and an authorised request succeed", async () => {
    const before = openFiles()
    let closedByServer = 0
    for (let batch = 0; batch < 15; batch++) {
      await Promise.all(Array.from({ length: 200 }, () =>
        new Promise<void>((resolve) => {
          const s = net.connect({ host: "127.0.0.1", port })
          flood.push(s)
          s.on("close", () => closedByServer++)
          s.on("error", () => {})
          s.once("connect", () => resolve())
          s.once("error", () => resolve())
        })))
    }
    // Each connection past the 64th closed an older one.
    await waitFor("evictions", () => (closedByServer >= 3_000 - 64 ? true : undefined), 60_000)
    expect(openFiles() - before).toBeLessThanOrEqual(64 + 8)

    const status = await cliJson<{ pid: number }>(home, ["daemon", "status"])
    expect(status.pid).toBe(pid)
    const authorised = await rawHttp(port, "GET", "/v1/daemon", { token })
    expect(authorised.status).toBe(200)
    expect(authorised.body).toContain(`"pid":${pid}`)
  }, 180_000)

  it("the daemon's open-file soft limit is its hard limit", () => {
    const line = fs.readFileSync(`/proc/${pid}/limits`, "utf8").split("\n").find((l) => l.startsWith("Max open files"))!
    const [, soft, hard] = /Max open files\s+(\S+)\s+(\S+)/.exec(line)!
    expect(soft).toBe(hard)
  })
})
