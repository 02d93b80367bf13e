// `substrat cleanup`: find leftovers of dead daemons and crashed operations — stale sockets and
// pidfiles (also start-up staging sockets and model-forwarder sockets), temp files (while a
// daemon runs: only old ones), git locks, incomplete workspace dirs, orphan sandbox processes
// (workspace sandboxes and agents' own `agents/<session>/workspace` sandboxes) — as data.
// `purgeLeftovers` deletes exactly what a scan reported (re-checking each process before killing it:
// its command line, and that its pid still names the process the scan saw, by start time).
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Option, Schedule, Schema } from "effect"
import type { Paths } from "../config/Paths.js"
import { type Found, killProcess, parseStat } from "./ProcScan.js"

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
  /** With `pid`: the process's start time as the scan saw it (/proc/<pid>/stat field 22; ProcScan.ts). */
  start: Schema.NullOr(Schema.String),
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

const item = (kind: typeof LeftoverKind.Type, detail: string, path: string | null = null) =>
  new Leftover({ kind, path, pid: null, start: null, detail, removed: false })

/**
 * The host dir this bwrap argv binds at /workspace, when it lies under one of `bases` (this home's
 * workspaces, or an agent's own `agents/<session>/workspace` when it has no workspace).
 */
const sandboxRootOf = (argv: ReadonlyArray<string>, bases: ReadonlyArray<string>): string | null => {
  for (let i = 0; i + 2 < argv.length; i++) {
    if (argv[i] === "--bind" && argv[i + 2] === "/workspace" && bases.some((b) => argv[i + 1]!.startsWith(b + "/"))) return argv[i + 1]!
  }
  return null
}

/** While a daemon runs, a temp file younger than this may be its write in progress: not reported. */
const liveTmpGraceMs = 10 * 60 * 1000

const pidAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"
  }
}

export const scanLeftovers = (input: ScanInput) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const { paths } = input
    const items: Array<Leftover> = []
    const exists = (p: string) => fs.exists(p).pipe(Effect.orElseSucceed(() => false))
    const ls = (p: string) => fs.readDirectory(p).pipe(Effect.orElseSucceed((): Array<string> => []))
    const daemonDead = input.daemonPid === null
    const now = Date.now()
    /** A temp file is a leftover when no daemon runs, or when it is old. */
    const staleTmp = (p: string) =>
      daemonDead
        ? Effect.succeed(true)
        : fs.stat(p).pipe(
          Effect.map((st) => Option.match(st.mtime, { onNone: () => true, onSome: (m) => now - m.getTime() > liveTmpGraceMs })),
          Effect.orElseSucceed(() => false)
        )

    // Staging sockets of daemons that died during start-up (`daemon.sock.<pid>.tmp`).
    for (const f of yield* ls(paths.home)) {
      const m = /^daemon\.sock\.(\d+)\.tmp$/.exec(f)
      if (m !== null && !pidAlive(Number(m[1]))) items.push(item("stale-socket", `staging socket of dead pid ${m[1]}`, `${paths.home}/${f}`))
    }

    if (daemonDead) {
      for (const f of yield* ls(`${paths.home}/llm`)) {
        if (f.endsWith(".sock")) items.push(item("stale-socket", "model forwarder socket of a dead daemon", `${paths.home}/llm/${f}`))
      }
      if (yield* exists(paths.socket)) items.push(item("stale-socket", "no daemon is running", paths.socket))
      if (yield* exists(paths.pidFile)) items.push(item("stale-pidfile", "no daemon is running", paths.pidFile))
      for (const sid of yield* ls(paths.agentsDir)) {
        const sock = paths.agentSocket(sid)
        if (yield* exists(sock)) items.push(item("stale-socket", "agent socket of a dead daemon", sock))
      }
    }
    for (const sid of yield* ls(paths.agentsDir)) {
      for (const f of yield* ls(paths.sessionDir(sid))) {
        const p = `${paths.sessionDir(sid)}/${f}`
        if (f.endsWith(".tmp") && (yield* staleTmp(p))) items.push(item("tmp-file", "interrupted atomic write", p))
      }
    }
    for (const id of yield* ls(paths.workspacesDir)) {
      const dir = paths.workspaceDir(id)
      // Only workspace directories (a stray file here is not a workspace, nor ours to delete).
      const isDir = yield* fs.stat(dir).pipe(Effect.map((st) => st.type === "Directory"), Effect.orElseSucceed(() => false))
      if (!isDir) continue
      const entries = yield* ls(dir)
      if (!entries.includes("workspace.json")) {
        items.push(item("incomplete-workspace", "workspace dir without workspace.json (interrupted create/delete)", dir))
      }
      for (const f of entries) {
        if (f.endsWith(".tmp") && (yield* staleTmp(`${dir}/${f}`))) items.push(item("tmp-file", "interrupted atomic write", `${dir}/${f}`))
      }
      if (entries.includes("history.git")) {
        for (const f of yield* ls(`${dir}/history.git`)) {
          const p = `${dir}/history.git/${f}`
          if (f.startsWith("index.diff-") && (yield* staleTmp(p))) items.push(item("tmp-file", "temporary diff index", p))
          if (daemonDead && f === "index.lock") items.push(item("git-lock", "git lock left by a dead daemon", `${dir}/history.git/${f}`))
        }
      }
    }
    const parentOf = (p: number) =>
      fs.readFileString(`/proc/${p}/stat`).pipe(
        Effect.map((st) => parseStat(st)?.ppid ?? NaN),
        Effect.orElseSucceed(() => NaN)
      )
    // Sandboxes of this $SUBSTRAT_HOME whose parent is neither the live daemon nor its spawner.
    for (const e of yield* ls("/proc")) {
      if (!/^\d+$/.test(e)) continue
      const pid = Number(e)
      const raw = yield* fs.readFileString(`/proc/${e}/cmdline`).pipe(Effect.orElseSucceed(() => ""))
      const argv = raw.split("\0")
      if (!(argv[0] ?? "").endsWith("bwrap")) continue
      const root = sandboxRootOf(argv, [paths.workspacesDir, paths.agentsDir])
      if (root === null) continue
      const stat = parseStat(yield* fs.readFileString(`/proc/${e}/stat`).pipe(Effect.orElseSucceed(() => "")))
      // Gone since, or dead already (a zombie waiting for a parent that does not reap at once, or exiting).
      if (stat === undefined || stat.state === "Z" || stat.state === "X") continue
      const { ppid } = stat
      if (input.daemonPid !== null && ppid === input.daemonPid) continue
      // The live daemon's own sandboxes are forked by its spawner process (Spawner.ts), its child.
      if (input.daemonPid !== null && (yield* parentOf(ppid)) === input.daemonPid) continue
      // bwrap's own monitor child (same argv, parent = another bwrap of ours) is not separate.
      const parentCmd = yield* fs.readFileString(`/proc/${ppid}/cmdline`).pipe(Effect.orElseSucceed(() => ""))
      if (parentCmd === raw) continue
      items.push(
        new Leftover({
          kind: "orphan-sandbox-process",
          path: root,
          pid,
          start: stat.start,
          detail: `bwrap for ${root} (parent pid ${ppid})`,
          removed: false
        })
      )
    }
    return new CleanupReport({ purged: false, items })
  })

