// What a `--wait` waits on besides the agents: while USER's request is open, follow the tree's
// events and say on stderr when it waits on the human — a question (`human.asked`) or a spent
// budget (`budget.breached`) — with the inbox id and the command that answers it, and when the
// human answered. stdout keeps only the answer.
import { Effect, Stream } from "effect"
import { EventsGroup, type FeedItem } from "../protocol/admin/events.js"
import { withClient } from "./Client.js"

/** The stderr line for one feed item, or null when it is no pause. */
export const pauseLine = (item: FeedItem): string | null => {
  if (item.kind !== "event") return null
  const e = item.entry
  switch (e.event) {
    case "human.asked":
      return `substrat: waiting on you: ${item.agent} asks (inbox item ${e.data.item_id}): ${e.data.question}\n` +
        `substrat: answer with: substrat inbox answer ${e.data.item_id} "…"`
    case "human.answered":
      return `substrat: you answered ${item.agent} (inbox item ${e.data.item_id}); waiting for the answer`
    case "budget.breached":
      return `substrat: waiting on you: ${item.agent}'s budget is spent (inbox item ${e.data.item_id}): ${e.data.reason}\n` +
        `substrat: raise it with: substrat budget set ${item.agent} …, or stop it: substrat inbox answer ${e.data.item_id} stop`
    default:
      return null
  }
}

/**
 * Follow `agent`'s subtree from `after` (ISO time) and print its pauses on stderr until
 * interrupted. Best-effort: a failure to follow only ends the notes, never the wait.
 */
export const watchPauses = (socket: string, agent: string, after: string): Effect.Effect<void> =>
  withClient(EventsGroup, socket, (c) =>
    c.events.follow({ tree: agent, after, follow: true }).pipe(
      Stream.runForEach((item) =>
        Effect.sync(() => {
          const line = pauseLine(item)
          if (line !== null) process.stderr.write(`${line}\n`)
        })
      ),
      Effect.ignore
    )).pipe(Effect.ignore)
