// Where everything lives under $SUBSTRAT_HOME (ARCHITECTURE §4). Pure path arithmetic.
import { Context, Layer } from "effect"
import { join } from "node:path"
import { type ProcessEnv, resolveHome } from "./Config.js"

export interface Paths {
  readonly home: string
  readonly socket: string
  readonly pidFile: string
  readonly daemonLog: string
  /** The daemon's order of appends across sessions (src/storage/EventIndex.ts). */
  readonly eventIndex: string
  /** Where the recovery fold of long logs stood (src/recovery/Checkpoint.ts). */
  readonly foldCheckpoint: string
  /** The file event log's group-commit journal (src/storage/internal/eventJournal.ts). */
  readonly eventJournal: string
  readonly agentsDir: string
  readonly workspacesDir: string
  readonly sessionDir: (sessionId: string) => string
  readonly sessionFile: (sessionId: string) => string
  readonly eventsFile: (sessionId: string) => string
  readonly pendingFile: (sessionId: string) => string
  readonly transcriptFile: (sessionId: string) => string
  readonly agentSocket: (sessionId: string) => string
  readonly mcpConfig: (sessionId: string) => string
  readonly workspaceDir: (workspaceId: string) => string
}

export const makePaths = (home: string): Paths => {
  const agentsDir = join(home, "agents")
  const workspacesDir = join(home, "workspaces")
  const sessionDir = (id: string) => join(agentsDir, id)
  return {
    home,
    socket: join(home, "daemon.sock"),
    pidFile: join(home, "daemon.pid"),
    daemonLog: join(home, "daemon.log"),
    eventIndex: join(home, "events.index"),
    foldCheckpoint: join(home, "recovery.checkpoint"),
    eventJournal: join(home, "events.journal"),
    agentsDir,
    workspacesDir,
    sessionDir,
    sessionFile: (id) => join(sessionDir(id), "session.json"),
    eventsFile: (id) => join(sessionDir(id), "events.jsonl"),
    pendingFile: (id) => join(sessionDir(id), "events.pending"),
    transcriptFile: (id) => join(sessionDir(id), "transcript.txt"),
    agentSocket: (id) => join(sessionDir(id), "agent.sock"),
    mcpConfig: (id) => join(sessionDir(id), "mcp.json"),
    workspaceDir: (id) => join(workspacesDir, id)
  }
}

/** `$SUBSTRAT_HOME`, else `~/.substrat` (Config.ts reads the environment). */
export const defaultHome = (env?: ProcessEnv): string => resolveHome(undefined, env)

export class SubstratPaths extends Context.Tag("substrat/Paths")<SubstratPaths, Paths>() {
  static readonly layer = (home: string): Layer.Layer<SubstratPaths> => Layer.succeed(SubstratPaths, makePaths(home))
}
