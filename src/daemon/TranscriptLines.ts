// What `transcript.txt` holds, as pure functions of the event logs: the lines one entry produces
// (the live writer, Transcript.ts, uses the same function), and whole transcripts regenerated
// from every session's log — the event log is the source of truth and the transcript is derived
// from it, so after a crash the daemon rebuilds transcripts that missed lines.
import { Either, Schema } from "effect"
import { type EgressRequestData as EgressRequestSchema, LogEntry } from "../domain/events.js"
import { repairedView } from "../storage/EventLog.js"

const utf8In = new TextEncoder()
const utf8Out = new TextDecoder()

type EgressRequestData = typeof EgressRequestSchema.Type

export interface KnownAgent {
  readonly id: string
  readonly name: string
  readonly session_id: string
}

export interface Names {
  readonly byAgent: Map<string, KnownAgent>
  readonly bySession: Map<string, KnownAgent>
}

export const emptyNames = (): Names => ({ byAgent: new Map(), bySession: new Map() })

const clock = (ts: string): string => (ts.length >= 19 ? ts.slice(11, 19) : ts)

/** One physical line per entry (line numbers are how `agent logs -f` avoids gaps and repeats). */
const oneLine = (text: string): string => text.replace(/\r?\n/g, " ↵ ")

const TOOL_TEXT_MAX = 200
/** A tool's arguments or result, short: strings as they are, other JSON compact; clipped. */
const toolText = (u: unknown): string => {
  const s = oneLine(typeof u === "string" ? u : JSON.stringify(u) ?? "")
  return s.length <= TOOL_TEXT_MAX ? s : `${s.slice(0, TOOL_TEXT_MAX)}…`
}

const clipped = (s: string, n: number): string => {
  const one = oneLine(s)
  return one.length <= n ? one : `${one.slice(0, n - 1)}…`
}

