// ToolEndpoint (port): how a sandboxed provider's tools reach the daemon. A CLI provider's agent
// runs behind bwrap; its only way out is a Unix socket bound into the sandbox, served for as long
// as the provider instance lives and answering with the agent's own ToolInvoker (the socket is
// the agent's identity). Providers ask for the socket through this port; the daemon provides the
// implementation (src/mcp/AgentSocket.ts `toolEndpoint`), so provider/ never depends on mcp/.
import { Context, Data, type Effect, type Scope } from "effect"
import type { ToolInvoker } from "./Provider.js"

export class ToolEndpointError extends Data.TaggedError("ToolEndpointError")<{ readonly message: string }> {}

export class ToolEndpoint extends Context.Tag("substrat/provider/ToolEndpoint")<ToolEndpoint, {
  /** Serve `tools` on a Unix socket at `path` until the scope closes; returns once it accepts connections. */
  readonly serve: (path: string, tools: ToolInvoker) => Effect.Effect<void, ToolEndpointError, Scope.Scope>
}>() {}
