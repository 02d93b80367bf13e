// The system tools some tests need (bwrap, git, socat, chromium, postgres): which are missing, which test
// files need them, and — as the `pretest` step — installing them when this machine allows it.
//
// A test file that needs a tool says so in a comment line near its top:
//     // requires: bwrap, git
// vitest.config.ts leaves such files out when a tool is missing and prints ONE line saying what
// was skipped and how to install it; with SUBSTRAT_REQUIRE_TOOLS=1 (.ci/run) a missing tool is
// an error instead, so CI always runs everything.
// Usage: `tsx scripts/system-tools.ts` installs what is missing with apt-get when running as root
// or with passwordless sudo, and otherwise only says what is missing. Never fails `npm test`.
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

export const tools = {
  bwrap: { package: "bubblewrap", why: "the sandbox" },
  git: { package: "git", why: "per-turn workspace history" },
  socat: { package: "socat", why: "raw-socket clients in the socket tests" },
  chromium: { package: "chromium", why: "the dashboard test in a real browser" },
  postgres: { package: "postgresql", why: "cluster mode's Postgres storage layers" }
} as const

export type Tool = keyof typeof tools
export const isTool = (s: string): s is Tool => Object.hasOwn(tools, s)

type Env = Readonly<Record<string, string | undefined>>

const executable = (file: string): boolean => {
  try {
    fs.accessSync(file, fs.constants.X_OK)
    return fs.statSync(file).isFile()
  } catch {
    return false
  }
}

const onPath = (bin: string, env: Env): string | undefined =>
  (env.PATH ?? "").split(":").filter((dir) => dir !== "").map((dir) => join(dir, bin)).find(executable)

/**
 * Debian's server binaries (initdb, pg_ctl, postgres) live in /usr/lib/postgresql/<major>/bin,
 * off PATH: the newest major's `bin`, or undefined.
 */
export const debianPostgresBin = (root = "/usr/lib/postgresql"): string | undefined => {
  let majors: Array<string>
  try {
    majors = fs.readdirSync(root).filter((d) => /^\d+$/.test(d)).sort((a, b) => Number(b) - Number(a))
  } catch {
    return undefined
  }
  return majors.map((m) => join(root, m, "bin")).find((bin) => executable(join(bin, "initdb")))
}

/**
 * Where `tool` is, or undefined. chromium: $SUBSTRAT_CHROMIUM, else /usr/bin/chromium (as the
 * dashboard test). postgres: `initdb` with `postgres` beside it, on PATH or Debian's directory.
 */
export const locate = (tool: Tool, env: Env = process.env): string | undefined => {
  if (tool === "postgres") {
    const onPathInitdb = onPath("initdb", env)
    if (onPathInitdb !== undefined && executable(join(fs.realpathSync(onPathInitdb), "..", "postgres"))) {
      return fs.realpathSync(onPathInitdb)
    }
    const bin = debianPostgresBin()
    return bin !== undefined && executable(join(bin, "postgres")) ? join(bin, "initdb") : undefined
  }
  if (tool !== "chromium") return onPath(tool, env)
  const p = env.SUBSTRAT_CHROMIUM ?? "/usr/bin/chromium"
  return executable(p) ? p : undefined
}

export const missingTools = (wanted: ReadonlyArray<Tool> = Object.keys(tools).filter(isTool), env: Env = process.env): Array<Tool> =>
  wanted.filter((t) => locate(t, env) === undefined)

/** The tools a test file declares with `// requires: a, b` (first 40 lines). */
export const requiredBy = (source: string): Array<Tool> => {
  const line = source.split("\n").slice(0, 40).find((l) => /^\/\/ requires: /.test(l))
  return line === undefined ? [] : line.replace(/^\/\/ requires: /, "").split(/[,\s]+/).filter(isTool)
}

export const installHint = (missing: ReadonlyArray<Tool>): string =>
  `sudo apt-get install ${[...new Set(missing.map((t) => tools[t].package))].join(" ")}`

export interface Plan {
  /** Test files to leave out (paths as given). */
  readonly skip: ReadonlyArray<string>
  /** The one line to print, or undefined when nothing is skipped. */
  readonly line: string | undefined
}

/**
 * Which test files to skip given the missing tools. With `require` (SUBSTRAT_REQUIRE_TOOLS=1)
 * nothing is skipped: a missing tool throws, naming what to install.
 */
export const plan = (files: ReadonlyArray<{ readonly path: string; readonly source: string }>, missing: ReadonlyArray<Tool>, require: boolean): Plan => {
  const needs = files.map((f) => ({ path: f.path, tools: requiredBy(f.source).filter((t) => missing.includes(t)) }))
  const skip = needs.filter((f) => f.tools.length > 0).map((f) => f.path)
  const lacking = missing.filter((t) => needs.some((f) => f.tools.includes(t)))
  if (lacking.length === 0) return { skip: [], line: undefined }
  const what = lacking.map((t) => `${t} (${tools[t].why})`).join(", ")
  if (require) {
    throw new Error(`SUBSTRAT_REQUIRE_TOOLS=1 and missing: ${what}; ${skip.length} test file(s) need them; install: ${installHint(lacking)}`)
  }
  return {
    skip,
    line: `substrat tests: skipped ${skip.length} test file(s) that need ${what}, not installed; install: ${installHint(lacking)} (npm test does it when run as root or with passwordless sudo)`
  }
}

/** Every test file under `dir` with its source. */
export const testFiles = (dir: string): Array<{ path: string; source: string }> =>
  (fs.readdirSync(dir, { recursive: true, encoding: "utf8" }))
    .filter((f) => f.endsWith(".test.ts"))
    .map((f) => ({ path: join(dir, f), source: fs.readFileSync(join(dir, f), "utf8") }))

const canInstall = (): "root" | "sudo" | undefined => {
  if (typeof process.getuid === "function" && process.getuid() === 0) return "root"
  return spawnSync("sudo", ["-n", "true"], { stdio: "ignore" }).status === 0 ? "sudo" : undefined
}

/** pretest: install the missing tools with apt-get when allowed; never fails. */
export const installMissing = (): void => {
  const missing = missingTools()
  if (missing.length === 0) return
  const how = canInstall()
  if (how === undefined || onPath("apt-get", process.env) === undefined) {
    console.log(`pretest: missing ${missing.join(", ")}; the tests that need them will be skipped (install: ${installHint(missing)})`)
    return
  }
  const packages = [...new Set(missing.map((t) => tools[t].package))]
  console.log(`pretest: installing ${packages.join(" ")} (apt-get${how === "sudo" ? ", sudo" : ""})`)
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" }
  const apt = (args: ReadonlyArray<string>) => {
    const [command, ...argv] = how === "sudo" ? ["sudo", "-n", "-E", "apt-get", ...args] : ["apt-get", ...args]
    return spawnSync(command!, argv, { stdio: "inherit", env }).status === 0
  }
  if (!apt(["update", "-qq"]) || !apt(["install", "-y", "-qq", ...packages])) {
    console.log(`pretest: could not install ${packages.join(" ")}; the tests that need them will be skipped`)
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) installMissing()
