// The command line, environment and model route each built-in ACP preset builds, and what the
// claude / codex adapters get of the CLI they run (each preset also runs offline: docs/providers.md).
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { adapterCli, modelEnv } from "../../src/provider/acp/Launch.js"
import { defaultMcpServer, type CliSettingsShape } from "../../src/provider/cli/CliSettings.js"
import { builtinPresets, presetFor, resolveCommand } from "../../src/provider/acp/Presets.js"

const repoRoot = Path.resolve(import.meta.dirname, "../..")

const settingsFor = (installDir: string): CliSettingsShape => ({
  installDir,
  nodePath: process.execPath,
  mcpServer: defaultMcpServer(installDir),
  binaries: {},
  models: {},
  anthropicSocket: null,
  openaiSocket: null,
  env: {}
})

const preset = (name: string) => Either.getOrThrow(presetFor(builtinPresets, name)).preset

describe("acp presets", () => {
  it("each preset's argv, package and model route", () => {
    const table = Object.fromEntries(Object.keys(builtinPresets).map((n) => [n, { command: preset(n).command, model: preset(n).model, package: preset(n).package, cli: preset(n).cli }]))
    expect(table).toEqual({
      qwen: { command: ["qwen", "--acp", "--approval-mode", "default"], model: "openai", package: "@qwen-code/qwen-code", cli: undefined },
      gemini: { command: ["gemini", "--acp", "--approval-mode", "default", "--admin-policy", "/opt/substrat/gemini-policy/substrat.toml"], model: "gemini", package: "@google/gemini-cli", cli: undefined },
      opencode: { command: ["opencode", "acp"], model: "openai", package: "opencode-ai", cli: undefined },
      claude: { command: ["claude-agent-acp"], model: "anthropic", package: "@agentclientprotocol/claude-agent-acp", cli: "claude" },
      codex: { command: ["codex-acp"], model: "openai", package: "@agentclientprotocol/codex-acp", cli: "codex" }
    })
  })

  it("gemini uses its own file access and starts a new session after a restart; the others take the client's fs and session/load", () => {
    const flags = Object.fromEntries(Object.keys(builtinPresets).map((n) => [n, [preset(n).clientFs !== false, preset(n).loadSession !== false]]))
    expect(flags).toEqual({ qwen: [true, true], gemini: [false, false], opencode: [true, true], claude: [true, true], codex: [true, true] })
  })

  it("the model environment per route: forwarded base URL and placeholder key, never a real key", () => {
    expect(modelEnv(preset("codex"), "m1")).toEqual({ OPENAI_BASE_URL: "http://127.0.0.1:8411/v1", OPENAI_API_KEY: "substrat-forwarded", OPENAI_MODEL: "m1" })
    expect(modelEnv(preset("claude"), "m2")).toEqual({
      ANTHROPIC_UNIX_SOCKET: "/run/substrat/llm.sock",
      ANTHROPIC_BASE_URL: "http://localhost",
      ANTHROPIC_API_KEY: "substrat-forwarded",
      ANTHROPIC_MODEL: "m2"
    })
    expect(modelEnv(preset("gemini"), "m3")).toEqual({
      GOOGLE_GEMINI_BASE_URL: "http://127.0.0.1:8411",
      GEMINI_API_KEY: "substrat-forwarded",
      GEMINI_MODEL: "m3"
    })
    expect(preset("claude").env).toEqual({ NO_BROWSER: "1", DO_NOT_TRACK: "1", IS_SANDBOX: "1", CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION: "false" })
    expect(preset("gemini").env).toEqual({
      NO_BROWSER: "1",
      DO_NOT_TRACK: "1",
      GEMINI_CLI_TRUST_WORKSPACE: "true",
      NODE_OPTIONS: "--disable-wasm-trap-handler"
    })
    expect(preset("codex").env).toEqual({ NO_BROWSER: "1", DO_NOT_TRACK: "1", INITIAL_AGENT_MODE: "agent-full-access", CODEX_ACP_PROMPT_SUGGESTIONS: "false" })
  })

  it("opencode's inline configuration: one OpenAI-compatible provider at the forwarded URL, by opencode's {env:} substitution", () => {
    const env = preset("opencode").env
    expect(env["OPENCODE_DISABLE_AUTOUPDATE"]).toBe("1")
    expect(JSON.parse(env["OPENCODE_CONFIG_CONTENT"] ?? "")).toEqual({
      autoupdate: false,
      share: "disabled",
      model: "substrat/{env:OPENAI_MODEL}",
      small_model: "substrat/{env:OPENAI_MODEL}",
      permission: { edit: "ask", bash: "ask" },
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
  })

  it.effect("a preset found on PATH (not in node_modules): its directory bound read-only, node scripts run with the sandbox's node", () =>
    Effect.gen(function*() {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "acp-presets-"))
      const bin = Path.join(dir, "bin")
      Fs.mkdirSync(bin)
      Fs.writeFileSync(Path.join(bin, "gemini"), "#!/usr/bin/env node\n", { mode: 0o755 })
      Fs.writeFileSync(Path.join(bin, "claude-agent-acp"), "\x7fELF", { mode: 0o755 })
      const opts = { installDir: dir, path: `/nonexistent:${bin}`, node: "/opt/substrat/node/node" }
      const g = yield* resolveCommand("acp:gemini", preset("gemini"), opts)
      expect([g.argv, g.binds, g.from]).toEqual([
        ["/opt/substrat/node/node", "/opt/substrat/acp/bin/gemini", "--acp", "--approval-mode", "default", "--admin-policy", "/opt/substrat/gemini-policy/substrat.toml"],
        [{ host_path: Fs.realpathSync(dir), sandbox_path: "/opt/substrat/acp", mode: "ro" }],
        "PATH"
      ])
      const c = yield* resolveCommand("acp:claude", preset("claude"), opts)
      expect(c.argv).toEqual(["/opt/substrat/acp/bin/claude-agent-acp"])
      const missing = yield* Effect.flip(resolveCommand("acp:codex", preset("codex"), opts))
      expect([missing.reason, missing.message]).toEqual(["missing-binary", "codex-acp not found (looked at substrat's node_modules (@agentclientprotocol/codex-acp) and PATH)"])
      Fs.rmSync(dir, { recursive: true, force: true })
    }))

  it.effect("the adapters from substrat's node_modules: their node_modules bound (they have dependencies), run with the sandbox's node", () =>
    Effect.gen(function*() {
      const opts = { installDir: repoRoot, path: "/nonexistent", node: "/opt/substrat/node/node" }
      const modules = Fs.realpathSync(Path.join(repoRoot, "node_modules"))
      for (const [name, pkg] of [["claude", "claude-agent-acp"], ["codex", "codex-acp"]] as const) {
        const c = yield* resolveCommand(`acp:${name}`, preset(name), opts)
        expect([c.argv, c.binds, c.from]).toEqual([
          ["/opt/substrat/node/node", `/opt/substrat/acp/node_modules/@agentclientprotocol/${pkg}/dist/index.js`],
          [{ host_path: modules, sandbox_path: "/opt/substrat/acp/node_modules", mode: "ro" }],
          "package"
        ])
      }
      // qwen's package has no dependencies of its own: only its directory is bound.
      const q = yield* resolveCommand("acp:qwen", preset("qwen"), opts)
      expect(q.binds.map((b) => b.sandbox_path)).toEqual(["/opt/substrat/acp"])
    }))

  it.effect("the CLI an adapter runs: the claude / codex provider's binary, bound at /opt/substrat/<cli>, with that provider's environment", () =>
    Effect.gen(function*() {
      const fake = Fs.mkdtempSync(Path.join(Os.tmpdir(), "acp-cli-"))
      const claudeBin = Path.join(fake, "claude")
      Fs.writeFileSync(claudeBin, "#!/bin/sh\n", { mode: 0o755 })
      const s = { ...settingsFor(repoRoot), binaries: { claude: claudeBin } }
      const claude = yield* adapterCli(preset("claude"), s, { PATH: "/nonexistent" }, "m1", null)
      expect(claude.binds).toEqual([{ host_path: Fs.realpathSync(fake), sandbox_path: "/opt/substrat/claude", mode: "ro" }])
      expect(claude.env).toMatchObject({
        CLAUDE_CODE_EXECUTABLE: "/opt/substrat/claude/claude",
        ANTHROPIC_UNIX_SOCKET: "/run/substrat/llm.sock",
        ANTHROPIC_API_KEY: "substrat-forwarded",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        DISABLE_TELEMETRY: "1",
        DISABLE_AUTOUPDATER: "1",
        IS_SANDBOX: "1"
      })
      // codex: the native binary of node_modules' @openai/codex (not npm's launcher), its config in CODEX_CONFIG.
      const codex = yield* adapterCli(preset("codex"), settingsFor(repoRoot), { PATH: "/nonexistent" }, "gpt-5.5", "/home/agent/.codex/catalog.json")
      expect(codex.env["CODEX_PATH"]).toMatch(/^\/opt\/substrat\/codex\/.*\/codex$/)
      expect(codex.binds.map((b) => b.sandbox_path)).toEqual(["/opt/substrat/codex"])
      expect([codex.env["CODEX_HOME"], codex.env["OPENAI_API_KEY"]]).toEqual(["/home/agent/.codex", "substrat-forwarded"])
      expect(JSON.parse(codex.env["CODEX_CONFIG"] ?? "")).toEqual({
        model_provider: "substrat",
        model_providers: {
          substrat: {
            name: "substrat",
            base_url: "http://127.0.0.1:8411/v1",
            wire_api: "responses",
            env_key: "OPENAI_API_KEY",
            request_max_retries: 0,
            stream_max_retries: 0
          }
        },
        analytics: { enabled: false },
        otel: { exporter: "none", trace_exporter: "none", metrics_exporter: "none" },
        check_for_update_on_startup: false,
        features: { plugins: false, remote_plugin: false, apps: false, unbounded_connection_retries: false },
        model_catalog_json: "/home/agent/.codex/catalog.json",
        model: "gpt-5.5"
      })
      // Not an adapter: nothing added.
      expect(yield* adapterCli(preset("qwen"), settingsFor(repoRoot), {}, undefined, null)).toEqual({ env: {}, binds: [] })
      Fs.rmSync(fake, { recursive: true, force: true })
    }))
})
