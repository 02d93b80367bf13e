// The admin socket's transport (stock @effect/rpc over NodeSocketServer, with the guard of
// src/protocol/SocketGuard.ts in between) on one real daemon: connection life cycle on the wire —
// half-closed clients still get every answer (guard errors and @effect/rpc answers alike),
// several requests in one write on a new connection are all answered, thousands pipelined on
// one connection are each answered once, ids at the edges of the range come back intact, a read
// right after a mutation's reply sees it, connections that go away in any manner (destroyed
// mid-request, half-closed, reset right after connecting) are no longer counted by
// `daemon.status`, and an idle open connection does not keep `daemon stop` from finishing.
import * as fs from "node:fs"
import * as net from "node:net"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { cli, daemons, isAlive, rawConnection, startDaemon, waitFor } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-adminsock-")
const home = join(dir, "home")
const socket = join(home, "daemon.sock")
let pid = 0

const line = (id: number, method: string, params?: unknown) =>
  JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) }) + "\n"

/** Write `data` on a new connection, optionally half-close, collect `count` reply lines. */
const exchange = (data: string, count: number, halfClose: boolean): Promise<Array<Record<string, unknown>>> =>
  new Promise((resolve, reject) => {
    const conn = net.createConnection({ path: socket, allowHalfOpen: true })
    const got: Array<Record<string, unknown>> = []
    let buf = ""
    const timer = setTimeout(() => {
      conn.destroy()
      reject(new Error(`only ${got.length}/${count} replies: ${JSON.stringify(got)}`))
    }, 20_000)
    conn.on("error", reject)
    conn.on("data", (d: Buffer) => {
      buf += d.toString("utf8")
      let nl: number
      while ((nl = buf.indexOf("\n")) >= 0) {
        got.push(JSON.parse(buf.slice(0, nl)) as Record<string, unknown>)
        buf = buf.slice(nl + 1)
      }
      if (got.length >= count) {
        clearTimeout(timer)
        conn.destroy()
        resolve(got)
      }
    })
    conn.on("connect", () => {
      conn.write(data)
      if (halfClose) conn.end()
    })
  })

/** `daemon.status`'s `connections` as seen from a new connection (which counts itself). */
const connections = async (): Promise<number> => {
  const [reply] = await exchange(line(1, "daemon.status"), 1, false)
  return (reply!["result"] as { connections: number }).connections
}

beforeAll(async () => {
  fs.mkdirSync(home, { recursive: true, mode: 0o700 })
  pid = await startDaemon(home)
  owned.track(pid)
  await cli(home, ["agent", "create", "--name", "solo", "--provider", "scripted"])
})

afterAll(async () => {
  await owned.killAll()
  removeDir(dir)
})

