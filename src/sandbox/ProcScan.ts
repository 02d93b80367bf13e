// Finding processes by a mark in their environment (/proc/<pid>/environ) and killing them, without
// killing a process that took one of their pids meanwhile. The same check guards every kill of a
// pid learnt earlier: a dead spawner's children (Spawner.ts), `cleanup --purge` (Cleanup.ts).
//
// A pid names a process only until it is reaped; then the kernel may give it to a new process.
// Between reading a process's environment and kill(pid) the process can exit, be reaped, and the
// pid be reused. Linux's answer is a pidfd (pidfd_open + pidfd_send_signal), but Node has no API
// for either (no addon is worth one call). So a process is named by (pid, start time): the start
// time (field 22 of /proc/<pid>/stat, clock ticks since boot) of the process holding a pid never
// changes, and a new holder of the same pid started later.
// - The scan reads the start time before and after the environment: equal, the environment was
//   that process's.
// - The kill re-reads the start time (and the process group) right before kill(), in the same
//   synchronous step: a different start time, or none, and nothing is signalled. What remains is
//   the gap between that read and kill() (microseconds, not the whole scan), in which the process
//   would have to exit, be reaped and the kernel's pid counter wrap round to the same pid.
// A zombie keeps its pid (and its group's id) until reaped, so it is still matched.
import * as fs from "node:fs"

/** A process, as a scan found it. */
export interface Found {
  readonly pid: number
  /** Field 22 of /proc/<pid>/stat: when it started, in clock ticks since boot. */
  readonly start: string
}

/** How /proc is read and a signal sent (tests: a fake /proc tree, a recording kill). */
export interface ProcAccess {
  readonly root: string
  readonly list: (dir: string) => ReadonlyArray<string>
  readonly read: (path: string) => Buffer
  readonly kill: (pid: number, signal: NodeJS.Signals) => void
}

export const liveProc: ProcAccess = {
  root: "/proc",
  list: (dir) => fs.readdirSync(dir),
  read: (path) => fs.readFileSync(path),
  kill: (pid, signal) => process.kill(pid, signal)
}

/** The fields of a /proc/<pid>/stat line used here, or undefined when it is not one. */
export const parseStat = (
  stat: string
): { readonly state: string; readonly ppid: number; readonly pgrp: number; readonly start: string } | undefined => {
  // "pid (comm) S ppid pgrp …": comm may hold spaces and parentheses; fields after the last ")"
  // start at field 3 (state), so field n is at index n - 3.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  const state = fields[3 - 3]
  const ppid = Number(fields[4 - 3])
  const pgrp = Number(fields[5 - 3])
  const start = fields[22 - 3]
  if (state === undefined || start === undefined || !/^\d+$/.test(start) || !Number.isInteger(ppid) || !Number.isInteger(pgrp)) {
    return undefined
  }
  return { state, ppid, pgrp, start }
}

/** Start time and process group of `pid`, or undefined when it is gone (or not readable). */
export const identity = (pid: number, proc: ProcAccess = liveProc): { readonly start: string; readonly pgrp: number } | undefined => {
  let stat: string
  try {
    stat = proc.read(`${proc.root}/${pid}/stat`).toString("latin1")
  } catch {
    return undefined
  }
  return parseStat(stat)
}

/** Every process whose environment holds `entry` (`NAME=value`) as a whole variable. */
export const withEnvironment = (entry: string, proc: ProcAccess = liveProc): ReadonlyArray<Found> => {
  const first = Buffer.from(`${entry}\0`)
  const later = Buffer.from(`\0${entry}\0`)
  let entries: ReadonlyArray<string>
  try {
    entries = proc.list(proc.root)
  } catch {
    return []
  }
  const found: Array<Found> = []
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue
    const pid = Number(e)
    const before = identity(pid, proc)
    if (before === undefined) continue
    let environ: Buffer
    try {
      environ = proc.read(`${proc.root}/${e}/environ`)
    } catch {
      continue // gone meanwhile, or not ours to read
    }
    // The first variable has no NUL before it.
    if (!(environ.subarray(0, first.length).equals(first) || environ.includes(later))) continue
    if (identity(pid, proc)?.start !== before.start) continue // another process's environment
    found.push({ pid, start: before.start })
  }
  return found
}

/**
 * Signal the process a scan found — its group when it leads one, as `killGroup` does — if it is
 * still that process (same start time). False when it is gone, its pid is another's, or the
 * signal failed.
 */
export const killFound = (p: Found, signal: NodeJS.Signals, proc: ProcAccess = liveProc): boolean =>
  signalSame(p, signal, proc, (pgrp) => (pgrp === p.pid ? -p.pid : p.pid))

/** Signal `p.pid` alone (not its group) if it is still that process (same start time). */
export const killProcess = (p: Found, signal: NodeJS.Signals, proc: ProcAccess = liveProc): boolean =>
  signalSame(p, signal, proc, () => p.pid)

const signalSame = (p: Found, signal: NodeJS.Signals, proc: ProcAccess, target: (pgrp: number) => number): boolean => {
  const now = identity(p.pid, proc)
  if (now === undefined || now.start !== p.start) return false
  try {
    proc.kill(target(now.pgrp), signal)
    return true
  } catch {
    return false
  }
}
