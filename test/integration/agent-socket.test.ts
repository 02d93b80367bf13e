// The per-agent tool socket (src/mcp/AgentSocket.ts) on the real orchestration stack: tool calls
// made through it change state like in-process ones, errors come back as JSON, admin methods do
// not exist there, and nobody can act as another agent through it.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Queue, Scope, Stream } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { makePaths } from "../../src/config/Paths.js"
import { ProviderError } from "../../src/domain/errors.js"
import type { AgentId } from "../../src/domain/ids.js"
import type { ProviderFactory, ProviderOutput } from "../../src/provider/Provider.js"
import { EdgeLive } from "../../src/mcp/McpServer.js"
import { callTool } from "../../src/mcp/AgentClient.js"
import * as AgentSocket from "../../src/mcp/AgentSocket.js"
import { tmpDir } from "../support/tmpDir.js"
import { makeGate, rawExchange, rpcLine, stackWith } from "./mcp.support.js"
import { dataOf, eventsOf } from "./orchestration.support.js"

/** The stack + a gate, for one test; `body` runs with both. */
const withStack = <A, E, R>(
  body: (gate: Effect.Effect.Success<typeof makeGate>, home: string) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const home = yield* tmpDir("substrat-agentsock-")
    const gate = yield* makeGate
    const ctx = yield* Layer.build(stackWith(home, gate.factory))
    return yield* body(gate, home).pipe(Effect.provide(ctx), Effect.provide(EdgeLive))
  })

const call = (socket: string, tool: string, args: unknown) => callTool({ socket, timeoutMs: 20_000 }, tool, args)

const serveFor = (home: string, agent: { readonly id: AgentId; readonly session_id: string }) =>
  Effect.gen(function*() {
    const path = makePaths(home).agentSocket(agent.session_id)
    yield* AgentSocket.serve({ path, agent: agent.id })
    return path
  })

