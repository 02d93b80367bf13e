// Exit codes and the wording of the errors every client path prints (docs/cli.md "Exit codes").
// Effect-free, used by Client.ts and main.ts.
import { dirname, resolve } from "node:path"
import { defaultHome } from "../config/Paths.js"

/** Exit codes (docs/cli.md). */
export const ExitCode = {
  ok: 0,
  internal: 1,
  invalidInput: 2,
  daemonNotRunning: 3,
  notFound: 4,
  unavailable: 5,
  alreadyRunning: 6,
  agentFailed: 7
} as const

export type CliErrorKind = "internal" | "invalid-input" | "daemon-not-running" | "not-found" | "unavailable" | "already-running" | "agent-failed"
  | "agent-failed"

export const exitCodeOf = (kind: CliErrorKind): number => {
  switch (kind) {
    case "internal":
      return ExitCode.internal
    case "invalid-input":
      return ExitCode.invalidInput
    case "daemon-not-running":
      return ExitCode.daemonNotRunning
    case "not-found":
      return ExitCode.notFound
    case "unavailable":
      return ExitCode.unavailable
    case "already-running":
      return ExitCode.alreadyRunning
    case "agent-failed":
      return ExitCode.agentFailed
  }
}

/** The one line on stderr for an error. */
export const errorLine = (message: string): string => `substrat: ${message}`

/** Quote a word for a POSIX shell when it needs it. */
export const shellWord = (s: string): string => (/^[A-Za-z0-9_@%+=:,./~-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`)

/**
 * A `substrat …` command line to suggest, keeping the user's home: `--home <home>` unless it is
 * the one the suggestion would use anyway ($SUBSTRAT_HOME, else ~/.substrat).
 */
export const suggest = (home: string, command: string): string =>
  resolve(home) === resolve(defaultHome()) ? `substrat ${command}` : `substrat ${command} --home ${shellWord(home)}`

/** The daemon's socket is `<home>/daemon.sock` (config/Paths.ts). */
export const notRunningMessage = (socket: string): string =>
  `daemon not running (no answer on ${socket}); start it with: ${suggest(dirname(socket), "daemon start")}`

export const lostConnectionMessage = (socket: string, detail: string): string =>
  `lost the connection to the daemon (${socket}): ${detail}`

/** Connect errors that mean "no daemon there" (no socket file, refused, not a socket). */
export const isNotRunningCode = (code: string | undefined): boolean =>
  code === "ENOENT" || code === "ECONNREFUSED" || code === "ENOTSOCK"