const kib = (n: number): string => (n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`)

/** One egress request: `⇄ GET npm.example:80 200 ↑120 B ↓3.2 KiB 12 ms (preset npm)` or `⊘ … denied: why`. */
export const egressLine = (d: EgressRequestData): string => {
  const target = `${d.method} ${d.host}:${d.port}`
  if (!d.allowed) return `⊘ egress ${target} denied: ${clipped(d.reason ?? "", 120)}${d.item_id === undefined ? "" : ` (inbox item ${d.item_id})`}`
  const status = d.status === null ? "" : ` ${d.status}`
  const ended = d.reason === null ? "" : `, ended: ${clipped(d.reason, 120)}`
  return `⇄ egress ${target}${status} ↑${kib(d.bytes_up)} ↓${kib(d.bytes_down)} ${Math.round(d.duration_ms)} ms (${d.rule ?? "?"}${ended})`
}

/** The transcript lines an entry produces, keyed by the session whose transcript gets them. */
export const linesFor = (entry: LogEntry, names: Names): ReadonlyArray<readonly [string, string]> => {
  const t = `[${clock(entry.ts)}]`
  const nameOf = (id: string, fallback?: string): string => names.byAgent.get(id)?.name ?? fallback ?? id.slice(0, 8)
  switch (entry.event) {
    case "agent.created": {
      const d = entry.data
      return [[entry.session_id, `${t} * ${d.name} created (provider ${d.provider}${d.role ? `, role ${d.role}` : ""})`]]
    }
    case "agent.terminated":
      return [[entry.session_id, `${t} * ${nameOf(entry.data.agent_id)} terminated`]]
    case "message.enqueued": {
      const env = entry.data
      const from = env.sender === "USER" || env.sender === "SYSTEM"
        ? env.sender
        : nameOf(env.sender, env.sender_name)
      const to = env.recipient === null ? "*" : env.recipient === "USER" ? "USER" : nameOf(env.recipient)
      const line = `${t} ${from} → ${to}${env.progress === true ? " (progress)" : ""}: ${oneLine(env.payload)}`
      const out: Array<readonly [string, string]> = [[entry.session_id, line]]
      if (env.sender !== "USER" && env.sender !== "SYSTEM") {
        const senderSession = names.byAgent.get(env.sender)?.session_id
        if (senderSession !== undefined && senderSession !== entry.session_id) {
          // A multicast is fanned out into one copy per recipient: the sender's transcript
          // gets each copy's line (one per recipient), which shows who it reached.
          out.push([senderSession, line])
        }
      }
      return out
    }
    case "provider.error":
      return [[entry.session_id, `${t} ! ${names.bySession.get(entry.session_id)?.name ?? "agent"}: ${entry.data.reason}: ${oneLine(entry.data.message)}`]]
    // The provider's own tools (claude's Write/Bash, codex's exec_command): what the agent did
    // in its workspace. Substrat's tools show as the messages they send.
    case "tool_call.invoked":
      if (entry.data.source !== "provider") return []
      return [[entry.session_id, `${t} ${names.bySession.get(entry.session_id)?.name ?? "agent"} ⚙ ${entry.data.tool} ${toolText(entry.data.arguments)}`]]
    case "tool_call.result":
      if (entry.data.source !== "provider") return []
      return [[entry.session_id, `${t} ${names.bySession.get(entry.session_id)?.name ?? "agent"} ⚙ ${entry.data.tool} → ${entry.data.is_error ? "error: " : ""}${toolText(entry.data.result)}`]]
    case "egress.request":
      return [[entry.session_id, `${t} ${names.bySession.get(entry.session_id)?.name ?? "agent"} ${egressLine(entry.data)}`]]
    default:
      return []
  }
}

/** The events that produce transcript lines (the others are skipped before decoding). */
const transcriptEvents = new Set([
  "agent.created",
  "agent.terminated",
  "message.enqueued",
  "provider.error",
  "tool_call.invoked",
  "tool_call.result",
  "egress.request"
])
const decodeEntry = Schema.decodeUnknownEither(LogEntry)

const parse = (line: string): LogEntry | null => {
  let json: unknown
  try {
    json = JSON.parse(line)
  } catch {
    return null
  }
  if (typeof json !== "object" || json === null || !("event" in json) || !transcriptEvents.has(String(json.event))) return null
  // Only the provider's own tool calls make lines; Substrat's are skipped before decoding.
  if (String(json.event).startsWith("tool_call.")) {
    const data: unknown = "data" in json ? json.data : null
    if (typeof data !== "object" || data === null || !("source" in data) || data.source !== "provider") return null
  }
  const e = decodeEntry(json)
  return Either.isRight(e) ? e.right : null
}

/**
 * The transcript-relevant entries of a log as the EventLog's repair would leave it, without
 * touching the files (`repairedView`: a torn trailing line is ignored, a valid pending entry or
 * batch applied by repair's rules). Undecodable lines are skipped.
 */
export const logView = (events: string, pending: string | null): ReadonlyArray<LogEntry> => {
  const text = utf8Out.decode(repairedView(utf8In.encode(events), pending === null ? undefined : utf8In.encode(pending)))
  const lines = text === "" ? [] : text.slice(0, -1).split("\n")
  const out: Array<LogEntry> = []
  for (const l of lines) {
    const e = parse(l)
    if (e !== null) out.push(e)
  }
  return out
}

/**
 * Every session's transcript from every session's entries: names are learned from all
 * `agent.created` first; lines are ordered by their entry's time (stable: a log's own order is
 * kept), which is the order the live writer sees them in up to same-millisecond ties.
 */
export const transcriptsFromLogs = (
  logs: ReadonlyArray<{ readonly session: string; readonly entries: ReadonlyArray<LogEntry> }>
): Map<string, Array<string>> => {
  const names = emptyNames()
  for (const l of logs) {
    for (const e of l.entries) {
      if (e.event === "agent.created") {
        const a = { id: e.data.agent_id, name: e.data.name, session_id: e.session_id }
        names.byAgent.set(a.id, a)
        names.bySession.set(a.session_id, a)
      }
    }
  }
  const all: Array<{ readonly ts: string; readonly session: string; readonly line: string }> = []
  for (const l of logs) {
    for (const e of l.entries) for (const [session, line] of linesFor(e, names)) all.push({ ts: e.ts, session, line })
  }
  all.sort((a, b) => (a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : 0))
  const out = new Map<string, Array<string>>()
  for (const x of all) {
    const lines = out.get(x.session)
    if (lines === undefined) out.set(x.session, [x.line])
    else lines.push(x.line)
  }
  return out
}