/** Poll `/proc/<pid>/stat` until the process is gone (its pid free or another's) or a zombie (at most ~5 s). */
const waitDead = (fs: FileSystem.FileSystem, p: Found) =>
  fs.readFileString(`/proc/${p.pid}/stat`).pipe(
    Effect.map((raw) => {
      const stat = parseStat(raw)
      return stat === undefined || stat.start !== p.start || stat.state === "Z" || stat.state === "X"
    }),
    Effect.orElseSucceed(() => true),
    Effect.flatMap((dead) => dead ? Effect.void : Effect.fail("alive" as const)),
    Effect.retry(Schedule.spaced("20 millis").pipe(Schedule.intersect(Schedule.recurs(250)))),
    Effect.ignore
  )

/** The live children of `pid` with its very command line (bwrap's monitor child), by (pid, start time). */
const monitorsOf = (fs: FileSystem.FileSystem, pid: number, raw: string) =>
  Effect.gen(function*() {
    const out: Array<Found> = []
    const entries = yield* fs.readDirectory("/proc").pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))
    for (const e of entries) {
      if (!/^\d+$/.test(e)) continue
      const stat = parseStat(yield* fs.readFileString(`/proc/${e}/stat`).pipe(Effect.orElseSucceed(() => "")))
      if (stat === undefined || stat.ppid !== pid || stat.state === "Z" || stat.state === "X") continue
      const cmd = yield* fs.readFileString(`/proc/${e}/cmdline`).pipe(Effect.orElseSucceed(() => ""))
      if (cmd === raw) out.push({ pid: Number(e), start: stat.start })
    }
    return out
  })

/**
 * Remove/kill every item of a scan. A process is re-checked before SIGKILL: still bwrap for the
 * same root, and its pid still the process the scan saw (same start time, re-read right before
 * kill(): in the meantime it may have exited and its pid gone to another process, even a new bwrap
 * for the same root).
 */
export const purgeLeftovers = (report: CleanupReport) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const out: Array<Leftover> = []
    for (const it of report.items) {
      let removed = false
      if (it.kind === "orphan-sandbox-process" && it.pid !== null) {
        const raw = yield* fs.readFileString(`/proc/${it.pid}/cmdline`).pipe(Effect.orElseSucceed(() => ""))
        if (raw.split("\0")[0]?.endsWith("bwrap") && it.path !== null && raw.includes(`\0${it.path}\0/workspace\0`) && it.start !== null) {
          const found = { pid: it.pid, start: it.start }
          // bwrap's monitor child (same argv) dies with it (--die-with-parent), but only once it is
          // scheduled: until then it is a bwrap for the same root whose parent is now pid 1, which
          // a scan right after would report as an orphan of its own.
          const monitors = yield* monitorsOf(fs, it.pid, raw)
          removed = yield* Effect.sync(() => killProcess(found, "SIGKILL"))
          // Return once it and its monitor are dead (gone, or zombies), so a scan right after no
          // longer sees them.
          if (removed) {
            yield* waitDead(fs, found)
            for (const m of monitors) {
              yield* Effect.sync(() => killProcess(m, "SIGKILL"))
              yield* waitDead(fs, m)
            }
          }
        }
      } else if (it.path !== null) {
        removed = yield* fs.remove(it.path, { recursive: true, force: true }).pipe(Effect.as(true), Effect.orElseSucceed(() => false))
      }
      out.push(new Leftover({ ...it, removed }))
    }
    return new CleanupReport({ purged: true, items: out })
  })