describe("agent socket", () => {
  it.scoped("spawn_agent through the socket mid-turn: the child is in the tree at once, born after the turn", () =>
    withStack((gate, home) =>
      Effect.gen(function*() {
        const o = yield* Orchestrator
        const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "gated" })
        const sock = yield* serveFor(home, boss)
        expect(fs.statSync(sock).mode & 0o777).toBe(0o600)

        const turnFiber = yield* Effect.fork(o.runTurn(boss.id, "build a team"))
        const turn = yield* Queue.take(gate.turns)
        expect(turn.agent).toBe("boss")

        const spawned = yield* call(sock, "spawn_agent", { name: "kid", instructions: "you are kid" })
        expect(spawned.is_error).toBe(false)
        const res = spawned.result as { status: string; agent_id: string; name: string }
        expect(res).toMatchObject({ status: "created", name: "kid" })

        // In the tree now; no session yet (deferred spawn): nothing on disk for it.
        const kid = yield* o.findByName("kid", boss.id)
        expect(kid.id).toBe(res.agent_id)
        expect(fs.existsSync(makePaths(home).eventsFile(kid.session_id))).toBe(false)

        // A message to the unborn child is accepted (held until birth).
        const sent = yield* call(sock, "send_message", { recipient: "kid", text: "welcome", sync: false })
        expect(sent.is_error).toBe(false)

        yield* turn.finish("team built")
        yield* Fiber.join(turnFiber)

        const kidLog = yield* eventsOf(kid.session_id)
        expect(dataOf(kidLog, "agent.created")).toEqual([
          expect.objectContaining({ agent_id: kid.id, name: "kid", parent_session_id: boss.session_id })
        ])
        expect(dataOf(kidLog, "message.enqueued").map((m) => [m.sender, m.payload])).toEqual([[boss.id, "welcome"]])

        // The calls are logged in the caller's log, exactly like in-process tool calls.
        const bossLog = yield* eventsOf(boss.session_id)
        expect(dataOf(bossLog, "tool_call.invoked").map((e) => e.tool)).toEqual(["spawn_agent", "send_message"])
        expect(dataOf(bossLog, "tool_call.result").map((e) => e.is_error)).toEqual([false, false])
      })
    ))

  it.scoped("routing and other tool errors come back as JSON errors (and as JSON-RPC errors on the wire)", () =>
    withStack((_gate, home) =>
      Effect.gen(function*() {
        const o = yield* Orchestrator
        const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "gated" })
        const a = yield* o.spawn(boss.id, { name: "a", instructions: "a" })
        yield* o.spawn(a.id, { name: "grandkid", instructions: "g" })
        const sock = yield* serveFor(home, boss)

        const nobody = yield* call(sock, "send_message", { recipient: "nobody", text: "hi" })
        expect(nobody.is_error).toBe(true)
        expect(nobody.result).toEqual({
          error: expect.objectContaining({ type: "routing_error", reason: "unknown-recipient" })
        })
        const twoHops = yield* call(sock, "send_message", { recipient: "grandkid", text: "hi" })
        expect(twoHops.result).toEqual({ error: expect.objectContaining({ type: "routing_error" }) })
        const taken = yield* call(sock, "spawn_agent", { name: "a", instructions: "dup" })
        expect(taken.result).toEqual({ error: expect.objectContaining({ type: "name_taken" }) })
        const gone = yield* call(sock, "inspect_agent", { name: "ghost" })
        expect(gone.is_error).toBe(true)

        // On the wire: a JSON-RPC error object with the tool error inside.
        const [wire] = yield* rawExchange(sock, [rpcLine(7, "send_message", { recipient: "nobody", text: "x" })], 1)
        expect(wire).toMatchObject({
          jsonrpc: "2.0",
          id: 7,
          error: { code: -32010, message: expect.stringContaining("nobody") }
        })

        // The failed calls are in boss's log as tool_call.result with is_error.
        const log = yield* eventsOf(boss.session_id)
        expect(dataOf(log, "tool_call.result").filter((r) => r.is_error).length).toBeGreaterThanOrEqual(5)
        // Nothing was delivered anywhere.
        expect(dataOf(yield* eventsOf(a.session_id), "message.enqueued")).toEqual([])
      })
    ))

  it.scoped("admin methods are not reachable: JSON-RPC -32601, and the connection keeps working", () =>
    withStack((_gate, home) =>
      Effect.gen(function*() {
        const o = yield* Orchestrator
        const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "gated" })
        const sock = yield* serveFor(home, boss)
        const replies = yield* rawExchange(sock, [
          rpcLine(1, "agent.list", {}),
          rpcLine(2, "daemon.stop"),
          rpcLine(3, "agent.create", { name: "evil" }),
          rpcLine(4, "@effect/rpc/Whatever"),
          "this is not json",
          rpcLine(5, "check_inbox", {})
        ], 6)
        const byId = (id: number) => replies.find((r) => r["id"] === id)
        for (const id of [1, 2, 3, 4]) {
          expect(byId(id)).toMatchObject({ error: { code: -32601, message: expect.stringContaining("Method not found") } })
        }
        expect(replies.find((r) => r["id"] === null)).toMatchObject({ error: { code: -32700 } })
        expect(byId(5)).toMatchObject({ result: { messages: [] } })
        // A client that writes and half-closes (socat, `nc -N`) still gets its answers.
        const halfClosed = yield* rawExchange(sock, [rpcLine(6, "check_inbox", {}), rpcLine(7, "agent.list", {})], 2, true)
        expect(halfClosed.map((r) => r["id"]).sort()).toEqual([6, 7])
        // Nothing happened: still one agent, the daemon-level effects did not run.
        expect((yield* o.list).map((n) => n.name)).toEqual(["boss"])
      })
    ))

  it.scoped("identity is the socket: no caller-supplied identity is accepted, calls act as the socket's agent", () =>
    withStack((_gate, home) =>
      Effect.gen(function*() {
        const o = yield* Orchestrator
        const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "gated" })
        const a = yield* o.spawn(boss.id, { name: "a", instructions: "a" })
        const b = yield* o.spawn(boss.id, { name: "b", instructions: "b" })
        const sockA = yield* serveFor(home, a)
        const sockB = yield* serveFor(home, b)

        // Extra keys claiming another identity are rejected, by the typed client and on the wire.
        for (const claim of [{ agent_id: boss.id }, { from: "boss" }, { sender: boss.id }]) {
          const r = yield* call(sockA, "send_message", { recipient: "b", text: "forged", sync: false, ...claim })
          expect(r.result).toEqual({ error: expect.objectContaining({ type: "invalid_arguments" }) })
        }
        const [wire] = yield* rawExchange(sockA, [
          rpcLine(9, "send_message", { recipient: "b", text: "forged", sync: false, agent_id: boss.id })
        ], 1)
        expect(wire).toMatchObject({ id: 9, error: { code: -32602 } })
        expect(dataOf(yield* eventsOf(b.session_id), "message.enqueued")).toEqual([])

        // A plain call through a's socket is a's call.
        const ok = yield* call(sockA, "send_message", { recipient: "b", text: "from a", sync: false })
        expect(ok.is_error).toBe(false)
        const env = dataOf(yield* eventsOf(b.session_id), "message.enqueued")
        expect(env.map((m) => [m.sender, m.recipient, m.payload])).toEqual([[a.id, b.id, "from a"]])

        // Each socket reads its own agent's inbox only.
        const inboxA = yield* call(sockA, "check_inbox", {})
        expect(inboxA.result).toEqual({ messages: [] })
        const inboxB = yield* call(sockB, "check_inbox", {})
        expect(inboxB.result).toEqual({
          messages: [expect.objectContaining({ from: "a", text: "from a", kind: "notification" })]
        })
        // The log of a (not boss, not b) holds the tool calls made through a's socket.
        expect(dataOf(yield* eventsOf(a.session_id), "tool_call.invoked").map((e) => e.tool)).toEqual([
          "send_message",
          "check_inbox"
        ])
        expect(dataOf(yield* eventsOf(boss.session_id), "tool_call.invoked")).toEqual([])
      })
    ))

  it.scoped("the socket file: 0600 while served, removed on release; stale sockets replaced; other files kept", () =>
    withStack((_gate, home) =>
      Effect.gen(function*() {
        const o = yield* Orchestrator
        const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "gated" })
        const path = makePaths(home).agentSocket(boss.session_id)

        const scope = yield* Scope.make()
        yield* AgentSocket.serve({ path, agent: boss.id }).pipe(Scope.extend(scope))
        expect(fs.statSync(path).isSocket()).toBe(true)
        expect(fs.statSync(path).mode & 0o777).toBe(0o600)
        expect((yield* call(path, "check_inbox", {})).is_error).toBe(false)
        yield* Scope.close(scope, Exit.void)
        expect(fs.existsSync(path)).toBe(false)
        const after = yield* call(path, "check_inbox", {})
        expect(after.result).toEqual({ error: expect.objectContaining({ type: "daemon_unavailable" }) })

        // A leftover socket file (dead daemon) is replaced: a second serve on the same path works.
        const s2 = yield* Scope.make()
        yield* AgentSocket.serve({ path, agent: boss.id }).pipe(Scope.extend(s2))
        yield* AgentSocket.serve({ path, agent: boss.id }) // takes over the path
        expect((yield* call(path, "check_inbox", {})).is_error).toBe(false)
        yield* Scope.close(s2, Exit.void) // the first one's release leaves the newer socket alone
        expect((yield* call(path, "check_inbox", {})).is_error).toBe(false)
        expect(fs.readdirSync(join(path, "..")).filter((f) => f.endsWith(".s"))).toEqual([]) // no staging leftovers

        // A regular file is never clobbered.
        const file = join(home, "not-a-socket")
        fs.writeFileSync(file, "keep me")
        const err = yield* AgentSocket.serve({ path: file, agent: boss.id }).pipe(Effect.flip)
        expect(err).toMatchObject({ _tag: "AgentSocketError", reason: "path" })
        expect(fs.readFileSync(file, "utf8")).toBe("keep me")

        // A path too long for sun_path is a clear error, not a truncated socket somewhere else.
        const long = join(home, "x".repeat(120), "agent.sock")
        const tooLong = yield* AgentSocket.serve({ path: long, agent: boss.id }).pipe(Effect.flip)
        expect(tooLong.message).toMatch(/more than a Unix socket allows/)
      })
    ))

  const setpriv = spawnSync("sh", ["-c", "command -v setpriv"], { encoding: "utf8" }).stdout.trim()
  const canSwitchUid = process.getuid?.() === 0 && setpriv !== ""
  it.scoped.skipIf(!canSwitchUid)("owner: only the sandbox uid it is chowned to can connect", () =>
    withStack((_gate, _home) =>
      Effect.gen(function*() {
        const o = yield* Orchestrator
        const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "gated" })
        // A directory other uids can traverse, as inside a sandbox's bind mount.
        const dir = yield* tmpDir("substrat-owner-")
        fs.chmodSync(dir, 0o711)
        const path = join(dir, "agent.sock")
        yield* AgentSocket.serve({ path, agent: boss.id, owner: { uid: 65534, gid: 65534 } })
        expect(fs.statSync(path).uid).toBe(65534)
        const connectAs = (uid: number) =>
          spawnSync(setpriv, [
            `--reuid=${uid}`,
            `--regid=${uid}`,
            "--clear-groups",
            process.execPath,
            "-e",
            `const c=require("net").connect(${JSON.stringify(path)});c.on("connect",()=>{console.log("OK");c.destroy()});c.on("error",e=>{console.log(e.code);})`
          ], { encoding: "utf8", timeout: 20_000 }).stdout.trim()
        expect(connectAs(65534)).toBe("OK")
        expect(connectAs(65533)).toBe("EACCES")
      })
    ))

  it.scoped("serveTools: a provider serving the socket for its own lifetime (the CLI-provider seam)", () =>
    Effect.gen(function*() {
      const home = yield* tmpDir("substrat-agentsock-")
      const paths = makePaths(home)
      // What a CLI provider does: serve ctx.tools on the agent's socket while the instance lives;
      // its "CLI" (here: the turn itself) calls tools through the socket, as the MCP server would.
      const sockety: ProviderFactory = {
        name: "sockety",
        make: (ctx) =>
          Effect.gen(function*() {
            const socket = paths.agentSocket(ctx.session_id)
            yield* AgentSocket.serveTools({ path: socket, tools: ctx.tools }).pipe(
              Effect.mapError((e) => new ProviderError({ provider: "sockety", reason: "start", message: e.message }))
            )
            return {
              name: "sockety",
              start: () => Effect.void,
              send: (message: string) =>
                Stream.fromEffect(
                  call(socket, "spawn_agent", { name: `kid-${message}`, instructions: "help" }).pipe(Effect.provide(EdgeLive))
                ).pipe(Stream.map((r): ProviderOutput => ({ _tag: "Final", text: JSON.stringify(r.result) }))),
              suspend: Effect.succeed(new Uint8Array()),
              resume: () => Effect.void,
              stop: Effect.void
            }
          })
      }
      const ctx = yield* Layer.build(stackWith(home, sockety))
      yield* Effect.gen(function*() {
        const o = yield* Orchestrator
        const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "sockety" })
        const socket = paths.agentSocket(boss.session_id)
        expect(fs.existsSync(socket)).toBe(false) // no live provider yet
        yield* o.runTurn(boss.id, "a")
        expect(fs.statSync(socket).isSocket()).toBe(true) // the provider is live (in its slot)
        const kid = yield* o.findByName("kid-a", boss.id)
        expect(dataOf(yield* eventsOf(kid.session_id), "agent.created")).toHaveLength(1)
        yield* o.suspend(boss.session_id) // evicted: the provider's scope closes, and the socket with it
        expect(fs.existsSync(socket)).toBe(false)
        yield* o.runTurn(boss.id, "b") // resumed: served again
        expect((yield* o.list).map((n) => n.name).sort()).toEqual(["boss", "kid-a", "kid-b"])
      }).pipe(Effect.provide(ctx))
    }))
})
