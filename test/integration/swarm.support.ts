// Shared by the swarm suites that drive a real daemon (swarm-daemon, swarm-find, swarm-schedule):
// the daemons and temp dirs a file owns, writing a code tree, and reading agents' event logs.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { daemons } from "./daemon.support.js"

/** One line of an agent's events.jsonl, loosely typed for assertions. */
export interface LogLine {
  readonly event: string
  readonly data: Record<string, unknown>
}

/** A row of `swarm agents --json`. */
export interface SwarmAgent {
  readonly node_id: string
  readonly agent_id: string
  readonly session_id: string
  readonly name: string
  readonly parent: string | null
  readonly status: string
}

/**
 * The daemons and temp dirs of one test file, all ended after it; `fresh()` makes a dir with a
 * `home` and a `repo` path (neither created).
 */
export const swarmScope = (prefix: string) => {
  const owned = daemons()
  const dirs: Array<string> = []
  afterAll(async () => {
    await owned.killAll()
    for (const d of dirs) removeDir(d)
  })
  const fresh = () => {
    const d = makeTmpDir(prefix)
    dirs.push(d)
    return { home: join(d, "home"), repo: join(d, "repo") }
  }
  return { owned, fresh }
}

/** Write `text` to `rel` under `root`, making its directories. */
export const write = (root: string, rel: string, text: string) => {
  fs.mkdirSync(join(root, rel, ".."), { recursive: true })
  fs.writeFileSync(join(root, rel), text)
}

/** The lines of a log; only its last line may be torn (a kill -9 mid-append: recovery repairs it). */
const parseLines = (text: string): ReadonlyArray<LogLine> => {
  const lines = text.split("\n").filter((l) => l.length > 0)
  return lines.flatMap((l, i) => {
    try {
      return [JSON.parse(l) as LogLine]
    } catch (e) {
      if (i === lines.length - 1) return []
      throw e
    }
  })
}

/** An agent session's log ([] before it exists). */
export const logOf = (home: string, session: string): ReadonlyArray<LogLine> => {
  const file = join(home, "agents", session, "events.jsonl")
  return fs.existsSync(file) ? parseLines(fs.readFileSync(file, "utf8")) : []
}

/** Every session's log: session id → lines. */
export const allLogs = (home: string): Map<string, ReadonlyArray<LogLine>> => {
  const dir = join(home, "agents")
  if (!fs.existsSync(dir)) return new Map()
  return new Map(fs.readdirSync(dir).map((s) => [s, logOf(home, s)] as const))
}
