// `agents/<session-id>/transcript.txt`: the human-readable conversation of seed 000 §9,
//   [12:00:00] USER → alpha: Please review src/auth.py
//   [12:00:05] alpha → beta: Check for SQL injection in src/auth.py
// written by the daemon from the live event stream (EventTap), never by the orchestrator.
// A message appears in the transcripts of both its sender and its recipient. Not durable: the
// event log is the source of truth; this file is for people (`substrat agent logs`).
import { Effect, Option, PubSub, Queue, Stream } from "effect"
import * as fsp from "node:fs/promises"
import { SubstratPaths } from "../config/Paths.js"
import type { LogEntry } from "../domain/events.js"
import type { SessionId } from "../domain/ids.js"
import { EventTap } from "./EventTap.js"

export interface KnownAgent {
  readonly id: string
  readonly name: string
  readonly session_id: string
}

interface Names {
  readonly byAgent: Map<string, KnownAgent>
  readonly bySession: Map<string, KnownAgent>
}

const clock = (ts: string): string => (ts.length >= 19 ? ts.slice(11, 19) : ts)

/** One physical line per entry (line numbers are how `agent logs -f` avoids gaps and repeats). */
const oneLine = (text: string): string => text.replace(/\r?\n/g, " ↵ ")

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
        : nameOf(env.sender, env.metadata["sender_name"])
      const to = env.recipient === null ? "*" : env.recipient === "USER" ? "USER" : nameOf(env.recipient)
      const line = `${t} ${from} → ${to}: ${oneLine(env.payload)}`
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
    default:
      return []
  }
}

export interface TranscriptLine {
  readonly session: string
  /** 1-based line number in the file. */
  readonly seq: number
  readonly line: string
}

export class Transcript extends Effect.Service<Transcript>()("substrat/Transcript", {
  scoped: Effect.gen(function*() {
    const paths = yield* SubstratPaths
    const tap = yield* EventTap
    const names: Names = { byAgent: new Map(), bySession: new Map() }
    const counts = new Map<string, number>()
    const hub = yield* PubSub.unbounded<TranscriptLine>()

    const learnOne = (a: KnownAgent) => {
      names.byAgent.set(a.id, a)
      names.bySession.set(a.session_id, a)
    }

    const readLines = (session: string): Effect.Effect<ReadonlyArray<string>> =>
      Effect.promise(() =>
        fsp.readFile(paths.transcriptFile(session), "utf8").then(
          (s) => s.split("\n").filter((l, i, all) => !(i === all.length - 1 && l === "")),
          () => [] as Array<string>
        )
      )

    const countOf = (session: string): Effect.Effect<number> =>
      counts.has(session) ? Effect.succeed(counts.get(session)!) : Effect.map(readLines(session), (ls) => ls.length)

    const write = (session: string, line: string) =>
      Effect.gen(function*() {
        const n = yield* countOf(session)
        const ok = yield* Effect.promise(() =>
          fsp.appendFile(paths.transcriptFile(session), line + "\n", { mode: 0o600 }).then(() => true, () => false)
        )
        if (!ok) return // the session's directory is gone (deleted): nothing to write to
        counts.set(session, n + 1)
        yield* PubSub.publish(hub, { session, seq: n + 1, line })
      })

    const onEntry = (entry: LogEntry) => {
      if (entry.event === "agent.created") {
        learnOne({ id: entry.data.agent_id, name: entry.data.name, session_id: entry.session_id })
      }
      return Effect.forEach(linesFor(entry, names), ([session, line]) => write(session, line), { discard: true })
    }

    // Subscribe now (before anything is appended), process entries one by one in a scoped fiber.
    const queue = yield* tap.subscribe
    yield* Queue.take(queue).pipe(Effect.flatMap(onEntry), Effect.forever, Effect.forkScoped)

    const learn = Effect.fn("Transcript.learn")(function*(agents: ReadonlyArray<KnownAgent>) {
      for (const a of agents) learnOne(a)
    })

    const read = Effect.fn("Transcript.read")(function*(session: SessionId) {
      return yield* readLines(session)
    })

    /** The whole file, then (with `follow`) every new line, without gaps or repeats. */
    const lines = (session: SessionId, follow: boolean): Stream.Stream<string> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const sub = follow ? Option.some(yield* PubSub.subscribe(hub)) : Option.none()
        const existing = yield* readLines(session)
        const head = Stream.fromIterable(existing)
        if (Option.isNone(sub)) return head
        const seen = existing.length
        return Stream.concat(
          head,
          Stream.fromQueue(sub.value).pipe(
            Stream.filter((l) => l.session === session && l.seq > seen),
            Stream.map((l) => l.line)
          )
        )
      }))

    return { learn, read, lines } as const
  })
}) {}
