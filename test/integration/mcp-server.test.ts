// The MCP server alone with the SDK's own Client over stdio (issue 7): the server process is
// `node --import tsx src/mcp/main.ts --socket <agent.sock>`, the agent socket is served by this
// test on the real orchestration stack. Outcomes are checked in the event logs and the tree.
import { describe, expect, it } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { Effect, Exit, Fiber, Layer, Queue, Scope } from "effect"
import { join } from "node:path"
import { Orchestrator } from "../../src/agent/Orchestrator.js"
import { makePaths } from "../../src/config/Paths.js"
import { callTool as callThroughSocket } from "../../src/mcp/AgentClient.js"
import * as AgentSocket from "../../src/mcp/AgentSocket.js"
import { parseArgs } from "../../src/mcp/Command.js"
import { EdgeLive } from "../../src/mcp/McpServer.js"
import { toolGuidance } from "../../src/domain/guidance.js"
import { inputJsonSchema, toolDescriptions, toolNames } from "../../src/domain/tools.js"
import { tmpDir } from "../support/tmpDir.js"
import { connectMcp, makeGate, stackWith } from "./mcp.support.js"
import { dataOf, eventsOf } from "./orchestration.support.js"


interface TextResult {
  readonly isError?: boolean
  readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }>
}

/** The JSON value carried by a tool result's text, and its error flag. */
const parse = (r: unknown): { readonly isError: boolean; readonly json: unknown } => {
  const t = r as TextResult
  expect(t.content).toHaveLength(1)
  expect(t.content[0]?.type).toBe("text")
  return { isError: t.isError === true, json: JSON.parse(t.content[0]?.text ?? "null") }
}

const connect = connectMcp

const callTool = (client: Client, name: string, args: Record<string, unknown>) =>
  Effect.promise(() => client.callTool({ name, arguments: args })).pipe(Effect.map(parse))

const withStack = <A, E, R>(
  body: (gate: Effect.Effect.Success<typeof makeGate>, home: string) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function*() {
    const home = yield* tmpDir("substrat-mcp-")
    const gate = yield* makeGate
    const ctx = yield* Layer.build(stackWith(home, gate.factory))
    return yield* body(gate, home).pipe(Effect.provide(ctx))
  })

