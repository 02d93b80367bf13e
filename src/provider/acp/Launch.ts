// How an ACP agent's process is started: its command (Presets.ts) inside the agent's sandbox
// (workspace at /workspace, private HOME at /home/agent, the agent socket, the model socket),
// with the model reached as the preset says, and the MCP server entry handed to `session/new`.
// Also the small durable record of the agent's session id (agents/<sid>/acp-session.json).
import type * as Acp from "@agentclientprotocol/sdk"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import type { ProcessEnv } from "../../config/Config.js"
import type { ExtraBind, SandboxService } from "../../sandbox/Sandbox.js"
import * as NoFollow from "../../sandbox/NoFollow.js"
import { noLimits } from "../../domain/workspace.js"
import { type AgentSandbox, SANDBOX_AGENT_SOCKET, SANDBOX_HOME, SANDBOX_LLM_SOCKET } from "../cli/AgentSandbox.js"
import { basePath, type CliSettingsShape, llmForwardScript, mcpBinds, SANDBOX_LLM_FORWARD, sandboxNode, substratMcp, withEgress } from "../cli/CliSettings.js"
import type { ProviderContext } from "../Provider.js"
import * as AcpProcess from "./AcpProcess.js"
import { GEMINI_ADMIN_POLICY, type Preset, resolveCommand } from "./Presets.js"
import { resolveBinary } from "../cli/Binary.js"
import { claudeEnv } from "../claude/Invocation.js"
import { defaultCodexModel, prepareCodexHome } from "../codex/CodexProvider.js"
import { codexEnv, offlineConfig, offlineDisabled } from "../codex/Invocation.js"

/** The port llm-forward.mjs listens on inside the sandbox (its own loopback) for `openai` and `gemini` presets. */
export const OPENAI_PORT = 8411

/** Files a preset needs in its HOME before the first start (written once, never through a link). */
export const homeFiles: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  // The claude-agent-acp adapter starts a session in Claude Code's `auto` mode (its own model-based
  // classifier, unavailable for a model it does not know: every tool call is then refused); in
  // `default` it asks the client (acp.approve), as qwen does.
  claude: {
    ".claude/settings.json": JSON.stringify({ permissions: { defaultMode: "default" } }, null, 2)
  },
  qwen: {
    ".qwen/settings.json": JSON.stringify({
      security: { auth: { selectedType: "openai" } },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      general: { disableAutoUpdate: true, disableUpdateNag: true },
      // Background model requests of their own after each turn (a memory-extraction subagent, a
      // "what might the user type next" suggestion), each metered against the agent: off.
      memory: { enableManagedAutoMemory: false },
      ui: { enableFollowupSuggestions: false }
    }, null, 2)
  },
  gemini: {
    ".gemini/settings.json": JSON.stringify({
      // The Gemini API with a key (GEMINI_API_KEY is a placeholder: the forwarder puts the real one in).
      security: { auth: { selectedType: "gemini-api-key" } },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      general: { disableAutoUpdate: true, disableUpdateNag: true }
    }, null, 2)
  }
}

/**
 * Host files bound read-only, per preset: gemini's admin policy (edits, shell commands and MCP
 * calls always asked of the client, whatever the agent-writable settings and policies under its
 * HOME and /workspace say).
 */
const presetFiles = (installDir: string): Record<string, ReadonlyArray<ExtraBind>> => ({
  gemini: [{ host_path: Path.join(installDir, "src", "provider", "acp", "gemini-policy", "substrat.toml"), sandbox_path: GEMINI_ADMIN_POLICY, mode: "ro" }]
})

export interface LaunchInput {
  readonly ctx: ProviderContext
  readonly preset: Preset
  readonly presetName: string
  readonly agent: AgentSandbox
  readonly settings: CliSettingsShape
  readonly modelSocket: string | null
  /** The agent's egress proxy socket, served while the process lives (null: no egress). */
  readonly egressSocket: string | null
  readonly owner: NoFollow.Owner | undefined
  readonly sandbox: SandboxService
  readonly handlers: AcpProcess.ClientHandlers
  readonly env: ProcessEnv
}

