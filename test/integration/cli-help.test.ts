// requires: git
// The CLI as a newcomer meets it, through the real `substrat` binary: help on a pipe and on a
// terminal (under script(1)), --version, typos, aliases, --quiet, hints that keep --home, the
// workspace-in-use error, and bash completion run in real bash against a running daemon.
import { execFile, execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { cli, daemons, launcher, startDaemon } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-help-")
const home = join(dir, "home")
const elsewhere = join(dir, "other home")
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

const hasScript = (() => {
  try {
    execFileSync("script", ["--version"], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
})()

/** Run the CLI on a pseudo-terminal (script(1)); what the terminal showed. */
const onTty = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>): Promise<string> =>
  new Promise((resolve, reject) => {
    const command = [process.execPath, launcher, ...args].map((a) => `'${a}'`).join(" ")
    execFile("script", ["-qec", command, "/dev/null"], { env: { ...process.env, SUBSTRAT_HOME: home, ...env } }, (err, stdout) =>
      err === null ? resolve(stdout) : reject(err))
  })

/** The bash completion script, sourced in real bash; COMPREPLY for the words of a command line. */
const complete = (script: string, words: ReadonlyArray<string>): Promise<Array<string>> =>
  new Promise((resolve, reject) => {
    const bin = join(dir, "bin")
    fs.mkdirSync(bin, { recursive: true })
    fs.writeFileSync(join(bin, "substrat"), `#!/bin/sh\nexec "${process.execPath}" "${launcher}" "$@"\n`, { mode: 0o755 })
    const program = [
      script,
      `COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")})`,
      `COMP_CWORD=${words.length - 1}`,
      "_substrat_complete",
      `printf '%s\\n' "\${COMPREPLY[@]}"`
    ].join("\n")
    execFile("bash", ["--norc", "--noprofile", "-c", program], {
      env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, SUBSTRAT_HOME: home }
    }, (err, stdout, stderr) => (err === null ? resolve(stdout.split("\n").filter((l) => l.length > 0)) : reject(new Error(stderr))))
  })

beforeAll(async () => {
  owned.track(await startDaemon(home))
})

afterAll(async () => {
  await cli(home, ["daemon", "stop"])
  await owned.killAll()
  removeDir(dir)
})

describe("help, version, typos", () => {
  it("top-level --help on a pipe: one screen, no escapes, links substrat config", async () => {
    const r = await cli(home, ["--help"])
    expect(r.code).toBe(0)
    expect(r.stdout).not.toContain("\x1b")
    expect(r.stdout.trimEnd().split("\n").length).toBeLessThanOrEqual(40)
    expect(r.stdout).toMatch(/^substrat \d+\.\d+\.\d+ — /)
    expect(r.stdout).toContain("substrat config")
    expect(r.stdout).toMatch(/^ {2}agent +Create, list and talk to agents$/m)
  })

  it("a command's --help: full USAGE, every flag described, examples", async () => {
    const r = await cli(home, ["agent", "send", "--help"])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain("USAGE\n  substrat agent send [flags] <agent> <message>\n")
    expect(r.stdout).toMatch(/^ {6}--notify +Queue as a notification/m)
    expect(r.stdout).toMatch(/^ {6}--home <dir> +Substrat home directory/m)
    expect(r.stdout).toContain("EXAMPLES\n  substrat agent send alpha ")
    expect(r.stdout).not.toMatch(/user-defined|This setting is optional|--wizard|--log-level/)
    // A group without a subcommand shows its commands.
    const group = await cli(home, ["workspace"])
    expect(group.code).toBe(0)
    expect(group.stdout).toMatch(/^ {2}delete, rm +Delete a workspace/m)
  })

  it.skipIf(!hasScript)("on a terminal: bold headers, none with NO_COLOR or TERM=dumb", async () => {
    expect(await onTty(["--help"], { TERM: "xterm" })).toContain("\x1b[1mUSAGE\x1b[0m")
    expect(await onTty(["--help"], { TERM: "xterm", NO_COLOR: "1" })).not.toContain("\x1b")
    expect(await onTty(["--help"], { TERM: "dumb" })).not.toContain("\x1b")
  })

  it("--version prints one line", async () => {
    const r = await cli(home, ["--version"])
    expect(r).toEqual({ code: 0, stdout: expect.stringMatching(/^substrat \d+\.\d+\.\d+\n$/), stderr: "" })
  })

  it("typos: did you mean, at the right level, exit 2", async () => {
    const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
      [["agnet", "list"], "substrat: unknown command 'agnet' for 'substrat'; did you mean 'agent'? (see substrat --help)\n"],
      [["agent", "crate"], "substrat: unknown command 'crate' for 'substrat agent'; did you mean 'create'? (see substrat agent --help)\n"],
      [["workspace", "delte", "x"], "substrat: unknown command 'delte' for 'substrat workspace'; did you mean 'delete'? (see substrat workspace --help)\n"],
      [["agent", "send", "--jsn", "a", "b"], "substrat: unknown flag '--jsn' for 'substrat agent send'; did you mean '--json'? (see substrat agent send --help)\n"]
    ]
    for (const [args, line] of cases) expect(await cli(home, args), args.join(" ")).toEqual({ code: 2, stdout: "", stderr: line })
  })
})

