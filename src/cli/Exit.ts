// Exit codes and the wording of the errors every client path prints (docs/cli.md "Exit codes").
// Effect-free, used by Client.ts and main.ts.

/** Exit codes (docs/cli.md). */
export const ExitCode = {
  ok: 0,
  internal: 1,
  invalidInput: 2,
  daemonNotRunning: 3,
  notFound: 4,
  unavailable: 5,
  alreadyRunning: 6
} as const

export type CliErrorKind = "internal" | "invalid-input" | "daemon-not-running" | "not-found" | "unavailable" | "already-running"

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
  }
}

/** The one line on stderr for an error. */
export const errorLine = (message: string): string => `substrat: ${message}`

export const notRunningMessage = (socket: string): string =>
  `daemon not running (no answer on ${socket}); start it with: substrat daemon start`

export const lostConnectionMessage = (socket: string, detail: string): string =>
  `lost the connection to the daemon (${socket}): ${detail}`

/** Connect errors that mean "no daemon there" (no socket file, refused, not a socket). */
export const isNotRunningCode = (code: string | undefined): boolean =>
  code === "ENOENT" || code === "ECONNREFUSED" || code === "ENOTSOCK"
