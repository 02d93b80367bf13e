// `substrat cleanup [--purge] [--json]`: leftovers of dead daemons and crashed operations (stale
// sockets and pid files, temp files, git locks, incomplete workspace dirs, orphan sandbox
// processes — src/sandbox/Cleanup.ts). Reports what it found; deletes/kills only with --purge.
// Client-side: works with or without a daemon (a live daemon's socket, pid file, sandboxes and
// recent temp files are never touched).
import { Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import { isAlive, lockHolder, readPid } from "../../daemon/Lifecycle.js"
import { DaemonGroup } from "../../protocol/admin/daemon.js"
import { call, withClient } from "../Client.js"
import { home, json, pathsOf } from "../Common.js"
import { printJson, table } from "../Output.js"
import { describe } from "../Help.js"

export const cleanupCommand = Command.make("cleanup", {
  home,
  json,
  purge: Options.boolean("purge").pipe(Options.withDescription("Delete the files and kill the processes found (default: only report)"))
}, (o) =>
  Effect.gen(function*() {
    const paths = pathsOf(o.home)
    const Cleanup = yield* Effect.promise(() => import("../../sandbox/Cleanup.js"))
    const pid = readPid(paths.pidFile)
    // A daemon on a disk too full for its pid file holds the lock with the file empty: its pid
    // comes from the daemon itself.
    const daemonPid = pid !== undefined && isAlive(pid)
      ? pid
      : pid === undefined && (yield* Effect.orElseSucceed(lockHolder(paths), () => undefined)) === true
      ? yield* withClient(DaemonGroup, paths.socket, (c) => call(paths.socket, c.daemon.status())).pipe(
        Effect.map((s) => s.pid),
        Effect.timeout("5 seconds"),
        Effect.orElseSucceed(() => null)
      )
      : null
    const found = yield* Cleanup.scanLeftovers({ paths, daemonPid })
    const report = o.purge ? yield* Cleanup.purgeLeftovers(found) : found
    if (o.json) return yield* printJson(report)
    if (report.items.length === 0) return yield* Console.log("nothing to clean up")
    yield* Console.log(table([
      ["KIND", "WHAT", "DETAIL", ...(o.purge ? ["REMOVED"] : [])],
      ...report.items.map((i) => [
        i.kind,
        i.pid === null ? i.path ?? "-" : `pid ${i.pid}`,
        i.detail,
        ...(o.purge ? [i.removed ? "yes" : "NO"] : [])
      ])
    ]))
    if (!o.purge) yield* Console.log(`\n${report.items.length} leftover(s); run with --purge to remove them`)
  })).pipe(Command.withDescription(describe("Find leftovers of dead daemons (stale sockets, temp files, orphan sandboxes)", {
    examples: ["substrat cleanup", "substrat cleanup --purge"]
  })))
