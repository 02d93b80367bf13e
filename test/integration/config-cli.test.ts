// Configuration through real processes: a bad SUBSTRAT_* value stops `daemon start` naming the
// variable; config.toml values reach `substrat config --json` (source "file") and the daemon
// itself (daemon.status slots), and the environment overrides the file.
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { type CliResult, cliJson, daemons, launcher } from "./daemon.support.js"

const owned = daemons()
const dirs: Array<string> = []
const home = () => {
  const d = makeTmpDir("substrat-config-")
  dirs.push(d)
  return join(d, "home")
}

afterAll(async () => {
  await owned.killAll()
  for (const d of dirs) removeDir(d)
})

/** The CLI with extra environment (variables that could leak in from the test runner are cleared). */
const run = (h: string, args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}): Promise<CliResult> =>
  new Promise((resolve) => {
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("SUBSTRAT_") || k === "SUBSTRAT_FROM_SOURCE"))
    execFile(process.execPath, [launcher, ...args], { env: { ...base, ...env, SUBSTRAT_HOME: h }, timeout: 120_000 }, (err, stdout, stderr) =>
      resolve({ code: err === null ? 0 : typeof err.code === "number" ? err.code : 1, stdout, stderr }))
  })

interface ConfigJson {
  readonly file: { readonly path: string; readonly exists: boolean }
  readonly settings: Readonly<Record<string, { readonly value: unknown; readonly source: string; readonly env: string; readonly file_key: string | null }>>
}

describe("configuration (real processes)", () => {
  it("SUBSTRAT_SLOTS=abc: daemon start fails with exit 2 naming SUBSTRAT_SLOTS, and no daemon is left", async () => {
    const h = home()
    const r = await run(h, ["daemon", "start"], { SUBSTRAT_SLOTS: "abc" })
    expect(r.code).toBe(2)
    expect(r.stderr).toMatch(/^substrat: invalid SUBSTRAT_SLOTS \(environment\): .*"abc"/m)
    expect(fs.existsSync(join(h, "daemon.pid"))).toBe(false)
    expect(fs.existsSync(join(h, "daemon.sock"))).toBe(false)
    const fg = await run(h, ["daemon", "run"], { SUBSTRAT_GRACE_MS: "-5" })
    expect(fg.code).toBe(2)
    expect(fg.stderr).toContain("SUBSTRAT_GRACE_MS")
  })

  it("--http that is not HOST:PORT: daemon start fails with exit 2 before anything starts", async () => {
    const h = home()
    for (const bad of ["bogus", "127.0.0.1:99999", "127.0.0.1:", "http://127.0.0.1:8080"]) {
      const r = await run(h, ["daemon", "start", "--http", bad])
      expect(r.code, bad).toBe(2)
      expect(r.stderr).toContain("invalid --http (command line): Expected HOST:PORT")
      expect(fs.existsSync(join(h, "daemon.pid"))).toBe(false)
    }
  })

  it("config.toml: its value shows with source \"file\"; the env var overrides it; a bad file value names key and file", async () => {
    const h = home()
    fs.mkdirSync(h, { recursive: true, mode: 0o700 })
    fs.writeFileSync(join(h, "config.toml"), "slots = 3\n[openai]\nmax_steps = 9\n")
    const fromFile = await run(h, ["config", "--json"])
    expect(fromFile.code).toBe(0)
    const c = JSON.parse(fromFile.stdout) as ConfigJson
    expect(c.file).toEqual({ path: join(h, "config.toml"), exists: true })
    expect(c.settings["slots"]).toMatchObject({ value: 3, source: "file", env: "SUBSTRAT_SLOTS", file_key: "slots" })
    expect(c.settings["openai.maxSteps"]).toMatchObject({ value: 9, source: "file", env: "SUBSTRAT_OPENAI_MAX_STEPS", file_key: "openai.max_steps" })
    expect(c.settings["graceMs"]).toMatchObject({ value: 10000, source: "default" })

    const overridden = JSON.parse((await run(h, ["config", "--json"], { SUBSTRAT_SLOTS: "5" })).stdout) as ConfigJson
    expect(overridden.settings["slots"]).toMatchObject({ value: 5, source: "env" })
    expect(overridden.settings["openai.maxSteps"]).toMatchObject({ value: 9, source: "file" })

    const text = await run(h, ["config"], { OPENAI_API_KEY: "sk-never-printed" })
    expect(text.stdout).toMatch(/^SUBSTRAT_SLOTS\s+slots\s+3\s+file$/m)
    expect(text.stdout).toMatch(/^OPENAI_API_KEY\s+-\s+<redacted>\s+env$/m)
    expect(text.stdout).not.toContain("sk-never-printed")

    fs.writeFileSync(join(h, "config.toml"), "slots = \"many\"\n")
    const bad = await run(h, ["daemon", "start"])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain(`invalid slots (${join(h, "config.toml")})`)
    fs.writeFileSync(join(h, "config.toml"), "slots = [\n")
    const broken = await run(h, ["config"])
    expect(broken.code).toBe(2)
    expect(broken.stderr).toContain(`${join(h, "config.toml")} is not valid TOML`)
  })

  it("the daemon runs with the file's value; a flag beats the file", async () => {
    const h = home()
    fs.mkdirSync(h, { recursive: true, mode: 0o700 })
    fs.writeFileSync(join(h, "config.toml"), "slots = 3\ngrace_ms = 1234\n")
    const started = JSON.parse((await run(h, ["daemon", "start", "--slots", "2", "--json"])).stdout) as { pid: number }
    owned.track(started.pid)
    const status = await cliJson<{ slots: number; grace_ms: number }>(h, ["daemon", "status"])
    expect([status.slots, status.grace_ms]).toEqual([2, 1234])
    await cliJson(h, ["daemon", "stop"])
  })
})
