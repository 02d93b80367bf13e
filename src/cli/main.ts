// The `substrat` command tree, and how any outcome becomes one line on stderr + an exit code.
// Each top-level command's module is imported when the command line names it: `substrat agent
// list` evaluates the agent commands (and the Schemas of the agent methods) only. Help for the
// top level, completion, and a word that is no command load them all, so what they print is
// the same as with the whole tree.
import { Command, ValidationError } from "@effect/cli"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as NodeTerminal from "@effect/platform-node/NodeTerminal"
import { Cause, Console, Effect, Layer, Option } from "effect"
import { CliError } from "./Client.js"
import { errorLine, exitCodeOf, ExitCode } from "./Exit.js"
import { frontDoor, terminalStyle } from "./Front.js"
import { describe } from "./Help.js"
import { commandTree, type CommandNode } from "./Tree.js"
import { version } from "../version.js"

/** Each top-level command, in the order `substrat --help` lists them, and how to load it. */
const commands = {
  daemon: () => import("./commands/daemon.js").then((m) => m.daemonCommand),
  agent: () => import("./commands/agent.js").then((m) => m.agentCommand),
  logs: () => import("./commands/logs.js").then((m) => m.logsCommand),
  session: () => import("./commands/session.js").then((m) => m.sessionCommand),
  workspace: () => import("./commands/workspace.js").then((m) => m.workspaceCommand),
  swarm: () => import("./commands/swarm.js").then((m) => m.swarmCommand),
  doctor: () => import("./commands/doctor.js").then((m) => m.doctorCommand),
  cleanup: () => import("./commands/cleanup.js").then((m) => m.cleanupCommand),
  ui: () => import("./commands/ui.js").then((m) => m.uiCommand),
  config: () => import("./commands/config.js").then((m) => m.configCommand),
  budget: () => import("./commands/budget.js").then((m) => m.budgetCommand),
  caps: () => import("./commands/caps.js").then((m) => m.capsCommand),
  inbox: () => import("./commands/budget.js").then((m) => m.inboxCommand),
  cluster: () => import("./commands/cluster.js").then((m) => m.clusterCommand)
}
type Name = keyof typeof commands
type TopCommand = Awaited<ReturnType<(typeof commands)[Name]>>
const names = Object.keys(commands) as Array<Name>
const isName = (word: string): word is Name => Object.prototype.hasOwnProperty.call(commands, word)

const bare = () =>
  Command.make("substrat").pipe(
    Command.withDescription(describe("durable, sandboxed trees of LLM coding agents: a daemon and its CLI", {
      examples: [
        "substrat daemon start",
        "substrat agent create --name alpha --provider scripted:demo",
        "substrat agent send alpha \"Summarise README.md\""
      ]
    }))
  )
const rootOf = (subcommands: readonly [TopCommand, ...Array<TopCommand>]) => bare().pipe(Command.withSubcommands(subcommands))
type Root = ReturnType<typeof rootOf>

interface Loaded {
  /** Undefined for the root without commands (`substrat --version`: the front door answers it). */
  readonly root: Root | undefined
  readonly tree: CommandNode
  /** Every command is in it. */
  readonly whole: boolean
}

const load = async (only: ReadonlyArray<Name>): Promise<Loaded> => {
  const [first, ...rest] = await Promise.all(only.map((n) => commands[n]()))
  if (first === undefined) return { root: undefined, tree: commandTree(bare()), whole: false }
  const root = rootOf([first, ...rest])
  return { root, tree: commandTree(root), whole: only.length === names.length }
}

let whole: Promise<Loaded> | undefined
/** The whole command tree (every command loaded), built once. */
const loadAll = (): Promise<Loaded> => (whole ??= load(names))

/** The command tree our help and completion read. */
export const rootTree = (): Promise<CommandNode> => loadAll().then((l) => l.tree)

/**
 * The top-level command `args` run, when it is one: their first word that is not a flag (the
 * top level has no flags taking a value). Below it, the front door and @effect/cli see the same
 * subtree as in the whole tree, so a tree of that command alone answers the same.
 */
export const commandNamed = (args: ReadonlyArray<string>): Name | undefined => {
  if (args[0] === "__complete") return undefined
  for (const a of args) {
    if (a === "--") return undefined
    if (a.startsWith("-") && a.length > 1) continue
    return isName(a) ? a : undefined
  }
  return undefined
}

/**
 * The front door answers `--version` from the root's name alone, before anything else but
 * `__complete` and `--completions` (front door: Front.ts): with no command named, no command is loaded.
 */
const versionOnly = (args: ReadonlyArray<string>): boolean => {
  const end = args.indexOf("--")
  const flags = end < 0 ? args : args.slice(0, end)
  return args[0] !== "__complete" && flags.includes("--version") &&
    !flags.some((a) => a === "--completions" || a.startsWith("--completions="))
}

/** The tree for `args`: only the command they name, else all of them (none for the version alone). */
const loadFor = (args: ReadonlyArray<string>): Promise<Loaded> => {
  const name = commandNamed(args)
  return name !== undefined ? load([name]) : versionOnly(args) ? load([]) : loadAll()
}

/** The command tree `main` answers `args` (argv without node and the script) with. */
export const treeFor = (args: ReadonlyArray<string>): Promise<CommandNode> => loadFor(args).then((l) => l.tree)

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
export const main = (argv: ReadonlyArray<string>): Effect.Effect<number> =>
  Effect.flatMap(Effect.promise(() => loadFor(argv.slice(2))), ({ root, tree, whole }) => {
    const door = frontDoor(tree, argv.slice(2), version, terminalStyle())
    if (door._tag === "parse") {
      const args = [...argv.slice(0, 2), ...door.args]
      return root !== undefined
        ? parse(root, args, door.path, whole)
        : Effect.flatMap(Effect.promise(loadAll), (l) => parse(l.root!, args, door.path, true))
    }
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
  })

/**
 * @effect/cli parses and runs the command; its errors become one line + exit code. `whole`: the
 * tree has every command. @effect/cli's words for a command line it refuses can name the
 * top-level commands, so a refusal by a tree of one command is parsed again with the whole tree
 * (the command itself has not run: parsing comes first).
 */
const parse = (root: Root, argv: ReadonlyArray<string>, path: string, whole: boolean): Effect.Effect<number> => {
  const cli = Command.run(root, { name: "substrat", version })
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
          if (!whole) return Effect.flatMap(Effect.promise(loadAll), (l) => parse(l.root!, argv, path, true))
          const text = captured.length > 0 ? oneLine(captured.join("\n")) : "invalid command line"
          return Effect.as(Console.error(errorLine(`${text} (see ${path} --help)`)), ExitCode.invalidInput)
        }
      }
      if (Cause.isInterruptedOnly(cause)) return Effect.succeed(ExitCode.ok)
      return Effect.as(Console.error(errorLine(`internal error: ${Cause.pretty(cause)}`)), ExitCode.internal)
    })
  )
}
