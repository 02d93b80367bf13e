// Sessions for tests of the event feed (test/unit/event-feed.test.ts, test/unit/sse.test.ts): a
// saved session record and the first two lines of its log, `session.created` and `agent.created`.
import { Effect } from "effect"
import { makeEvent } from "../../src/domain/events.js"
import { type AgentId, newAgentId, newSessionId, type SessionId } from "../../src/domain/ids.js"
import { Session } from "../../src/domain/session.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { SessionStore } from "../../src/storage/SessionStore.js"

export const saveSession = (id: SessionId) =>
  Effect.flatMap(SessionStore, (store) =>
    store.save(new Session({
      id,
      state: "active",
      provider_name: "scripted",
      model: null,
      created_at: new Date().toISOString(),
      suspended_at: null,
      provider_state: new Uint8Array()
    })))

export const newSession = (parent: SessionId | null, agent: AgentId = newAgentId()) =>
  Effect.gen(function*() {
    const id = newSessionId()
    const log = yield* EventLog
    yield* saveSession(id)
    yield* log.append(id, makeEvent("session.created", { provider: "scripted", model: null, system_prompt: "" }))
    yield* log.append(id, makeEvent("agent.created", {
      agent_id: agent,
      name: "a",
      parent_session_id: parent,
      instructions: "",
      role: "worker",
      provider: "scripted",
      workspace: null
    }))
    return { id, agent }
  })

