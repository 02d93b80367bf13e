// The admin protocol (ARCHITECTURE §6): every method of `daemon.sock`, its payload, success and
// error Schemas. Shared by the daemon (RpcServer handlers) and the CLI (RpcClient); docs/protocol.md
// shows each one on the wire. Kept free of daemon imports so the CLI bundle stays small.
// Each area's methods are declared in src/protocol/admin/ (so a CLI command builds only the Schemas
// of the methods it calls, with that area's group); this module gathers them into the one
// `RpcGroup` the daemon serves.
import type * as RpcClient from "@effect/rpc/RpcClient"
import type * as RpcGroup from "@effect/rpc/RpcGroup"
import { AgentGroup } from "./admin/agent.js"
import { BudgetGroup } from "./admin/budget.js"
import { ClusterGroup } from "./admin/cluster.js"
import { DaemonGroup } from "./admin/daemon.js"
import { EventsGroup } from "./admin/events.js"
import { SessionGroup } from "./admin/session.js"
import { SwarmGroup } from "./admin/swarm.js"
import { WorkspaceGroup } from "./admin/workspace.js"

export * from "./admin/agent.js"
export * from "./admin/budget.js"
export * from "./admin/cluster.js"
export * from "./admin/common.js"
export * from "./admin/daemon.js"
export * from "./admin/events.js"
export * from "./admin/session.js"
export * from "./admin/swarm.js"
export * from "./admin/workspace.js"

export class AdminRpcs extends DaemonGroup.merge(AgentGroup, EventsGroup, SessionGroup, WorkspaceGroup, SwarmGroup, BudgetGroup, ClusterGroup) {}

/** Every method name, for the frame guard and the docs. */
export const methodNames: ReadonlyArray<string> = Array.from(AdminRpcs.requests.keys())

/** A client of every admin method (the HTTP API's, in the daemon's process). */
export type AdminClient = RpcClient.RpcClient<RpcGroup.Rpcs<typeof AdminRpcs>>
