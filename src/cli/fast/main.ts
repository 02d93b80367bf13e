// The fast path of one-shot commands (docs/cli.md "Start-up speed"): the request/response
// commands of Argv.ts, answered with one JSON-RPC line over node:net and printed through the
// same Format.ts/Exit.ts as the full CLI — same stdout, stderr and exit code — without loading
// Effect or @effect/cli. Bundled alone into dist/cli-fast.cjs (scripts/build.ts); the launcher
// (scripts/substrat.cjs) calls `run`, with the full CLI as `fallback` for every other command
// line and for replies it cannot reproduce exactly. SUBSTRAT_CLI_FULL=1 skips it.
import { homedir } from "node:os"
import { join } from "node:path"
import { errorLine, exitCodeOf, ExitCode, lostConnectionMessage, notRunningMessage } from "../Exit.js"
import { type FastCall, parse } from "./Argv.js"
import { call } from "./Wire.js"

/** `$SUBSTRAT_HOME`, else `~/.substrat` (src/config/Paths.ts `defaultHome`, which imports Effect). */
const defaultHome = (): string => {
  const env = process.env["SUBSTRAT_HOME"]
  return env !== undefined && env.length > 0 ? env : join(homedir(), ".substrat")
}

const exit = (code: number): void => process.exit(code)

const fail = (message: string, code: number): void => {
  process.stderr.write(`${errorLine(message)}\n`)
  exit(code)
}

const answer = async (c: FastCall, fallback: () => void): Promise<void> => {
  const socket = join(c.home ?? defaultHome(), "daemon.sock")
  let printed = false
  const print = (text: string) => {
    printed = true
    process.stdout.write(`${text}\n`)
  }
  /** The full CLI may ask again only if nothing was printed and asking again changes nothing. */
  const canHandOver = () => c.repeatable && !printed
  const o = await call(socket, c.method, c.params, (item) => print(c.render(item)))
  switch (o._tag) {
    case "Success": {
      if (c.stream) return exit(ExitCode.ok)
      let text: string
      try {
        text = c.render(o.value)
      } catch (e) {
        // A result of another shape than the Schema's: the full CLI reports its decoding error.
        if (canHandOver()) return fallback()
        return fail(`internal error: ${String(e)}`, ExitCode.internal)
      }
      print(text)
      return exit(ExitCode.ok)
    }
    case "Failure":
      return fail(o.message, exitCodeOf(o.kind))
    case "NotRunning":
      return fail(notRunningMessage(socket), ExitCode.daemonNotRunning)
    case "Lost":
      return fail(lostConnectionMessage(socket, o.detail), ExitCode.daemonNotRunning)
    case "Unexpected":
      if (!o.sent || canHandOver()) return fallback()
      return fail(`internal error: ${o.detail}`, ExitCode.internal)
  }
}

/** Answer `argv` (process.argv.slice(2)) here when it is a fast command, else call `fallback`. */
export const run = (argv: ReadonlyArray<string>, fallback: () => void): void => {
  const c = parse(argv)
  if (c === undefined) return fallback()
  answer(c, fallback).catch((e: unknown) => fail(`internal error: ${String(e)}`, ExitCode.internal))
}
