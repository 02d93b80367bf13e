// Over 300 lines because the built-in presets (command, environment, inline configuration, the why of each) sit with the lookup that resolves them.
// The command line of an ACP agent: `acp:<preset>` names a preset (built in below, or added or
// overridden by the `acp.presets` setting), `acp:<command …>` any other command line (split on
// blanks). The executable is looked for in substrat's own node_modules (a preset's `package`,
// where its `bin` is a node script run with the sandbox's node), else on PATH (the parent
// environment's). What the sandbox needs of it is bound read-only: the package's directory (its
// node_modules when the package has dependencies of its own: the claude / codex adapters), or
// the executable's directory (its parent when it sits in a `bin/`); absolute paths among a raw
// command's arguments that exist on the host are bound read-only below /opt/substrat.
//
// An adapter (`cli`: the claude-agent-acp and codex-acp presets) runs an agent CLI itself: that
// CLI is the one the claude / codex provider runs (same setting, node_modules copy or PATH), with
// that provider's environment (Launch.ts).
//
// How the agent reaches its model (`model`): `openai` — an OpenAI-compatible base URL on the
// sandbox's loopback (llm-forward.mjs relays it to the model socket, the daemon's metering
// forwarder); `anthropic` — the Anthropic API over the model socket (ANTHROPIC_UNIX_SOCKET, as for
// claude); `gemini` — the Gemini API at a base URL on the sandbox's loopback (relayed as for
// `openai`); `none` — nothing is provided (the network is off: such an agent needs a local model).
import { Effect, Either, Schema } from "effect"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Path from "node:path"
import { ProviderError } from "../../domain/errors.js"
import type { ExtraBind } from "../../sandbox/Sandbox.js"
import * as Binary from "../cli/Binary.js"

/** Where gemini's admin policy (src/provider/acp/gemini-policy/substrat.toml) is bound in its sandbox (Launch.ts). */
export const GEMINI_ADMIN_POLICY = "/opt/substrat/gemini-policy/substrat.toml"

export const ModelRoute = Schema.Literal("openai", "anthropic", "gemini", "none")
export type ModelRoute = typeof ModelRoute.Type

export const Preset = Schema.Struct({
  /** argv; the first word is the executable (looked up as described above). */
  command: Schema.Array(Schema.String).pipe(Schema.minItems(1)),
  env: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.String }), { default: () => ({}) }),
  model: Schema.optionalWith(ModelRoute, { default: () => "none" as const }),
  /** The npm package holding the executable as a `bin` entry (substrat's node_modules). */
  package: Schema.optional(Schema.String),
  /**
   * The agent CLI an adapter runs (`claude`, `codex`): found and bound as the claude / codex
   * providers find theirs (Launch.ts), handed to the adapter, with that provider's environment.
   */
  cli: Schema.optional(Schema.Literal("claude", "codex")),
  /** Offer the client's `fs/*` (WorkspaceFs.ts; default yes); false: the agent reads and writes /workspace itself, inside its sandbox. */
  clientFs: Schema.optional(Schema.Boolean),
  /** Continue a kept session with `session/load` when the agent offers it (default yes); false: a new session with the recovery note. */
  loadSession: Schema.optional(Schema.Boolean)
})
export type Preset = typeof Preset.Type

/** The `acp.presets` setting: JSON, name → preset. */
export const PresetTable = Schema.Record({ key: Schema.String, value: Preset })
export type PresetTable = typeof PresetTable.Type
const decodeTable = Schema.decodeUnknownEither(Schema.parseJson(PresetTable))

/** Model-provider variables the agent would otherwise try to reach the internet with. */
const offline = { NO_BROWSER: "1", DO_NOT_TRACK: "1" }

const opencodeConfig = JSON.stringify({
  autoupdate: false,
  share: "disabled",
  model: "substrat/{env:OPENAI_MODEL}",
  small_model: "substrat/{env:OPENAI_MODEL}",
  // opencode asks its client before an edit (write, edit, patch) or a shell command, as Qwen
  // Code's default mode does (left to itself it asks for neither): the agent's `approve` decides.
  permission: { edit: "ask", bash: "ask" },
  // No session-title request after a session's first prompt: a model request of its own, metered
  // against the agent, whose title nobody reads.
  agent: { title: { disable: true } },
  provider: {
    substrat: {
      npm: "@ai-sdk/openai-compatible",
      name: "substrat",
      options: { baseURL: "{env:OPENAI_BASE_URL}", apiKey: "{env:OPENAI_API_KEY}" },
      models: { "{env:OPENAI_MODEL}": { name: "{env:OPENAI_MODEL}" } }
    }
  }
})

