// Wiring for tests of the real CLI providers through the Orchestrator: the file EventLog /
// SessionStore under a temp $SUBSTRAT_HOME, the WorkspaceStore, the real bwrap Sandbox, and the
// registry from src/provider/registryLive.ts — the model sockets pointing at a scripted endpoint
// (directly, or through the daemon's model forwarder).
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect, Layer, Stream } from "effect"
import * as Orchestration from "../../src/agent/Orchestrator.js"
import { SubstratPaths } from "../../src/config/Paths.js"
import type { EventData, LogEntry, LogEventName } from "../../src/domain/events.js"
import type { SessionId } from "../../src/domain/ids.js"
import { Durable } from "../../src/storage/Durable.js"
import { EventLog } from "../../src/storage/EventLog.js"
import type { CliSettingsShape } from "../../src/provider/cli/CliSettings.js"
import { defaultMcpServer } from "../../src/provider/cli/CliSettings.js"
import * as AgentSocket from "../../src/mcp/AgentSocket.js"
import * as RegistryLive from "../../src/provider/registryLive.js"
import * as SandboxBwrap from "../../src/sandbox/SandboxBwrap.js"
import { WorkspaceStore } from "../../src/sandbox/WorkspaceStore.js"
import { WorkspaceUsage } from "../../src/sandbox/WorkspaceUsage.js"
import { MultiplexerConfig } from "../../src/session/Multiplexer.js"
import type * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { claudeBin, codexVendorDir, repoRoot } from "./support.js"
import { SessionStore } from "../../src/storage/SessionStore.js"

export const cursorStandIn = `${repoRoot}/test/fixtures/cursor-agent`

/** CLI settings for tests: binaries from node_modules, models through the given host socket(s). */
export const testSettings = (sockets: { readonly anthropic: string | null; readonly openai: string | null }): CliSettingsShape => ({
  installDir: repoRoot,
  nodePath: process.execPath,
  mcpServer: defaultMcpServer(repoRoot, "/usr/bin/node"),
  binaries: { claude: claudeBin, codex: `${codexVendorDir()}/bin/codex`, "cursor-agent": cursorStandIn },
  // Outside Codex's bundled catalog, MCP tools are declared directly (docs/providers-real.md).
  models: { codex: "scripted-model" },
  anthropicSocket: sockets.anthropic,
  openaiSocket: sockets.openai,
  env: {}
})

export const stackWith = (home: string, settings: CliSettingsShape, slots = 4) => {
  const base = Layer.mergeAll(SubstratPaths.layer(home), Durable.layer, NodeContext.layer, AgentSocket.toolEndpoint)
  const storage = Layer.mergeAll(EventLog.layerFile, SessionStore.layerFile)
  const workspaces = WorkspaceStore.Default.pipe(Layer.provide(WorkspaceUsage.layerRegistry))
  const sandbox = SandboxBwrap.layerBwrap()
  return Orchestration.layer.pipe(
    Layer.provideMerge(Layer.mergeAll(RegistryLive.layer(settings), MultiplexerConfig.layer(slots))),
    Layer.provideMerge(Layer.mergeAll(storage, workspaces, sandbox)),
    Layer.provideMerge(base),
    Layer.orDie
  )
}

export const eventsOf = (session: SessionId) =>
  Effect.flatMap(EventLog, (log) => Stream.runCollect(log.read(session))).pipe(
    Effect.map((c): ReadonlyArray<LogEntry> => [...c])
  )

export const dataOf = <E extends LogEventName>(entries: ReadonlyArray<LogEntry>, event: E): Array<EventData<E>> =>
  entries.filter((e) => e.event === event).map((e) => e.data as EventData<E>)

// --- reading recorded Anthropic requests ------------------------------------------------------

export type Msg = { readonly role: string; readonly content: unknown }
export const messagesOf = (r: ScriptedLlm.RecordedRequest): ReadonlyArray<Msg> =>
  ((r.body as { messages?: ReadonlyArray<Msg> }).messages ?? [])
export const systemOf = (r: ScriptedLlm.RecordedRequest): string => r.system ?? ""
/** Every text (user/assistant text, tool results) of a request, flattened. */
export const conversationText = (r: ScriptedLlm.RecordedRequest): string => JSON.stringify(messagesOf(r))
/** The tool_result blocks of a request's messages, as text. */
export const toolResultsOf = (r: ScriptedLlm.RecordedRequest): ReadonlyArray<string> =>
  messagesOf(r).flatMap((m) =>
    typeof m.content === "string"
      ? []
      : (m.content as ReadonlyArray<Record<string, unknown>>).filter((b) => b["type"] === "tool_result").map((b) => JSON.stringify(b["content"]))
  )

/**
 * A scripted reply whose tool input is computed when the request arrives: `from(lastUser)` runs
 * in the entry's `where` (so a reply can carry e.g. the runtime message id of the prompt).
 */
export const dynamicToolCall = (
  name: string,
  input: (lastUser: string) => unknown
): { readonly where: (r: ScriptedLlm.ScriptRequest) => boolean; readonly reply: ScriptedLlm.Reply } => {
  let current: unknown = {}
  const reply = {
    _tag: "Message" as const,
    get content() {
      return [{ type: "tool_use" as const, name, input: current }]
    }
  }
  return {
    where: (r) => {
      current = input(r.lastUser)
      return true
    },
    reply
  }
}