describe("admin socket transport", () => {
  it("half-closed client: every request answered (@effect/rpc answers and a guard error), ids intact", async () => {
    const data = line(1, "daemon.status") + line(2, "agent.list") + "{not json\n" + line(3, "session.list") +
      line(4, "agent.inspect", { agent: "solo" })
    const got = await exchange(data, 5, true)
    const byId = new Map(got.map((r) => [r["id"], r]))
    expect(got).toHaveLength(5)
    expect((byId.get(1)!["result"] as { agents: number }).agents).toBe(1)
    expect((byId.get(2)!["result"] as { agents: ReadonlyArray<{ name: string }> }).agents.map((a) => a.name)).toEqual(["solo"])
    expect((byId.get(null)!["error"] as { code: number }).code).toBe(-32700)
    expect(byId.get(3)!["result"]).toBeDefined()
    expect((byId.get(4)!["result"] as { agent: { name: string } }).agent.name).toBe("solo")
  })

  it("the same requests on an open connection: same answers as half-closed", async () => {
    const data = line(1, "daemon.status") + line(2, "agent.list") + line(3, "session.list")
    const open = await exchange(data, 3, false)
    const half = await exchange(data, 3, true)
    const strip = (rs: Array<Record<string, unknown>>) =>
      rs.map((r) => JSON.stringify(r["id"] === 1 ? { ...r, result: { ...(r["result"] as object), uptime_ms: 0 } } : r)).sort()
    expect(strip(half)).toEqual(strip(open))
  })

  it("ids 0 and 2^53-1 come back intact; a bad envelope is -32600 with the request's id", async () => {
    const c = await rawConnection(socket)
    try {
      c.write(line(0, "agent.list"))
      expect(JSON.parse(await c.next())).toMatchObject({ jsonrpc: "2.0", id: 0, result: { agents: [{ name: "solo" }] } })
      c.write(line(2 ** 53 - 1, "agent.list"))
      expect(JSON.parse(await c.next())["id"]).toBe(2 ** 53 - 1)
      for (const extra of [{ jsonrpc: "1.0" }, { traceId: 5 }, { headers: "x" }]) {
        c.write(JSON.stringify({ jsonrpc: "2.0", id: 77, method: "agent.list", ...extra }) + "\n")
        expect(JSON.parse(await c.next()), JSON.stringify(extra)).toMatchObject({ id: 77, error: { code: -32600 } })
      }
    } finally {
      c.close()
    }
  })

  it("thousands of requests pipelined in one write: every id answered once, same bytes", async () => {
    const c = await rawConnection(socket)
    try {
      c.write(line(7777, "agent.list"))
      const reference = (await c.next()).replace("\"id\":7777", "\"id\":ID")
      const n = 3000
      c.write(Array.from({ length: n }, (_, i) => line(10_000 + i, "agent.list")).join(""))
      const seen = new Set<number>()
      for (let i = 0; i < n; i++) {
        const reply = await c.next(60_000)
        const id = (JSON.parse(reply) as { id: number }).id
        expect(seen.has(id)).toBe(false)
        seen.add(id)
        expect(reply).toBe(reference.replace("\"id\":ID", `"id":${id}`))
      }
      expect(seen.size).toBe(n)
    } finally {
      c.close()
    }
  }, 120_000)

  it("a list sent right after a create's reply on the same connection sees the new agent", async () => {
    const c = await rawConnection(socket)
    try {
      c.write(line(1, "agent.create", { name: "late", provider: "scripted" }))
      const created = JSON.parse(await c.next()) as { id: number; result: { id: string } }
      expect(created.id).toBe(1)
      c.write(line(2, "agent.list"))
      const listed = JSON.parse(await c.next()) as { result: { agents: ReadonlyArray<{ id: string }> } }
      expect(listed.result.agents.map((a) => a.id)).toContain(created.result.id)
      c.write(line(3, "agent.terminate", { agent: "late" }))
      expect(JSON.parse(await c.next())["id"]).toBe(3)
      c.write(line(4, "agent.list"))
      const after = JSON.parse(await c.next()) as { result: { agents: ReadonlyArray<{ id: string }> } }
      expect(after.result.agents.map((a) => a.id)).not.toContain(created.result.id)
    } finally {
      c.close()
    }
  })

  it("connections that go away in any manner are no longer counted", async () => {
    const before = await waitFor("a quiet socket", async () => ((await connections()) === 1 ? 1 : undefined))
    // destroyed right after connecting, destroyed with a request in flight, half-closed idle,
    // half-closed after a request, and still open (counted until closed).
    const conns: Array<net.Socket> = []
    const open = (f: (c: net.Socket) => void) =>
      new Promise<void>((resolve) => {
        const c = net.createConnection({ path: socket, allowHalfOpen: true })
        c.on("error", () => {})
        c.on("connect", () => {
          conns.push(c)
          f(c)
          resolve()
        })
      })
    for (let i = 0; i < 5; i++) {
      await open((c) => c.destroy())
      await open((c) => {
        c.write(line(1, "session.list"))
        c.destroy()
      })
      await open((c) => c.end())
      await open((c) => c.end(line(1, "daemon.status")))
    }
    const stay = await rawConnection(socket)
    expect(await waitFor("only the open one left", async () => ((await connections()) === before + 1 ? true : undefined))).toBe(true)
    stay.write(line(9, "agent.list"))
    expect(JSON.parse(await stay.next())["id"]).toBe(9)
    stay.close()
    expect(await waitFor("none left", async () => ((await connections()) === before ? true : undefined))).toBe(true)
    for (const c of conns) c.destroy()
  })

  it("an idle open connection does not hold up daemon stop", async () => {
    const idle = await rawConnection(socket)
    const r = await cli(home, ["daemon", "stop"])
    expect(r.code).toBe(0)
    await waitFor("daemon gone", () => (isAlive(pid) ? undefined : true), 30_000)
    await waitFor("idle connection closed by the daemon", () => (idle.closed() ? true : undefined), 10_000)
    expect(fs.existsSync(socket)).toBe(false)
  })
})