export const builtinPresets: PresetTable = {
  qwen: {
    // `default`: qwen asks the client (acp.approve) instead of its own model-based classifier.
    command: ["qwen", "--acp", "--approval-mode", "default"],
    // QWEN_CODE_LEGACY_MCP_BLOCKING: `session/new` answers once the MCP servers' tools are
    // registered. Without it qwen discovers them in the background, and a first prompt that runs
    // before Substrat's MCP server is up (a loaded machine) finds no `mcp__substrat__*` tool.
    env: { ...offline, QWEN_CODE_DISABLE_TELEMETRY: "1", QWEN_CODE_LEGACY_MCP_BLOCKING: "1" },
    model: "openai",
    package: "@qwen-code/qwen-code"
  },
  gemini: {
    // `default`: Gemini CLI asks the client before an edit or a shell command (acp.approve
    // decides). On the command line it outranks a `general.defaultApprovalMode` of the agent's
    // own settings files (its HOME and /workspace/.gemini are writable by it): `auto_edit` there
    // would approve every edit unasked, under `--approve ask` too. `--admin-policy` (bound by
    // Launch.ts): its admin tier keeps edits, shell commands and MCP calls asked over what those
    // files' `tools.allowed` and policies say.
    command: ["gemini", "--acp", "--approval-mode", "default", "--admin-policy", GEMINI_ADMIN_POLICY],
    // The workspace is trusted (else Gemini CLI refuses to run in it); its settings file (Launch.ts)
    // does the rest. WebAssembly bound checks inline: with V8's trap handler each of its WebAssembly
    // instances reserves ~10 GiB of address space, and a few exhaust the sandbox's RLIMIT_AS.
    env: { ...offline, GEMINI_CLI_TRUST_WORKSPACE: "true", NODE_OPTIONS: "--disable-wasm-trap-handler" },
    model: "gemini",
    package: "@google/gemini-cli",
    // Gemini CLI 0.61 reads a JSON-RPC error answer as "[object Object]": a missing file on the
    // client's fs is never "not found" to it, so its write_file cannot create a file. It uses its
    // own file access in the sandbox instead (the same /workspace).
    clientFs: false,
    // Its session/load answers first and replays the history afterwards, unawaited: the replayed
    // messages would arrive as the next turn's output. A new session with the recovery note instead.
    loadSession: false
  },
  opencode: {
    command: ["opencode", "acp"],
    // opencode's configuration inline: one OpenAI-compatible provider at the forwarded base URL
    // ({env:…} is opencode's own substitution), no auto-update, no sharing, edits and shell
    // commands asked of the client, no title requests.
    env: { ...offline, OPENCODE_CONFIG_CONTENT: opencodeConfig, OPENCODE_DISABLE_AUTOUPDATE: "1" },
    model: "openai",
    package: "opencode-ai"
  },
  claude: {
    command: ["claude-agent-acp"],
    // No predicted follow-up prompt after each turn (a model request of its own, metered against the agent).
    env: { ...offline, IS_SANDBOX: "1", CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION: "false" },
    model: "anthropic",
    package: "@agentclientprotocol/claude-agent-acp",
    cli: "claude"
  },
  codex: {
    command: ["codex-acp"],
    // `agent-full-access`: codex's own sandbox off (it would nest in ours and fail) and no
    // approvals (its default mode has a model review each tool call), as the codex provider runs
    // it; no predicted follow-up prompt after each turn (a model request of its own).
    env: { ...offline, INITIAL_AGENT_MODE: "agent-full-access", CODEX_ACP_PROMPT_SUGGESTIONS: "false" },
    model: "openai",
    package: "@agentclientprotocol/codex-acp",
    cli: "codex"
  }
}

/** The built-in presets with the configured ones over them (a bad setting is reported, not ignored). */
export const presetsOf = (configured: string | undefined): Either.Either<PresetTable, string> =>
  configured === undefined || configured.trim() === ""
    ? Either.right(builtinPresets)
    : Either.map(
      Either.mapLeft(decodeTable(configured), (e) => `acp.presets: ${e.message}`),
      (t) => ({ ...builtinPresets, ...t })
    )

