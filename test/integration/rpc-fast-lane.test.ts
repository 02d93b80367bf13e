// The frame guard's fast lane (src/daemon/FastLane.ts) against @effect/rpc, on one real daemon:
// a plain `agent.list` is answered by the guard; the same request carrying an @effect/rpc header
// goes through @effect/rpc. Two connections send the same request with the same id at the same
// state of the daemon — empty, after create, with a child born, with one agent waiting on another
// that is mid-turn, after terminate — and the reply lines must be byte-identical. Replies read
// right after a mutation's reply reflect that mutation (no stale reads), and a plain request is
// provably answered by the guard (its reply overtakes an @effect/rpc request sent before it).
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { type Agent, cli, daemons, rawConnection, startDaemon, waitFor, waitQuiet } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-fastlane-")
const home = join(dir, "home")
const socket = join(home, "daemon.sock")

type Conn = Awaited<ReturnType<typeof rawConnection>>
let fast: Conn
let slow: Conn
let nextId = 1

const line = (id: number, method: string, params: unknown, viaRpc: boolean, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    jsonrpc: "2.0",
    id,
    method,
    ...(params === undefined ? {} : { params }),
    ...(viaRpc ? { headers: [["x-substrat-test", "rpc"]] } : {}),
    ...extra
  }) + "\n"

/** The same request (same id) on both paths; both reply lines. */
const both = async (method: string, params?: unknown, id = nextId++, extra?: Record<string, unknown>) => {
  fast.write(line(id, method, params, false, extra))
  const f = await fast.next()
  slow.write(line(id, method, params, true, extra))
  const s = await slow.next()
  return { fast: f, slow: s }
}

/** A mutation through @effect/rpc on the fast lane's own connection; its parsed result. */
const call = async <A>(method: string, params: unknown): Promise<A> => {
  fast.write(line(nextId++, method, params, false))
  const reply = JSON.parse(await fast.next()) as { result?: A; error?: unknown }
  if (reply.result === undefined) throw new Error(`${method}: ${JSON.stringify(reply.error)}`)
  return reply.result
}

const agentsIn = (reply: string): ReadonlyArray<Agent> => (JSON.parse(reply) as { result: { agents: ReadonlyArray<Agent> } }).result.agents

beforeAll(async () => {
  fs.mkdirSync(join(home, "scripts"), { recursive: true, mode: 0o700 })
  fs.chmodSync(home, 0o700)
  // boss: spawns kid, then asks kid (sync) → boss waits while kid's slow turn runs.
  fs.writeFileSync(
    join(home, "scripts", "fl.json"),
    JSON.stringify({
      boss: {
        steps: [
          { tools: [{ tool: "spawn_agent", args: { name: "kid", instructions: "work" } }], text: "spawned" },
          { tools: [{ tool: "send_message", args: { recipient: "kid", text: "do it", sync: true } }], text: "asked" }
        ],
        after: "silent"
      },
      kid: { steps: [{ text: "done", delay_ms: 6000 }], after: "silent" }
    })
  )
  owned.track(await startDaemon(home))
  fast = await rawConnection(socket)
  slow = await rawConnection(socket)
})

afterAll(async () => {
  fast?.close()
  slow?.close()
  await cli(home, ["daemon", "stop"])
  await owned.killAll()
  removeDir(dir)
})

