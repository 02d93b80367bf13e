// Finding an agent CLI's executable and deciding how it appears inside the sandbox.
// Order: the configured path (the `claude.bin`/`codex.bin`/`cursor.bin` settings of
// src/config/Config.ts: SUBSTRAT_CLAUDE_BIN, SUBSTRAT_CODEX_BIN, SUBSTRAT_CURSOR_BIN or config.toml),
// the copy installed with substrat itself (its own node_modules: @anthropic-ai/claude-code,
// @openai/codex — the versions substrat is tested with), then PATH (the parent environment's, not
// configuration). This module never reads a setting itself: callers hand it the loaded ones.
// An explicit choice that is broken is an error, never silently replaced by a later source.
// The file is resolved through symlinks; the directory holding
// it is bound read-only at /opt/substrat/<name> (or its parent when the file sits in a `bin/`,
// so sibling resources come along), and the sandbox runs it from there.
// npm's Codex launcher (`node_modules/.bin/codex` → `@openai/codex/bin/codex.js`) is a node
// script that execs a native binary from a platform package; we resolve that binary instead, so
// the sandbox needs neither the launcher nor its package tree.
import { Effect, Option } from "effect"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { ProviderError } from "../../domain/errors.js"
import { defaultInstallDir } from "./CliSettings.js"
import { allKeys, type Loaded, parentEnv, type ProcessEnv, sourceLabel } from "../../config/Config.js"

export type CliName = "claude" | "codex" | "cursor-agent"

/** The setting (src/config/Config.ts) holding each CLI's path. */
const binarySetting: Readonly<Record<CliName, string>> = {
  claude: "claude.bin",
  codex: "codex.bin",
  "cursor-agent": "cursor.bin"
}

/** The setting of a CLI's path as a user sets it: its variable and its config.toml key. */
const settingNames = (name: CliName): string => {
  const info = allKeys.find((k) => k.key === binarySetting[name])
  return info === undefined ? binarySetting[name] : `${info.env} / config.toml ${info.file ?? info.key}`
}

/** A configured executable and where the setting came from (e.g. `SUBSTRAT_CLAUDE_BIN`). */
export interface Configured {
  readonly path: string
  readonly from: string
}

/**
 * The configured binary of each CLI in loaded settings, labelled with the setting's source (the
 * variable, the config.toml key or the flag), as `substrat doctor` reports it.
 */
export const configuredBinaries = (loaded: Loaded): Partial<Record<CliName, Configured>> => {
  const s = loaded.settings
  const out: Partial<Record<CliName, Configured>> = {}
  for (const [name, bin] of [["claude", s.claude.bin], ["codex", s.codex.bin], ["cursor-agent", s.cursor.bin]] as const) {
    if (Option.isSome(bin) && bin.value !== "") out[name] = { path: bin.value, from: sourceLabel(loaded, binarySetting[name]) }
  }
  return out
}

/** Executable names looked up on PATH, in order. */
const pathNames: Readonly<Record<CliName, ReadonlyArray<string>>> = {
  claude: ["claude"],
  codex: ["codex"],
  "cursor-agent": ["cursor-agent", "agent"]
}

const installHint: Readonly<Record<CliName, string>> = {
  claude: "npm install -g @anthropic-ai/claude-code (or set SUBSTRAT_CLAUDE_BIN)",
  codex: "npm install -g @openai/codex (or set SUBSTRAT_CODEX_BIN)",
  "cursor-agent": "curl https://cursor.com/install -fsS | bash (or set SUBSTRAT_CURSOR_BIN)"
}

/**
 * Where a binary was found: the configured setting's source (`SUBSTRAT_CLAUDE_BIN`, `config.toml
 * claude.bin`, or `configuration` when the caller does not say), `package` (substrat's own
 * node_modules) or `PATH`.
 */
export type BinarySource = string

export interface ResolvedBinary {
  readonly name: CliName
  /** The real file on the host (symlinks resolved). */
  readonly hostPath: string
  /** Where it was found (see `BinarySource`). */
  readonly from: BinarySource
  /** Host directory bound read-only into the sandbox. */
  readonly bindDir: string
  /** Where `bindDir` appears inside the sandbox. */
  readonly sandboxDir: string
  /** The executable's path inside the sandbox. */
  readonly sandboxPath: string
}

