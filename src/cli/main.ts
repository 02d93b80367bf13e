// The `substrat` command tree, and how any outcome becomes one line on stderr + an exit code.
import { Command, ValidationError } from "@effect/cli"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as NodeTerminal from "@effect/platform-node/NodeTerminal"
import { Cause, Console, Effect, Layer, Option } from "effect"
import { CliError } from "./Client.js"
import { agentCommand } from "./commands/agent.js"
import { cleanupCommand } from "./commands/cleanup.js"
import { configCommand } from "./commands/config.js"
import { daemonCommand } from "./commands/daemon.js"
import { doctorCommand } from "./commands/doctor.js"
import { logsCommand } from "./commands/logs.js"
import { sessionCommand } from "./commands/session.js"
import { swarmCommand } from "./commands/swarm.js"
import { workspaceCommand } from "./commands/workspace.js"
import { budgetCommand, inboxCommand } from "./commands/budget.js"
import { capsCommand } from "./commands/caps.js"
import { uiCommand } from "./commands/ui.js"
import { errorLine, exitCodeOf, ExitCode } from "./Exit.js"
import { frontDoor, terminalStyle } from "./Front.js"
import { describe } from "./Help.js"
import { commandTree, type CommandNode } from "./Tree.js"
import { version } from "../version.js"

export const root = Command.make("substrat").pipe(
  Command.withDescription(describe("durable, sandboxed trees of LLM coding agents: a daemon and its CLI", {
    examples: [
      "substrat daemon start",
      "substrat agent create --name alpha --provider scripted:demo",
      "substrat agent send alpha \"Summarise README.md\""
    ]
  })),
  Command.withSubcommands([daemonCommand, agentCommand, logsCommand, sessionCommand, workspaceCommand, swarmCommand, doctorCommand, cleanupCommand, uiCommand, configCommand, budgetCommand, capsCommand, inboxCommand])
)

const cli = Command.run(root, { name: "substrat", version })

let tree: CommandNode | undefined
/** The command tree our help and completion read (built once, on first use). */
export const rootTree = (): CommandNode => (tree ??= commandTree(root))

const CliEnv = Layer.mergeAll(NodeFileSystem.layer, NodePath.layer, NodeTerminal.layer)

const stripAnsi = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "")

/**
 * @effect/cli prints what was wrong with the command line (through Console.error) as a
 * multi-line document; we keep errors to one line: its first line, plus the innermost reason.
 */
export const oneLine = (doc: string): string => {
  const lines = stripAnsi(doc).split("\n").map((l) => l.replace(/^[\s│├└─]+/, "").trim()).filter((l) => l.length > 0)
  if (lines.length <= 1) return lines[0] ?? "invalid command line"
  return `${lines[0]}: ${lines[lines.length - 1]}`
}

/** Run the CLI on `argv` (process.argv shape); succeeds with the process exit code. */
export const main = (argv: ReadonlyArray<string>): Effect.Effect<number> => {
  const door = frontDoor(rootTree(), argv.slice(2), version, terminalStyle())
  if (door._tag === "parse") return parse([...argv.slice(0, 2), ...door.args], door.path)
  return door.effect.pipe(
    Effect.catchAllCause((cause) => {
      const failure = Cause.failureOption(cause)
      if (Option.isSome(failure)) {
        const e = failure.value
        if (e instanceof CliError) return Effect.as(Console.error(errorLine(e.message)), exitCodeOf(e.kind))
      }
      return Effect.failCause(cause)
    }),
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.succeed(ExitCode.ok)
        : Effect.as(Console.error(errorLine(`internal error: ${Cause.pretty(cause)}`)), ExitCode.internal)
    )
  )
}

/** @effect/cli parses and runs the command; its errors become one line + exit code. */
const parse = (argv: ReadonlyArray<string>, path: string): Effect.Effect<number> => {
  const captured: Array<string> = []
  const capturing = Effect.map(Console.consoleWith(Effect.succeed), (base): Console.Console => ({
    ...base,
    error: (...args: ReadonlyArray<unknown>) => Effect.sync(() => void captured.push(args.map(String).join(" ")))
  }))
  return Effect.flatMap(capturing, (console) => Console.withConsole(cli(argv), console)).pipe(
    Effect.provide(CliEnv),
    Effect.as(ExitCode.ok),
    Effect.catchAllCause((cause) => {
      const failure = Cause.failureOption(cause)
      if (Option.isSome(failure)) {
        const e = failure.value
        if (e instanceof CliError) return Effect.as(Console.error(errorLine(e.message)), exitCodeOf(e.kind))
        if (ValidationError.isValidationError(e)) {
          const text = captured.length > 0 ? oneLine(captured.join("\n")) : "invalid command line"
          return Effect.as(Console.error(errorLine(`${text} (see ${path} --help)`)), ExitCode.invalidInput)
        }
      }
      if (Cause.isInterruptedOnly(cause)) return Effect.succeed(ExitCode.ok)
      return Effect.as(Console.error(errorLine(`internal error: ${Cause.pretty(cause)}`)), ExitCode.internal)
    })
  )
}
