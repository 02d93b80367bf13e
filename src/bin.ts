#!/usr/bin/env node
// The `substrat` executable: the only place that runs an Effect (NodeRuntime.runMain).
// Launched by scripts/substrat.cjs (bundled build in dist/, or this file through tsx).
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Exit } from "effect"
import { main } from "./cli/main.js"

// A reader that went away (`substrat logs | head`) ends the command quietly, as with any Unix tool.
process.stdout.on("error", (e: NodeJS.ErrnoException) => {
  if (e.code === "EPIPE") process.exit(0)
  throw e
})

NodeRuntime.runMain(main(process.argv), {
  disableErrorReporting: true,
  teardown: (exit) => process.exit(Exit.isSuccess(exit) && typeof exit.value === "number" ? exit.value : 0)
})
