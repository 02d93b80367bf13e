// The fast path of one-shot commands (src/cli/fast/, dist/cli-fast.cjs) against the full
// @effect/cli client (SUBSTRAT_CLI_FULL=1), both through the real `substrat` launcher and the
// same real daemon: identical stdout, stderr and exit code — with and without --json, existing
// and unknown agents, no daemon, a daemon that hangs up or answers garbage. Each fast command
// is also run through dist/cli-fast.cjs directly with a fallback that exits 99, which proves
// the fast path answered it itself (a fast path that always fell back would pass the
// differential checks trivially). Command lines outside the fast set must fall back.
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { cli, cliJson, daemons, launcher, repoRoot, startDaemon, waitFor, waitQuiet } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-fast-")
const home = join(dir, "home")
const noDaemon = join(dir, "empty")
const fastBundle = join(repoRoot, "dist", "cli-fast.cjs")

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

type Env = Readonly<Record<string, string | undefined>>

const exec = (args: ReadonlyArray<string>, env: Env): Promise<Run> =>
  new Promise((resolve) => {
    const merged: NodeJS.ProcessEnv = { ...process.env }
    delete merged["SUBSTRAT_CLI_FULL"]
    delete merged["SUBSTRAT_FROM_SOURCE"]
    for (const [k, v] of Object.entries(env)) {
      if (v === undefined) delete merged[k]
      else merged[k] = v
    }
    const child = execFile(process.execPath, args, { env: merged, maxBuffer: 16 * 1024 * 1024, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === "number" ? err.code : 1, stdout, stderr })
    })
    child.stdin?.end()
  })

/** `substrat <argv>` through the launcher: fast path (default) or forced full CLI. */
const substrat = (argv: ReadonlyArray<string>, env: Env, full: boolean) =>
  exec([launcher, ...argv], { ...env, SUBSTRAT_CLI_FULL: full ? "1" : undefined })

/** The fast bundle alone; its fallback exits 99 (so 99 = "handed over to the full CLI"). */
const fastOnly = (argv: ReadonlyArray<string>, env: Env) =>
  exec(["-e", "require(process.argv[1]).run(process.argv.slice(2), () => process.exit(99))", fastBundle, ...argv], env)

/** Volatile fields of `daemon status` (they change between two calls). */
const steady = (r: Run): Run => ({
  ...r,
  stdout: r.stdout
    .replace(/"(uptime_ms|connections)": \d+/g, "\"$1\": N")
    .replace(/^(uptime|connections)( +)\d+( s)?$/gm, "$1$2N")
})

/** Same bytes and exit code from the full CLI, the launcher's fast path and the fast bundle alone. */
const same = async (argv: ReadonlyArray<string>, env: Env = { SUBSTRAT_HOME: home }, norm: (r: Run) => Run = (r) => r) => {
  const full = norm(await substrat(argv, env, true))
  const viaLauncher = norm(await substrat(argv, env, false))
  const alone = norm(await fastOnly(argv, env))
  expect(viaLauncher, `launcher: substrat ${argv.join(" ")}`).toEqual(full)
  expect(alone, `fast bundle: substrat ${argv.join(" ")}`).toEqual(full)
  return full
}

/** Not a fast command line: the fast bundle hands it over, and the launcher prints what the full CLI prints. */
const fallsBack = async (argv: ReadonlyArray<string>, env: Env = { SUBSTRAT_HOME: home }) => {
  const full = await substrat(argv, env, true)
  expect((await fastOnly(argv, env)).code, `fast bundle: substrat ${argv.join(" ")}`).toBe(99)
  expect(await substrat(argv, env, false), `launcher: substrat ${argv.join(" ")}`).toEqual(full)
  return full
}

let leadId = ""

beforeAll(async () => {
  owned.track(await startDaemon(home))
  const lead = await cliJson<{ id: string }>(home, ["agent", "create", "--name", "lead", "--provider", "scripted:demo"])
  leadId = lead.id
  await cliJson(home, ["agent", "send", "lead", "Plan the project"])
  await waitQuiet(home)
  await cliJson(home, ["workspace", "create", "--name", "ws1"])
  fs.mkdirSync(noDaemon)
}, 120_000)

afterAll(async () => {
  await cli(home, ["daemon", "stop"])
  await owned.killAll()
  removeDir(dir)
})