describe("MCP server (SDK client over stdio)", () => {
  it.scoped("lists the five tools with our JSON Schemas and sends the guidance as instructions", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir("substrat-mcp-list-")
      // No socket needed to list tools.
      const { client } = yield* connect(join(dir, "absent.sock"))
      const { tools } = yield* Effect.promise(() => client.listTools())
      expect(tools.map((t) => t.name)).toEqual([...toolNames])
      for (const t of tools) {
        expect(t.inputSchema).toEqual(inputJsonSchema(t.name as (typeof toolNames)[number]))
        expect(t.description).toBe(toolDescriptions[t.name as (typeof toolNames)[number]])
        expect(t.inputSchema.type).toBe("object")
      }
      const send = tools.find((t) => t.name === "send_message")!
      expect(send.inputSchema.required).toEqual(["recipient", "text"])
      expect(Object.keys(send.inputSchema.properties ?? {})).toEqual(["recipient", "text", "sync", "reply_to", "timeout_seconds"])
      expect(client.getInstructions()).toBe(toolGuidance)
      expect(client.getServerVersion()?.name).toBe("substrat")
    }))

  it.scoped("calls every tool mid-turn; state changes as if the agent had called them in-process", () =>
    withStack((gate, home) =>
      Effect.gen(function*() {
        const o = yield* Orchestrator
        const top = yield* o.createRoot({ name: "top", instructions: "lead", provider: "gated" })
        const boss = yield* o.spawn(top.id, { name: "boss", instructions: "manage" })
        const peer = yield* o.spawn(top.id, { name: "peer", instructions: "a sibling" })
        const sock = makePaths(home).agentSocket(boss.session_id)
        yield* AgentSocket.serve({ path: sock, agent: boss.id })
        const { client } = yield* connect(sock)

        const turnFiber = yield* Effect.fork(o.runTurn(boss.id, "build a team"))
        const bossTurn = yield* Queue.take(gate.turns)

        const spawned = yield* callTool(client, "spawn_agent", { name: "kid", instructions: "you are kid", role: "reviewer" })
        expect(spawned.isError).toBe(false)
        expect(spawned.json).toMatchObject({ status: "created", name: "kid" })
        const kidId = (spawned.json as { agent_id: string }).agent_id

        const sent = yield* callTool(client, "send_message", { recipient: "kid", text: "review this" })
        expect(sent).toEqual({
          isError: false,
          json: { status: "sent", message_id: expect.any(String), waiting_for_reply: true }
        })
        const note = yield* callTool(client, "send_message", { recipient: "top", text: "working on it", sync: false })
        expect(note.isError).toBe(false)

        const cast = yield* callTool(client, "broadcast", { text: "hello team" })
        expect(cast.json).toMatchObject({ status: "sent", recipient_count: 1 }) // peer

        const inbox = yield* callTool(client, "check_inbox", {})
        expect(inbox).toEqual({ isError: false, json: { messages: [] } })

        const seen = yield* callTool(client, "inspect_agent", { name: "kid" })
        expect(seen.isError).toBe(false)
        expect(seen.json).toMatchObject({ agent_id: kidId, name: "kid", role: "reviewer", parent: "boss" })

        // The tools returned at once, mid-turn; the child exists but is born when the turn ends.
        const kid = yield* o.findByName("kid", boss.id)
        expect(kid.id).toBe(kidId)
        yield* bossTurn.finish("team built")
        yield* Fiber.join(turnFiber)

        // Born: its request is delivered and wakes it; its answer goes back to boss as a reply.
        const kidTurn = yield* Queue.take(gate.turns)
        expect(kidTurn.agent).toBe("kid")
        expect(kidTurn.prompt).toContain("Message from boss")
        expect(kidTurn.prompt).toContain("review this")
        yield* kidTurn.finish("looks good")
        const replyTurn = yield* Queue.take(gate.turns)
        expect(replyTurn.agent).toBe("boss")
        expect(replyTurn.prompt).toMatch(/^Reply from kid \(to message [0-9a-f-]{36}\): looks good/)
        yield* replyTurn.finish("done")
        yield* o.awaitIdle

        const kidLog = yield* eventsOf(kid.session_id)
        expect(dataOf(kidLog, "agent.created")[0]).toMatchObject({ name: "kid", role: "reviewer", parent_session_id: boss.session_id })
        expect(dataOf(kidLog, "message.enqueued").map((m) => [m.kind, m.payload])).toEqual([["request", "review this"]])
        const peerLog = yield* eventsOf(peer.session_id)
        expect(dataOf(peerLog, "message.enqueued").map((m) => [m.kind, m.payload])).toEqual([["multicast", "hello team"]])
        const bossLog = yield* eventsOf(boss.session_id)
        expect(dataOf(bossLog, "tool_call.invoked").map((e) => e.tool)).toEqual([
          "spawn_agent",
          "send_message",
          "send_message",
          "broadcast",
          "check_inbox",
          "inspect_agent"
        ])
        expect(dataOf(bossLog, "tool_call.result").every((r) => !r.is_error)).toBe(true)
        const topLog = yield* eventsOf(top.session_id)
        expect(dataOf(topLog, "message.enqueued").map((m) => [m.sender, m.kind, m.payload])).toEqual([
          [boss.id, "notification", "working on it"]
        ])
      })
    ))

  it.scoped("bad arguments and unknown tools are MCP error results; nothing reaches the agent's log", () =>
    withStack((_gate, home) =>
      Effect.gen(function*() {
        const o = yield* Orchestrator
        const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "gated" })
        const sock = makePaths(home).agentSocket(boss.session_id)
        yield* AgentSocket.serve({ path: sock, agent: boss.id })
        const { client } = yield* connect(sock)
        const bad: ReadonlyArray<readonly [string, Record<string, unknown>, RegExp]> = [
          ["send_message", { recipient: "kid" }, /text/],
          ["send_message", { recipient: "kid", text: 42 }, /Expected string/],
          ["send_message", { recipient: "kid", text: "x", sync: "yes" }, /boolean/],
          ["send_message", { recipient: "kid", text: "x", reply_to: "not-a-uuid" }, /reply_to/],
          ["send_message", { recipient: "kid", text: "x", as: "boss" }, /as/],
          ["broadcast", {}, /text/],
          ["check_inbox", { all: true }, /all/],
          ["spawn_agent", { name: "kid" }, /instructions/],
          ["spawn_agent", { name: "kid", instructions: "x", role: "" }, /role/],
          ["inspect_agent", { name: ["kid"] }, /Expected string/],
          ["rm_rf", {}, /unknown tool "rm_rf"/]
        ]
        for (const [tool, args, why] of bad) {
          const r = yield* callTool(client, tool, args)
          expect(r.isError, `${tool} ${JSON.stringify(args)}`).toBe(true)
          const err = (r.json as { error: { type: string; message: string } }).error
          expect(err.type).toBe(tool === "rm_rf" ? "unknown_tool" : "invalid_arguments")
          expect(err.message).toMatch(why)
        }
        // Routing errors come from the daemon (the call reached it) and are error results too.
        const routed = yield* callTool(client, "send_message", { recipient: "nobody", text: "x" })
        expect(routed.isError).toBe(true)
        expect(routed.json).toMatchObject({ error: { type: "routing_error", reason: "unknown-recipient" } })

        const log = yield* eventsOf(boss.session_id)
        expect(dataOf(log, "tool_call.invoked").map((e) => e.tool)).toEqual(["send_message"])
        expect((yield* o.list).map((n) => n.name)).toEqual(["boss"])
      })
    ))

  it.scoped("no daemon behind the socket: a clear error result per call; calls work again once it is back", () =>
    withStack((_gate, home) =>
      Effect.gen(function*() {
        const o = yield* Orchestrator
        const boss = yield* o.createRoot({ name: "boss", instructions: "manage", provider: "gated" })
        const sock = makePaths(home).agentSocket(boss.session_id)
        const { client, stderr } = yield* connect(sock)

        const missing = yield* callTool(client, "check_inbox", {})
        expect(missing.isError).toBe(true)
        expect(missing.json).toEqual({
          error: { type: "daemon_unavailable", message: expect.stringContaining(`cannot reach the Substrat daemon through ${sock}`) }
        })

        // The daemon serves it: the same server process now gets through.
        const scope = yield* Scope.make()
        yield* AgentSocket.serve({ path: sock, agent: boss.id }).pipe(Scope.extend(scope))
        expect(yield* callTool(client, "check_inbox", {})).toEqual({ isError: false, json: { messages: [] } })

        // The daemon goes away (socket closed and removed), then a stale socket file with nobody behind it.
        yield* Scope.close(scope, Exit.void)
        const gone = yield* callTool(client, "send_message", { recipient: "USER", text: "x" })
        expect(gone.json).toMatchObject({ error: { type: "daemon_unavailable" } })
        const net = yield* Effect.promise(() => import("node:net"))
        const stale = net.createServer().listen(sock)
        yield* Effect.promise(() => new Promise<void>((r) => stale.once("listening", () => r())))
        yield* Effect.promise(() => new Promise<void>((r) => stale.close(() => r()))) // leaves no listener
        const refused = yield* callTool(client, "check_inbox", {})
        expect(refused.json).toMatchObject({ error: { type: "daemon_unavailable" } })
        // Nothing on stdout but protocol (the client would have choked) and no crash report.
        expect(stderr()).not.toMatch(/Error|at /)
      })
    ))

  it.scopedLive("a daemon that accepts but never answers: daemon_unavailable after --timeout-ms", () =>
    Effect.gen(function*() {
      const dir = yield* tmpDir("substrat-mcp-mute-")
      const sock = join(dir, "mute.sock")
      const net = yield* Effect.promise(() => import("node:net"))
      const conns: Array<import("node:net").Socket> = []
      const mute = net.createServer((c) => void conns.push(c)).listen(sock)
      yield* Effect.addFinalizer(() =>
        Effect.promise(() => new Promise<void>((r) => {
          for (const c of conns) c.destroy()
          mute.close(() => r())
        }))
      )
      yield* Effect.promise(() => new Promise<void>((r) => mute.once("listening", () => r())))
      const r = yield* callThroughSocket({ socket: sock, timeoutMs: 300 }, "check_inbox", {}).pipe(Effect.provide(EdgeLive))
      expect(r).toEqual({
        is_error: true,
        result: { error: { type: "daemon_unavailable", message: expect.stringContaining("did not answer within 300 ms") } }
      })
      expect(conns.length).toBeGreaterThanOrEqual(1) // it did connect
    }))

  it("command line: --socket required, --timeout-ms checked, env fallback, help", () => {
    expect(parseArgs(["--socket", "/run/a.sock"], {})).toEqual({ _tag: "Right", args: { socket: "/run/a.sock", timeoutMs: 30000 } })
    expect(parseArgs(["mcp-server", "--socket=/x", "--timeout-ms=5"], {})).toEqual({
      _tag: "Right",
      args: { socket: "/x", timeoutMs: 5 }
    })
    expect(parseArgs([], { SUBSTRAT_AGENT_SOCKET: "/env.sock" })).toMatchObject({ args: { socket: "/env.sock" } })
    expect(parseArgs([], {})).toEqual({ _tag: "Left", message: "--socket <path> is required" })
    expect(parseArgs(["--socket"], {})).toMatchObject({ _tag: "Left" })
    expect(parseArgs(["--socket", "/x", "--timeout-ms", "0"], {})).toMatchObject({ _tag: "Left" })
    expect(parseArgs(["--socket", "/x", "--agent-id", "boss"], {})).toEqual({ _tag: "Left", message: "unknown argument: --agent-id" })
    expect(parseArgs(["--help"], {})).toEqual({ _tag: "Left", message: "help" })
  })
})