describe("admin socket fast lane (agent.list without @effect/rpc)", () => {
  it("a plain agent.list is answered by the frame guard, ahead of an @effect/rpc request sent before it", async () => {
    // One write, two lines: the first goes to @effect/rpc, the second is answered while the
    // chunk is framed, before the first even reaches @effect/rpc.
    fast.write(line(901, "agent.list", undefined, true) + line(902, "agent.list", undefined, false))
    const first = JSON.parse(await fast.next()) as { id: number }
    const second = JSON.parse(await fast.next()) as { id: number }
    expect([first.id, second.id]).toEqual([902, 901])
  })

  it("same bytes as @effect/rpc: empty tree, odd params, id 0, bad envelope", async () => {
    const empty = await both("agent.list")
    expect(empty.fast).toBe(`{"jsonrpc":"2.0","id":${JSON.parse(empty.fast).id},"result":{"agents":[]}}`)
    expect(empty.fast).toBe(empty.slow)
    // agent.list takes no params: whatever is sent, both paths answer alike.
    for (const params of [{}, { x: 1 }, [], null]) {
      const r = await both("agent.list", params)
      expect(r.fast).toBe(r.slow)
    }
    const zero = await both("agent.list", undefined, 0)
    expect(zero.fast).toBe(zero.slow)
    expect(JSON.parse(zero.fast)).toEqual({ jsonrpc: "2.0", id: 0, result: { agents: [] } })
    // A large id, and envelope errors (answered by the guard before either path).
    const big = await both("agent.list", undefined, 2 ** 53 - 1)
    expect(big.fast).toBe(big.slow)
    expect(JSON.parse(big.fast).id).toBe(2 ** 53 - 1)
    const badVersion = await both("agent.list", undefined, nextId++, { jsonrpc: "1.0" })
    expect(badVersion.fast).toBe(badVersion.slow)
    expect(JSON.parse(badVersion.fast).error.code).toBe(-32600)
    const badTrace = await both("agent.list", undefined, nextId++, { traceId: 5 })
    expect(badTrace.fast).toBe(badTrace.slow)
    expect(JSON.parse(badTrace.fast).error.code).toBe(-32600)
  })

  it("same bytes, and no stale read, after create / spawn / sync wait / terminate", async () => {
    // create → the next plain list (same connection, after the reply) has the agent.
    const boss = await call<Agent>("agent.create", { name: "boss", provider: "scripted:fl", instructions: "Lead \"us\" ↵\n" })
    const afterCreate = await both("agent.list")
    expect(afterCreate.fast).toBe(afterCreate.slow)
    expect(agentsIn(afterCreate.fast).map((a) => [a.id, a.name, a.state])).toEqual([[boss.id, "boss", "idle"]])

    // boss's first turn spawns kid.
    await call("agent.send", { agent: "boss", text: "spawn" })
    await waitQuiet(home)
    const withKid = await both("agent.list")
    expect(withKid.fast).toBe(withKid.slow)
    const kid = agentsIn(withKid.fast).find((a) => a.name === "kid")
    expect(kid?.parent_id).toBe(boss.id)

    // boss asks kid (sync); kid's turn takes seconds: boss waiting, kid busy, on both paths.
    await call("agent.send", { agent: "boss", text: "ask" })
    const midTurn = await waitFor("boss waiting, kid busy", async () => {
      const r = await both("agent.list")
      const states = agentsIn(r.fast).map((a) => `${a.name}:${a.state}`)
      return states.includes("boss:waiting") && states.includes("kid:busy") ? r : undefined
    })
    expect(midTurn.fast).toBe(midTurn.slow)

    await waitQuiet(home)
    const settled = await both("agent.list")
    expect(settled.fast).toBe(settled.slow)
    expect(agentsIn(settled.fast).map((a) => `${a.name}:${a.state}`)).toEqual(["boss:idle", "kid:idle"])

    // terminate → the next plain list no longer has the subtree.
    const term = await call<{ terminated: ReadonlyArray<string> }>("agent.terminate", { agent: "boss" })
    expect(term.terminated).toHaveLength(2)
    const afterTerminate = await both("agent.list")
    expect(afterTerminate.fast).toBe(afterTerminate.slow)
    expect(agentsIn(afterTerminate.fast)).toEqual([])
  })

  it("thousands of lists pipelined in one write: every id answered once, same bytes, daemon still serving", async () => {
    // More fast-lane answers than one read's budget (fastLaneBytesPerRead): the rest of the read
    // goes through @effect/rpc, so the replies are the same bytes whichever path served them.
    const n = 3000
    const reference = (await both("agent.list", undefined, 7777)).fast.replace('"id":7777', '"id":ID')
    fast.write(Array.from({ length: n }, (_, i) => line(10_000 + i, "agent.list", undefined, false)).join(""))
    const seen = new Set<number>()
    for (let i = 0; i < n; i++) {
      const reply = await fast.next()
      const id = (JSON.parse(reply) as { id: number }).id
      expect(seen.has(id)).toBe(false)
      seen.add(id)
      expect(reply).toBe(reference.replace('"id":ID', `"id":${id}`))
    }
    expect(seen.size).toBe(n)
    const after = await both("agent.list")
    expect(after.fast).toBe(after.slow)
  })

  it("a list pipelined right behind a create on the same connection is answered, and the next one sees the agent", async () => {
    fast.write(line(950, "agent.create", { name: "late", provider: "scripted" }, false) + line(951, "agent.list", undefined, false))
    const replies = [JSON.parse(await fast.next()), JSON.parse(await fast.next())] as Array<{ id: number; result: unknown }>
    const created = replies.find((r) => r.id === 950)!.result as Agent
    expect(replies.map((r) => r.id).sort()).toEqual([950, 951])
    const after = await both("agent.list")
    expect(after.fast).toBe(after.slow)
    expect(agentsIn(after.fast).map((a) => a.id)).toEqual([created.id])
  })
})