describe("fast path = full CLI, byte for byte (real daemon)", () => {
  it("agent list, with and without --json (a tree with children)", async () => {
    const text = await same(["agent", "list"])
    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(/^lead .*\n├─ alice .*\n└─ bob /m)
    const json = await same(["agent", "list", "--json"])
    expect((JSON.parse(json.stdout) as { agents: ReadonlyArray<unknown> }).agents).toHaveLength(3)
    await same(["agent", "list", "--home", home], { SUBSTRAT_HOME: noDaemon })
    await same(["agent", "list", "--home", home, "--json"], { SUBSTRAT_HOME: noDaemon })
  })

  it("agent inspect: by name, by id, --json before or after, unknown agent (exit 4)", async () => {
    expect((await same(["agent", "inspect", "lead"])).stdout).toMatch(/recent turns:[\s\S]*recent messages:/)
    await same(["agent", "inspect", leadId, "--json"])
    await same(["agent", "inspect", "--json", "alice"])
    const unknown = await same(["agent", "inspect", "nope"])
    expect(unknown).toMatchObject({ code: 4, stdout: "" })
    expect(unknown.stderr).toMatch(/^substrat: .*nope.*\n$/)
    await same(["agent", "inspect", "nope", "--json"])
  })

  it("agent logs (no -f): the transcript; unknown agent", async () => {
    const logs = await same(["agent", "logs", "lead"])
    expect(logs.stdout).toMatch(/^\[\d\d:\d\d:\d\d\] USER → lead: Plan the project$/m)
    expect((await same(["agent", "logs", "nope"])).code).toBe(4)
  })

  it("session list, workspace list, daemon status", async () => {
    expect((await same(["session", "list"])).stdout).toMatch(/^SESSION +STATE/)
    await same(["session", "list", "--json"])
    expect((await same(["workspace", "list"])).stdout).toMatch(/ws1/)
    await same(["workspace", "list", "--json"])
    expect((await same(["daemon", "status"], undefined, steady)).stdout).toMatch(/^pid +\d+$/m)
    await same(["daemon", "status", "--json"], undefined, steady)
  })

  it("agent send (and --notify, --json); unknown agent; mutations are not repeated", async () => {
    // The message id differs per send: compare everything else, and count the messages.
    const ids = (r: Run): Run => ({ ...r, stdout: r.stdout.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, (m) => (m === leadId ? m : "MSG")) })
    expect((await same(["agent", "send", "bob", "note one", "--notify"], undefined, ids)).stdout).toBe("sent MSG\n")
    await same(["agent", "send", "--notify", "--json", "bob", "note two"], undefined, ids)
    // Three runs per `same` (full CLI, launcher, fast bundle): each note is in bob's transcript
    // three times — once per run, none sent twice.
    const count = (text: string, note: string) => text.split("\n").filter((l) => l.endsWith(`USER → bob: ${note}`)).length
    const logs = await waitFor("the notes in bob's transcript", async () => {
      const out = (await cli(home, ["agent", "logs", "bob"])).stdout
      return count(out, "note one") >= 3 && count(out, "note two") >= 3 ? out : undefined
    })
    expect([count(logs, "note one"), count(logs, "note two")]).toEqual([3, 3])
    expect(await same(["agent", "send", "nope", "hi"])).toMatchObject({ code: 4, stdout: "" })
  })

  it("no daemon: exit 3, same line (no socket, a stale socket file, default home ~/.substrat)", async () => {
    for (const argv of [["agent", "list"], ["agent", "list", "--json"], ["agent", "inspect", "x"], ["agent", "send", "x", "y"], ["agent", "logs", "x"], ["session", "list"], ["daemon", "status"]]) {
      const r = await same(argv, { SUBSTRAT_HOME: noDaemon })
      expect(r).toEqual({ code: 3, stdout: "", stderr: `substrat: daemon not running (no answer on ${join(noDaemon, "daemon.sock")}); start it with: substrat daemon start\n` })
    }
    const stale = join(dir, "stale")
    fs.mkdirSync(stale)
    fs.writeFileSync(join(stale, "daemon.sock"), "")
    expect((await same(["agent", "list"], { SUBSTRAT_HOME: stale })).code).toBe(3)
    const fakeHome = join(dir, "user")
    fs.mkdirSync(fakeHome)
    const r = await same(["agent", "list"], { SUBSTRAT_HOME: undefined, HOME: fakeHome })
    expect(r.stderr).toContain(join(fakeHome, ".substrat", "daemon.sock"))
  })

  it("a daemon that hangs up, or answers garbage: same error line and exit code", async () => {
    for (const mode of ["hang-up", "garbage"] as const) {
      const fake = join(dir, `fake-${mode}`)
      fs.mkdirSync(fake)
      const server = net.createServer((c) => c.once("data", () => (mode === "hang-up" ? c.destroy() : c.write("garbage\n"))))
      await new Promise<void>((r) => server.listen(join(fake, "daemon.sock"), () => r()))
      try {
        for (const argv of [["agent", "list"], ["agent", "send", "x", "y"]]) {
          const r = await same(argv, { SUBSTRAT_HOME: fake })
          expect(r.code).toBe(3)
          expect(r.stderr).toMatch(/^substrat: lost the connection to the daemon/)
        }
      } finally {
        await new Promise<void>((r) => server.close(() => r()))
      }
    }
  })
})

describe("command lines outside the fast set fall back to the full CLI", () => {
  it("help, version, unknown flags, --home=DIR, flag values, wrong arity, invalid refs", async () => {
    expect((await fallsBack(["agent", "list", "--help"])).stdout).toContain("Show the agent tree")
    expect((await fallsBack(["--version"])).stdout).toMatch(/^\d+\.\d+\.\d+/)
    expect((await fallsBack(["agent", "list", "--verbose"])).code).toBe(2)
    expect((await fallsBack(["agent", "list", `--home=${home}`], { SUBSTRAT_HOME: noDaemon })).code).toBe(0)
    expect((await fallsBack(["agent", "list", "--json", "false"])).stdout).toMatch(/^NAME/)
    await fallsBack(["agent", "list", "--json", "--json"])
    expect((await fallsBack(["agent", "inspect"])).code).toBe(2)
    expect((await fallsBack(["agent", "inspect", "lead", "bob"])).code).toBe(2)
    expect((await fallsBack(["agent", "inspect", ""])).code).not.toBe(0)
    expect((await fallsBack(["agent", "logs", "--json", "lead"])).code).toBe(2)
    expect((await fallsBack(["agent", "send", "nope", "-x"])).code).toBe(4)
    await fallsBack(["AGENT", "list"])
  })
})
