// Settings shared by the CLI providers (claude, codex, cursor-agent), and the parts of a turn's
// sandbox request they all have in common: binds (what the MCP server needs to run — the one
// bundled file dist/mcp-server.cjs, or in a checkout without the bundle src/ + node_modules —,
// the CLI's package dir, node, the private HOME, the agent socket, the model socket) and base
// environment. Never the whole install dir: its .git, test/ and the rest stay outside.
import { Context, Layer, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { ResourceLimits } from "../../domain/workspace.js"
import type { ExtraBind, SandboxRequest } from "../../sandbox/Sandbox.js"
import { type AgentSandbox, SANDBOX_AGENT_SOCKET, SANDBOX_EGRESS_SOCKET, SANDBOX_HOME, SANDBOX_LLM_SOCKET } from "./AgentSandbox.js"
import type { CliName, ResolvedBinary } from "./Binary.js"
import type { Settings } from "../../config/Config.js"

export interface McpCommand {
  readonly command: string
  readonly args: ReadonlyArray<string>
  /**
   * Host files/dirs the command reads, bound read-only at the same paths. Absent (a hand-made
   * command): the whole install dir is bound, as the command may use anything in it.
   */
  readonly binds?: ReadonlyArray<string>
}

export interface CliSettingsShape {
  /** substrat's install dir: where the MCP server and llm-forward.mjs come from (only those are bound). */
  readonly installDir: string
  /** node on the host (its directory is bound when it is not under /usr). */
  readonly nodePath: string
  /** The MCP server inside the sandbox, without `--socket` (appended). Default: see `defaultMcpServer`. */
  readonly mcpServer: McpCommand
  /** Explicit binary paths (else SUBSTRAT_<CLI>_BIN, else PATH). */
  readonly binaries: Partial<Record<CliName, string>>
  /** Model names per CLI (default: the CLI's own default; codex: `gpt-5.5`). */
  readonly models: Partial<Record<CliName, string>>
  /** Host socket speaking the Anthropic Messages API (the daemon's forwarder, or a scripted endpoint). */
  readonly anthropicSocket: string | null
  /** Host socket speaking the OpenAI Responses API. */
  readonly openaiSocket: string | null
  /** Host socket speaking the Gemini API (acp:gemini); absent: none. */
  readonly geminiSocket?: string | null | undefined
  /** Extra environment per CLI inside the sandbox (e.g. CURSOR_API_KEY: cursor has no forwarder). */
  readonly env: Partial<Record<CliName, Readonly<Record<string, string>>>>
  /** Per-turn limits overriding the workspace's (e.g. a wall clock); default: the workspace's. */
  readonly limits?: ResourceLimits | undefined
  /** The acp provider's settings (src/provider/acp/); absent: built-in presets, approve auto. */
  readonly acp?: AcpSettings | undefined
}

export interface AcpSettings {
  /** JSON presets added to / overriding the built-in ones (src/provider/acp/Presets.ts). */
  readonly presets?: string | undefined
  /** How `session/request_permission` is answered. */
  readonly approve: "auto" | "reject" | "ask"
  /** `ask`: seconds before an unanswered request is rejected (0 or absent: no limit). */
  readonly askTimeoutSeconds?: number | undefined
  /** The model name handed to the agent (OPENAI_MODEL / ANTHROPIC_MODEL / GEMINI_MODEL). */
  readonly model?: string | undefined
}

export class CliSettings extends Context.Tag("substrat/provider/CliSettings")<CliSettings, CliSettingsShape>() {
  static readonly layer = (settings: CliSettingsShape): Layer.Layer<CliSettings> => Layer.succeed(CliSettings, settings)
}

/**
 * The directory holding package.json of this substrat (works from src/ and from the dist/ bundles,
 * where esbuild leaves `import.meta.url` undefined: then the running script's path is used).
 * The configured `installDir` (SUBSTRAT_INSTALL_DIR) overrides.
 */
export const defaultInstallDir = (configured?: string): string => {
  if (configured !== undefined && configured !== "") return configured
  const url: unknown = import.meta.url
  let dir = Path.dirname(typeof url === "string" ? fileURLToPath(url) : Fs.realpathSync(process.argv[1] ?? process.cwd()))
  for (let i = 0; i < 6; i++) {
    if (Fs.existsSync(Path.join(dir, "package.json"))) return dir
    dir = Path.dirname(dir)
  }
  return process.cwd()
}

/**
 * `node <install>/dist/mcp-server.cjs` when the bundle exists (self-contained: only that file is
 * bound), else `node --import tsx <install>/src/mcp/main.ts` (binds src/, node_modules — also
 * when it is a symlink to a directory elsewhere —, package.json and tsconfig.json) — both are
 * `substrat mcp-server`, minus the CLI's start-up cost.
 */
export const defaultMcpServer = (installDir: string, node = "node", options: { readonly bundle?: boolean } = {}): McpCommand => {
  const bundle = Path.join(installDir, "dist", "mcp-server.cjs")
  if (options.bundle !== false && Fs.existsSync(bundle)) return { command: node, args: [bundle], binds: [bundle] }
  const tsx = Path.join(installDir, "node_modules", "tsx", "dist", "esm", "index.mjs")
  const binds = ["src", "node_modules", "package.json", "tsconfig.json"]
    .map((p) => Path.join(installDir, p))
    .filter((p) => Fs.existsSync(p))
  return { command: node, args: ["--import", tsx, Path.join(installDir, "src", "mcp", "main.ts")], binds }
}

/** Codex's model relay (runs inside the sandbox): one file, bound here. */
export const SANDBOX_LLM_FORWARD = "/opt/substrat/llm-forward.mjs"
export const llmForwardScript = (installDir: string): string => Path.join(installDir, "src", "provider", "codex", "llm-forward.mjs")

/** What the MCP server needs, bound read-only at the same paths (symlinks followed on the host side). */
export const mcpBinds = (s: CliSettingsShape): ReadonlyArray<ExtraBind> =>
  (s.mcpServer.binds ?? [s.installDir]).map((p) => {
    let host = p
    try {
      host = Fs.realpathSync(p)
    } catch {
      // keep as given: the sandbox reports a missing path
    }
    return { host_path: host, sandbox_path: p, mode: "ro" as const }
  })

const systemPrefixes = ["/usr/", "/bin/", "/lib/", "/lib64/", "/sbin/"]

/** node as the sandbox sees it: its host path when under a system dir, else bound at /opt/substrat/node. */
export const sandboxNode = (nodePath: string): { readonly path: string; readonly bind: ExtraBind | null } => {
  let real = nodePath
  try {
    real = Fs.realpathSync(nodePath)
  } catch {
    // keep as given
  }
  if (systemPrefixes.some((p) => real.startsWith(p))) return { path: real, bind: null }
  return { path: `/opt/substrat/node/${Path.basename(real)}`, bind: { host_path: Path.dirname(real), sandbox_path: "/opt/substrat/node", mode: "ro" } }
}

/** The CLI providers' settings from the configuration (src/config/Config.ts). */
export const settingsOf = (
  config: Settings,
  sockets: { readonly anthropic: string | null; readonly openai: string | null; readonly gemini?: string | null },
  overrides: Partial<CliSettingsShape> = {}
): CliSettingsShape => {
  const installDir = overrides.installDir ?? defaultInstallDir(Option.getOrUndefined(config.installDir))
  const nodePath = overrides.nodePath ?? process.execPath
  const node = sandboxNode(nodePath).path
  const pick = <A>(entries: ReadonlyArray<readonly [CliName, Option.Option<A>]>): Partial<Record<CliName, A>> => {
    const out: Partial<Record<CliName, A>> = {}
    for (const [name, value] of entries) if (Option.isSome(value)) out[name] = value.value
    return out
  }
  const cursorEnv: Record<string, string> = {}
  if (Option.isSome(config.credentials.cursorApiKey)) cursorEnv["CURSOR_API_KEY"] = Redacted.value(config.credentials.cursorApiKey.value)
  return {
    installDir,
    nodePath,
    mcpServer: defaultMcpServer(installDir, node),
    binaries: pick([["claude", config.claude.bin], ["codex", config.codex.bin], ["cursor-agent", config.cursor.bin]]),
    models: pick([["claude", config.claude.model], ["codex", config.codex.model], ["cursor-agent", config.cursor.model]]),
    anthropicSocket: sockets.anthropic,
    openaiSocket: sockets.openai,
    geminiSocket: sockets.gemini ?? null,
    env: { "cursor-agent": cursorEnv },
    acp: {
      presets: Option.getOrUndefined(config.acp.presets),
      approve: config.acp.approve,
      askTimeoutSeconds: config.acp.askTimeoutSeconds,
      model: Option.getOrUndefined(config.acp.model)
    },
    ...overrides
  }
}

/** The MCP server entry every CLI gets: our server, pointed at the bound agent socket. */
export const substratMcp = (s: CliSettingsShape): McpCommand => ({
  command: s.mcpServer.command,
  args: [...s.mcpServer.args, "--socket", SANDBOX_AGENT_SOCKET]
})

/** Binds every CLI turn needs. `modelSocket`: which host socket to bind at /run/substrat/llm.sock. */
export const commonBinds = (
  s: CliSettingsShape,
  agent: AgentSandbox,
  bin: ResolvedBinary,
  modelSocket: string | null
): ReadonlyArray<ExtraBind> => {
  const node = sandboxNode(s.nodePath)
  const binds: Array<ExtraBind> = [
    ...mcpBinds(s),
    { host_path: bin.bindDir, sandbox_path: bin.sandboxDir, mode: "ro" },
    { host_path: agent.homeDir, sandbox_path: SANDBOX_HOME, mode: "rw" },
    { host_path: agent.socketPath, sandbox_path: SANDBOX_AGENT_SOCKET, mode: "ro" }
  ]
  if (node.bind !== null) binds.push(node.bind)
  if (modelSocket !== null) binds.push({ host_path: modelSocket, sandbox_path: SANDBOX_LLM_SOCKET, mode: "ro" })
  return binds
}

export const basePath = "/usr/local/bin:/usr/bin:/bin"

/** The port of the egress relay inside the sandbox (its own network namespace: nothing else listens). */
export const EGRESS_PORT = 3128

/** The proxy settings every common tool reads (curl, npm, pip, git, Node's fetch with a proxy agent, Go, cargo). */
export const egressEnv = (port = EGRESS_PORT): Record<string, string> => {
  const url = `http://127.0.0.1:${port}`
  const env: Record<string, string> = {
    HTTPS_PROXY: url,
    HTTP_PROXY: url,
    https_proxy: url,
    http_proxy: url,
    npm_config_https_proxy: url,
    npm_config_proxy: url,
    PIP_PROXY: url,
    NO_PROXY: "localhost,127.0.0.1,::1",
    no_proxy: "localhost,127.0.0.1,::1"
  }
  // TLS is end to end: the tools check the hosts' certificates against the system's CAs.
  const bundle = "/etc/ssl/certs/ca-certificates.crt"
  if (Fs.existsSync(bundle)) {
    env["NODE_EXTRA_CA_CERTS"] = bundle
    env["SSL_CERT_FILE"] = bundle
    env["REQUESTS_CA_BUNDLE"] = bundle
    env["PIP_CERT"] = bundle
  }
  return env
}

/**
 * A turn's request with egress: the command runs under the relay (llm-forward.mjs listening on
 * 127.0.0.1:EGRESS_PORT inside the sandbox, relaying to the proxy's socket bound read-only), with
 * the proxy settings in its environment and the system's certificates bound.
 */
export const withEgress = <R extends Omit<SandboxRequest, "workspace">>(request: R, s: Pick<CliSettingsShape, "nodePath" | "installDir">, socket: string): R => {
  const node = sandboxNode(s.nodePath)
  const binds: Array<ExtraBind> = [...(request.extraBinds ?? [])]
  const add = (b: ExtraBind) => {
    if (!binds.some((x) => x.sandbox_path === b.sandbox_path)) binds.push(b)
  }
  add({ host_path: socket, sandbox_path: SANDBOX_EGRESS_SOCKET, mode: "ro" })
  add({ host_path: llmForwardScript(s.installDir), sandbox_path: SANDBOX_LLM_FORWARD, mode: "ro" })
  if (node.bind !== null) add(node.bind)
  for (const dir of ["/etc/ssl", "/etc/ca-certificates", "/etc/pki"]) {
    try {
      if (Fs.realpathSync(dir) === dir) add({ host_path: dir, sandbox_path: dir, mode: "ro" })
    } catch {
      // not on this host
    }
  }
  return {
    ...request,
    command: [node.path, SANDBOX_LLM_FORWARD, "--socket", SANDBOX_EGRESS_SOCKET, "--port", String(EGRESS_PORT), "--keep-args", "--", ...request.command],
    env: { ...request.env, ...egressEnv() },
    extraBinds: binds
  }
}
