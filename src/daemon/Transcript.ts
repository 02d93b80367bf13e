// `agents/<session-id>/transcript.txt`: the human-readable conversation of seed 000 §9,
//   [12:00:00] USER → alpha: Please review src/auth.py
//   [12:00:05] alpha → beta: Check for SQL injection in src/auth.py
// written by the daemon from the live event stream (EventTap), never by the orchestrator.
// A message appears in the transcripts of both its sender and its recipient. Appends are not
// fsync'd: the event log is the source of truth and transcripts are derived from it. The marker
// `$SUBSTRAT_HOME/transcripts.dirty` exists while a daemon writes transcripts; a clean shutdown
// writes every line still queued and removes it. Finding it at start-up means the last daemon
// died (kill -9, crash, power loss): every transcript is then regenerated from the event logs
// (TranscriptLines.ts) and replaced atomically where it differs — before recovery and before
// anything new is logged, so nothing races with the live writer. The live writer starts once it
// knows the agents' names (`learn`, after recovery), so recovery's own messages show names too.
import { Chunk, Deferred, Duration, Effect, Fiber, Option, PubSub, Queue, Schema, Stream } from "effect"
import * as fsp from "node:fs/promises"
import { SubstratPaths } from "../config/Paths.js"
import type { LogEntry } from "../domain/events.js"
import { SessionId } from "../domain/ids.js"
import { Durable } from "../storage/Durable.js"
import { EventTap } from "../storage/EventTap.js"
import { emptyNames, type KnownAgent, linesFor, logView, type Names, transcriptsFromLogs } from "./TranscriptLines.js"

export { type KnownAgent, linesFor } from "./TranscriptLines.js"

const isSessionId = Schema.is(SessionId)

/** Bytes of transcript text per stream chunk: each chunk is one message on the wire. */
const chunkBytes = 256 * 1024

/**
 * `lines` as a stream of chunks of at most ~`chunkBytes` each (a line longer than that is a
 * chunk of its own): a whole file in one chunk would be one wire message of its full size.
 */
const inChunks = (lines: ReadonlyArray<string>): Stream.Stream<string> => {
  const chunks: Array<Chunk.Chunk<string>> = []
  let from = 0
  let size = 0
  lines.forEach((l, i) => {
    if (size > 0 && size + l.length > chunkBytes) {
      chunks.push(Chunk.unsafeFromArray(lines.slice(from, i)))
      from = i
      size = 0
    }
    size += l.length + 1
  })
  if (from < lines.length) chunks.push(Chunk.unsafeFromArray(lines.slice(from)))
  return Stream.fromChunks(...chunks)
}
const utf8 = new TextDecoder()

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
    const durable = yield* Durable
    const names: Names = emptyNames()
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

    /** Regenerate every transcript from the event logs; rewrite (atomically) those that differ. */
    const rebuildAll = Effect.gen(function*() {
      const text = (path: string) => Effect.map(durable.readFile(path), Option.map((b) => utf8.decode(b)))
      const dirs = (yield* durable.readDir(paths.agentsDir)).filter((e) => e.isDirectory && isSessionId(e.name))
      const logs = yield* Effect.forEach(dirs, (d) =>
        Effect.gen(function*() {
          const events = yield* text(paths.eventsFile(d.name))
          const pending = yield* text(paths.pendingFile(d.name))
          return { session: d.name, entries: logView(Option.getOrElse(events, () => ""), Option.getOrNull(pending)) }
        }))
      const transcripts = transcriptsFromLogs(logs)
      let rewritten = 0
      for (const d of dirs) {
        const lines = transcripts.get(d.name) ?? []
        const want = lines.length === 0 ? "" : lines.join("\n") + "\n"
        const have = yield* text(paths.transcriptFile(d.name))
        if (Option.getOrElse(have, () => "") === want) continue
        yield* durable.replaceAtomic(paths.transcriptFile(d.name), new TextEncoder().encode(want))
        rewritten++
      }
      return { sessions: dirs.length, rewritten }
    })

    const dirty = `${paths.home}/transcripts.dirty`
    if (Option.isSome(yield* Effect.orElseSucceed(durable.size(dirty), () => Option.none()))) {
      yield* rebuildAll.pipe(
        Effect.timed,
        Effect.tap(([took, r]) =>
          Effect.logInfo(
            `transcripts: the last daemon did not stop cleanly; regenerated from the event logs: ${r.rewritten} of ${r.sessions} rewritten in ${
              Math.round(Duration.toMillis(took))
            } ms`
          )
        ),
        Effect.catchAllCause((cause) => Effect.logWarning("transcripts: regeneration failed; they may miss lines", cause))
      )
    }
    yield* durable.replaceAtomic(dirty, new TextEncoder().encode(`${process.pid}\n`)).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("transcripts: cannot write the dirty marker", cause))
    )

    // Subscribe now (before anything is appended), process entries one by one in a scoped fiber;
    // an entry once taken is written even if the fiber is interrupted meanwhile.
    // Lines are written once the agents' names are known (`learn`, right after start-up
    // recovery): what recovery logs before then names agents that only their own logs name.
    const queue = yield* tap.subscribe
    const named = yield* Deferred.make<void>()
    const writer = yield* Deferred.await(named).pipe(
      Effect.zipRight(
        Effect.uninterruptibleMask((restore) => Effect.flatMap(restore(Queue.take(queue)), onEntry)).pipe(Effect.forever)
      ),
      Effect.forkScoped
    )
    // Clean shutdown (runs before the subscription closes): stop the writer, write what is still
    // queued, then drop the marker — the transcripts are complete.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        yield* Fiber.interrupt(writer)
        const rest = yield* Queue.takeAll(queue)
        for (const entry of rest) yield* onEntry(entry)
        yield* durable.unlink(dirty)
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("transcripts: flush at shutdown failed", cause)))
    )

    /** The agents' names (the live tree, after start-up recovery); starts the writer. */
    const learn = Effect.fn("Transcript.learn")(function*(agents: ReadonlyArray<KnownAgent>) {
      for (const a of agents) learnOne(a)
      yield* Deferred.succeed(named, undefined)
    })

    const read = Effect.fn("Transcript.read")(function*(session: SessionId) {
      return yield* readLines(session)
    })

    /** The whole file, then (with `follow`) every new line, without gaps or repeats. */
    const lines = (session: SessionId, follow: boolean): Stream.Stream<string> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const sub = follow ? Option.some(yield* PubSub.subscribe(hub)) : Option.none()
        const existing = yield* readLines(session)
        const head = inChunks(existing)
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
