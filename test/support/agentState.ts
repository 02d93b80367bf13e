// A read-only snapshot of the agent services' state (Tree, Mailbox, Requests, Turns, Activity),
// for tests that check invariants across all of them. Each service owns its part; this only
// asks each for a copy.
import { Effect } from "effect"
import { Activity } from "../../src/agent/Activity.js"
import { Mailbox } from "../../src/agent/Mailbox.js"
import { Requests } from "../../src/agent/Requests.js"
import { Tree } from "../../src/agent/Tree.js"
import { Turns } from "../../src/agent/Turns.js"

export const agentState = Effect.gen(function*() {
  const tree = yield* Tree
  const mailbox = (yield* Mailbox).snapshot()
  const requests = (yield* Requests).snapshot()
  const activity = (yield* Activity).snapshot()
  const turns = yield* Turns
  return {
    tree: tree.current(),
    terminating: tree.terminating(),
    inboxes: mailbox.inboxes,
    unborn: mailbox.unborn,
    triggers: mailbox.triggers,
    userOutbox: mailbox.userOutbox,
    requests: new Map(requests.map((r) => [r.id, r] as const)),
    usage: activity.usage,
    activity: activity.activity,
    turns: { size: turns.runningCount() }
  }
})

/** What `agentState` needs. */
export type AgentStateServices = Tree | Mailbox | Requests | Activity | Turns