const isExecutableFile = (p: string): boolean => {
  try {
    const st = Fs.statSync(p)
    if (!st.isFile()) return false
    Fs.accessSync(p, Fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** npm's codex.js launcher → the native binary of the platform package next to it (or null). */
const codexNative = (launcher: string): string | null => {
  const pkgDir = Path.dirname(Path.dirname(launcher)) // …/@openai/codex
  const scope = Path.dirname(pkgDir)
  const candidates = [Path.join(pkgDir, "node_modules", "@openai"), scope]
  for (const base of candidates) {
    let entries: Array<string> = []
    try {
      entries = Fs.readdirSync(base).filter((d) => d.startsWith(`codex-${process.platform}-`))
    } catch {
      continue
    }
    for (const pkg of entries) {
      const vendor = Path.join(base, pkg, "vendor")
      let triples: Array<string> = []
      try {
        triples = Fs.readdirSync(vendor)
      } catch {
        continue
      }
      for (const t of triples) {
        const bin = Path.join(vendor, t, "bin", "codex")
        if (isExecutableFile(bin)) return bin
      }
    }
  }
  return null
}

const looksLikeNodeScript = (p: string): boolean => {
  try {
    const fd = Fs.openSync(p, "r")
    const buf = Buffer.alloc(64)
    Fs.readSync(fd, buf, 0, 64, 0)
    Fs.closeSync(fd)
    return buf.toString("utf8").startsWith("#!") && buf.toString("utf8").split("\n")[0]!.includes("node")
  } catch {
    return false
  }
}

/** A native executable, not npm's placeholder or a launcher script (those are small text files). */
const isNativeBinary = (p: string): boolean => {
  if (!isExecutableFile(p)) return false
  try {
    return Fs.statSync(p).size > 1024 * 1024
  } catch {
    return false
  }
}

/** `pkg`'s directory as node would resolve it from `fromDir` (hoisted, nested or symlinked), or null. */
const packageDir = (fromDir: string, pkg: string): string | null => {
  try {
    return Path.dirname(createRequire(Path.join(fromDir, "package.json")).resolve(`${pkg}/package.json`))
  } catch {
    return null
  }
}

/**
 * The CLI installed with substrat (its package's own dependencies), or null. Claude Code: the
 * native binary npm's postinstall put at `bin/claude.exe`, else the platform package's `claude`.
 * Codex: npm's launcher `bin/codex.js` (resolved to the native binary by `resolveBinary`).
 */
export const bundled = (name: CliName, installDir: string): string | null => {
  if (name === "claude") {
    const pkg = packageDir(installDir, "@anthropic-ai/claude-code")
    if (pkg === null) return null
    const exe = Path.join(pkg, "bin", "claude.exe")
    if (isNativeBinary(exe)) return exe
    const arch = `${process.platform}-${process.arch}`
    for (const platformPkg of [`@anthropic-ai/claude-code-${arch}`, `@anthropic-ai/claude-code-${arch}-musl`]) {
      const dir = packageDir(pkg, platformPkg)
      if (dir !== null && isNativeBinary(Path.join(dir, "claude"))) return Path.join(dir, "claude")
    }
    return null
  }
  if (name === "codex") {
    const pkg = packageDir(installDir, "@openai/codex")
    const launcher = pkg === null ? null : Path.join(pkg, "bin", "codex.js")
    return launcher !== null && Fs.existsSync(launcher) ? launcher : null
  }
  return null
}

/** Why a binary cannot be used, and how to install it (what `doctor` shows as its fix). */
export interface MissingBinary {
  readonly problem: string
  readonly install: string
}

const missing = (name: CliName, problem: string): MissingBinary => ({ problem, install: installHint[name] })

const asConfigured = (configured: string | Configured | undefined): Configured | undefined =>
  configured === undefined || configured === "" ? undefined : typeof configured === "string" ? { path: configured, from: "configuration" } : configured

/**
 * Where a binary is on the host (first hit), or null. Pure lookup, no sandbox decisions.
 * `configured`: the loaded setting (a bare string reports `configuration` as its source); `env`:
 * the parent environment, for PATH only.
 */
export const locate = (
  name: CliName,
  configured: string | Configured | undefined,
  env: ProcessEnv = parentEnv(),
  installDir: string = defaultInstallDir()
): { readonly path: string; readonly from: BinarySource } | null => {
  const set = asConfigured(configured)
  if (set !== undefined && set.path !== "") return set
  const own = bundled(name, installDir)
  if (own !== null) return { path: own, from: "package" }
  for (const dir of (env["PATH"] ?? "").split(":").filter((d) => d.length > 0)) {
    for (const exe of pathNames[name]) {
      const p = Path.join(dir, exe)
      if (isExecutableFile(p)) return { path: p, from: "PATH" }
    }
  }
  return null
}

/** Find the binary for `name` and how it is bound into the sandbox, or why it cannot be used. */
export const findBinary = (
  name: CliName,
  configured?: string | Configured,
  env: ProcessEnv = parentEnv(),
  installDir?: string
): Effect.Effect<ResolvedBinary, MissingBinary> =>
  Effect.suspend(() => {
    const hit = locate(name, configured, env, installDir ?? defaultInstallDir())
    if (hit === null) {
      return Effect.fail(missing(name, `${name} not found (looked at ${settingNames(name)}, substrat's node_modules and PATH)`))
    }
    let real: string
    try {
      real = Fs.realpathSync(hit.path)
    } catch {
      return Effect.fail(missing(name, `${name}: ${hit.path} (from ${hit.from}) does not exist`))
    }
    if (!isExecutableFile(real)) {
      return Effect.fail(missing(name, `${name}: ${real} (from ${hit.from}) is not an executable file`))
    }
    if (name === "codex" && looksLikeNodeScript(real)) {
      const native = codexNative(real)
      if (native === null) {
        return Effect.fail(missing(name, `codex: ${real} is npm's launcher and no native platform binary was found beside it`))
      }
      real = native
    }
    const dir = Path.dirname(real)
    const bindDir = Path.basename(dir) === "bin" ? Path.dirname(dir) : dir
    const sandboxDir = `/opt/substrat/${name}`
    return Effect.succeed({
      name,
      hostPath: real,
      from: hit.from,
      bindDir,
      sandboxDir,
      sandboxPath: `${sandboxDir}/${Path.relative(bindDir, real)}`
    })
  })

/** Resolve the binary for `name` and how it is bound into the sandbox; `missing-binary` if absent. */
export const resolveBinary = (
  name: CliName,
  configured?: string | Configured,
  env: ProcessEnv = parentEnv(),
  installDir?: string
): Effect.Effect<ResolvedBinary, ProviderError> =>
  Effect.mapError(
    findBinary(name, configured, env, installDir),
    (m) => new ProviderError({ provider: name, reason: "missing-binary", message: `${m.problem}; install it: ${m.install}` })
  )

/** `check` for a provider factory: the binary is there (used by `agent create` and `doctor`). */
export const checkBinary = (name: CliName, configured?: string | Configured, env: ProcessEnv = parentEnv(), installDir?: string) =>
  Effect.asVoid(resolveBinary(name, configured, env, installDir))
