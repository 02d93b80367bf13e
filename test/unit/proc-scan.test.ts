// The /proc scan that finds a dead spawner's children by their mark and kills them
// (src/sandbox/ProcScan.ts), against a fake /proc tree: a pid whose process changed between the
// scan and the kill (another start time: the pid was reused) is not signalled, nor is one whose
// process changed while its environment was read; the same process is, by group when it leads one
// (killFound) or alone (killProcess, cleanup --purge's kill).
import * as fs from "node:fs"
import { join } from "node:path"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { identity, killFound, killProcess, liveProc, type ProcAccess, withEnvironment } from "../../src/sandbox/ProcScan.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const MARK = "SUBSTRAT_SPAWNER=abc"

/** A /proc/<pid>/stat line: comm with a space and a ")" in it, state, ppid, pgrp, …, starttime (field 22). */
const statLine = (pid: number, pgrp: number, start: number) => {
  const fields = ["S", "1", String(pgrp), String(pgrp), "0", "-1", ...Array.from({ length: 13 }, () => "0"), String(start), "0", "0"]
  return `${pid} (we ird) name) ${fields.join(" ")}\n`
}

let root: string
let killed: Array<readonly [number, NodeJS.Signals]>
let proc: ProcAccess

const put = (pid: number, environ: ReadonlyArray<string> | null, pgrp: number, start: number) => {
  fs.mkdirSync(join(root, String(pid)), { recursive: true })
  fs.writeFileSync(join(root, String(pid), "stat"), statLine(pid, pgrp, start))
  if (environ !== null) fs.writeFileSync(join(root, String(pid), "environ"), environ.map((v) => `${v}\0`).join(""))
}

beforeEach(() => {
  root = makeTmpDir("substrat-procscan-")
  killed = []
  proc = { ...liveProc, root, kill: (pid, signal) => void killed.push([pid, signal]) }
})
afterEach(() => removeDir(root))

describe("ProcScan", () => {
  it("reads a process's state, parent, group and start time from its stat line", () => {
    put(42, [], 40, 123456)
    expect(identity(42, proc)).toEqual({ state: "S", ppid: 1, pgrp: 40, start: "123456" })
    expect(identity(43, proc)).toBeUndefined()
    // The real one: this process.
    expect(identity(process.pid)?.start).toMatch(/^\d+$/)
  })

  it("finds the marked processes only (the mark as a whole variable, first or not)", () => {
    put(101, [MARK, "PATH=/bin"], 101, 5000)
    put(102, ["PATH=/bin", MARK], 7, 5001)
    put(103, ["PATH=/bin", `${MARK}d`, `X${MARK}`], 103, 5002)
    put(104, null, 104, 5003) // environ not readable
    fs.mkdirSync(join(root, "self"))
    expect([...withEnvironment(MARK, proc)].sort((a, b) => a.pid - b.pid)).toEqual([
      { pid: 101, start: "5000" },
      { pid: 102, start: "5001" }
    ])
  })

  it("kills the process the scan found (its group when it leads one), and not a process that took its pid since", () => {
    put(101, [MARK], 101, 5000)
    put(102, [MARK], 7, 5001)
    const found = withEnvironment(MARK, proc)
    expect(found).toHaveLength(2)
    const [leader, member] = [...found].sort((a, b) => a.pid - b.pid)
    // 101 exited and was reaped; a new, unrelated process got pid 101 (a later start time).
    put(101, ["PATH=/bin"], 101, 9000)
    expect(killFound(leader!, "SIGKILL", proc)).toBe(false)
    expect(killFound(member!, "SIGKILL", proc)).toBe(true)
    // 102 gone altogether.
    fs.rmSync(join(root, "102"), { recursive: true })
    expect(killFound(member!, "SIGKILL", proc)).toBe(false)
    expect(killed).toEqual([[102, "SIGKILL"]])
    // The same process still there: its group is signalled.
    put(101, [MARK], 101, 5000)
    expect(killFound(leader!, "SIGKILL", proc)).toBe(true)
    expect(killed).toEqual([[102, "SIGKILL"], [-101, "SIGKILL"]])
  })

  it("killProcess signals the pid alone (a group leader too), only while it is the same process", () => {
    put(101, [], 101, 5000)
    expect(killProcess({ pid: 101, start: "5000" }, "SIGKILL", proc)).toBe(true)
    put(101, [], 101, 9000)
    expect(killProcess({ pid: 101, start: "5000" }, "SIGKILL", proc)).toBe(false)
    expect(killProcess({ pid: 102, start: "5000" }, "SIGKILL", proc)).toBe(false)
    expect(killed).toEqual([[101, "SIGKILL"]])
  })

  it("skips a pid whose process changed while its environment was read", () => {
    put(101, [MARK], 101, 5000)
    // The environment read is the new process's; the stat before it was the old one's.
    const racing: ProcAccess = {
      ...proc,
      read: (path) => {
        const bytes = proc.read(path)
        if (path.endsWith("/environ")) put(101, [MARK], 101, 9000)
        return bytes
      }
    }
    expect(withEnvironment(MARK, racing)).toEqual([])
    expect(withEnvironment(MARK, proc)).toEqual([{ pid: 101, start: "9000" }])
  })
})
