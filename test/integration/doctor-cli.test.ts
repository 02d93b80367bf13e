// requires: bwrap, git
// `substrat doctor` and `substrat cleanup` through the real CLI binary (client-side commands:
// they must work with no daemon), against real leftovers: a SIGKILLed daemon's socket and pid
// file, temp files, a dead daemon's staging socket, and an orphan bwrap process.
import { execFile, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { cli, cliJson, daemons, isAlive, launcher, startDaemon, waitFor } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-doctor-cli-")
const orphans: Array<number> = []

afterAll(async () => {
  for (const pid of orphans) if (isAlive(pid)) process.kill(pid, "SIGKILL")
  await owned.killAll()
  removeDir(dir)
})

interface Check {
  readonly name: string
  readonly status: "ok" | "warn" | "fail"
  readonly detail: string
  readonly fix: string | null
}
interface Report {
  readonly ok: boolean
  readonly checks: ReadonlyArray<Check>
}
interface Leftover {
  readonly kind: string
  readonly path: string | null
  readonly pid: number | null
  readonly removed: boolean
}
interface Cleanup {
  readonly purged: boolean
  readonly items: ReadonlyArray<Leftover>
}

/** Run the CLI with extra environment. */
const run = (home: string, args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, [launcher, ...args], { env: { ...process.env, SUBSTRAT_HOME: home, ...env }, timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err === null ? 0 : typeof err.code === "number" ? err.code : 1, stdout, stderr }))
  })

const check = (r: Report, name: string): Check => {
  const c = r.checks.find((x) => x.name === name)
  if (c === undefined) throw new Error(`no check ${name} in ${JSON.stringify(r.checks.map((x) => x.name))}`)
  return c
}

/** A pid that is certainly dead (a process we ran to completion). */
const deadPid = (): number => spawnSync("true").pid!

