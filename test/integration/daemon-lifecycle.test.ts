// Daemon lifecycle through real processes: start/stop, modes of home/socket/pid, single
// instance, stale pid + socket, signals, "daemon not running", persistence across restarts.
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { type Agent, answers, cli, cliJson, daemons, isAlive, launcher, modeOf, spawnCli, startDaemon, startDaemonCli, waitFor, waitQuiet } from "./daemon.support.js"

const owned = daemons()
const homes: Array<string> = []
const home = () => {
  const h = join(makeTmpDir("substrat-life-"), "home")
  homes.push(h)
  return h
}

afterAll(async () => {
  await owned.killAll()
  for (const h of homes) removeDir(join(h, ".."))
})

describe("daemon lifecycle (real processes)", () => {
  it("start → socket 0600, pid file, home 0700 → second start refused → stop → both gone", async () => {
    const h = home()
    const pid = await startDaemonCli(h)
    owned.track(pid)
    expect(isAlive(pid)).toBe(true)
    expect(modeOf(h)).toBe(0o700)
    expect(modeOf(join(h, "daemon.sock"))).toBe(0o600)
    expect(fs.statSync(join(h, "daemon.sock")).isSocket()).toBe(true)
    expect(fs.readFileSync(join(h, "daemon.pid"), "utf8").trim()).toBe(String(pid))

    const again = await cli(h, ["daemon", "start"])
    expect(again.code).toBe(6)
    expect(again.stderr).toMatch(/already running \(pid \d+/)
    // A foreground instance is refused the same way, and does not disturb the live one.
    const fg = await cli(h, ["daemon", "run"])
    expect(fg.code).toBe(6)
    expect(fs.existsSync(join(h, "daemon.sock"))).toBe(true)

    const status = await cliJson<{ pid: number; home: string }>(h, ["daemon", "status"])
    expect(status.pid).toBe(pid)
    expect(status.home).toBe(h)

    const stop = await cliJson<{ pid: number; stopped: boolean }>(h, ["daemon", "stop"])
    expect(stop).toEqual({ pid, stopped: true })
    expect(isAlive(pid)).toBe(false)
    expect(fs.existsSync(join(h, "daemon.sock"))).toBe(false)
    expect(fs.existsSync(join(h, "daemon.pid"))).toBe(false)
    expect(fs.readFileSync(join(h, "daemon.log"), "utf8")).toMatch(/listening on/)
  })

  it("a stale pid file (dead process) and a leftover socket file are removed on start", async () => {
    const h = home()
    fs.mkdirSync(h, { recursive: true, mode: 0o700 })
    // A process that existed and is gone: its pid is dead.
    const dead = spawn(process.execPath, ["-e", "0"])
    const deadPid = await new Promise<number>((r) => dead.on("exit", () => r(dead.pid!)))
    expect(isAlive(deadPid)).toBe(false)
    fs.writeFileSync(join(h, "daemon.pid"), `${deadPid}\n`)
    // A socket file nobody listens on (what a SIGKILLed daemon leaves behind).
    const leftover = spawn(process.execPath, ["-e", `require("net").createServer().listen(${JSON.stringify(join(h, "daemon.sock"))}, () => console.log("up"))`])
    await new Promise<void>((r) => leftover.stdout!.once("data", () => r()))
    leftover.kill("SIGKILL")
    await new Promise((r) => leftover.on("exit", r))
    expect(fs.existsSync(join(h, "daemon.sock"))).toBe(true)

    const pid = await startDaemon(h)
    owned.track(pid)
    expect(pid).not.toBe(deadPid)
    expect(fs.readFileSync(join(h, "daemon.pid"), "utf8").trim()).toBe(String(pid))
    expect((await cliJson<{ pid: number }>(h, ["daemon", "status"])).pid).toBe(pid)
    await cliJson(h, ["daemon", "stop"])
  })

  it("a garbage pid file is treated as stale", async () => {
    const h = home()
    fs.mkdirSync(h, { recursive: true, mode: 0o700 })
    fs.writeFileSync(join(h, "daemon.pid"), "not a pid\n")
    const pid = await startDaemon(h)
    owned.track(pid)
    expect(fs.readFileSync(join(h, "daemon.pid"), "utf8").trim()).toBe(String(pid))
    await cliJson(h, ["daemon", "stop"])
  })

  it("a SIGKILLed daemon its parent never reaps (a zombie) does not block the next start", async () => {
    const h = home()
    fs.mkdirSync(h, { recursive: true, mode: 0o700 })
    // The daemon's parent is `sleep` (the shell execs it), which never wait()s: once killed, the
    // daemon stays a zombie, as under a container init that does not reap orphans.
    const parent = spawn("sh", ["-c", '"$0" "$1" daemon run --home "$2" >"$2/fg.log" 2>&1 & echo $!; exec sleep 300', process.execPath, launcher, h], {
      env: { ...process.env, SUBSTRAT_HOME: h },
      stdio: ["ignore", "pipe", "inherit"]
    })
    owned.track(parent.pid!)
    const first = Number(await new Promise<string>((r) => parent.stdout!.once("data", (d: Buffer) => r(d.toString("utf8").trim()))))
    await waitFor("the first daemon answers", () => answers(h))
    expect(fs.readFileSync(join(h, "daemon.pid"), "utf8").trim()).toBe(String(first))

    process.kill(first, "SIGKILL")
    const state = () => {
      const stat = fs.readFileSync(`/proc/${first}/stat`, "utf8")
      return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3)
    }
    await waitFor("the first daemon a zombie", () => (state() === "Z" ? true : undefined), 10_000)

    const second = await cli(h, ["daemon", "start", "--json"])
    expect(second.stderr).toBe("")
    expect(second.code).toBe(0)
    const pid = (JSON.parse(second.stdout) as { pid: number }).pid
    owned.track(pid)
    expect(pid).not.toBe(first)
    expect(state()).toBe("Z")
    expect((await cliJson<{ pid: number }>(h, ["daemon", "status"])).pid).toBe(pid)
    // And the lock is the new daemon's now: a third start is refused.
    expect((await cli(h, ["daemon", "start"])).code).toBe(6)
    await cliJson(h, ["daemon", "stop"])
    parent.kill("SIGKILL")
  })

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`daemon run (foreground) stops cleanly on ${signal}: sessions suspended, socket and pid file removed`, async () => {
      const h = home()
      const fg = spawnCli(h, ["daemon", "run", "--grace-ms", "5000"])
      owned.track(fg.child.pid!)
      await waitFor("socket", () => (fs.existsSync(join(h, "daemon.sock")) && fs.existsSync(join(h, "daemon.pid")) ? true : undefined))
      await waitFor("answer", () => answers(h))
      const lead = await cliJson<Agent>(h, ["agent", "create", "--name", "lead", "--provider", "scripted"])
      await cliJson(h, ["agent", "send", "lead", "hello"])
      await waitQuiet(h)
      fg.child.kill(signal)
      expect(await fg.exit).toBe(0)
      expect(fs.existsSync(join(h, "daemon.sock"))).toBe(false)
      expect(fs.existsSync(join(h, "daemon.pid"))).toBe(false)
      const record = JSON.parse(fs.readFileSync(join(h, "agents", lead.session_id, "session.json"), "utf8")) as { state: string }
      expect(record.state).toBe("suspended")
      expect(fg.out() + fg.err()).toMatch(/suspended 1 session/)
    })
  }

  it("without a daemon: one line on stderr and exit code 3 for every client command", async () => {
    const h = home()
    for (const args of [["daemon", "status"], ["daemon", "stop"], ["agent", "list"], ["session", "list"], ["workspace", "list"]]) {
      const r = await cli(h, args)
      expect(r.code, args.join(" ")).toBe(3)
      expect(r.stdout).toBe("")
      expect(r.stderr.trim().split("\n")).toHaveLength(1)
      expect(r.stderr).toMatch(/^substrat: daemon not running/)
    }
  })

  it("without a daemon: the exact line, for a missing socket, a plain file in its place and the default home", async () => {
    const h = home()
    fs.mkdirSync(h, { recursive: true, mode: 0o700 })
    const line = (sock: string) => `substrat: daemon not running (no answer on ${sock}); start it with: substrat daemon start\n`
    for (const args of [["agent", "list"], ["agent", "list", "--json"], ["agent", "inspect", "x"], ["agent", "send", "x", "y"], ["agent", "logs", "x"]]) {
      expect(await cli(h, args), args.join(" ")).toEqual({ code: 3, stdout: "", stderr: line(join(h, "daemon.sock")) })
    }
    fs.writeFileSync(join(h, "daemon.sock"), "")
    expect(await cli(h, ["agent", "list"])).toEqual({ code: 3, stdout: "", stderr: line(join(h, "daemon.sock")) })
    // No --home, no SUBSTRAT_HOME: ~/.substrat.
    const user = join(h, "user")
    fs.mkdirSync(user)
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const env: NodeJS.ProcessEnv = { ...process.env, HOME: user }
      delete env["SUBSTRAT_HOME"]
      const child = spawn(process.execPath, [launcher, "agent", "list"], { env, stdio: ["ignore", "ignore", "pipe"] })
      let err = ""
      child.stderr.on("data", (d: Buffer) => (err += d.toString("utf8")))
      child.on("exit", (code) => resolve({ code, stderr: err }))
    })
    expect(r).toEqual({ code: 3, stderr: line(join(user, ".substrat", "daemon.sock")) })
  })

  it("a daemon that hangs up, or answers garbage: 'lost the connection', exit 3, one line", async () => {
    for (const mode of ["hang-up", "garbage"] as const) {
      const h = home()
      fs.mkdirSync(h, { recursive: true, mode: 0o700 })
      const server = net.createServer((c) => c.once("data", () => (mode === "hang-up" ? c.destroy() : c.write("garbage\n"))))
      await new Promise<void>((r) => server.listen(join(h, "daemon.sock"), () => r()))
      try {
        for (const args of [["agent", "list"], ["agent", "send", "x", "y"]]) {
          const r = await cli(h, args)
          expect(r.code, `${mode}: ${args.join(" ")}`).toBe(3)
          expect(r.stdout).toBe("")
          expect(r.stderr).toMatch(/^substrat: lost the connection to the daemon \(.*daemon\.sock\): .*\n$/)
        }
      } finally {
        await new Promise<void>((r) => server.close(() => r()))
      }
    }
  })

  it("a socket file with nobody behind it is reported as 'daemon not running'", async () => {
    const h = home()
    fs.mkdirSync(h, { recursive: true, mode: 0o700 })
    const srv = net.createServer()
    await new Promise<void>((r) => srv.listen(join(h, "daemon.sock"), () => r()))
    // Keep the file, stop listening: connect() is refused.
    fs.linkSync(join(h, "daemon.sock"), join(h, "keep.sock"))
    await new Promise<void>((r) => srv.close(() => r()))
    fs.renameSync(join(h, "keep.sock"), join(h, "daemon.sock"))
    const r = await cli(h, ["agent", "list"])
    expect(r.code).toBe(3)
  })

  it("persistence: after stop and start, the same tree, the same sessions (suspended) and the same transcripts", async () => {
    const h = home()
    owned.track(await startDaemon(h))
    await cliJson(h, ["agent", "create", "--name", "lead", "--provider", "scripted:demo"])
    await cliJson(h, ["agent", "send", "lead", "Plan the project"])
    const agents = await waitQuiet(h)
    expect(agents.map((a) => a.name).sort()).toEqual(["alice", "bob", "lead"])
    const before = await cliJson<{ sessions: ReadonlyArray<{ id: string; agent_name: string | null }> }>(h, ["session", "list"])
    const transcripts = new Map<string, string>()
    for (const a of agents) transcripts.set(a.id, (await cli(h, ["agent", "logs", a.id])).stdout)
    expect(transcripts.get(agents.find((a) => a.name === "lead")!.id)).toMatch(/^\[\d\d:\d\d:\d\d\] USER → lead: Plan the project$/m)
    await cliJson(h, ["daemon", "stop"])

    owned.track(await startDaemon(h))
    // The tree is rebuilt from the event logs by start-up recovery (src/recovery/Recovery.ts).
    const tree = await cliJson<{ agents: ReadonlyArray<Agent> }>(h, ["agent", "list"])
    const shape = (as: ReadonlyArray<Agent>) => as.map((a) => [a.id, a.name, a.parent_id, a.session_id]).sort()
    expect(shape(tree.agents)).toEqual(shape(agents))
    const after = await cliJson<{ sessions: ReadonlyArray<{ id: string; state: string; agent_name: string | null }> }>(h, ["session", "list"])
    expect(after.sessions.map((s) => [s.id, s.agent_name])).toEqual(before.sessions.map((s) => [s.id, s.agent_name]))
    expect(after.sessions.every((s) => s.state === "suspended")).toBe(true)
    for (const a of agents) expect((await cli(h, ["agent", "logs", a.id])).stdout).toBe(transcripts.get(a.id))
    for (const a of agents) {
      const lines = fs.readFileSync(join(h, "agents", a.session_id, "events.jsonl"), "utf8").trim().split("\n")
      expect(lines.every((l) => typeof JSON.parse(l).event === "string")).toBe(true)
    }
    await cliJson(h, ["daemon", "stop"])
  })
})
