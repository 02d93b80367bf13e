// The words of the live view (`events.follow`, `substrat logs`): for one log entry, who it is
// about and one line for people — or nothing for bookkeeping entries. Pure. Prompts are shown
// without the daemon's message headers (Prompt.ts's `forPeople`).
import { forPeople } from "../agent/Prompt.js"
import type { LogEntry } from "../domain/events.js"
import { egressLine, type Names } from "./TranscriptLines.js"
import { SAME_AS_TURN } from "../protocol/FeedMarks.js"

export interface FeedLine {
  /** Who speaks: a message's sender, else the agent whose log it is. */
  readonly agent: string
  readonly text: string | null
}

const oneLine = (s: string): string => s.replace(/\r?\n/g, " ↵ ")

const clip = (s: string, n = 200): string => {
  const one = oneLine(s)
  return one.length <= n ? one : `${one.slice(0, n - 1)}…`
}

/** Substrat tools that leave no other trace in the logs (their call is the news). */
const quietTools = new Set(["check_inbox", "inspect_agent"])

const json = (u: unknown): string => (typeof u === "string" ? u : JSON.stringify(u) ?? "")

/**
 * What one stream of feed lines remembers: each session's last turn text, so that the message
 * carrying it (the automatic answer to USER, or the reply to a requester) says so instead of
 * repeating it — each thing said is shown once.
 */
export type FeedMemory = Map<string, string>

