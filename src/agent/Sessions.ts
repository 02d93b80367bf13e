// Sessions: the records that make an agent durable — its session record (`session.json`),
// `session.created` and `agent.created` in its log — and the materializing of dormant agents.
// A dormant agent (a swarm node agent, docs/swarm.md) is in the tree with ids and instructions
// but nothing on disk, no inbox and no process; the first message, turn or termination that
// reaches it materializes it: its ancestors first (recovery rebuilds a child only under a parent
// whose session exists), then itself, each exactly as a root or a born child is created.
import { Effect } from "effect"
import type { AgentNode } from "../domain/agent.js"
import { EventLogError, type SessionStoreError, withFault } from "../domain/errors.js"
import { makeEvent } from "../domain/events.js"
import type { AgentId } from "../domain/ids.js"
import { makeSession } from "../domain/session.js"
import { EventLog } from "../storage/EventLog.js"
import { SessionStore } from "../storage/SessionStore.js"
import { Mailbox } from "./Mailbox.js"
import { Tree } from "./Tree.js"

export class Sessions extends Effect.Service<Sessions>()("substrat/Sessions", {
  effect: Effect.gen(function*() {
    const tree = yield* Tree
    const mailbox = yield* Mailbox
    const log = yield* EventLog
    const store = yield* SessionStore
    // Materializations are rare (a dormant agent's first trigger): one at a time, so two
    // messages reaching the same dormant agent create its session once.
    const lock = yield* Effect.makeSemaphore(1)

    const now = Effect.sync(() => new Date().toISOString())

    /** The session record and `session.created`. */
    const createSession = (node: AgentNode): Effect.Effect<void, SessionStoreError | EventLogError> =>
      Effect.gen(function*() {
        yield* store.save(makeSession({ id: node.session_id, provider_name: node.provider, now: yield* now }))
        yield* log.append(
          node.session_id,
          makeEvent("session.created", { provider: node.provider, model: null, system_prompt: node.instructions })
        )
      })

    /** `agent.created` in the agent's own log (what recovery rebuilds the tree from). */
    const logCreated = (node: AgentNode): Effect.Effect<void, EventLogError> =>
      Effect.asVoid(log.append(
        node.session_id,
        makeEvent("agent.created", {
          agent_id: node.id,
          name: node.name,
          parent_session_id: node.parent_id === null ? null : tree.get(node.parent_id)?.session_id ?? null,
          instructions: node.instructions,
          role: node.role,
          provider: node.provider,
          workspace: node.workspace_id,
          ...(node.approve === undefined ? {} : { approve: node.approve })
        })
      ))

    /**
     * Give a dormant agent (and its dormant ancestors, outermost first) its session, log and
     * inbox. Nothing to do for an agent that is not dormant. On failure the agent stays dormant
     * (a half-written session without `agent.created` is an orphan recovery removes).
     */
    const materialize = (id: AgentId): Effect.Effect<void, EventLogError> =>
      Effect.suspend(() => {
        if (!tree.isDormant(id)) return Effect.void
        return lock.withPermits(1)(Effect.gen(function*() {
          const chain: Array<AgentNode> = []
          for (let n = tree.get(id); n !== undefined && tree.isDormant(n.id); n = n.parent_id ? tree.get(n.parent_id) : undefined) {
            chain.push(tree.complete(n))
          }
          for (const node of chain.reverse()) {
            // To a sender, a record that cannot be written is a log that cannot be written.
            yield* createSession(node).pipe(
              Effect.catchTag("SessionStoreError", (e) =>
                Effect.fail(new EventLogError({ reason: "io", file: `${node.session_id}/session.json`, ...withFault(e.fault), message: e.message })))
            )
            yield* logCreated(node)
            tree.awaken(node)
            mailbox.open(node.id, { unborn: false })
          }
        }))
      })

    return { createSession, logCreated, materialize } as const
  })
}) {}
