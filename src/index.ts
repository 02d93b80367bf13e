// The library surface for embedders: provide Layers, run the orchestrator in your own program,
// or talk to a running daemon with the admin RPC group. A plain re-export list; append yours.
export * from "./domain/index.js"
export * from "./config/Paths.js"
export * from "./storage/EventLog.js"
export * from "./storage/SessionStore.js"
export * from "./storage/Durable.js"
export * as Orchestration from "./agent/Orchestrator.js"
export * from "./provider/ProviderRegistry.js"
export * as ScriptedProvider from "./provider/scripted/ScriptedProvider.js"
export * as Daemon from "./daemon/Daemon.js"
export * as AdminRpcs from "./daemon/Rpcs.js"
export * as AdminClient from "./cli/Client.js"
