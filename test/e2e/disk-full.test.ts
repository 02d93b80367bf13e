// A full disk under a real daemon (docs/reliability.md, "A full disk"): $SUBSTRAT_HOME on a
// small tmpfs, filled to the last byte. The daemon stays up, refuses what it cannot make durable
// with a typed error (exit 5, Unavailable), keeps serving reads, leaves no `*.tmp` behind,
// starts on the full disk in read-only mode (said in `daemon status` and `doctor`), and once
// space is back and it is restarted, nothing acknowledged before is lost. Needs root (mount).
import * as Child from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type Agent, cli, cliJson, daemons, isAlive, sleep, startDaemon, waitFor } from "../integration/daemon.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const isRoot = process.getuid?.() === 0
const owned = daemons()
const dir = makeTmpDir("substrat-diskfull-")
const mnt = join(dir, "mnt")
const home = join(mnt, "home")
const filler = join(mnt, "filler")
let mounted = false
if (isRoot) {
  fs.mkdirSync(mnt)
  mounted = Child.spawnSync("mount", ["-t", "tmpfs", "-o", "size=12m", "tmpfs", mnt]).status === 0
}
const savedMin = process.env["SUBSTRAT_MIN_FREE_BYTES"]

afterAll(async () => {
  await owned.killAll()
  if (savedMin === undefined) delete process.env["SUBSTRAT_MIN_FREE_BYTES"]
  else process.env["SUBSTRAT_MIN_FREE_BYTES"] = savedMin
  if (mounted) Child.spawnSync("umount", ["-l", mnt])
  removeDir(dir)
})

const fill = () => {
  // Write until ENOSPC: the file system has no free block left.
  const fd = fs.openSync(filler, "a")
  const chunk = Buffer.alloc(64 * 1024)
  try {
    for (;;) fs.writeSync(fd, chunk)
  } catch (e) {
    expect((e as NodeJS.ErrnoException).code).toBe("ENOSPC")
  } finally {
    fs.closeSync(fd)
  }
  // And byte by byte, for the last partial block.
  const fd2 = fs.openSync(filler, "a")
  try {
    for (;;) fs.writeSync(fd2, Buffer.alloc(512))
  } catch {
    // full
  } finally {
    fs.closeSync(fd2)
  }
}

const tmpLeftovers = (d: string): Array<string> =>
  fs.readdirSync(d, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".tmp"))

const messageIds = (session: string): Set<string> => {
  const text = fs.readFileSync(join(home, "agents", session, "events.jsonl"), "utf8")
  return new Set(
    text.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as { event: string; data: { id?: string } })
      .filter((l) => l.event === "message.enqueued").map((l) => l.data.id ?? "")
  )
}

interface Status {
  readonly pid: number
  readonly storage?: { readonly mode: string; readonly reason: string | null; readonly restart_needed: boolean }
}

