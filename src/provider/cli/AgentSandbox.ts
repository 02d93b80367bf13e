// What a CLI provider needs from the daemon for one agent: the workspace its sandbox binds at
// /workspace, a private HOME that persists across turns (Claude/Codex/cursor keep their sessions
// there, which is what `--resume` reads), and the agent's tool socket (the MCP server inside the
// sandbox connects to it). On disk, under `$SUBSTRAT_HOME/agents/<session-id>/`:
//   home/          bound read-write at /home/agent
//   workspace/     the sandbox's /workspace when the agent has no workspace of its own
//   agent.sock     the agent socket (bound read-only at /run/substrat/agent.sock)
//   mcp.json       generated MCP config (cursor-agent: bound at /workspace/.cursor/mcp.json)
//
// The agent socket: by default this layer serves it (through the ToolEndpoint port) for as long as the provider instance lives
// (it exists exactly while the agent can run a turn; identity = the socket = ctx.tools). A daemon
// that serves agent sockets itself passes `serveSocket: false`; the path is then only bound.
import { Context, Effect, Layer, Option, type Scope, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { SubstratPaths } from "../../config/Paths.js"
import { ProviderError } from "../../domain/errors.js"
import type { WorkspaceId } from "../../domain/ids.js"
import { noLimits, type WorkspaceSpec } from "../../domain/workspace.js"
import { EventLog } from "../../storage/EventLog.js"
import type { SandboxRequest } from "../../sandbox/Sandbox.js"
import { WorkspaceStore } from "../../sandbox/WorkspaceStore.js"
import type { ModelApi } from "../../domain/requestUsage.js"
import { ModelMeter } from "../ModelMeter.js"
import type { ProviderContext } from "../Provider.js"
import * as ModelForwarder from "./ModelForwarder.js"
import { ToolEndpoint } from "../ToolEndpoint.js"
import { Tracing } from "../../telemetry/Tracing.js"
import { Egress } from "../../egress/Egress.js"

export interface AgentSandbox {
  readonly workspace: SandboxRequest["workspace"]
  /** `agents/<sid>/` on the host. */
  readonly agentDir: string
  /** The private HOME on the host (bound read-write at /home/agent). */
  readonly homeDir: string
  /** The agent's tool socket on the host. */
  readonly socketPath: string
  /** Where a generated MCP config file goes on the host. */
  readonly mcpConfigPath: string
  /** The agent's id (from the context, else its `agent.created` event). */
  readonly agentId?: string | undefined
}

export interface AgentSandboxOptions {
  /** Serve the agent socket from `ctx.tools` while the provider lives (default true). */
  readonly serveSocket?: boolean
}

export class AgentSandboxes extends Context.Tag("substrat/provider/AgentSandboxes")<AgentSandboxes, {
  /** Prepare the agent's directories (and socket) for one provider instance; released with its scope. */
  readonly prepare: (ctx: ProviderContext, provider: string) => Effect.Effect<AgentSandbox, ProviderError, Scope.Scope>
  /**
   * The host socket to bind at /run/substrat/llm.sock for `api`: with a ModelMeter, a metering
   * forwarder of this agent's own relaying to `upstream` (served while the scope lives); without
   * one, `upstream` itself.
   */
  readonly modelSocket: (
    ctx: ProviderContext,
    provider: string,
    api: ModelApi,
    upstream: string | null
  ) => Effect.Effect<string | null, ProviderError, Scope.Scope>
  /**
   * The host socket to bind at /run/substrat/egress.sock for one turn: the agent's egress proxy,
   * served while the scope lives (src/egress/Egress.ts), or null — no egress service, or the
   * workspace has no egress policy (or has network access).
   */
  readonly egressSocket: (ctx: ProviderContext, provider: string, turn?: () => number) => Effect.Effect<string | null, ProviderError, Scope.Scope>
}>() {}

/** In-sandbox locations shared by every CLI provider. */
export const SANDBOX_HOME = "/home/agent"
export const SANDBOX_AGENT_SOCKET = "/run/substrat/agent.sock"
export const SANDBOX_LLM_SOCKET = "/run/substrat/llm.sock"
export const SANDBOX_EGRESS_SOCKET = "/run/substrat/egress.sock"

const err = (provider: string, message: string) => new ProviderError({ provider, reason: "start", message })

const mkdir = (provider: string, dir: string) =>
  Effect.try({
    try: () => Fs.mkdirSync(dir, { recursive: true, mode: 0o700 }),
    catch: (e) => err(provider, `cannot create ${dir}: ${e instanceof Error ? e.message : String(e)}`)
  })

/** The agent's id and workspace from its `agent.created` event (when the context lacks them). */
const fromLog = (log: EventLog["Type"], ctx: ProviderContext) =>
  log.read(ctx.session_id).pipe(
    Stream.filter((e) => e.event === "agent.created"),
    Stream.runHead,
    Effect.map(Option.map((e) => e.event === "agent.created" ? { agent_id: e.data.agent_id, workspace: e.data.workspace } : null)),
    Effect.map(Option.getOrNull),
    Effect.orElseSucceed(() => null)
  )

export const make = (options: AgentSandboxOptions = {}) =>
  Effect.gen(function*() {
    const paths = yield* SubstratPaths
    const log = yield* EventLog
    const workspaces = yield* WorkspaceStore
    const endpoint = yield* ToolEndpoint
    const serveSocket = options.serveSocket ?? true
    const meter = yield* Effect.serviceOption(ModelMeter)
    const tracing = yield* Tracing
    const egress = yield* Effect.serviceOption(Egress)

    const egressSocket = Effect.fn("AgentSandboxes.egressSocket")(function*(ctx: ProviderContext, provider: string, turn?: () => number) {
      if (Option.isNone(egress)) return null
      const logged = ctx.agent_id === undefined || ctx.workspace_id === undefined ? yield* fromLog(log, ctx) : null
      const agentId = ctx.agent_id ?? logged?.agent_id
      const workspaceId = ctx.workspace_id !== undefined ? ctx.workspace_id : logged?.workspace ?? null
      if (agentId === undefined || workspaceId === null) return null
      const socketPath = Path.join(paths.sessionDir(ctx.session_id), "egress.sock")
      const served = yield* egress.value.serveTurn({
        session_id: ctx.session_id,
        agent_id: agentId,
        agent_name: ctx.agent_name,
        workspace_id: workspaceId,
        socketPath,
        ...(turn === undefined ? {} : { turn })
      }).pipe(Effect.mapError((e) => err(provider, `egress socket: ${e.message}`)))
      return served ? socketPath : null
    })

    const modelSocket = Effect.fn("AgentSandboxes.modelSocket")(function*(
      ctx: ProviderContext,
      provider: string,
      api: ModelApi,
      upstream: string | null
    ) {
      if (upstream === null || Option.isNone(meter)) return upstream
      const m = meter.value
      const socketPath = Path.join(paths.sessionDir(ctx.session_id), `llm-${api}.sock`)
      const agentId = !tracing.enabled ? undefined : ctx.agent_id ?? (yield* fromLog(log, ctx))?.agent_id
      // Each request's span hangs below the agent's running turn (Tracing.modelRequest).
      const span = !tracing.enabled ? undefined : tracing.modelRequest(ctx.session_id, {
        "gen_ai.agent.name": ctx.agent_name,
        ...(agentId === undefined ? {} : { "gen_ai.agent.id": agentId }),
        "gen_ai.provider.name": provider,
        "substrat.model.api": api,
        "substrat.session.id": ctx.session_id
      })
      yield* ModelForwarder.serve({
        socketPath,
        upstream: "http://localhost",
        upstreamSocket: upstream,
        credential: null,
        api,
        meter: {
          reserve: (estimate) => m.reserve(ctx.session_id, estimate),
          settle: m.settle,
          refused: (r) => m.refused(ctx.session_id, r),
          span
        }
      }).pipe(Effect.mapError((e) => err(provider, `model socket: ${e.message}`)))
      return socketPath
    })

    const prepare = Effect.fn("AgentSandboxes.prepare")(function*(ctx: ProviderContext, provider: string) {
      const agentDir = paths.sessionDir(ctx.session_id)
      const homeDir = Path.join(agentDir, "home")
      yield* mkdir(provider, homeDir)
      const logged = ctx.workspace_id === undefined || ctx.agent_id === undefined ? yield* fromLog(log, ctx) : null
      const workspaceId: WorkspaceId | null | undefined = ctx.workspace_id === undefined ? logged?.workspace ?? null : ctx.workspace_id
      let workspace: SandboxRequest["workspace"]
      if (workspaceId === null || workspaceId === undefined) {
        const root = Path.join(agentDir, "workspace")
        yield* mkdir(provider, root)
        workspace = { root_path: root, network_access: false, symlinks: [], limits: noLimits }
      } else {
        const spec: WorkspaceSpec = yield* workspaces.get(workspaceId).pipe(
          Effect.mapError((e) =>
            err(
              provider,
              e._tag === "NotFoundError"
                ? `workspace ${workspaceId} no longer exists (it was deleted); this agent cannot run turns in it: terminate it`
                : `workspace ${workspaceId}: ${e.message}`
            )
          )
        )
        workspace = spec
      }
      const socketPath = paths.agentSocket(ctx.session_id)
      if (serveSocket) {
        // ctx.tools is already bound to this agent: the socket is its identity.
        yield* endpoint.serve(socketPath, ctx.tools).pipe(
          Effect.mapError((e) => err(provider, `agent socket: ${e.message}`))
        )
      }
      const result: AgentSandbox = {
        workspace,
        agentDir,
        homeDir,
        socketPath,
        mcpConfigPath: paths.mcpConfig(ctx.session_id),
        agentId: ctx.agent_id ?? logged?.agent_id
      }
      return result
    })
    return AgentSandboxes.of({ prepare, modelSocket, egressSocket })
  })

export const layer = (
  options: AgentSandboxOptions = {}
): Layer.Layer<AgentSandboxes, never, SubstratPaths | EventLog | WorkspaceStore | ToolEndpoint> =>
  Layer.effect(AgentSandboxes, make(options))