export const feedLine = (entry: LogEntry, names: Names, memory?: FeedMemory): FeedLine => {
  const own = names.bySession.get(entry.session_id)?.name ?? entry.session_id.slice(0, 8)
  const nameOf = (id: string, fallback?: string): string => names.byAgent.get(id)?.name ?? fallback ?? id.slice(0, 8)
  switch (entry.event) {
    case "agent.created": {
      const d = entry.data
      return { agent: d.name, text: `* created (provider ${d.provider}${d.role ? `, role ${d.role}` : ""})` }
    }
    case "agent.terminated":
      return { agent: nameOf(entry.data.agent_id, own), text: "* terminated" }
    case "agent.quarantined":
      return { agent: nameOf(entry.data.agent_id, own), text: `! quarantined after ${entry.data.attempts} daemon deaths during a turn (substrat agent resume)` }
    case "agent.resumed":
      return { agent: nameOf(entry.data.agent_id, own), text: "* resumed" }
    case "turn.start":
      memory?.delete(entry.session_id)
      return { agent: own, text: `▶ turn: ${clip(forPeople(entry.data.prompt), 160)}` }
    case "turn.complete":
      if (entry.data.response.length > 0) memory?.set(entry.session_id, entry.data.response)
      return { agent: own, text: `■ turn done${entry.data.response.length > 0 ? `: ${clip(entry.data.response, 160)}` : ""}` }
    case "message.enqueued": {
      const env = entry.data
      const from = env.sender === "USER" || env.sender === "SYSTEM" ? env.sender : nameOf(env.sender, env.sender_name)
      const to = env.recipient === null ? "*" : env.recipient === "USER" ? "USER" : nameOf(env.recipient)
      if (env.find?.state === "hop") return { agent: from, text: `↪ ${to}: find:${env.find.symbol} (hop ${env.find.hops})` }
      const kind = env.kind === "request" ? " (request)" : env.kind === "multicast" ? " (broadcast)" : env.progress === true ? " (progress)" : ""
      const senderSession = env.sender === "USER" || env.sender === "SYSTEM" ? undefined : names.byAgent.get(env.sender)?.session_id
      const repeats = senderSession !== undefined && env.payload.length > 0 && memory?.get(senderSession) === env.payload
      return { agent: from, text: `→ ${to}${kind}: ${repeats ? SAME_AS_TURN : clip(env.payload)}` }
    }
    case "message.timed_out":
      return { agent: own, text: `! no reply from ${entry.data.recipient_name} within ${entry.data.timeout_s} s` }
    case "provider.error":
      return { agent: own, text: `! ${entry.data.reason}: ${clip(entry.data.message)}` }
    // The provider's own tools (claude's Write, codex's exec_command): call and result. Substrat's
    // tools show as what they do (messages, agents created); only reads and failures get a line.
    case "tool_call.invoked":
      if (entry.data.source === undefined && !quietTools.has(entry.data.tool)) return { agent: own, text: null }
      return { agent: own, text: `⚙ ${entry.data.tool} ${clip(json(entry.data.arguments), 160)}` }
    case "tool_call.result":
      if (entry.data.source === undefined && !entry.data.is_error) return { agent: own, text: null }
      return { agent: own, text: `⚙ ${entry.data.tool} → ${entry.data.is_error ? "error: " : ""}${clip(json(entry.data.result), 160)}` }
    case "workspace.overlap":
      return { agent: own, text: `! overlap: ${entry.data.turns.map((t) => t.agent).join(" and ")} both changed ${clip(entry.data.paths.join(", "))}` }
    case "merge.queued":
      return { agent: own, text: `⇢ ${entry.data.agent}'s branch queued for merging (${entry.data.branch} at ${entry.data.head.slice(0, 12)})` }
    case "merge.held":
      return { agent: own, text: `⇢ ${entry.data.agent}'s changes wait for its answer before they are queued` }
    case "merge.merged": {
      const d = entry.data
      return { agent: own, text: `⇉ merged (commit ${d.commit.slice(0, 12)}${d.checked ? ", check passed" : ""}): ${clip(d.paths.join(", ")) || "no paths"}` }
    }
    case "merge.failed":
      return { agent: own, text: `! merge not done (${entry.data.reason}): ${clip(entry.data.paths.length > 0 ? entry.data.paths.join(", ") : entry.data.output)}` }
    case "workspace.diff": {
      const n = entry.data.paths.length
      return { agent: own, text: `± ${n} path${n === 1 ? "" : "s"} changed (commit ${entry.data.commit.slice(0, 12)})` }
    }
    case "budget.set": {
      const d = entry.data
      const parts = [d.usd === null ? null : `$${d.usd}`, d.tokens === null ? null : `${d.tokens} tokens`, d.turns === null ? null : `${d.turns} turns`, d.time_s === null ? null : `${d.time_s} s`]
      return { agent: own, text: `$ budget: ${parts.filter((p) => p !== null).join(", ") || "no limit"}` }
    }
    case "egress.request":
      return { agent: own, text: egressLine(entry.data) }
    case "budget.breached":
      return { agent: own, text: `! ${entry.data.reason} (inbox item ${entry.data.item_id})` }
    case "human.asked":
      return { agent: own, text: `? asks the human: ${clip(entry.data.question)} (inbox item ${entry.data.item_id})` }
    case "human.answered":
      return { agent: own, text: `← the human answers: ${clip(entry.data.answer)}` }
    case "permission.asked":
      return { agent: own, text: `? ${clip(entry.data.question)} (inbox item ${entry.data.item_id})` }
    case "permission.answered":
      return { agent: own, text: `← the human answers the permission request: ${entry.data.choice}` }
    case "caps.set": {
      const d = entry.data
      const parts = [d.max_depth === null ? null : `depth ${d.max_depth}`, d.max_children === null ? null : `${d.max_children} live children`, d.max_live === null ? null : `${d.max_live} live agents`]
      return { agent: own, text: `# tree caps: ${parts.filter((p) => p !== null).join(", ") || "the config's"}` }
    }
    case "spawn.queued":
      return { agent: own, text: `… spawn of ${entry.data.name} queued: ${clip(entry.data.reason)}` }
    case "spawn.started":
      return { agent: own, text: `* queued spawn started: ${nameOf(entry.data.agent_id)}` }
    case "spawn.failed":
      return { agent: own, text: `! queued spawn dropped: ${clip(entry.data.message)}` }
    case "forwarder.refused":
      return { agent: own, text: `! model forwarder refused ${clip(entry.data.method, 10)} ${clip(entry.data.path, 120)}: ${clip(entry.data.reason)}` }
    case "session.created":
    case "usage.reserved":
    case "user.read":
    case "suspend.result":
    case "session.restored":
    case "message.delivered":
    case "message.forwarded":
    case "usage":
      return { agent: own, text: null }
  }
}
