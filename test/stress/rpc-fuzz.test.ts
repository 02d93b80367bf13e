// requires: git
// Bad input on the admin socket: random and mutated JSON-RPC frames (fast-check; ci: derandomised,
// a few hundred frames; nightly: SUBSTRAT_FUZZ=nightly, ≥ 10k), oversized lines, unknown
// methods, wrong param types, unknown ids, split and abandoned frames. Each bad frame gets
// exactly one JSON-RPC error reply; the daemon keeps serving; its state is unchanged.
import fc from "fast-check"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { methodNames } from "../../src/protocol/AdminRpcs.js"
import { cli, cliJson, daemons, isAlive, rawConnection, rpcClient, startDaemon, waitQuiet } from "../integration/daemon.support.js"
import { fuzzParams } from "../support/fuzz.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const owned = daemons()
const dir = makeTmpDir("substrat-fuzz-")
const home = join(dir, "home")
const socket = join(home, "daemon.sock")
let pid = 0

interface Snapshot {
  readonly agents: unknown
  readonly sessions: unknown
  readonly workspaces: unknown
}

const snapshot = async (): Promise<Snapshot> => {
  const c = await rpcClient(socket)
  try {
    const { agents } = await c.call<{ agents: ReadonlyArray<{ id: string; name: string; parent_id: string | null; state: string }> }>("agent.list")
    const { sessions } = await c.call<{ sessions: ReadonlyArray<{ id: string; state: string }> }>("session.list")
    const { workspaces } = await c.call<{ workspaces: ReadonlyArray<{ id: string; symlinks: unknown }> }>("workspace.list")
    return {
      agents: agents.map((a) => [a.id, a.name, a.parent_id, a.state]),
      sessions: sessions.map((s) => [s.id, s.state]),
      workspaces: workspaces.map((w) => [w.id, w.symlinks])
    }
  } finally {
    c.close()
  }
}

let before: Snapshot

beforeAll(async () => {
  pid = await startDaemon(home)
  owned.track(pid)
  await cliJson(home, ["agent", "create", "--name", "anchor", "--provider", "scripted"])
  await cliJson(home, ["agent", "send", "anchor", "hello"])
  await cliJson(home, ["workspace", "create", "--name", "ws"])
  await waitQuiet(home)
  before = await snapshot()
})

afterAll(async () => {
  await cli(home, ["daemon", "stop"])
  await owned.killAll()
  removeDir(dir)
})

// ---- frame generators ------------------------------------------------------------------------

const known = new Set(methodNames)
const control = new Set(["@effect/rpc/Ping", "@effect/rpc/Eof", "@effect/rpc/Ack", "@effect/rpc/Interrupt"])
const uuid = fc.uuid()

/** Methods whose params carry a reference; an unknown one must fail, never change anything. */
const refParams: Record<string, fc.Arbitrary<Record<string, unknown>>> = {
  "agent.send": fc.record({ agent: uuid, text: fc.string() }),
  "agent.attach": fc.record({ agent: uuid }),
  "agent.inspect": fc.record({ agent: uuid }),
  "agent.terminate": fc.record({ agent: uuid }),
  "agent.logs": fc.record({ agent: uuid, follow: fc.boolean() }),
  "session.suspend": fc.record({ session: uuid }),
  "session.resume": fc.record({ session: uuid }),
  "session.delete": fc.record({ session: uuid }),
  "workspace.link": fc.record({ workspace: uuid, host_path: fc.constant("/tmp"), mount_path: fc.constant("x") }),
  "workspace.delete": fc.record({ workspace: uuid }),
  "agent.create": fc.record({ name: fc.constant("x"), provider: fc.constant("scripted"), workspace_id: uuid })
}
const withParams = Object.keys(refParams)

const wrongValue = fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.integer(), { maxLength: 3 }), fc.double())

const badParams = fc.constantFrom(...withParams).chain((method) =>
  fc.oneof(
    // params of the wrong type altogether
    wrongValue.map((params) => ({ method, params })),
    fc.string().map((params) => ({ method, params })),
    // a field of the wrong type
    fc.tuple(refParams[method]!, wrongValue).map(([p, v]) => {
      const key = Object.keys(p)[0]!
      return { method, params: { ...p, [key]: v } }
    }),
    // a required field missing
    refParams[method]!.map((p) => {
      const { [Object.keys(p)[0]!]: _, ...rest } = p
      return { method, params: rest }
    })
  )
)

const unknownRef = fc.constantFrom(...withParams).chain((method) => refParams[method]!.map((params) => ({ method, params })))

