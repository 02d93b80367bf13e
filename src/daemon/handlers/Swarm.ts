// Handlers of the `swarm.*` methods (src/protocol/admin/swarm.ts): thin adapters from the wire
// shapes to the Swarm service (src/swarm/Swarm.ts). A chat that waits for the answer stops
// waiting when its client goes away.
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Effect, Option } from "effect"
import { isAbsolute } from "node:path"
import { InvalidInputError } from "../../domain/errors.js"
import { Durable } from "../../storage/Durable.js"
import { EventLog } from "../../storage/EventLog.js"
import { Meter } from "../../meter/Meter.js"
import { ROOT_NODE_REF, SwarmSchedules, validateCron } from "../../swarm/Schedules.js"
import * as NoFollow from "../../sandbox/NoFollow.js"
import { Swarm } from "../../swarm/Swarm.js"
import { swarmLog } from "../../swarm/SwarmLog.js"
import { SwarmGroup } from "../../protocol/AdminRpcs.js"
import { handlersOf, served } from "./Middleware.js"

/** The largest file `swarm.source` reads (a node's source is shown in the dashboard). */
export const SOURCE_MAX_BYTES = 1024 * 1024

export const SwarmHandlers = served(SwarmGroup, Effect.gen(function*() {
  const swarm = yield* Swarm
  const schedules = yield* SwarmSchedules
  const eventLog = yield* EventLog
  const meter = yield* Meter
  const durable = yield* Durable
  const withDurable = <A, E>(effect: Effect.Effect<A, E, Durable>) => Effect.provideService(effect, Durable, durable)
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

  return handlersOf(SwarmGroup)({
    "swarm.start": (p) =>
      withDurable(Effect.gen(function*() {
        const path = yield* codeRoot(p.path)
        // (A bad --cron is refused before anything starts.)
        if (p.cron !== undefined) yield* validateCron(p.cron)
        const s = yield* swarm.start({ path, provider: p.provider, languages: p.languages, name: p.name })
        if (p.cron !== undefined) yield* schedules.set(ROOT_NODE_REF, p.cron)
        return s
      })),
    "swarm.stop": () => withDurable(swarm.stop),
    "swarm.status": () => withDurable(Effect.map(swarm.status, (s) => ({ swarm: Option.getOrNull(s) }))),
    "swarm.agents": (p) => Effect.map(swarm.agents({ parent: p.parent, status: p.status }), (agents) => ({ agents })),
    "swarm.agent": (p) => swarm.agent(p.node),
    // The node's file is in an agent-writable tree: read no-follow from the swarm's root, at most
    // SOURCE_MAX_BYTES; a link, a non-file or a bigger file is refused (nothing read).
    "swarm.source": (p) =>
      Effect.gen(function*() {
        const status = yield* withDurable(swarm.status)
        if (Option.isNone(status)) return yield* new InvalidInputError({ field: "node", message: "no swarm runs here" })
        const node = yield* swarm.agent(p.node)
        const bytes = yield* NoFollow.readFile(status.value.root, node.path, SOURCE_MAX_BYTES).pipe(
          Effect.mapError((e) => new InvalidInputError({ field: "node", message: `${node.node_id}: source not readable (${e.reason})` }))
        )
        const all = new TextDecoder().decode(bytes)
        if (node.lines === null) return { node_id: node.node_id, path: node.path, first_line: 1, text: all }
        const text = all.split("\n").slice(node.lines.start - 1, node.lines.end).join("\n")
        return { node_id: node.node_id, path: node.path, first_line: node.lines.start, text }
      }),
    // With `wait` the answer is shown to the human: out of the inbox (best effort: it was given either way).
    "swarm.chat": (p) =>
      p.wait === true
        ? Effect.interruptible(Effect.tap(swarm.chat(p.node, p.text, true), (r) => r.reply_id === null ? Effect.void : Effect.ignore(meter.markRead([r.reply_id]))))
        : swarm.chat(p.node, p.text, false),
    "swarm.trigger": (p) => swarm.trigger(p.node),
    "swarm.schedule": (p) => withDurable(schedules.set(p.node, p.cron)),
    "swarm.unschedule": (p) => schedules.remove(p.node),
    "swarm.log": (p) =>
      Effect.map(swarmLog(p.node).pipe(Effect.provideService(Swarm, swarm), Effect.provideService(EventLog, eventLog)), (nodes) => ({ nodes })),
    "swarm.schedules": () => Effect.map(schedules.list, (s) => ({ schedules: s }))
  })
}))
