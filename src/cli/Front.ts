// What the CLI answers before @effect/cli parses the command line: help pages, the version
// line, completion scripts and `__complete`, "did you mean" for unknown commands and flags,
// and command aliases (`ls`, `rm`) rewritten to their full names. See Help.ts and
// Completion.ts for why these are ours and not @effect/cli's built-ins.
import { Console, Duration, Effect, Option } from "effect"
import { parentEnv } from "../config/Config.js"
import { call, CliError, withClient } from "./Client.js"
import { pathsOf } from "./Common.js"
import { answer, type Dynamic, homeIn, script, type Shell, shells, want } from "./Completion.js"
import { renderHelp, type Style, unknownCommandMessage, unknownFlagMessage, versionLine, wantsColor } from "./Help.js"
import { type CommandNode, resolve } from "./Tree.js"

/** Handled here (exit code), or the argv @effect/cli should parse. */
export type FrontDoor =
  | { readonly _tag: "done"; readonly effect: Effect.Effect<number, CliError> }
  | { readonly _tag: "parse"; readonly args: ReadonlyArray<string>; readonly path: string }

export const terminalStyle = (): Style => ({
  color: wantsColor(parentEnv(), process.stdout.isTTY === true),
  width: Math.min(Math.max(process.stdout.columns ?? 100, 60), 120)
})

const done = (effect: Effect.Effect<number, CliError>): FrontDoor => ({ _tag: "done", effect })
const invalid = (message: string) => done(Effect.fail(new CliError({ kind: "invalid-input", message })))
const print = (text: string) => done(Effect.as(Console.log(text), 0))

/** Names and ids the daemon knows, for completing an argument; nothing when it is not running. */
const dynamicValues = (kind: Dynamic, home: string | undefined): Effect.Effect<ReadonlyArray<string>> => {
  const socket = pathsOf(Option.fromNullable(home)).socket
  const values: Effect.Effect<ReadonlyArray<string>, CliError> = Effect.suspend(() => {
    switch (kind) {
      case "agent":
        return Effect.flatMap(Effect.promise(() => import("../protocol/admin/agent.js")), ({ AgentGroup }) =>
          withClient(AgentGroup, socket, (c) =>
            call(socket, c.agent.list({})).pipe(Effect.map((r) => r.agents.flatMap((a) => [a.name, a.id])))))
      case "workspace":
        return Effect.flatMap(Effect.promise(() => import("../protocol/admin/workspace.js")), ({ WorkspaceGroup }) =>
          withClient(WorkspaceGroup, socket, (c) =>
            call(socket, c.workspace.list()).pipe(
              Effect.map((r) => r.workspaces.flatMap((w) => (w.name === undefined || w.name === null ? [w.id] : [w.name, w.id])))
            )))
      case "session":
        return Effect.flatMap(Effect.promise(() => import("../protocol/admin/session.js")), ({ SessionGroup }) =>
          withClient(SessionGroup, socket, (c) => call(socket, c.session.list(undefined)).pipe(Effect.map((r) => r.sessions.map((s) => s.id)))))
    }
  })
  return values.pipe(
    Effect.timeoutFail({ duration: Duration.seconds(2), onTimeout: () => new CliError({ kind: "unavailable", message: "timeout" }) }),
    Effect.orElseSucceed((): ReadonlyArray<string> => [])
  )
}

const completeWords = (tree: CommandNode, words: ReadonlyArray<string>): Effect.Effect<number> => {
  const w = want(tree, words.length === 0 ? [""] : words)
  const dynamic = w.want._tag === "dynamic" ? dynamicValues(w.want.kind, homeIn(words)) : Effect.succeed([])
  return Effect.flatMap(dynamic, (values) => {
    const lines = answer(w.want, w.current, values)
    return lines.length === 0 ? Effect.succeed(0) : Effect.as(Console.log(lines.join("\n")), 0)
  })
}

const isShell = (s: string | undefined): s is Shell => shells.some((x) => x === s)

/** Decide what to do with `args` (argv without node and the script). */
export const frontDoor = (tree: CommandNode, args: ReadonlyArray<string>, version: string, style: Style): FrontDoor => {
  if (args[0] === "__complete") return done(completeWords(tree, args.slice(1)))
  const end = args.indexOf("--")
  const flags = end < 0 ? args : args.slice(0, end)
  const r = resolve(tree, args)
  const completions = flags.findIndex((a) => a === "--completions" || a.startsWith("--completions="))
  if (completions >= 0) {
    const a = flags[completions]!
    const shell = a.includes("=") ? a.slice(a.indexOf("=") + 1) : flags[completions + 1]
    if (!isShell(shell)) return invalid(`--completions needs one of: ${shells.join(", ")}`)
    return print(script(shell, tree.name))
  }
  if (flags.includes("--version")) return print(versionLine(tree.name, version))
  if (flags.includes("--help") || flags.includes("-h")) return print(renderHelp(r.node, style, version))
  if (r.strayAt !== undefined) return invalid(unknownCommandMessage(r.node, r.argv[r.strayAt]!))
  if (r.node.children.length > 0) return print(renderHelp(r.node, style, version))
  const badFlag = unknownFlagMessage(r.node, r.argv)
  if (badFlag !== undefined) return invalid(badFlag)
  return { _tag: "parse", args: r.argv, path: r.node.path.join(" ") }
}