/** A variant (`qwen`, `node /x/agent.js --flag`) → its preset: a named one, or a raw command line. */
export const presetFor = (presets: PresetTable, variant: string | null): Either.Either<{ readonly name: string; readonly preset: Preset }, string> => {
  const v = (variant ?? "").trim()
  if (v === "") return Either.left(`acp needs a preset or a command: acp:<${Object.keys(presets).join("|")}> or acp:<command …>`)
  const named = presets[v]
  if (named !== undefined) return Either.right({ name: v, preset: named })
  const words = v.split(/\s+/)
  if (words.length === 1 && !words[0]!.includes("/")) {
    return Either.left(`acp: unknown preset "${v}" (presets: ${Object.keys(presets).join(", ")}; or give a command line with arguments or a path)`)
  }
  return Either.right({ name: "command", preset: { command: words, env: {}, model: "none" } })
}

/** The agent's command as the sandbox runs it, and what must be bound for it. */
export interface ResolvedCommand {
  readonly argv: ReadonlyArray<string>
  readonly binds: ReadonlyArray<ExtraBind>
  /** The host file found for the executable, and where it was found (doctor). */
  readonly hostPath: string
  readonly from: "package" | "PATH" | "path"
}

const isExecutable = (p: string): boolean => {
  try {
    if (!Fs.statSync(p).isFile()) return false
    Fs.accessSync(p, Fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/**
 * `pkg`'s `bin` entry named `bin` (or its only one), as a host file, or null. `modules`: the
 * node_modules directory holding the package when it has dependencies of its own (they are
 * resolved from there, hoisted or nested), else null (a self-contained package).
 */
const packageBin = (
  installDir: string,
  pkg: string,
  bin: string
): { readonly dir: string; readonly file: string; readonly modules: string | null } | null => {
  try {
    const manifest = createRequire(Path.join(installDir, "package.json")).resolve(`${pkg}/package.json`)
    const dir = Path.dirname(manifest)
    const j: unknown = JSON.parse(Fs.readFileSync(manifest, "utf8"))
    const bins = typeof j === "object" && j !== null && "bin" in j ? j.bin : undefined
    const rel = typeof bins === "string" ? bins : typeof bins === "object" && bins !== null ? (bins as Record<string, unknown>)[bin] : undefined
    if (typeof rel !== "string") return null
    const file = Path.join(dir, rel)
    if (!Fs.existsSync(file)) return null
    const deps = typeof j === "object" && j !== null && "dependencies" in j && typeof j.dependencies === "object" && j.dependencies !== null
      ? Object.keys(j.dependencies)
      : []
    const real = Fs.realpathSync(dir)
    const modules = deps.length === 0 ? null : nodeModulesOf(real)
    return { dir: real, file: Fs.realpathSync(file), modules }
  } catch {
    return null
  }
}

/** The outermost `node_modules` above `dir` (hoisted dependencies are found below it), or null. */
const nodeModulesOf = (dir: string): string | null => {
  const parts = dir.split(Path.sep)
  const i = parts.indexOf("node_modules")
  return i < 0 ? null : parts.slice(0, i + 1).join(Path.sep) || null
}

const isNodeScript = (p: string): boolean => {
  if (/\.(c|m)?js$/.test(p)) return true
  try {
    const fd = Fs.openSync(p, "r")
    const buf = Buffer.alloc(64)
    Fs.readSync(fd, buf, 0, 64, 0)
    Fs.closeSync(fd)
    const first = buf.toString("utf8").split("\n")[0] ?? ""
    return first.startsWith("#!") && first.includes("node")
  } catch {
    return false
  }
}

const SANDBOX_AGENT_DIR = "/opt/substrat/acp"

/**
 * Find the preset's executable and build the sandbox's argv. `node`: the sandbox's node (run
 * node scripts with it). Fails with `missing-binary` naming every place looked at.
 */
export const resolveCommand = (
  provider: string,
  preset: Preset,
  options: { readonly installDir: string; readonly path: string; readonly node: string }
): Effect.Effect<ResolvedCommand, ProviderError> =>
  Effect.suspend((): Effect.Effect<ResolvedCommand, ProviderError> => {
    const [exe, ...given] = preset.command as [string, ...Array<string>]
    // Host files among the arguments appear at /opt/substrat/acp-arg<i>/<name> (a host path such
    // as /tmp/… would be hidden by the sandbox's own /tmp).
    const rawBinds: Array<ExtraBind> = []
    const args = given.map((a, i) => {
      if (!Path.isAbsolute(a) || !Fs.existsSync(a)) return a
      const inside = `/opt/substrat/acp-arg${i}/${Path.basename(a)}`
      rawBinds.push({ host_path: Fs.realpathSync(a), sandbox_path: inside, mode: "ro" })
      return inside
    })
    const fromPackage = preset.package === undefined ? null : packageBin(options.installDir, preset.package, exe)
    if (fromPackage !== null) {
      // A package with dependencies: its whole node_modules at /opt/substrat/acp/node_modules, so
      // node resolves them inside as on the host; else the package's directory alone.
      const [bindHost, inside] = fromPackage.modules === null
        ? [fromPackage.dir, `${SANDBOX_AGENT_DIR}/${Path.relative(fromPackage.dir, fromPackage.file)}`]
        : [fromPackage.modules, `${SANDBOX_AGENT_DIR}/node_modules/${Path.relative(fromPackage.modules, fromPackage.file)}`]
      return Effect.succeed({
        argv: isNodeScript(fromPackage.file) ? [options.node, inside, ...args] : [inside, ...args],
        binds: [{ host_path: bindHost, sandbox_path: fromPackage.modules === null ? SANDBOX_AGENT_DIR : `${SANDBOX_AGENT_DIR}/node_modules`, mode: "ro" as const }, ...rawBinds],
        hostPath: fromPackage.file,
        from: "package" as const
      })
    }
    const candidates = exe.includes("/") ? [exe] : options.path.split(":").filter((d) => d !== "").map((d) => Path.join(d, exe))
    const hit = candidates.find(isExecutable)
    if (hit === undefined) {
      const where = exe.includes("/") ? exe : `${preset.package === undefined ? "" : `substrat's node_modules (${preset.package}) and `}PATH`
      return Effect.fail(new ProviderError({ provider, reason: "missing-binary", message: `${exe} not found (looked at ${where})` }))
    }
    const real = Fs.realpathSync(hit)
    const system = ["/usr/", "/bin/", "/lib/", "/sbin/"].some((p) => real.startsWith(p))
    if (system) return Effect.succeed({ argv: [real, ...args], binds: rawBinds, hostPath: real, from: exe.includes("/") ? "path" as const : "PATH" as const })
    const dir = Path.dirname(real)
    const bindDir = Path.basename(dir) === "bin" ? Path.dirname(dir) : dir
    const inside = `${SANDBOX_AGENT_DIR}/${Path.relative(bindDir, real)}`
    return Effect.succeed({
      argv: isNodeScript(real) ? [options.node, inside, ...args] : [inside, ...args],
      binds: [{ host_path: bindDir, sandbox_path: SANDBOX_AGENT_DIR, mode: "ro" as const }, ...rawBinds],
      hostPath: real,
      from: exe.includes("/") ? "path" as const : "PATH" as const
    })
  })

/**
 * Where each preset's executable is found (`doctor`): `ok` with the file and its source, or why
 * not. An adapter's CLI (`cli`) is looked up as the claude / codex provider looks it up
 * (`binaries`: their configured paths), and named after the adapter.
 */
export const locatePresets = (
  configured: string | undefined,
  options: {
    readonly installDir: string
    readonly path: string
    readonly binaries?: Partial<Record<Binary.CliName, Binary.Configured>> | undefined
  }
): Effect.Effect<ReadonlyArray<{ readonly name: string; readonly found: boolean; readonly detail: string }>> =>
  Either.match(presetsOf(configured), {
    onLeft: (message) => Effect.succeed([{ name: "acp", found: false, detail: message }]),
    onRight: (table) =>
      Effect.forEach(Object.entries(table), ([name, preset]) =>
        Effect.gen(function*() {
          const found = yield* Effect.either(resolveCommand(`acp:${name}`, preset, { ...options, node: "node" }))
          if (Either.isLeft(found)) return { name, found: false, detail: found.left.message }
          const c = found.right
          const detail = `${c.hostPath} (from ${c.from}; model: ${preset.model})`
          if (preset.cli === undefined) return { name, found: true, detail }
          const cli = yield* Effect.either(Binary.findBinary(preset.cli, options.binaries?.[preset.cli], { PATH: options.path }, options.installDir))
          return Either.match(cli, {
            onLeft: (m) => ({ name, found: false, detail: `${detail}; the ${preset.cli} it runs: ${m.problem}` }),
            onRight: (b) => ({ name, found: true, detail: `${detail}; runs ${preset.cli}: ${b.hostPath} (from ${b.from})` })
          })
        }))
  })
