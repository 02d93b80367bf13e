// `substrat mcp-server --socket <agent.sock> [--timeout-ms N]`: argument parsing and `main`.
// src/mcp/main.ts runs it as a program of its own; a CLI subcommand can call `main(argv)`.
// Arguments are parsed by hand: this process is spawned per provider turn, so it must not load
// @effect/cli (or anything else of substrat beyond src/mcp, the domain ids and src/config/Config.ts,
// whose `parentEnv` is this process's own environment: SUBSTRAT_AGENT_SOCKET set inside the sandbox).
import { parentEnv, type ProcessEnv } from "../config/Config.js"
import { serveStdio } from "./McpServer.js"

export const usage = `usage: substrat mcp-server --socket <path> [--timeout-ms <n>]

Speak MCP over stdio and forward Substrat's tool calls (send_message, broadcast, check_inbox,
spawn_agent, inspect_agent) to an agent socket (agents/<session-id>/agent.sock, or where it is
bound inside the sandbox). Started by the agent's CLI (Claude Code, Codex, cursor-agent).

  --socket <path>     the agent socket (required; env SUBSTRAT_AGENT_SOCKET also works)
  --timeout-ms <n>    give up on a silent daemon after n ms (default 30000)
`

export interface Args {
  readonly socket: string
  readonly timeoutMs: number
}

/** Parse argv (without node and script). Left: a usage error message (or "help"). */
export const parseArgs = (
  argv: ReadonlyArray<string>,
  env: ProcessEnv = parentEnv()
): { readonly _tag: "Right"; readonly args: Args } | { readonly _tag: "Left"; readonly message: string } => {
  let socket = env["SUBSTRAT_AGENT_SOCKET"] ?? ""
  let timeoutMs = 30_000
  const rest = argv[0] === "mcp-server" ? argv.slice(1) : argv
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i] ?? ""
    const eq = a.indexOf("=")
    const [flag, inline] = a.startsWith("--") && eq > 0 ? [a.slice(0, eq), a.slice(eq + 1)] : [a, undefined]
    const value = () => inline ?? rest[++i]
    switch (flag) {
      case "-h":
      case "--help":
        return { _tag: "Left", message: "help" }
      case "--socket": {
        const v = value()
        if (v === undefined || v === "") return { _tag: "Left", message: "--socket needs a path" }
        socket = v
        break
      }
      case "--timeout-ms": {
        const v = Number(value())
        if (!Number.isInteger(v) || v <= 0) return { _tag: "Left", message: "--timeout-ms needs a positive integer" }
        timeoutMs = v
        break
      }
      default:
        return { _tag: "Left", message: `unknown argument: ${a}` }
    }
  }
  if (socket === "") return { _tag: "Left", message: "--socket <path> is required" }
  return { _tag: "Right", args: { socket, timeoutMs } }
}

/** Run the server; resolves with the exit code when the client goes away. */
export const main = async (argv: ReadonlyArray<string>): Promise<number> => {
  const parsed = parseArgs(argv)
  if (parsed._tag === "Left") {
    if (parsed.message === "help") {
      process.stdout.write(usage)
      return 0
    }
    process.stderr.write(`substrat mcp-server: ${parsed.message}\n${usage}`)
    return 2
  }
  await serveStdio({ socket: parsed.args.socket, timeoutMs: parsed.args.timeoutMs })
  return 0
}