/** The model part of the environment, per route. */
export const modelEnv = (preset: Preset, model: string | undefined): Record<string, string> =>
  preset.model === "openai"
    ? {
      OPENAI_BASE_URL: `http://127.0.0.1:${OPENAI_PORT}/v1`,
      // A placeholder: the forwarder outside the sandbox puts the real key in.
      OPENAI_API_KEY: "substrat-forwarded",
      ...(model === undefined ? {} : { OPENAI_MODEL: model })
    }
    : preset.model === "gemini"
    ? {
      GOOGLE_GEMINI_BASE_URL: `http://127.0.0.1:${OPENAI_PORT}`,
      GEMINI_API_KEY: "substrat-forwarded",
      ...(model === undefined ? {} : { GEMINI_MODEL: model })
    }
    : preset.model === "anthropic"
    ? {
      ANTHROPIC_UNIX_SOCKET: SANDBOX_LLM_SOCKET,
      ANTHROPIC_BASE_URL: "http://localhost",
      ANTHROPIC_API_KEY: "substrat-forwarded",
      ...(model === undefined ? {} : { ANTHROPIC_MODEL: model })
    }
    : {}

/**
 * An adapter's CLI (`cli` of the preset) as the claude / codex provider runs it: found the same
 * way (its setting, substrat's node_modules, PATH), bound at /opt/substrat/<cli>, and that
 * provider's environment — the claude-agent-acp adapter runs CLAUDE_CODE_EXECUTABLE, codex-acp
 * runs CODEX_PATH with CODEX_CONFIG (our model provider at the sandbox's forwarded base URL,
 * nothing phoning home; codex-acp passes `model_provider` and its definition to `codex
 * app-server` as `-c` overrides, the rest as the session's configuration).
 */
export const adapterCli = (preset: Preset, s: CliSettingsShape, env: ProcessEnv, model: string | undefined, codexCatalog: string | null) =>
  Effect.gen(function*() {
    if (preset.cli === undefined) return { env: {}, binds: [] }
    const cli = preset.cli
    const bin = yield* resolveBinary(cli, s.binaries[cli], env, s.installDir)
    const binds: ReadonlyArray<ExtraBind> = [{ host_path: bin.bindDir, sandbox_path: bin.sandboxDir, mode: "ro" }]
    if (cli === "claude") {
      const e = claudeEnv({
        home: SANDBOX_HOME,
        endpoint: { _tag: "UnixSocket", path: SANDBOX_LLM_SOCKET },
        apiKey: "substrat-forwarded",
        path: basePath,
        extra: { IS_SANDBOX: "1", ...s.env.claude, CLAUDE_CODE_EXECUTABLE: bin.sandboxPath }
      })
      return { env: e, binds }
    }
    const config = {
      ...offlineConfig({ baseUrl: `http://127.0.0.1:${OPENAI_PORT}/v1`, envKey: "OPENAI_API_KEY" }),
      features: Object.fromEntries(offlineDisabled.map((f) => [f, false])),
      ...(codexCatalog === null ? {} : { model_catalog_json: codexCatalog }),
      ...(model === undefined ? {} : { model })
    }
    const e = codexEnv({
      home: SANDBOX_HOME,
      envKey: "OPENAI_API_KEY",
      apiKey: "substrat-forwarded",
      path: basePath,
      extra: { ...s.env.codex, CODEX_PATH: bin.sandboxPath, CODEX_CONFIG: JSON.stringify(config) }
    })
    return { env: e, binds }
  })

/** The sandbox request of the agent's process (argv wrapped in llm-forward for `openai` and `gemini`). */
export const processRequest = (input: Omit<LaunchInput, "handlers" | "sandbox" | "owner" | "ctx"> & { readonly codexCatalog?: string | null }) =>
  Effect.gen(function*() {
    const { settings: s, preset, agent } = input
    const node = sandboxNode(s.nodePath)
    const cmd = yield* resolveCommand(`acp:${input.presetName}`, preset, { installDir: s.installDir, path: input.env["PATH"] ?? basePath, node: node.path })
    const model = s.acp?.model ?? (preset.cli === "codex" ? s.models.codex ?? defaultCodexModel : preset.cli === "claude" ? s.models.claude : undefined)
    const cli = yield* adapterCli(preset, s, input.env, model, input.codexCatalog ?? null)
    const binds: Array<ExtraBind> = [
      ...mcpBinds(s),
      ...cmd.binds,
      ...cli.binds,
      ...(presetFiles(s.installDir)[input.presetName] ?? []),
      { host_path: agent.homeDir, sandbox_path: SANDBOX_HOME, mode: "rw" },
      { host_path: agent.socketPath, sandbox_path: SANDBOX_AGENT_SOCKET, mode: "ro" }
    ]
    if (node.bind !== null) binds.push(node.bind)
    if (input.modelSocket !== null) binds.push({ host_path: input.modelSocket, sandbox_path: SANDBOX_LLM_SOCKET, mode: "ro" })
    let argv = cmd.argv
    if ((preset.model === "openai" || preset.model === "gemini") && input.modelSocket !== null) {
      binds.push({ host_path: llmForwardScript(s.installDir), sandbox_path: SANDBOX_LLM_FORWARD, mode: "ro" })
      argv = [node.path, SANDBOX_LLM_FORWARD, "--socket", SANDBOX_LLM_SOCKET, "--port", String(OPENAI_PORT), "--keep-args", "--", ...argv]
    }
    const env = {
      ...cli.env,
      HOME: SANDBOX_HOME,
      PATH: `${node.bind === null ? "" : "/opt/substrat/node:"}${basePath}`,
      ...modelEnv(preset, model),
      ...preset.env
    }
    // The agent process lives across turns: the workspace's wall clock (a per-command limit) does not apply to it.
    const limits = s.limits ?? agent.workspace.limits ?? noLimits
    return { command: argv, env, extraBinds: binds, limits: { ...limits, wall_clock_seconds: null }, hostPath: cmd.hostPath, from: cmd.from }
  })

