// `substrat cleanup`: find leftovers of dead daemons and crashed operations — stale sockets and
// pidfiles, temp files, git locks, incomplete workspace dirs, orphan sandbox processes — as data.
// `purgeLeftovers` deletes exactly what a scan reported (re-checking each process before killing it).
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Schema } from "effect"
import type { Paths } from "../config/Paths.js"

export const LeftoverKind = Schema.Literal(
  "stale-socket",
  "stale-pidfile",
  "tmp-file",
  "git-lock",
  "incomplete-workspace",
  "orphan-sandbox-process"
)
export class Leftover extends Schema.Class<Leftover>("Leftover")({
  kind: LeftoverKind,
  path: Schema.NullOr(Schema.String),
  pid: Schema.NullOr(Schema.Number),
  detail: Schema.String,
  removed: Schema.Boolean
}) {}
export class CleanupReport extends Schema.Class<CleanupReport>("CleanupReport")({
  purged: Schema.Boolean,
  items: Schema.Array(Leftover)
}) {}

export interface ScanInput {
  readonly paths: Paths
  /** pid of the live daemon, or null when none runs (then sockets/locks/processes are all stale). */
  readonly daemonPid: number | null
}

const item = (kind: typeof LeftoverKind.Type, detail: string, path: string | null = null, pid: number | null = null) =>
  new Leftover({ kind, path, pid, detail, removed: false })

/** Is `arg` bound at /workspace by this bwrap argv, from under `workspacesDir`? */
const sandboxRootOf = (argv: ReadonlyArray<string>, workspacesDir: string): string | null => {
  for (let i = 0; i + 2 < argv.length; i++) {
    if (argv[i] === "--bind" && argv[i + 2] === "/workspace" && argv[i + 1]!.startsWith(workspacesDir + "/")) return argv[i + 1]!
  }
  return null
}

export const scanLeftovers = (input: ScanInput) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const { paths } = input
    const items: Array<Leftover> = []
    const exists = (p: string) => fs.exists(p).pipe(Effect.orElseSucceed(() => false))
    const ls = (p: string) => fs.readDirectory(p).pipe(Effect.orElseSucceed((): Array<string> => []))
    const daemonDead = input.daemonPid === null

    if (daemonDead) {
      if (yield* exists(paths.socket)) items.push(item("stale-socket", "no daemon is running", paths.socket))
      if (yield* exists(paths.pidFile)) items.push(item("stale-pidfile", "no daemon is running", paths.pidFile))
      for (const sid of yield* ls(paths.agentsDir)) {
        const sock = paths.agentSocket(sid)
        if (yield* exists(sock)) items.push(item("stale-socket", "agent socket of a dead daemon", sock))
      }
    }
    for (const sid of yield* ls(paths.agentsDir)) {
      for (const f of yield* ls(paths.sessionDir(sid))) {
        if (f.endsWith(".tmp")) items.push(item("tmp-file", "interrupted atomic write", `${paths.sessionDir(sid)}/${f}`))
      }
    }
    for (const id of yield* ls(paths.workspacesDir)) {
      const dir = paths.workspaceDir(id)
      const entries = yield* ls(dir)
      if (!entries.includes("workspace.json")) {
        items.push(item("incomplete-workspace", "workspace dir without workspace.json (interrupted create/delete)", dir))
      }
      for (const f of entries) if (f.endsWith(".tmp")) items.push(item("tmp-file", "interrupted atomic write", `${dir}/${f}`))
      if (entries.includes("history.git")) {
        for (const f of yield* ls(`${dir}/history.git`)) {
          if (f.startsWith("index.diff-")) items.push(item("tmp-file", "temporary diff index", `${dir}/history.git/${f}`))
          if (daemonDead && f === "index.lock") items.push(item("git-lock", "git lock left by a dead daemon", `${dir}/history.git/${f}`))
        }
      }
    }
    // Sandboxes of this $SUBSTRAT_HOME whose parent is not the live daemon.
    for (const e of yield* ls("/proc")) {
      if (!/^\d+$/.test(e)) continue
      const pid = Number(e)
      const raw = yield* fs.readFileString(`/proc/${e}/cmdline`).pipe(Effect.orElseSucceed(() => ""))
      const argv = raw.split("\0")
      if (!(argv[0] ?? "").endsWith("bwrap")) continue
      const root = sandboxRootOf(argv, paths.workspacesDir)
      if (root === null) continue
      const stat = yield* fs.readFileString(`/proc/${e}/stat`).pipe(Effect.orElseSucceed(() => ""))
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1] ?? NaN)
      if (input.daemonPid !== null && ppid === input.daemonPid) continue
      // bwrap's own monitor child (same argv, parent = another bwrap of ours) is not separate.
      const parentCmd = yield* fs.readFileString(`/proc/${ppid}/cmdline`).pipe(Effect.orElseSucceed(() => ""))
      if (parentCmd === raw) continue
      items.push(item("orphan-sandbox-process", `bwrap for ${root} (parent pid ${ppid})`, root, pid))
    }
    return new CleanupReport({ purged: false, items })
  })

/** Remove/kill every item of a scan. Processes are re-checked (still bwrap for the same root) before SIGKILL. */
export const purgeLeftovers = (report: CleanupReport) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const out: Array<Leftover> = []
    for (const it of report.items) {
      let removed = false
      if (it.kind === "orphan-sandbox-process" && it.pid !== null) {
        const raw = yield* fs.readFileString(`/proc/${it.pid}/cmdline`).pipe(Effect.orElseSucceed(() => ""))
        if (raw.split("\0")[0]?.endsWith("bwrap") && it.path !== null && raw.includes(`\0${it.path}\0/workspace\0`)) {
          removed = yield* Effect.sync(() => {
            try {
              process.kill(it.pid!, "SIGKILL")
              return true
            } catch {
              return false
            }
          })
        }
      } else if (it.path !== null) {
        removed = yield* fs.remove(it.path, { recursive: true, force: true }).pipe(Effect.as(true), Effect.orElseSucceed(() => false))
      }
      out.push(new Leftover({ ...it, removed }))
    }
    return new CleanupReport({ purged: true, items: out })
  })