describe.skipIf(!mounted)("a full disk (tmpfs; needs root to mount)", () => {
  it("stays up, refuses with a typed error, serves reads, starts read-only, loses nothing acknowledged", async () => {
    // The free-space threshold off: the refusals below come from failed writes themselves.
    process.env["SUBSTRAT_MIN_FREE_BYTES"] = "0"
    let pid = await startDaemon(home)
    owned.track(pid)
    const a = await cliJson<Agent>(home, ["agent", "create", "--name", "a", "--provider", "scripted"])
    const acked: Array<string> = []
    for (let i = 0; i < 5; i++) acked.push((await cliJson<{ message_id: string }>(home, ["agent", "send", "a", `m${i}`, "--notify"])).message_id)

    fill()
    // Writes fail with ENOSPC: a typed refusal (exit 5), not an internal error, not a dead daemon.
    // (An append may still fit in the last page of the log file: that one is durable, and acknowledged.)
    let sent = await cli(home, ["agent", "send", "a", "on a full disk", "--notify", "--json"])
    for (let i = 0; sent.code === 0 && i < 200; i++) {
      acked.push((JSON.parse(sent.stdout) as { message_id: string }).message_id)
      sent = await cli(home, ["agent", "send", "a", `on a full disk ${i}`, "--notify", "--json"])
    }
    expect(sent.code).toBe(5)
    expect(sent.stderr).toMatch(/storage unavailable|read-only/)
    const created = await cli(home, ["agent", "create", "--name", "b"])
    expect(created.code).toBe(5)
    expect(isAlive(pid)).toBe(true)
    // Reads are served; status says read-only.
    const list = await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])
    expect(list.agents.map((x) => x.name)).toEqual(["a"])
    const status = await cliJson<Status>(home, ["daemon", "status"])
    expect(status.storage?.mode).toBe("read-only")
    expect(tmpLeftovers(home)).toEqual([])

    // kill -9 and start again on the full disk: read-only from the start, said clearly. A start
    // replays the event logs' journal and empties it, which would give its blocks back; a killed
    // process's log writes are all in the logs (the page cache), so the journal is emptied here and
    // its blocks filled: the start finds no free block at all.
    process.kill(pid, "SIGKILL")
    await waitFor("daemon dead", () => (isAlive(pid) ? undefined : true))
    expect(acked.filter((id) => !messageIds(a.session_id).has(id))).toEqual([])
    fs.truncateSync(join(home, "events.journal"), 0)
    fill()
    pid = await startDaemon(home)
    owned.track(pid)
    const again = await cliJson<Status>(home, ["daemon", "status"])
    expect(again.storage).toMatchObject({ mode: "read-only", restart_needed: true })
    const human = await cli(home, ["daemon", "status"])
    expect(human.stdout).toContain("READ-ONLY")
    const doctor = await cli(home, ["doctor", "--json"])
    const checks = (JSON.parse(doctor.stdout) as { checks: ReadonlyArray<{ name: string; status: string; detail: string }> }).checks
    expect(checks.find((c) => c.name === "daemon")?.detail).toContain("READ-ONLY")
    expect((await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])).agents.map((x) => x.name)).toEqual(["a"])
    const refused = await cli(home, ["agent", "send", "a", "still full", "--notify"])
    expect(refused.code).toBe(5)
    expect(refused.stderr).toContain("read-only")
    await sleep(500)
    expect(isAlive(pid)).toBe(true)
    expect(tmpLeftovers(home)).toEqual([])

    // A clean stop on the full disk, then a start with not one free block: the pid file cannot
    // be written (the stop removed it), yet the daemon starts, holds the lock and is read-only.
    await cliJson(home, ["daemon", "stop"])
    await waitFor("daemon stopped", () => (isAlive(pid) ? undefined : true))
    expect(fs.existsSync(join(home, "daemon.pid"))).toBe(false)
    fill() // what the stop freed (the pid file, the transcripts marker)
    expect(fs.statfsSync(mnt).bavail).toBe(0)
    pid = await startDaemon(home)
    owned.track(pid)
    expect(fs.readFileSync(join(home, "daemon.pid"), "utf8")).toBe("")
    const full = await cliJson<Status>(home, ["daemon", "status"])
    expect(full.pid).toBe(pid)
    expect(full.storage).toMatchObject({ mode: "read-only", restart_needed: true })
    expect(full.storage?.reason).toContain("daemon.pid")
    expect((await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])).agents.map((x) => x.name)).toEqual(["a"])
    expect((await cli(home, ["agent", "send", "a", "still full", "--notify"])).code).toBe(5)
    // Single instance still holds: a second start is refused by the lock.
    expect((await cli(home, ["daemon", "start"])).code).not.toBe(0)
    // cleanup knows the daemon is alive (its socket is not a leftover).
    const leftovers = JSON.parse((await cli(home, ["cleanup", "--json"])).stdout) as { items: ReadonlyArray<{ kind: string; path: string }> }
    expect(leftovers.items.filter((i) => i.path === join(home, "daemon.sock"))).toEqual([])
    expect(isAlive(pid)).toBe(true)

    // Space back: a restart leaves read-only mode; everything acknowledged is there.
    fs.rmSync(filler)
    await waitFor("space noticed", async () => {
      const r = await cli(home, ["agent", "send", "a", "x", "--notify"])
      return r.stderr.includes("Space is available again") ? true : undefined
    })
    await cliJson(home, ["daemon", "stop"])
    await waitFor("daemon stopped", () => (isAlive(pid) ? undefined : true))
    pid = await startDaemon(home)
    owned.track(pid)
    expect((await cliJson<Status>(home, ["daemon", "status"])).storage?.mode).toBe("ok")
    acked.push((await cliJson<{ message_id: string }>(home, ["agent", "send", "a", "after", "--notify"])).message_id)
    const logged = messageIds(a.session_id)
    expect(acked.filter((id) => !logged.has(id))).toEqual([])
    await cliJson(home, ["daemon", "stop"])
  }, 180_000)
})
