// Deeply nested JSON and random JSON on both socket kinds (src/protocol/SocketGuard.ts): the
// admin socket of a real daemon (started with a line bound large enough for a 1,000,000-deep
// frame to reach the depth check) and an agent socket served in this process over a real Unix
// socket. Every frame gets exactly one JSON-RPC error reply, the connection stays usable and
// the server stays up — a daemon that died, or threw out of a socket callback here, fails the
// suite.
import { Effect, Exit, Scope } from "effect"
import fc from "fast-check"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { maxJsonDepth } from "../../src/protocol/SocketGuard.js"
import * as AgentSocket from "../../src/mcp/AgentSocket.js"
import { cli, cliJson, daemons, isAlive, rawConnection, startDaemon } from "../integration/daemon.support.js"
import { fuzzParams } from "../support/fuzz.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const owned = daemons()
const dir = makeTmpDir("substrat-depth-")
const home = join(dir, "home")
const adminSocket = join(home, "daemon.sock")
const agentSocket = join(dir, "a.sock")
const maxLine = 8 * 1024 * 1024
let pid = 0
let agentScope: Scope.CloseableScope | undefined
let toolCalls = 0
let agentProbes = 0

beforeAll(async () => {
  pid = await startDaemon(home, ["--max-line-bytes", String(maxLine)])
  owned.track(pid)
  await cliJson(home, ["agent", "create", "--name", "anchor", "--provider", "scripted"])
  // An agent socket whose tools answer {"ok": true}: the frames below must never reach them.
  agentScope = Effect.runSync(Scope.make())
  await Effect.runPromise(
    AgentSocket.serveTools({
      path: agentSocket,
      maxLineBytes: maxLine,
      tools: { invoke: () => Effect.sync(() => ((toolCalls++), { is_error: false, result: { ok: true } })) }
    }).pipe(Scope.extend(agentScope))
  )
}, 60_000)

afterAll(async () => {
  if (agentScope !== undefined) await Effect.runPromise(Scope.close(agentScope, Exit.void))
  await cli(home, ["daemon", "stop"])
  await owned.killAll()
  removeDir(dir)
})

const nested = (depth: number, leaf = "1") => "[".repeat(depth) + leaf + "]".repeat(depth)
const nestedObject = (depth: number) => "{\"a\":".repeat(depth) + "1" + "}".repeat(depth)

/** A request line whose `params.<field>` is the raw JSON text `value`. */
const frame = (id: number, method: string, field: string, value: string) =>
  `{"jsonrpc":"2.0","id":${id},"method":"${method}","params":{"${field}":${value}}}\n`

interface Reply {
  readonly id: number | string | null
  readonly result?: unknown
  readonly error?: { readonly code: number; readonly message: string }
}

const next = async (c: Awaited<ReturnType<typeof rawConnection>>): Promise<Reply> => JSON.parse(await c.next(60_000)) as Reply

const sockets = [
  // `method`/`field`: a Schema-checked params field; `readOnly`: the method random params go to
  // (a random value that happens to be valid params must not change the daemon's state).
  { name: "admin socket (real daemon)", path: adminSocket, method: "agent.create", field: "name", readOnly: "agent.inspect", ok: frameOk("agent.list") },
  { name: "agent socket", path: agentSocket, method: "send_message", field: "recipient", readOnly: "inspect_agent", ok: frameOk("check_inbox") }
] as const

/** A valid request (counted when it is a tool call, which must reach the tools). */
function frameOk(method: string) {
  return (id: number) => {
    if (method === "check_inbox") agentProbes++
    return `{"jsonrpc":"2.0","id":${id},"method":"${method}","params":{}}\n`
  }
}