const unknownMethod = fc.string({ minLength: 1, maxLength: 40 })
  .filter((m) => !known.has(m) && !control.has(m))
  .map((method) => ({ method, params: {} }))

const badId = fc.oneof(
  fc.string({ minLength: 1 }).filter((s) => !/^\d+$/.test(s)),
  fc.integer({ max: -1 }),
  fc.double({ noInteger: true, noNaN: true }),
  fc.constant(null),
  fc.boolean(),
  fc.constant({})
)

const frame = (method: string, params: unknown, id: unknown = 1) => ({ jsonrpc: "2.0", id, method, params })

/** One line, no newline inside, not blank: what is sent, and the id a reply should echo (if any). */
const badFrame: fc.Arbitrary<{ readonly line: string; readonly id: number | null }> = fc.oneof(
  // random text
  fc.string({ minLength: 1, maxLength: 300 }).map((s) => s.replace(/[\r\n]/g, " ")).filter((s) => s.trim().length > 0)
    .map((line) => ({ line, id: null })),
  fc.fullUnicodeString({ minLength: 1, maxLength: 100 }).map((s) => s.replace(/[\r\n]/g, " ")).filter((s) => s.trim().length > 0)
    .map((line) => ({ line, id: null })),
  // random JSON
  fc.jsonValue().map((v) => ({ line: JSON.stringify(v) ?? "null", id: null })),
  // mutated frames
  fc.tuple(fc.nat(), unknownMethod).map(([id, f]) => ({ line: JSON.stringify(frame(f.method, f.params, id)), id })),
  fc.tuple(fc.nat(), badParams).map(([id, f]) => ({ line: JSON.stringify(frame(f.method, f.params, id)), id })),
  fc.tuple(fc.nat(), unknownRef).map(([id, f]) => ({ line: JSON.stringify(frame(f.method, f.params, id)), id })),
  fc.tuple(badId, unknownRef).map(([id, f]) => ({ line: JSON.stringify(frame(f.method, f.params, id)), id: null })),
  fc.tuple(fc.nat(), unknownRef, fc.constantFrom("1.0", 2, null)).map(([id, f, v]) =>
    ({ line: JSON.stringify({ ...frame(f.method, f.params, id), jsonrpc: v }), id })),
  fc.tuple(fc.nat(), unknownRef, fc.constantFrom("x", [1], [["a"]], 7)).map(([id, f, headers]) =>
    ({ line: JSON.stringify({ ...frame(f.method, f.params, id), headers }), id })),
  fc.tuple(fc.nat(), unknownRef).chain(([id, f]) => {
    const text = JSON.stringify(frame(f.method, f.params, id))
    return fc.integer({ min: 1, max: text.length - 1 }).map((cut) => ({ line: text.slice(0, cut), id: null }))
  }),
  // no method / no id (a notification)
  fc.tuple(fc.nat(), unknownRef).map(([id, f]) => ({ line: JSON.stringify({ jsonrpc: "2.0", id, params: f.params }), id })),
  unknownRef.map((f) => ({ line: JSON.stringify({ jsonrpc: "2.0", method: "daemon.status", params: f.params }), id: null }))
)

interface Reply {
  readonly jsonrpc?: unknown
  readonly id?: unknown
  readonly result?: unknown
  readonly error?: { readonly code?: unknown; readonly message?: unknown }
}

const expectError = (raw: string, id: number | null) => {
  const reply = JSON.parse(raw) as Reply
  expect(reply.jsonrpc).toBe("2.0")
  expect(reply.result).toBeUndefined()
  expect(Number.isInteger(reply.error?.code)).toBe(true)
  expect(typeof reply.error?.message).toBe("string")
  if (id !== null) expect(reply.id).toBe(id)
  return reply
}

