// Helpers for daemon tests with the real claude binary that need no test runner (the chaos
// experiments import them too): the metered home, the scripted endpoint, reading agents' logs.
import { Effect } from "effect"
import * as Path from "node:path"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { makeTmpDir } from "../support/tmp.js"

const repoRoot = Path.resolve(import.meta.dirname, "../..")

/** The native Claude Code binary (the npm package's postinstall copies it to bin/claude.exe). */
export const claudeBin = Path.join(repoRoot, "node_modules/@anthropic-ai/claude-code/bin/claude.exe")

export { agentEvents, dataNamed, jsonLines, type LoggedEvent, readJsonLines } from "../support/agentLogs.js"

/** A scripted endpoint on a loopback port for the duration of `f` (the daemon tests are promise-based). */
export const withLlm = async <A>(
  script: ReadonlyArray<ScriptedLlm.ScriptEntry>,
  f: (llm: ScriptedLlm.ScriptedLlmServer) => Promise<A>
): Promise<A> =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(ScriptedLlm.make({ listen: { port: 0 }, script }), (llm) => Effect.promise(() => f(llm)))))

/** The environment a metered claude daemon test sets (register these keys with daemonTestScope). */
export const claudeMeterEnvKeys = [
  "SUBSTRAT_ANTHROPIC_UPSTREAM",
  "ANTHROPIC_API_KEY",
  "SUBSTRAT_CLAUDE_BIN",
  "SUBSTRAT_CLAUDE_MODEL",
  "SUBSTRAT_METER_PRICES"
] as const

/**
 * A fresh home for a daemon whose claude agents reach `llm` through the forwarder, ask for model
 * `claude-test-1`, priced $1 / $2 / $0.5 / $4 per million input / output / cache-read / cache-write
 * tokens. `prefix` is short: agent socket paths must fit in sun_path.
 */
export const claudeMeteredHome = (llm: ScriptedLlm.ScriptedLlmServer, homes: Array<string>, prefix: string): string => {
  const home = makeTmpDir(prefix)
  homes.push(home)
  process.env["SUBSTRAT_ANTHROPIC_UPSTREAM"] = llm.baseUrl
  process.env["ANTHROPIC_API_KEY"] = "sk-test-daemon-only"
  process.env["SUBSTRAT_CLAUDE_BIN"] = claudeBin
  process.env["SUBSTRAT_CLAUDE_MODEL"] = "claude-test-1"
  process.env["SUBSTRAT_METER_PRICES"] = JSON.stringify({ "claude-test-1": { input: 1, output: 2, cache_read: 0.5, cache_write: 4 } })
  return home
}