describe.each(sockets)("$name: nesting depth is bounded before decoding", (s) => {
  it("depths 2,500 … 1,000,000 in a params field: one -32600 each, the connection and the server stay up", async () => {
    const c = await rawConnection(s.path)
    try {
      let id = 1
      for (const depth of [maxJsonDepth + 1, 2_500, 10_000, 100_000, 1_000_000]) {
        for (const value of [nested(depth), nestedObject(depth), nested(depth, "\"x\"")]) {
          c.write(frame(id, s.method, s.field, value))
          const reply = await next(c)
          expect(reply.error?.code, `depth ${depth}`).toBe(-32600)
          expect(reply.error?.message).toContain(`deeper than ${maxJsonDepth}`)
          c.write(s.ok(id + 1))
          const ok = await next(c)
          expect(ok.id).toBe(id + 1)
          expect(ok.error).toBeUndefined()
          id += 2
        }
      }
    } finally {
      c.close()
    }
    expect(isAlive(pid)).toBe(true)
  }, 120_000)

  it("nesting just within the bound is decoded and refused by the Schema (-32602), message formatted", async () => {
    const c = await rawConnection(s.path)
    try {
      // The envelope and params take two levels.
      c.write(frame(7, s.method, s.field, nested(maxJsonDepth - 2)))
      const reply = await next(c)
      expect(reply).toMatchObject({ id: 7, error: { code: -32602 } })
      expect(reply.error!.message).toMatch(/^Invalid params: /)
    } finally {
      c.close()
    }
  })

  it("brackets inside strings do not count, escaped quotes do not end a string", async () => {
    const c = await rawConnection(s.path)
    try {
      const text = JSON.stringify("[[[\\\"{{{" + "[".repeat(10_000))
      c.write(frame(8, s.method, s.field, `[${text}]`))
      const reply = await next(c)
      // A one-level array: past the depth check, refused by the Schema (the field wants a string).
      expect(reply).toMatchObject({ id: 8, error: { code: -32602 } })
    } finally {
      c.close()
    }
  })

  it("random JSON (fast-check) as params, as a whole line, and nested in ladders: one reply each, never a crash", async () => {
    const c = await rawConnection(s.path)
    let id = 1000
    try {
      const arb = fc.oneof(
        fc.jsonValue({ maxDepth: 8 }).map((v) => ({ params: JSON.stringify(v) })),
        fc.tuple(fc.integer({ min: 1, max: 50_000 }), fc.constantFrom("[", "{\"k\":", "[{\"a\":[")).map(([d, open]) => {
          const close = open === "[" ? "]" : open === "{\"k\":" ? "}" : "]}]"
          return { params: open.repeat(d) + "0" + close.repeat(d) }
        }),
        fc.json({ maxDepth: 6 }).map((line) => ({ line })),
        fc.string({ maxLength: 200 }).map((line) => ({ line: line.replace(/\n/g, " ") }))
      )
      await fc.assert(
        fc.asyncProperty(arb, async (f) => {
          const myId = id++
          const line = "line" in f ? f.line : `{"jsonrpc":"2.0","id":${myId},"method":"${s.readOnly}","params":${f.params}}`
          if (line.trim().length === 0) return
          c.write(line + "\n")
          const reply = await next(c)
          if (!("line" in f)) expect(reply.id === myId || reply.id === null).toBe(true)
          if (reply.error === undefined) {
            // Valid by accident (e.g. inspect_agent with {}): answered, and on the agent socket a tool call.
            expect(reply.result).toBeDefined()
            if (s.path === agentSocket) agentProbes++
          } else {
            expect(typeof reply.error.code).toBe("number")
          }
        }),
        fuzzParams(150)
      )
      c.write(s.ok(1))
      expect((await next(c)).id).toBe(1)
    } finally {
      c.close()
    }
    expect(isAlive(pid)).toBe(true)
  }, 300_000)
})

describe("after the deep frames", () => {
  it("the daemon is the same process, still serving; the agent socket's tools were never called with them", async () => {
    expect(isAlive(pid)).toBe(true)
    expect(fs.readFileSync(join(home, "daemon.pid"), "utf8").trim()).toBe(String(pid))
    const status = await cliJson<{ pid: number; agents: number }>(home, ["daemon", "status"])
    expect(status).toMatchObject({ pid, agents: 1 })
    // Only the `check_inbox` probes reached the tools, each once.
    expect(agentProbes).toBeGreaterThan(0)
    expect(toolCalls).toBe(agentProbes)
  })
})
