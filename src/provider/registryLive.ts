// The daemon's provider registry: scripted (+ JSON books from $SUBSTRAT_HOME/scripts) + claude +
// codex + cursor-agent + acp (any Agent Client Protocol agent) + openai (a bare Chat Completions model, tool loop in the daemon).
//
//   layer(settings)   the registry over given CLI settings (tests: model sockets = a scripted endpoint)
//   layerDaemon(config)  the same, plus the daemon-owned model forwarders on
//                     $SUBSTRAT_HOME/llm/anthropic.sock, openai.sock and gemini.sock (upstreams and API keys
//                     from the configuration, src/config/Config.ts; see ModelForwarder.ts)
//
// Both need: Sandbox (SandboxBwrap.layerBwrap), SubstratPaths, EventLog, WorkspaceStore, and the
// ToolEndpoint that serves agent sockets (the daemon provides src/mcp/AgentSocket.ts `toolEndpoint`).
// Agent sockets are served by the providers themselves unless `serveSocket: false`.
import { Effect, Layer } from "effect"
import * as Path from "node:path"
import type { Settings } from "../config/Config.js"
import { SubstratPaths } from "../config/Paths.js"
import type { EventLog } from "../storage/EventLog.js"
import type { Sandbox } from "../sandbox/Sandbox.js"
import type { WorkspaceStore } from "../sandbox/WorkspaceStore.js"
import * as Acp from "./acp/AcpProvider.js"
import * as Claude from "./claude/ClaudeProvider.js"
import * as AgentSandbox from "./cli/AgentSandbox.js"
import { CliSettings, type CliSettingsShape, settingsOf } from "./cli/CliSettings.js"
import * as ModelForwarder from "./cli/ModelForwarder.js"
import * as Codex from "./codex/CodexProvider.js"
import * as Cursor from "./cursor/CursorProvider.js"
import * as OpenAi from "./openai/OpenAiProvider.js"
import * as OpenAiSettings from "./openai/Settings.js"
import { makeRegistry, ProviderRegistry } from "./ProviderRegistry.js"
import { scriptedFactory, type ScriptedOptions } from "./scripted/ScriptedProvider.js"
import type { ToolEndpoint } from "./ToolEndpoint.js"

export interface RegistryOptions {
  readonly scripted?: ScriptedOptions
  readonly agentSandbox?: AgentSandbox.AgentSandboxOptions
  /** The `openai` provider's endpoint/key/model (default: none configured — its `check` fails). */
  readonly openai?: OpenAiSettings.OpenAiSettingsShape
}

export type RegistryRequirements = Sandbox | SubstratPaths | EventLog | WorkspaceStore | ToolEndpoint

/** The CLI factories, built once their services are there. */
export const cliFactories = Effect.all([Claude.factory, Codex.factory, Cursor.factory, Acp.factory])

/** scripted + claude + codex + cursor-agent over `settings`, + openai over `options.openai`. */
export const layer = (
  settings: CliSettingsShape,
  options: RegistryOptions = {}
): Layer.Layer<ProviderRegistry, never, RegistryRequirements> =>
  Layer.effect(
    ProviderRegistry,
    Effect.map(
      Effect.all([cliFactories, SubstratPaths, OpenAi.factoryWith(options.openai ?? OpenAiSettings.defaults())]),
      ([clis, paths, openai]) =>
        makeRegistry([
          // `scripted:<name>` also finds JSON books in $SUBSTRAT_HOME/scripts/<name>.json.
          scriptedFactory({ booksDir: scriptsDir(paths.home), ...options.scripted }),
          ...clis,
          openai
        ])
    )
  ).pipe(
    Layer.provide(Layer.mergeAll(
      AgentSandbox.layer(options.agentSandbox ?? {}),
      CliSettings.layer(settings)
    ))
  )

/** Where `scripted:<name>` books live: `$SUBSTRAT_HOME/scripts/<name>.json`. */
export const scriptsDir = (home: string) => Path.join(home, "scripts")

/** Where the daemon's forwarder sockets live. */
export const forwarderSockets = (home: string) => ({
  anthropic: Path.join(home, "llm", "anthropic.sock"),
  openai: Path.join(home, "llm", "openai.sock"),
  gemini: Path.join(home, "llm", "gemini.sock")
})

/**
 * The daemon's registry: starts the model forwarders (scoped to the layer), then `layer` with
 * settings from the configuration (claude/codex/cursor binaries and models, CURSOR_API_KEY, the
 * upstreams and keys of the forwarders, the openai provider's settings; src/config/Config.ts).
 */
export const layerDaemon = (
  config: Settings,
  options: RegistryOptions & { readonly settings?: Partial<CliSettingsShape> } = {}
): Layer.Layer<ProviderRegistry, ModelForwarder.ForwarderError, RegistryRequirements> =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const paths = yield* SubstratPaths
    const sockets = forwarderSockets(paths.home)
    const up = ModelForwarder.upstreamsOf(config)
    yield* ModelForwarder.serve({ socketPath: sockets.anthropic, api: "anthropic", ...up.anthropic })
    yield* ModelForwarder.serve({ socketPath: sockets.openai, api: "openai", ...up.openai })
    yield* ModelForwarder.serve({ socketPath: sockets.gemini, api: "gemini", ...up.gemini })
    return layer(settingsOf(config, sockets, options.settings ?? {}), {
      ...options,
      openai: options.openai ?? OpenAiSettings.fromConfig(config)
    })
  }))