describe("admin socket under bad input", () => {
  it("random and mutated frames: one JSON-RPC error each, on one connection that stays open", async () => {
    const conn = await rawConnection(socket)
    let frames = 0
    await fc.assert(
      fc.asyncProperty(badFrame, async ({ line, id }) => {
        conn.write(`${line}\n`)
        expectError(await conn.next(), id)
        frames++
      }),
      fuzzParams(600)
    )
    // Still the same connection, still answering.
    conn.write(`${JSON.stringify(frame("daemon.status", undefined, 424242))}\n`)
    const ok = JSON.parse(await conn.next()) as Reply & { result: { pid: number } }
    expect(ok.id).toBe(424242)
    expect(ok.result.pid).toBe(pid)
    expect(conn.closed()).toBe(false)
    conn.close()
    console.log(`rpc fuzz: ${frames} bad frames, each answered with one error`)
  })

  it("specific errors: parse error, unknown method, wrong params, unknown id, bad request id", async () => {
    const conn = await rawConnection(socket)
    const ask = async (line: string) => {
      conn.write(`${line}\n`)
      return JSON.parse(await conn.next()) as Reply
    }
    expect((await ask("{not json")).error?.code).toBe(-32700)
    expect(await ask(JSON.stringify(frame("agent.fly", {}, 7)))).toMatchObject({ id: 7, error: { code: -32601 } })
    expect(await ask(JSON.stringify(frame("agent.send", { agent: 5 }, 8)))).toMatchObject({ id: 8, error: { code: -32602 } })
    expect(await ask(JSON.stringify(frame("agent.inspect", { agent: "00000000-0000-4000-8000-000000000000" }, 9))))
      .toMatchObject({ id: 9, error: { code: -32001, data: { _tag: "Fail", error: { _tag: "NotFound", kind: "agent" } } } })
    expect(await ask(JSON.stringify(frame("session.delete", { session: "00000000-0000-4000-8000-000000000000" }, 10))))
      .toMatchObject({ id: 10, error: { code: -32001 } })
    expect(await ask(JSON.stringify(frame("daemon.status", undefined, "abc")))).toMatchObject({ id: "abc", error: { code: -32600 } })
    expect(await ask("[1,2,3]")).toMatchObject({ id: null, error: { code: -32600 } })
    conn.close()
  })

  it("an oversized line gets an error, is skipped to its newline, and the connection keeps working", async () => {
    const conn = await rawConnection(socket)
    const big = JSON.stringify(frame("agent.send", { agent: "anchor", text: "x".repeat(2 * 1024 * 1024) }, 11))
    // In pieces, like a slow client.
    for (let i = 0; i < big.length; i += 256 * 1024) conn.write(big.slice(i, i + 256 * 1024))
    conn.write(`\n${JSON.stringify(frame("daemon.status", undefined, 12))}\n`)
    const err = JSON.parse(await conn.next()) as Reply
    expect(err.error?.code).toBe(-32600)
    expect(String(err.error?.message)).toMatch(/longer than 1048576 bytes/)
    const ok = JSON.parse(await conn.next()) as Reply
    expect(ok.id).toBe(12)
    expect(ok.result).toBeDefined()
    conn.close()
  })

  it("a request split across writes is answered; abandoned half-frames and abrupt closes do no harm", async () => {
    const conn = await rawConnection(socket)
    const line = JSON.stringify(frame("agent.list", undefined, 13))
    conn.write(line.slice(0, 10))
    await new Promise((r) => setTimeout(r, 50))
    conn.write(`${line.slice(10)}\n`)
    expect((JSON.parse(await conn.next()) as Reply).id).toBe(13)
    conn.close()
    for (let i = 0; i < 20; i++) {
      const c = await rawConnection(socket)
      c.write(i % 2 === 0 ? '{"jsonrpc":"2.0","id":1,"method":"agent.li' : "\u0000\u0001garbage")
      c.close()
    }
  })

  it("a client that half-closes after writing still gets every answer", async () => {
    const net = await import("node:net")
    const replies = await new Promise<Array<string>>((resolve, reject) => {
      const c = net.createConnection({ path: socket })
      let buf = ""
      c.on("data", (d: Buffer) => (buf += d.toString("utf8")))
      c.on("close", () => resolve(buf.trim().split("\n")))
      c.on("error", reject)
      c.on("connect", () =>
        c.end([
          JSON.stringify(frame("session.list", undefined, 61)),
          JSON.stringify(frame("agent.logs", { agent: "anchor" }, 62)),
          JSON.stringify(frame("agent.inspect", { agent: "nobody" }, 63)),
          "garbage"
        ].join("\n") + "\n"))
    })
    const parsed = replies.map((l) => JSON.parse(l) as Reply & { chunk?: boolean })
    const finals = parsed.filter((r) => r.chunk !== true)
    expect(finals.map((r) => r.id).sort()).toEqual([61, 62, 63, null].sort())
    expect(parsed.some((r) => r.chunk === true && r.id === 62)).toBe(true)
  })

  it("afterwards: same daemon, same state", async () => {
    expect(isAlive(pid)).toBe(true)
    expect(fs.readFileSync(join(home, "daemon.pid"), "utf8").trim()).toBe(String(pid))
    expect(await snapshot()).toEqual(before)
    const status = await cliJson<{ pid: number; agents: number }>(home, ["daemon", "status"])
    expect(status).toMatchObject({ pid, agents: 1 })
  })
})