/** The MCP server entry of `session/new`: Substrat's tools over stdio. */
export const mcpServersOf = (s: CliSettingsShape): Array<Acp.McpServer> => {
  const m = substratMcp(s)
  return [{ name: "substrat", command: m.command, args: [...m.args], env: [] }]
}

export const launch = (input: LaunchInput) =>
  Effect.gen(function*() {
    for (const [rel, text] of Object.entries(homeFiles[input.presetName] ?? {})) {
      // A missing parent directory (a new HOME) is nothing there: writeFile makes it.
      const there = yield* NoFollow.entryType(input.agent.homeDir, rel).pipe(
        Effect.catchAll((e) => Effect.succeed(e.reason === "missing" ? null : "other" as const))
      )
      if (there === null) {
        yield* NoFollow.writeFile(input.agent.homeDir, rel, text, { mode: 0o644, owner: input.owner }).pipe(
          Effect.catchAll((e) => Effect.logWarning(`acp: cannot write ${rel} in the agent's home: ${e.message}`))
        )
      }
    }
    // codex-acp's codex: CODEX_HOME made (codex app-server exits 1 without it), the catalog written as for the codex provider.
    const codexCatalog = input.preset.cli !== "codex" ? null : yield* Effect.flatMap(
      resolveBinary("codex", input.settings.binaries.codex, input.env, input.settings.installDir),
      (bin) => prepareCodexHome(input.agent.homeDir, bin.hostPath, input.owner, `acp:${input.presetName}`, "start")
    )
    const req = yield* processRequest({ ...input, codexCatalog })
    const { hostPath: _h, from: _f, ...bare } = req
    const request = input.egressSocket === null ? bare : withEgress(bare, input.settings, input.egressSocket)
    const proc = yield* AcpProcess.start(`acp:${input.presetName}`, input.sandbox, { workspace: input.agent.workspace, ...request }, input.handlers, { fs: input.preset.clientFs !== false, terminal: true })
    return { proc, mcpServers: mcpServersOf(input.settings) }
  })

const sessionFile = (agentDir: string) => Path.join(agentDir, "acp-session.json")

/** The kept session id of this preset, or null (none yet, another preset, unreadable). */
export const readSession = (agentDir: string, preset: string): string | null => {
  try {
    const j: unknown = JSON.parse(Fs.readFileSync(sessionFile(agentDir), "utf8"))
    return typeof j === "object" && j !== null && "preset" in j && "session_id" in j && j.preset === preset && typeof j.session_id === "string"
      ? j.session_id
      : null
  } catch {
    return null
  }
}

/** Record the session id (tmp + fsync + rename in the daemon-owned agent dir). */
export const persistSession = (agentDir: string, preset: string, sessionId: string): void => {
  const file = sessionFile(agentDir)
  const tmp = `${file}.tmp`
  try {
    const fd = Fs.openSync(tmp, "w", 0o600)
    Fs.writeSync(fd, JSON.stringify({ preset, session_id: sessionId }))
    Fs.fsyncSync(fd)
    Fs.closeSync(fd)
    Fs.renameSync(tmp, file)
  } catch {
    // Not fatal: a restart then starts a new session with the recovery note.
  }
}

