// Shared wiring for the agent-socket and MCP server tests: the real orchestration stack on the
// file EventLog/SessionStore, with a "gated" provider whose turns stay open until the test
// finishes them — so tool calls made through the socket happen mid-turn, as a CLI agent's do.
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { Deferred, Effect, Layer, Queue, Stream } from "effect"
import { createRequire } from "node:module"
import * as net from "node:net"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import * as Orchestration from "../../src/agent/Orchestrator.js"
import type { ProviderFactory, ProviderOutput } from "../../src/provider/Provider.js"
import { ProviderRegistry } from "../../src/provider/ProviderRegistry.js"
import { scriptedFactory } from "../../src/provider/scripted/ScriptedProvider.js"
import { MultiplexerConfig } from "../../src/session/Multiplexer.js"
import { storage } from "./orchestration.support.js"

export interface GatedTurn {
  readonly agent: string
  readonly prompt: string
  /** End the turn with this final text. */
  readonly finish: (text: string) => Effect.Effect<void>
}

/** A provider whose every turn is handed to the test (through `turns`) and waits for `finish`. */
export const makeGate = Effect.gen(function*() {
  const turns = yield* Queue.unbounded<GatedTurn>()
  const factory: ProviderFactory = {
    name: "gated",
    make: (ctx) =>
      Effect.succeed({
        name: "gated",
        start: () => Effect.void,
        send: (message: string) =>
          Stream.unwrap(Effect.gen(function*() {
            const done = yield* Deferred.make<string>()
            yield* Queue.offer(turns, {
              agent: ctx.agent_name,
              prompt: message,
              finish: (text) => Deferred.succeed(done, text).pipe(Effect.asVoid)
            })
            const text = yield* Deferred.await(done)
            return Stream.make<Array<ProviderOutput>>({ _tag: "TextChunk", text }, { _tag: "Final", text })
          })),
        suspend: Effect.succeed(new TextEncoder().encode("{}")),
        resume: () => Effect.void,
        stop: Effect.void
      })
  }
  return { turns, factory } as const
})

/** Orchestrator (+ ToolHandler, EventLog, SessionStore, …) on files under `home`; scripted + these providers. */
export const stackWith = (home: string, ...providers: ReadonlyArray<ProviderFactory>) =>
  Orchestration.layer.pipe(
    Layer.provideMerge(
      Layer.mergeAll(ProviderRegistry.layer(scriptedFactory(), ...providers), MultiplexerConfig.layer(4), storage(home))
    )
  )

/**
 * Write raw lines to a Unix socket and collect the first `count` JSON lines that come back
 * (for JSON-RPC-level assertions a typed client cannot make).
 */
export const rawExchange = (path: string, lines: ReadonlyArray<string>, count: number, halfClose = false) =>
  Effect.async<ReadonlyArray<Record<string, unknown>>, Error>((resume) => {
    const conn = net.createConnection({ path, allowHalfOpen: true })
    const got: Array<Record<string, unknown>> = []
    let buf = ""
    const timer = setTimeout(() => finish(new Error(`only ${got.length}/${count} replies: ${JSON.stringify(got)}`)), 20_000)
    const finish = (e?: Error) => {
      clearTimeout(timer)
      conn.destroy()
      resume(e ? Effect.fail(e) : Effect.succeed(got))
    }
    conn.on("error", (e) => finish(e))
    conn.on("data", (d) => {
      buf += d.toString("utf8")
      let nl: number
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl)
        buf = buf.slice(nl + 1)
        if (line.trim() === "") continue
        const msg = JSON.parse(line) as Record<string, unknown>
        // @effect/rpc keep-alives are not answers.
        if (typeof msg["method"] === "string" && msg["method"].startsWith("@effect/rpc/")) continue
        got.push(msg)
        if (got.length >= count) return finish()
      }
    })
    conn.on("connect", () => {
      for (const l of lines) conn.write(l.endsWith("\n") ? l : `${l}\n`)
      if (halfClose) conn.end() // like `printf … | socat - UNIX-CONNECT:…`
    })
    return Effect.sync(() => {
      clearTimeout(timer)
      conn.destroy()
    })
  })

/** A JSON-RPC 2.0 request line. */
export const rpcLine = (id: number, method: string, params?: unknown): string =>
  JSON.stringify({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) })

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const tsx = createRequire(import.meta.url).resolve("tsx")

/** Spawn the MCP server (`src/mcp/main.ts`) on `socket` and connect the SDK client to it; closed with the scope. */
export const connectMcp = (socket: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: ["--import", tsx, join(repo, "src/mcp/main.ts"), "--socket", socket],
        cwd: repo,
        stderr: "pipe"
      })
      let stderr = ""
      transport.stderr?.on("data", (d: Buffer) => (stderr += d.toString("utf8")))
      const client = new Client({ name: "substrat-test", version: "0.0.0" })
      await client.connect(transport)
      return { client, stderr: () => stderr }
    }),
    ({ client }) => Effect.promise(() => client.close())
  )
