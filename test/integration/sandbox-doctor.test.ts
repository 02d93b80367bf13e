// requires: bwrap, git
// Doctor and cleanup reports: real probes, real leftovers (files and an orphan bwrap process).
// Purge kills a reported process only while its pid names the process the scan saw (start time).
import { NodeContext } from "@effect/platform-node"
import { Effect, Schema } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makePaths } from "../../src/config/Paths.js"
import { CleanupReport, Leftover, purgeLeftovers, scanLeftovers } from "../../src/sandbox/Cleanup.js"
import { binaryCheck, DoctorReport, makeReport, sandboxChecks } from "../../src/sandbox/Doctor.js"
import { identity } from "../../src/sandbox/ProcScan.js"
import { alive, findExact, isRoot, pidsCgroupWritable, waitFor } from "./sandbox.support.js"

const run = <A, E>(e: Effect.Effect<A, E, NodeContext.NodeContext>) => Effect.runPromise(Effect.provide(e, NodeContext.layer))

let T = ""
beforeAll(() => {
  T = fs.mkdtempSync(join(tmpdir(), "substrat-doctor-"))
})
afterAll(() => {
  if (T !== "") fs.rmSync(T, { recursive: true, force: true })
})

describe("doctor", () => {
  it("reports a working sandbox on this machine, as JSON-serialisable data", async () => {
    const checks = await run(sandboxChecks())
    const report = makeReport([...checks, await run(binaryCheck("provider:nonexistent", "substrat-no-such-binary"))])
    const byName = Object.fromEntries(report.checks.map((c) => [c.name, c]))
    expect(byName["bwrap"]?.status).toBe("ok")
    expect(byName["sandbox"]?.status).toBe("ok")
    expect(byName["prlimit"]?.status).toBe("ok")
    expect(byName["git"]?.status).toBe("ok")
    expect(byName["cgroup"]?.detail).toMatch(/^(v2-writable|v2-readonly|v1-or-hybrid|none):/)
    // As root the process limit rests on a pids cgroup; only without one is it a warning.
    expect(byName["identity"]?.status).toBe(isRoot && !pidsCgroupWritable() ? "warn" : "ok")
    expect(byName["provider:nonexistent"]?.status).toBe("warn")
    expect(report.ok).toBe(true)
    const json = JSON.stringify(Schema.encodeSync(DoctorReport)(report))
    expect(Schema.decodeUnknownSync(Schema.parseJson(DoctorReport))(json)).toEqual(report)
  })

  it("a missing bwrap fails the report with the install hint", async () => {
    const report = makeReport(await run(sandboxChecks({ bwrap: "/nonexistent/bwrap" })))
    expect(report.ok).toBe(false)
    const sb = report.checks.find((c) => c.name === "sandbox")
    expect(sb?.status).toBe("fail")
    expect(sb?.fix).toContain("apt-get install bubblewrap")
  })
})

describe("cleanup", () => {
  it("finds leftovers of a dead daemon, purges exactly those, and spares the live daemon's sandboxes", async () => {
    const home = join(T, "home")
    const paths = makePaths(home)
    const wsId = "11111111-2222-4333-8444-555555555555"
    const root = join(paths.workspaceDir(wsId), "root")
    fs.mkdirSync(join(paths.workspaceDir(wsId), "history.git"), { recursive: true })
    fs.mkdirSync(root)
    fs.writeFileSync(join(paths.workspaceDir(wsId), "history.git", "index.lock"), "")
    fs.writeFileSync(join(paths.workspaceDir(wsId), "workspace.json.tmp"), "{")
    fs.mkdirSync(paths.sessionDir("s1"), { recursive: true })
    fs.writeFileSync(paths.agentSocket("s1"), "")
    fs.writeFileSync(join(paths.sessionDir("s1"), "session.json.tmp"), "{")
    // An old temp file; workspace.json.tmp stays fresh (a live daemon may be writing it).
    const hourAgo = new Date(Date.now() - 3600_000)
    fs.utimesSync(join(paths.sessionDir("s1"), "session.json.tmp"), hourAgo, hourAgo)
    fs.writeFileSync(paths.socket, "")
    fs.writeFileSync(paths.pidFile, "999999")
    const marker = `44.${Math.floor(Math.random() * 1e9)}`
    const orphan = spawn("bwrap", [
      "--die-with-parent", "--unshare-all", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
      "--symlink", "usr/lib64", "/lib64", "--bind", root, "/workspace", "--", "sleep", marker
    ], { stdio: "ignore" })
    try {
      // The sandboxed sleep itself runs (so bwrap set the sandbox up and is waiting on it).
      expect(await waitFor(() => findExact(["sleep", marker]).length > 0)).toBe(true)
      // With us as "the live daemon", our own bwrap child is not an orphan and locks/sockets are live.
      const live = await run(scanLeftovers({ paths, daemonPid: process.pid }))
      expect(live.items.map((i) => i.kind).sort()).toEqual(["incomplete-workspace", "tmp-file"])
      expect(live.items.find((i) => i.kind === "tmp-file")?.path).toBe(join(paths.sessionDir("s1"), "session.json.tmp"))
      const dead = await run(scanLeftovers({ paths, daemonPid: null }))
      const kinds = dead.items.map((i) => i.kind).sort()
      expect(kinds).toEqual(["git-lock", "incomplete-workspace", "orphan-sandbox-process", "stale-pidfile", "stale-socket", "stale-socket", "tmp-file", "tmp-file"])
      const found = dead.items.find((i) => i.kind === "orphan-sandbox-process")!
      expect(found.pid).toBe(orphan.pid)
      expect(found.start).toBe(identity(orphan.pid!)!.start)
      expect(fs.existsSync(paths.socket)).toBe(true) // scanning deletes nothing
      const json = JSON.stringify(Schema.encodeSync(CleanupReport)(dead))
      expect(Schema.decodeUnknownSync(Schema.parseJson(CleanupReport))(json)).toEqual(dead)

      // The bwrap the scan saw has exited and a new one for the same root took its pid (a later
      // start time): same command line, another process. It is not killed.
      const earlier = new Leftover({ ...found, start: String(Number(found.start) - 1) })
      const spared = await run(purgeLeftovers(new CleanupReport({ purged: false, items: [earlier] })))
      expect(spared.items.map((i) => i.removed)).toEqual([false])
      expect(alive(orphan.pid!, marker)).toBe(true)

      const purged = await run(purgeLeftovers(dead))
      expect(purged.items.every((i) => i.removed)).toBe(true)
      expect(await waitFor(() => !alive(orphan.pid!, marker))).toBe(true)
      expect(fs.existsSync(paths.socket)).toBe(false)
      expect(fs.existsSync(paths.workspaceDir(wsId))).toBe(false)
      expect((await run(scanLeftovers({ paths, daemonPid: null }))).items).toEqual([])
    } finally {
      orphan.kill("SIGKILL")
    }
  })
})