describe("aliases, --quiet, hints", () => {
  it("create -q prints the id only; ls and rm are aliases", async () => {
    const created = await cli(home, ["agent", "create", "--name", "alpha", "--provider", "scripted:echo", "-q"])
    expect(created.code).toBe(0)
    const id = created.stdout.trim()
    expect(id).toMatch(uuid)
    expect((await cli(home, ["agent", "ls", "--quiet"])).stdout).toBe(`${id}\n`)
    const ws = (await cli(home, ["workspace", "create", "--name", "web", "--quiet"])).stdout.trim()
    expect(ws).toMatch(uuid)
    // ids only: alpha's own default workspace and web
    const listed = (await cli(home, ["workspace", "ls", "-q"])).stdout.trimEnd().split("\n")
    expect(listed).toHaveLength(2)
    expect(listed).toContain(ws)
    for (const line of listed) expect(line).toMatch(uuid)
    const tmp = (await cli(home, ["workspace", "create", "--quiet"])).stdout.trim()
    expect(await cli(home, ["workspace", "rm", tmp])).toMatchObject({ code: 0, stdout: `workspace ${tmp} deleted\n` })
  })

  it("workspace delete of a workspace in use names the agent and the --force flag", async () => {
    const ws = (await cli(home, ["workspace", "create", "--name", "busy", "-q"])).stdout.trim()
    const beta = (await cli(home, ["agent", "create", "--name", "beta", "--provider", "scripted:echo", "--workspace", ws, "-q"])).stdout.trim()
    const r = await cli(home, ["workspace", "delete", ws])
    expect(r).toEqual({
      code: 5,
      stdout: "",
      stderr: `substrat: workspace ${ws} is in use by agent beta (${beta}); terminate it first, or delete anyway with substrat workspace delete --force ${ws}\n`
    })
    expect(fs.existsSync(join(home, "workspaces", ws))).toBe(true)
  })

  it("workspace delete of a workspace with children names the --force flag", async () => {
    const top = (await cli(home, ["workspace", "create", "--name", "top", "-q"])).stdout.trim()
    expect((await cli(home, ["workspace", "create", "--parent", top, "-q"])).code).toBe(0)
    const r = await cli(home, ["workspace", "delete", top])
    expect(r).toEqual({
      code: 2,
      stdout: "",
      stderr: `substrat: workspace ${top} has 1 child workspace(s); delete them first, or all together with substrat workspace delete --force ${top}\n`
    })
    expect(fs.existsSync(join(home, "workspaces", top))).toBe(true)
  })

  it("hints keep the user's --home", async () => {
    const r = await cli(home, ["agent", "list", "--home", elsewhere])
    expect(r).toEqual({
      code: 3,
      stdout: "",
      stderr: `substrat: daemon not running (no answer on ${elsewhere}/daemon.sock); start it with: substrat daemon start --home '${elsewhere}'\n`
    })
    const doctor = await cli(home, ["doctor", "--json", "--home", elsewhere])
    const checks = (JSON.parse(doctor.stdout) as { checks: ReadonlyArray<{ name: string; fix: string | null }> }).checks
    expect(checks.find((c) => c.name === "daemon")?.fix).toBe(`substrat daemon start --home '${elsewhere}'`)
    // Every substrat command doctor suggests is one the CLI has.
    for (const c of checks) {
      for (const m of (c.fix ?? "").matchAll(/substrat ([a-z-]+(?: [a-z-]+)?)/g)) {
        const help = await cli(home, [...m[1]!.split(" "), "--help"])
        expect(help.code, `${c.name}: ${c.fix}`).toBe(0)
      }
      expect(c.fix ?? "", c.name).not.toMatch(/--unsafe|identity '/)
    }
  })
})

describe("bash completion, run in bash", () => {
  let script = ""
  beforeAll(async () => {
    const r = await cli(home, ["--completions", "bash"])
    expect(r.code).toBe(0)
    script = r.stdout
  })

  it("below the top level: subcommands, then the command's own flags", async () => {
    expect(await complete(script, ["substrat", ""])).toEqual(expect.arrayContaining(["agent", "workspace", "config"]))
    expect(await complete(script, ["substrat", "agent", "se"])).toEqual(["send"])
    const flags = await complete(script, ["substrat", "agent", "send", "--"])
    expect(flags).toEqual(["--home", "--json", "--notify", "--wait", "--timeout", "--help"])
    expect(await complete(script, ["substrat", "workspace", "delete", "--f"])).toEqual(["--force"])
  })

  it("agent and workspace names from the daemon", async () => {
    const agents = await complete(script, ["substrat", "agent", "send", ""])
    expect(agents).toEqual(expect.arrayContaining(["alpha", "beta"]))
    expect(await complete(script, ["substrat", "agent", "inspect", "al"])).toEqual(["alpha"])
    const ws = await complete(script, ["substrat", "workspace", "log", "we"])
    expect(ws).toEqual(["web"])
    expect(await complete(script, ["substrat", "agent", "create", "--provider", "scripted:"])).toEqual(
      expect.arrayContaining(["scripted:demo", "scripted:echo"])
    )
  })
})