describe("substrat doctor", () => {
  it("with no daemon: sandbox checks pass here, providers found through the providers' own lookup, daemon 'not running'", async () => {
    const home = join(dir, "nodaemon")
    const fake = join(dir, "fake-claude")
    fs.writeFileSync(fake, "#!/bin/sh\necho fake\n", { mode: 0o755 })
    const r = await run(home, ["doctor", "--json"], { SUBSTRAT_CLAUDE_BIN: fake, SUBSTRAT_CODEX_BIN: join(dir, "no-such-codex") })
    expect(r.code).toBe(0)
    const report = JSON.parse(r.stdout) as Report
    expect(report.ok).toBe(true)
    expect(report.checks.map((c) => c.name)).toEqual([
      "bwrap", "sandbox", "prlimit", "git", "cgroup", "identity", "config",
      "provider:claude", "provider:codex", "provider:cursor-agent",
      "provider:acp:qwen", "provider:acp:gemini", "provider:acp:opencode", "provider:acp:claude", "provider:acp:codex", "daemon"
    ])
    // Each ACP preset's executable: qwen and gemini are installed with substrat.
    expect(check(report, "provider:acp:qwen")).toMatchObject({ status: "ok", detail: expect.stringMatching(/@qwen-code\/qwen-code\/.* \(from package; model: openai\)$/) })
    expect(check(report, "provider:acp:gemini")).toMatchObject({
      status: "ok",
      detail: expect.stringMatching(/@google\/gemini-cli\/bundle\/gemini\.js \(from package; model: gemini\)$/)
    })
    // The claude / codex adapters, installed with substrat, and the CLI each runs: the claude / codex
    // provider's own (here the env var's claude; codex's broken override makes its adapter unusable).
    expect(check(report, "provider:acp:claude")).toMatchObject({
      status: "ok",
      detail: expect.stringMatching(/@agentclientprotocol\/claude-agent-acp\/dist\/index\.js \(from package; model: anthropic\); runs claude: (.*) \(from SUBSTRAT_CLAUDE_BIN\)$/)
    })
    expect(check(report, "provider:acp:claude").detail).toContain(`runs claude: ${fs.realpathSync(fake)} (from SUBSTRAT_CLAUDE_BIN)`)
    expect(check(report, "provider:acp:codex").status).toBe("warn")
    expect(check(report, "provider:acp:codex").detail).toMatch(/@agentclientprotocol\/codex-acp\/dist\/index\.js \(from package; model: openai\); the codex it runs: .*no-such-codex/)
    for (const n of ["bwrap", "sandbox", "prlimit", "git"]) expect(check(report, n).status).toBe("ok")
    expect(check(report, "cgroup").detail).toMatch(/^(v2-writable|v2-readonly|v1-or-hybrid|none):/)
    // Where each CLI was found: the env var here; codex's broken override is reported, not replaced.
    expect(check(report, "provider:claude")).toMatchObject({ status: "ok", detail: `${fs.realpathSync(fake)} (from SUBSTRAT_CLAUDE_BIN)` })
    expect(check(report, "provider:codex").status).toBe("warn")
    expect(check(report, "provider:codex").detail).toContain(join(dir, "no-such-codex"))
    expect(check(report, "provider:codex").detail).not.toContain("install it")
    expect(check(report, "provider:codex").fix).toBe("npm install -g @openai/codex (or set SUBSTRAT_CODEX_BIN)")
    expect(check(report, "daemon")).toMatchObject({ status: "warn", fix: "substrat daemon start" })
    expect(check(report, "daemon").detail).toMatch(/not running/)
    expect(check(report, "config")).toMatchObject({ status: "ok", detail: `no ${join(home, "config.toml")} (environment and defaults)` })
    // Nothing was created in the home by asking.
    expect(fs.existsSync(join(home, "daemon.sock"))).toBe(false)

    const text = await run(home, ["doctor"])
    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(/^ok +bwrap +\/.*bwrap/m)
    expect(text.stdout).toMatch(/^WARN +daemon +not running/m)
  })

  it("reads $SUBSTRAT_HOME/config.toml like the daemon: a CLI path set there is used and named; an invalid file fails the config check", async () => {
    const home = join(dir, "configured")
    fs.mkdirSync(home, { recursive: true })
    const fake = join(dir, "fake-codex")
    fs.writeFileSync(fake, "#!/bin/sh\necho fake\n", { mode: 0o755 })
    fs.writeFileSync(join(home, "config.toml"), `[codex]\nbin = ${JSON.stringify(fake)}\n[cursor]\nbin = ${JSON.stringify(join(dir, "no-such-cursor"))}\n`)
    const r = await run(home, ["doctor", "--json"], { SUBSTRAT_CODEX_BIN: "", SUBSTRAT_CURSOR_BIN: "" })
    expect(r.code).toBe(0)
    const report = JSON.parse(r.stdout) as Report
    expect(check(report, "config")).toMatchObject({ status: "ok", detail: join(home, "config.toml") })
    expect(check(report, "provider:codex")).toMatchObject({ status: "ok", detail: `${fs.realpathSync(fake)} (from config.toml codex.bin)` })
    // A broken path in the file is reported with where it came from, not replaced by a later source.
    expect(check(report, "provider:cursor-agent").status).toBe("warn")
    expect(check(report, "provider:cursor-agent").detail).toContain(`${join(dir, "no-such-cursor")} (from config.toml cursor.bin)`)
    // The environment wins over the file, as in the daemon.
    const env = JSON.parse((await run(home, ["doctor", "--json"], { SUBSTRAT_CODEX_BIN: join(dir, "fake-claude") })).stdout) as Report
    expect(check(env, "provider:codex").detail).toMatch(/ \(from SUBSTRAT_CODEX_BIN\)$/)

    fs.writeFileSync(join(home, "config.toml"), "slots = \"many\"\n")
    const bad = await run(home, ["doctor", "--json"])
    expect(bad.code).toBe(1)
    const failed = JSON.parse(bad.stdout) as Report
    expect(check(failed, "config").status).toBe("fail")
    expect(check(failed, "config").detail).toContain("slots")
    expect(bad.stderr).toMatch(/check\(s\) failed: config/)
  })

  it("a live daemon is 'ok' with its pid; a SIGKILLed one leaves stale files it points at cleanup", async () => {
    const home = join(dir, "live")
    const pid = await startDaemon(home)
    owned.track(pid)
    const live = await cliJson<Report>(home, ["doctor"])
    expect(check(live, "daemon").status).toBe("ok")
    expect(check(live, "daemon").detail).toContain(`pid ${pid}`)
    expect(check(live, "daemon").detail).toContain("(0600)")
    process.kill(pid, "SIGKILL")
    await owned.killAll()
    const dead = await cliJson<Report>(home, ["doctor"])
    expect(check(dead, "daemon").status).toBe("warn")
    expect(check(dead, "daemon").detail).toMatch(/stale socket .*daemon\.sock and pid file \(pid \d+ is gone\)/)
    expect(check(dead, "daemon").fix).toMatch(/substrat cleanup --purge/)
  })

  it("no bwrap on PATH: the report fails (exit 1) with the install hint, and is still printed", async () => {
    const home = join(dir, "nobwrap")
    const r = await run(home, ["doctor", "--json"], { PATH: join(dir, "empty-path"), SUBSTRAT_CLAUDE_BIN: "", SUBSTRAT_CODEX_BIN: "" })
    expect(r.code).toBe(1)
    const report = JSON.parse(r.stdout) as Report
    expect(report.ok).toBe(false)
    // Nothing on PATH, no env var: the CLIs installed with substrat are found, and doctor says so.
    expect(check(report, "provider:claude")).toMatchObject({ status: "ok", detail: expect.stringMatching(/@anthropic-ai\/claude-code.* \(from package\)$/) })
    expect(check(report, "provider:codex")).toMatchObject({ status: "ok", detail: expect.stringMatching(/\/bin\/codex \(from package\)$/) })
    expect(check(report, "bwrap").status).toBe("fail")
    expect(check(report, "sandbox").fix).toContain("apt-get install bubblewrap")
    expect(r.stderr.trim()).toMatch(/^substrat: doctor: \d+ check\(s\) failed: bwrap, sandbox/)
  })
})

