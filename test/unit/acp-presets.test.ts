// The command line, environment and model route each built-in ACP preset builds (the presets
// without an offline end-to-end run here — claude, codex — are held to this).
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { modelEnv } from "../../src/provider/acp/Launch.js"
import { builtinPresets, presetFor, resolveCommand } from "../../src/provider/acp/Presets.js"

const preset = (name: string) => Either.getOrThrow(presetFor(builtinPresets, name)).preset

describe("acp presets", () => {
  it("each preset's argv, package and model route", () => {
    const table = Object.fromEntries(Object.keys(builtinPresets).map((n) => [n, { command: preset(n).command, model: preset(n).model, package: preset(n).package }]))
    expect(table).toEqual({
      qwen: { command: ["qwen", "--acp", "--approval-mode", "default"], model: "openai", package: "@qwen-code/qwen-code" },
      gemini: { command: ["gemini", "--acp"], model: "gemini", package: "@google/gemini-cli" },
      opencode: { command: ["opencode", "acp"], model: "openai", package: "opencode-ai" },
      claude: { command: ["claude-agent-acp"], model: "anthropic", package: "@agentclientprotocol/claude-agent-acp" },
      codex: { command: ["codex-acp"], model: "openai", package: "@agentclientprotocol/codex-acp" }
    })
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
    expect(preset("claude").env).toEqual({ NO_BROWSER: "1", DO_NOT_TRACK: "1", IS_SANDBOX: "1" })
    expect(preset("gemini").env).toEqual({
      NO_BROWSER: "1",
      DO_NOT_TRACK: "1",
      GEMINI_CLI_TRUST_WORKSPACE: "true",
      NODE_OPTIONS: "--disable-wasm-trap-handler"
    })
    expect(preset("codex").env).toEqual({ NO_BROWSER: "1", DO_NOT_TRACK: "1" })
  })

  it("opencode's inline configuration: one OpenAI-compatible provider at the forwarded URL, by opencode's {env:} substitution", () => {
    const env = preset("opencode").env
    expect(env["OPENCODE_DISABLE_AUTOUPDATE"]).toBe("1")
    expect(JSON.parse(env["OPENCODE_CONFIG_CONTENT"] ?? "")).toEqual({
      autoupdate: false,
      share: "disabled",
      model: "substrat/{env:OPENAI_MODEL}",
      small_model: "substrat/{env:OPENAI_MODEL}",
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
        ["/opt/substrat/node/node", "/opt/substrat/acp/bin/gemini", "--acp"],
        [{ host_path: Fs.realpathSync(dir), sandbox_path: "/opt/substrat/acp", mode: "ro" }],
        "PATH"
      ])
      const c = yield* resolveCommand("acp:claude", preset("claude"), opts)
      expect(c.argv).toEqual(["/opt/substrat/acp/bin/claude-agent-acp"])
      const missing = yield* Effect.flip(resolveCommand("acp:codex", preset("codex"), opts))
      expect([missing.reason, missing.message]).toEqual(["missing-binary", "codex-acp not found (looked at substrat's node_modules (@agentclientprotocol/codex-acp) and PATH)"])
      Fs.rmSync(dir, { recursive: true, force: true })
    }))
})
