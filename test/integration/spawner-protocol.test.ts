// The spawner's channel protocol (src/sandbox/Spawner.ts), each side against a peer that breaks it:
// a pipe without its socket, an exit before the pipes, a malformed reply (fake spawners), a
// malformed request (the real spawner), and a spawner killed between a fork and its pid report
// (a test hook pauses it there). Every case ends with the start failed, typed, and no child left.
// A spawner that dies: the pids it reported are killed only while they name the process it forked
// (the start time in its pid message), so a pid taken since by another process is spared.
import { Schema } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { identity } from "../../src/sandbox/ProcScan.js"
import { type LaunchOptions, MARK, PAUSE_HOOK, SpawnerProcess, spawnerSource, SpawnRequest, type Started } from "../../src/sandbox/Spawner.js"
import { waitFor } from "./sandbox.support.js"

let T = ""
beforeAll(() => {
  T = fs.realpathSync(fs.mkdtempSync(join(tmpdir(), "substrat-spawner-protocol-")))
})
afterAll(() => {
  if (T !== "") fs.rmSync(T, { recursive: true, force: true })
})

const env = { PATH: "/usr/bin:/bin" }
let seq = 0
/** A `sleep` argument no other process has: the child is found by it in /proc. */
const marker = () => `4000.${process.pid}${++seq}`

/** Live (non-zombie) processes whose command line holds `text`. */
const withArg = (text: string): Array<number> =>
  fs.readdirSync("/proc").filter((e) => /^\d+$/.test(e)).filter((e) => {
    try {
      return fs.readFileSync(`/proc/${e}/cmdline`, "utf8").split("\0").includes(text)
    } catch {
      return false
    }
  }).map(Number)

const start = (s: SpawnerProcess, opts: Partial<LaunchOptions> & Pick<LaunchOptions, "program" | "args">) =>
  new Promise<Started>((resolve) => {
    s.launch({ env, stdin: false, onExit: () => {}, ...opts }, resolve)
  })

/** A fake spawner: starts `sleep <arg>` (marked, as the real one marks its children), then runs `then`. */
const fake = (then: string) =>
  String.raw`"use strict"
const { spawn } = require("node:child_process")
process.on("message", (m) => {
  const c = spawn("sleep", [m.args[0]], { stdio: ["ignore", "pipe", "pipe"], detached: true, env: { ...process.env, PATH: "/usr/bin:/bin" } })
  const send = (x, h) => process.send(x, h)
  ${then}
})
process.on("disconnect", () => process.exit(0))
`

const failedWith = (r: Started) => (r._tag === "failed" ? { reason: r.reason, message: r.message } : { started: r.child.pid })

