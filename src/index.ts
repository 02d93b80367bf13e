// The library surface for embedders (docs/embedding.md): provide Layers and run the orchestrator
// in your own program, with the real providers or the scripted ones, the sandbox and workspace
// layers, or talk to a running daemon with the admin RPC group. Built to dist/ (JS + .d.ts) by
// scripts/build-lib.ts; a plain re-export list, append yours.
export * from "./domain/index.js"
export * from "./config/Paths.js"
export * from "./storage/EventLog.js"
export * from "./storage/SessionStore.js"
export * from "./storage/Durable.js"
export * as Config from "./config/Config.js"

// Orchestration: the agent tree, messaging, turns (Orchestration.layer needs a ProviderRegistry,
// MultiplexerConfig, EventLog and SessionStore).
export * as Orchestration from "./agent/Orchestrator.js"
export { Orchestrator } from "./agent/Orchestrator.js"
export { MultiplexerConfig } from "./session/Multiplexer.js"

// Providers: the registry, the scripted provider (no model, for tests and demos), the real ones.
export * from "./provider/ProviderRegistry.js"
export * as ScriptedProvider from "./provider/scripted/ScriptedProvider.js"
export * as Providers from "./provider/registryLive.js"
export * as ClaudeProvider from "./provider/claude/ClaudeProvider.js"
export * as CodexProvider from "./provider/codex/CodexProvider.js"
export * as CursorProvider from "./provider/cursor/CursorProvider.js"
export * as OpenAiProvider from "./provider/openai/OpenAiProvider.js"
export * as CliSettings from "./provider/cli/CliSettings.js"
export { ToolEndpoint } from "./provider/ToolEndpoint.js"

// Sandbox and workspaces.
export * as Sandbox from "./sandbox/Sandbox.js"
export * as SandboxBwrap from "./sandbox/SandboxBwrap.js"
export * as SandboxUnsafe from "./sandbox/SandboxUnsafe.js"
export * as WorkspaceStore from "./sandbox/WorkspaceStore.js"
export * as WorkspaceUsage from "./sandbox/WorkspaceUsage.js"
export * as WorkspaceHistory from "./sandbox/WorkspaceHistory.js"

// Scripted LLM endpoints (Anthropic Messages / OpenAI Responses + Chat Completions) for tests of
// the real providers without network.
export * as ScriptedLlm from "./testing/ScriptedLlm.js"

// The daemon, and a client of a running one.
export * as Daemon from "./daemon/Daemon.js"
export * as AdminRpcs from "./protocol/AdminRpcs.js"
// The other wire contracts: the HTTP API's declaration (a typed client: @effect/platform's
// HttpApiClient.make(HttpApi.SubstratApi)), the agent socket's tool methods, the swarm's shapes.
export * as HttpApi from "./protocol/HttpApi.js"
export * as AgentRpcs from "./protocol/AgentRpcs.js"
export * as SwarmRpcs from "./protocol/SwarmRpcs.js"
export * as AdminClient from "./cli/AdminClient.js"
export { version } from "./version.js"
