// The swarm's own record, `$SUBSTRAT_HOME/swarm/swarm.json` (atomic replace through Durable):
// what was started (root, provider, languages, name), whether it runs (a daemon start resumes
// it), the node generations (a node id that comes back after its materialized agent was
// orphaned gets a fresh agent) and the orphaned agents (kept for history, never triggered).
// The live nodes are in `nodes.json` (SwarmStore). A dormant agent costs nothing here: its ids
// derive from the swarm name, the node id and its generation (SwarmAgents.ts).
import { Effect, Option, Schema } from "effect"
import { join } from "node:path"
import { AgentId, SessionId, WorkspaceId } from "../domain/ids.js"
import { Durable } from "../storage/Durable.js"
import { SwarmLanguage, SwarmNode } from "./SwarmNode.js"

/** The swarm record could not be read or written, or the swarm is not in the state asked for. */
export class SwarmError extends Schema.TaggedError<SwarmError>()("SwarmError", {
  reason: Schema.Literal("io", "corrupt", "not-running", "running"),
  message: Schema.String
}) {}

export const OrphanRecord = Schema.Struct({
  node: SwarmNode,
  agent_id: AgentId,
  session_id: SessionId,
  /** It had a session (history on disk) when it was orphaned. */
  materialized: Schema.Boolean,
  at: Schema.String
})
export type OrphanRecord = typeof OrphanRecord.Type

export const SwarmRecord = Schema.Struct({
  version: Schema.Literal(1),
  name: Schema.String,
  root: Schema.String,
  provider: Schema.String,
  languages: Schema.Array(SwarmLanguage),
  workspace_id: Schema.NullOr(WorkspaceId),
  running: Schema.Boolean,
  started_at: Schema.String,
  generations: Schema.Record({ key: Schema.String, value: Schema.Number }),
  orphans: Schema.Array(OrphanRecord)
})
export type SwarmRecord = typeof SwarmRecord.Type

const Json = Schema.parseJson(SwarmRecord)
const decode = Schema.decodeUnknownEither(Json)
const encode = Schema.encodeSync(Json)

export const swarmDir = (home: string): string => join(home, "swarm")
export const recordFile = (home: string): string => join(swarmDir(home), "swarm.json")
export const nodesFile = (home: string): string => join(swarmDir(home), "nodes.json")

export const loadRecord = (home: string) =>
  Effect.gen(function*() {
    const durable = yield* Durable
    const file = recordFile(home)
    const bytes = yield* durable.readFile(file).pipe(
      Effect.mapError((e) => new SwarmError({ reason: "io", message: `${file}: ${e.message}` }))
    )
    if (Option.isNone(bytes)) return Option.none<SwarmRecord>()
    const r = decode(new TextDecoder().decode(bytes.value))
    if (r._tag === "Left") return yield* new SwarmError({ reason: "corrupt", message: `${file}: ${r.left.message}` })
    return Option.some(r.right)
  })

export const saveRecord = (home: string, record: SwarmRecord) =>
  Effect.gen(function*() {
    const durable = yield* Durable
    const file = recordFile(home)
    const io = (e: { readonly message: string }) => new SwarmError({ reason: "io", message: `${file}: ${e.message}` })
    yield* durable.mkdir(swarmDir(home), 0o700).pipe(Effect.mapError(io))
    yield* durable.replaceAtomic(file, new TextEncoder().encode(encode(record) + "\n")).pipe(Effect.mapError(io))
  })