describe("spawner protocol", () => {
  const incomplete = [
    { what: "a pipe that arrives without its socket", then: `send({ t: "fd", id: m.id, n: 1 })`, says: "without its socket" },
    { what: "an exit before the pipes", then: `send({ t: "exit", id: m.id, code: 0, signal: null })`, says: "before all its pipes" }
  ]
  for (const k of incomplete) {
    it(`${k.what} fails the start (protocol) and kills the child's group`, async () => {
      const s = new SpawnerProcess(() => {}, { source: fake(`send({ t: "pid", id: m.id, pid: c.pid, start: null }); ${k.then}`) })
      try {
        const arg = marker()
        const r = await start(s, { program: "sleep", args: [arg] })
        expect(failedWith(r)).toMatchObject({ reason: "protocol", message: expect.stringContaining(k.says) })
        expect(await waitFor(() => withArg(arg).length === 0, 20_000)).toBe(true)
      } finally {
        s.stop()
      }
    }, 60_000)
  }

  it("a malformed reply fails every start in flight (protocol), kills that spawner and its children; this process goes on", async () => {
    let gone = 0
    const s = new SpawnerProcess(() => gone++, { source: fake(`send({ t: "pid", id: m.id, pid: "many" })`) })
    const spawner = s.pid!
    const arg = marker()
    const r = await start(s, { program: "sleep", args: [arg] })
    expect(failedWith(r)).toMatchObject({ reason: "protocol", message: expect.stringContaining("malformed message from the spawner") })
    expect(gone).toBe(1)
    expect(await waitFor(() => withArg(arg).length === 0, 20_000)).toBe(true)
    expect(await waitFor(() => !fs.existsSync(`/proc/${spawner}/cmdline`) || fs.readFileSync(`/proc/${spawner}/cmdline`, "utf8") === "", 20_000)).toBe(true)
    // It is not used again.
    const again = await start(s, { program: "true", args: [] })
    expect(failedWith(again)).toMatchObject({ reason: "spawn" })
  }, 60_000)

  it("a request the Schema refuses is not sent (protocol)", async () => {
    const s = new SpawnerProcess(() => {})
    try {
      const r = await start(s, { program: "true", args: [], env: { PATH: 1 } as unknown as Record<string, string> })
      expect(failedWith(r)).toMatchObject({ reason: "protocol", message: expect.stringContaining("malformed spawn request") })
      const ok = await start(s, { program: "true", args: [] })
      expect(ok._tag).toBe("started")
    } finally {
      s.stop()
    }
  }, 60_000)

  it("the spawner refuses malformed requests (those SpawnRequest refuses), runs none of them and stays up", async () => {
    const mark = join(T, "SPAWNED")
    const good = { t: "spawn", id: 7, program: "/usr/bin/touch", args: [mark], env, cwd: null, stdin: false }
    const bad: ReadonlyArray<unknown> = [
      "spawn",
      [good],
      { ...good, t: "run" },
      { ...good, id: "7" },
      { ...good, id: 0 },
      { ...good, id: 1.5 },
      { ...good, program: ["/usr/bin/touch"] },
      { ...good, args: mark },
      { ...good, args: [mark, 3] },
      { ...good, env: { PATH: ["/usr/bin"] } },
      { ...good, env: null },
      { ...good, cwd: 5 },
      { ...good, stdin: "yes" }
    ]
    // The spawner's hand-written check and the Schema agree on every case.
    expect(bad.filter((m) => Schema.is(SpawnRequest)(m))).toEqual([])
    expect(Schema.is(SpawnRequest)(good)).toBe(true)
    const proc = spawn(process.execPath, ["-e", spawnerSource], { stdio: ["ignore", "ignore", "ignore", "ipc"], env: { [MARK]: "t" }, serialization: "json" })
    const replies: Array<{ t: string; id: unknown; message?: string }> = []
    proc.on("message", (m: { t: string; id: unknown; message?: string }) => replies.push(m))
    try {
      for (const m of bad) proc.send(m as object)
      expect(await waitFor(() => replies.length >= bad.length, 20_000)).toBe(true)
      expect(replies.map((r) => r.t)).toEqual(bad.map(() => "refused"))
      // A request with a usable id is answered under it; one without, under null.
      expect(replies[3]!.id).toBe(null)
      expect(replies[6]!.id).toBe(7)
      expect(fs.existsSync(mark)).toBe(false)
      proc.send(good)
      expect(await waitFor(() => replies.some((r) => r.t === "exit"), 20_000)).toBe(true)
      expect(fs.existsSync(mark)).toBe(true)
    } finally {
      proc.kill("SIGKILL")
    }
  }, 60_000)

  it("a spawner that dies: a reported child without its mark is killed by the pid and start time it reported", async () => {
    const s = new SpawnerProcess(() => {})
    const arg = marker()
    try {
      // `env -i`: the sleep's environment has no mark, so only the reported pid can find it.
      const r = await start(s, { program: "env", args: ["-i", "sleep", arg] })
      expect(r._tag).toBe("started")
      expect(await waitFor(() => withArg(arg).length === 1, 20_000)).toBe(true)
      process.kill(s.pid!, "SIGKILL")
      expect(await waitFor(() => withArg(arg).length === 0, 20_000)).toBe(true)
    } finally {
      for (const pid of withArg(arg)) process.kill(pid, "SIGKILL")
      s.stop()
    }
  }, 60_000)

  it("a spawner that dies after reporting a pid that is another process's now: that process is not signalled", async () => {
    // The process now holding the reported pid (started here, unmarked, its own group).
    const victim = spawn("sleep", [marker()], { stdio: "ignore", detached: true })
    const gone = new Promise<void>((resolve) => victim.once("exit", () => resolve()))
    /** A fake spawner: reports `victim`'s pid with `start` as the child's start time, then dies. */
    const reporting = (start: string) =>
      new SpawnerProcess(() => {}, {
        env: { VICTIM: String(victim.pid), START: start },
        source: String.raw`"use strict"
process.on("message", (m) => {
  process.send({ t: "pid", id: m.id, pid: Number(process.env.VICTIM), start: process.env.START }, undefined, {}, () => process.exit(0))
})
`
      })
    try {
      const now = identity(victim.pid!)!.start
      // The child it forked started earlier than the process that holds its pid now.
      const stale = reporting(String(Number(now) - 1))
      const r = await start(stale, { program: "sleep", args: ["1"] })
      expect(failedWith(r)).toMatchObject({ reason: "spawn", message: "the spawner process exited" })
      // A kill would have been sent before the start failed; give the victim time to die of it.
      await new Promise((resolve) => setTimeout(resolve, 1000))
      expect(victim.exitCode === null && victim.signalCode === null).toBe(true)
      // Control: reported with the start time it has, the same pid is killed.
      const same = reporting(now)
      expect(failedWith(await start(same, { program: "sleep", args: ["1"] }))).toMatchObject({ reason: "spawn" })
      await gone
      expect(victim.signalCode).toBe("SIGKILL")
    } finally {
      victim.kill("SIGKILL")
    }
  }, 60_000)

  it("a spawner killed between a fork and its pid report leaves no child (nor a setsid'd grandchild) alive", async () => {
    const s = new SpawnerProcess(() => {}, { env: { [PAUSE_HOOK]: "120000" } })
    const pids = join(T, "paused.pids")
    const a = marker()
    const b = marker()
    const launched = start(s, { program: "sh", args: ["-c", `setsid sleep ${b} & echo $! > ${pids}.tmp; echo $$ >> ${pids}.tmp; mv ${pids}.tmp ${pids}; exec sleep ${a}`] })
    try {
      // The child and its grandchild run; the spawner is stopped before it could say the child's pid.
      expect(await waitFor(() => fs.existsSync(pids) && withArg(a).length === 1 && withArg(b).length === 1, 30_000)).toBe(true)
      const [grandchild, child] = fs.readFileSync(pids, "utf8").trim().split("\n").map(Number)
      expect(withArg(a)).toEqual([child])
      expect(withArg(b)).toEqual([grandchild])
      process.kill(s.pid!, "SIGKILL")
      const r = await launched
      expect(failedWith(r)).toMatchObject({ reason: "spawn" })
      expect(await waitFor(() => withArg(a).length === 0 && withArg(b).length === 0, 20_000)).toBe(true)
    } finally {
      for (const pid of [...withArg(a), ...withArg(b)]) process.kill(pid, "SIGKILL")
      s.stop()
    }
  }, 90_000)

})