describe("substrat cleanup", () => {
  it("reports a dead daemon's leftovers without touching them; --purge removes exactly those", async () => {
    const home = join(dir, "crashed")
    const pid = await startDaemon(home)
    owned.track(pid)
    const ws = await cliJson<{ id: string; root_path: string }>(home, ["workspace", "create"])
    const agent = await cliJson<{ session_id: string }>(home, ["agent", "create", "--name", "a", "--provider", "scripted"])
    process.kill(pid, "SIGKILL")
    await owned.killAll()

    // Leftovers: the socket + pid file (kill -9), an interrupted atomic write, a dead daemon's
    // staging socket, and a sandbox process whose daemon is gone.
    const tmp = join(home, "agents", agent.session_id, "session.json.tmp")
    fs.writeFileSync(tmp, "{")
    const staging = join(home, `daemon.sock.${deadPid()}.tmp`)
    fs.writeFileSync(staging, "")
    const marker = `45.${Math.floor(Math.random() * 1e9)}`
    const orphan = spawn("bwrap", [
      "--die-with-parent", "--unshare-all", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
      "--symlink", "usr/lib64", "/lib64", "--bind", ws.root_path, "/workspace", "--", "sleep", marker
    ], { stdio: "ignore" })
    orphans.push(orphan.pid!)
    await waitFor("the orphan sandbox", () => {
      const r = spawnSync("pgrep", ["-f", `^sleep ${marker}$`], { encoding: "utf8" })
      return r.stdout.trim() !== "" ? true : undefined
    })

    // The model forwarders' sockets, when the daemon's provider registry serves them.
    const llmDir = join(home, "llm")
    const forwarders = fs.existsSync(llmDir) ? fs.readdirSync(llmDir).filter((f) => f.endsWith(".sock")).map((f) => join(llmDir, f)) : []

    const found = await cliJson<Cleanup>(home, ["cleanup"])
    expect(found.purged).toBe(false)
    const kinds = found.items.map((i) => `${i.kind}:${i.path ?? i.pid}`).sort()
    expect(kinds).toEqual([
      `orphan-sandbox-process:${ws.root_path}`,
      `stale-pidfile:${join(home, "daemon.pid")}`,
      `stale-socket:${join(home, "daemon.sock")}`,
      `stale-socket:${staging}`,
      `tmp-file:${tmp}`,
      ...forwarders.map((f) => `stale-socket:${f}`)
    ].sort())
    expect(found.items.find((i) => i.kind === "orphan-sandbox-process")?.pid).toBe(orphan.pid)
    // Reporting deleted nothing.
    for (const p of [tmp, staging, join(home, "daemon.sock"), join(home, "daemon.pid")]) expect(fs.existsSync(p)).toBe(true)
    expect(isAlive(orphan.pid!)).toBe(true)
    const text = await cli(home, ["cleanup"])
    expect(text.stdout).toContain(`${5 + forwarders.length} leftover(s); run with --purge to remove them`)

    const purged = await cliJson<Cleanup>(home, ["cleanup", "--purge"])
    expect(purged.purged).toBe(true)
    expect(purged.items).toHaveLength(5 + forwarders.length)
    expect(purged.items.every((i) => i.removed)).toBe(true)
    for (const p of [tmp, staging, join(home, "daemon.sock"), join(home, "daemon.pid"), ...forwarders]) expect(fs.existsSync(p)).toBe(false)
    await waitFor("the orphan killed", () => (isAlive(orphan.pid!) ? undefined : true))
    // The workspace, the agent's session and its log are not leftovers.
    expect(fs.existsSync(join(home, "workspaces", ws.id, "workspace.json"))).toBe(true)
    expect(fs.existsSync(join(home, "agents", agent.session_id, "events.jsonl"))).toBe(true)
    expect((await cliJson<Cleanup>(home, ["cleanup"])).items).toEqual([])
    // And the next daemon starts and sees the agent.
    owned.track(await startDaemon(home))
    const { agents } = await cliJson<{ agents: ReadonlyArray<{ name: string }> }>(home, ["agent", "list"])
    expect(agents.map((a) => a.name)).toEqual(["a"])
  })

  it("with a live daemon: its socket, pid file and fresh temp files are spared; purging leaves it serving", async () => {
    const home = join(dir, "crashed") // the daemon started at the end of the previous test
    const ws = await cliJson<{ id: string }>(home, ["workspace", "create"])
    const fresh = join(home, "workspaces", ws.id, "workspace.json.tmp")
    fs.writeFileSync(fresh, "x")
    const found = await cliJson<Cleanup>(home, ["cleanup", "--purge"])
    expect(found.items).toEqual([])
    expect(fs.existsSync(fresh)).toBe(true)
    expect(fs.existsSync(join(home, "daemon.sock"))).toBe(true)
    expect((await cliJson<{ pid: number }>(home, ["daemon", "status"])).pid).toBeGreaterThan(0)
    await cliJson(home, ["daemon", "stop"])
  })
})
