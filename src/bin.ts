#!/usr/bin/env node
// The `substrat` executable: the only place that runs an Effect (NodeRuntime.runMain).
// Launched by scripts/substrat.cjs (bundled build in dist/, or this file through tsx).
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Exit } from "effect"
import { main } from "./cli/main.js"

// A reader that went away (`substrat logs | head`) ends the command quietly, as with any Unix tool.
// Any other failure ends the command too, unless something else listens: the daemon's stdout is
// its log file, and a failed write there (a full disk) must not end it (daemon/Daemon.ts).
process.stdout.on("error", (e: NodeJS.ErrnoException) => {
  if (e.code === "EPIPE") process.exit(0)
  if (process.stdout.listenerCount("error") > 1) return
  throw e
})

/**
 * Calls `done` once everything written to `stream` so far has left the process. Writes to a
 * pipe are asynchronous in Node (a file or a terminal is written synchronously): `process.exit`
 * with output still queued would drop all but the first pipe-buffer's worth (64 KiB) of it. A
 * zero-length write's callback runs after every earlier write has been flushed.
 */
const flushed = (stream: NodeJS.WriteStream, done: () => void): void => {
  if (stream.destroyed || !stream.writable) return done()
  stream.write("", () => done())
}

NodeRuntime.runMain(main(process.argv), {
  disableErrorReporting: true,
  teardown: (exit) => {
    const code = Exit.isSuccess(exit) && typeof exit.value === "number" ? exit.value : 0
    process.exitCode = code
    flushed(process.stdout, () => flushed(process.stderr, () => process.exit(code)))
  }
})
