// Handlers of the `swarm.*` admin methods (Rpcs.ts), spread into HandlersLive: thin adapters
// from the wire shapes to the Swarm service (src/swarm/Swarm.ts), errors mapped by the handlers' `wire` / `mutation`.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Effect, Option } from "effect"
import { isAbsolute } from "node:path"
import { InvalidInputError } from "../domain/errors.js"
import { ROOT_NODE_REF, SwarmSchedules, validateCron } from "../swarm/Schedules.js"
import { type NodeStatus, Swarm } from "../swarm/Swarm.js"
import { swarmLog } from "../swarm/SwarmLog.js"
import { EventLog } from "../storage/EventLog.js"
import type { SwarmLanguage } from "../swarm/SwarmNode.js"
import type { RpcError } from "./Rpcs.js"
import type { ServiceError } from "./WireErrors.js"

/** How Handlers.ts turns a service effect into a handler's answer (`mutation`: refused when read-only). */
export interface Wiring {
  readonly wire: <A, E extends ServiceError, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, RpcError, R>
  readonly mutation: <A, E extends ServiceError, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, RpcError, R>
}

export const makeSwarmHandlers = ({ mutation, wire }: Wiring) => Effect.gen(function*() {
  const swarm = yield* Swarm
  const schedules = yield* SwarmSchedules
  const eventLog = yield* EventLog
  const fs = yield* Effect.provide(FileSystem.FileSystem, NodeFileSystem.layer)

  /** The code tree: an absolute path of an existing directory, as the daemon resolves it. */
  const codeRoot = (path: string) =>
    Effect.gen(function*() {
      const bad = (why: string) => new InvalidInputError({ field: "path", message: `${path}: ${why}` })
      if (!isAbsolute(path)) return yield* bad("not an absolute path")
      const real = yield* fs.realPath(path).pipe(Effect.mapError(() => bad("no such directory")))
      const info = yield* fs.stat(real).pipe(Effect.mapError(() => bad("no such directory")))
      if (info.type !== "Directory") return yield* bad("not a directory")
      return real
    })

  return {
    "swarm.start": (p: { readonly path: string; readonly provider?: string | undefined; readonly languages?: ReadonlyArray<SwarmLanguage> | undefined; readonly name?: string | undefined; readonly cron?: string | undefined }) =>
      mutation(Effect.gen(function*() {
        const path = yield* codeRoot(p.path)
        // (A bad --cron is refused before anything starts.)
        if (p.cron !== undefined) yield* validateCron(p.cron)
        const s = yield* swarm.start({ path, provider: p.provider, languages: p.languages, name: p.name })
        if (p.cron !== undefined) yield* schedules.set(ROOT_NODE_REF, p.cron)
        return s
      })),
    "swarm.stop": () => mutation(swarm.stop),
    "swarm.status": () => wire(Effect.map(swarm.status, (s) => ({ swarm: Option.getOrNull(s) }))),
    "swarm.agents": (p: { readonly parent?: string | undefined; readonly status?: ReadonlyArray<NodeStatus> | undefined }) =>
      wire(Effect.map(swarm.agents({ parent: p.parent, status: p.status }), (agents) => ({ agents }))),
    "swarm.agent": (p: { readonly node: string }) => wire(swarm.agent(p.node)),
    "swarm.chat": (p: { readonly node: string; readonly text: string; readonly wait?: boolean | undefined }) =>
      p.wait === true ? wire(swarm.chat(p.node, p.text, true)) : mutation(swarm.chat(p.node, p.text, false)),
    "swarm.trigger": (p: { readonly node: string }) => mutation(swarm.trigger(p.node)),
    "swarm.schedule": (p: { readonly node: string; readonly cron: string }) => mutation(schedules.set(p.node, p.cron)),
    "swarm.unschedule": (p: { readonly node: string }) => mutation(schedules.remove(p.node)),
    "swarm.log": (p: { readonly node?: string | undefined }) =>
      wire(Effect.map(swarmLog(p.node).pipe(Effect.provideService(Swarm, swarm), Effect.provideService(EventLog, eventLog)), (nodes) => ({ nodes }))),
    "swarm.schedules": () => wire(Effect.map(schedules.list, (s) => ({ schedules: s })))
  } as const
})
