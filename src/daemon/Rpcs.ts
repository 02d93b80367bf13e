// The admin protocol (ARCHITECTURE §6): every method of `daemon.sock`, its payload, success and
// error Schemas. Shared by the daemon (RpcServer handlers) and the CLI (RpcClient); docs/protocol.md
// shows each one on the wire. Kept free of daemon imports so the CLI bundle stays small.
// Each area's methods are declared in src/daemon/rpcs/ (so a CLI command builds only the Schemas
// of the methods it calls, with that area's group); this module gathers them into the one
// `RpcGroup` the daemon serves.
import { AgentGroup } from "./rpcs/agent.js"
import { BudgetGroup } from "./rpcs/budget.js"
import { DaemonGroup } from "./rpcs/daemon.js"
import { EventsGroup } from "./rpcs/events.js"
import { SessionGroup } from "./rpcs/session.js"
import { SwarmGroup } from "./rpcs/swarm.js"
import { WorkspaceGroup } from "./rpcs/workspace.js"

export * from "./rpcs/agent.js"
export * from "./rpcs/budget.js"
export * from "./rpcs/common.js"
export * from "./rpcs/daemon.js"
export * from "./rpcs/events.js"
export * from "./rpcs/session.js"
export * from "./rpcs/swarm.js"
export * from "./rpcs/workspace.js"

export class AdminRpcs extends DaemonGroup.merge(AgentGroup, EventsGroup, SessionGroup, WorkspaceGroup, SwarmGroup, BudgetGroup) {}

/** Every method name, for the frame guard and the docs. */
export const methodNames: ReadonlyArray<string> = Array.from(AdminRpcs.requests.keys())
