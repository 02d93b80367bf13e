// Opening an event stream (GET /v1/events, src/feed/EventFeed.ts) on a home of 1,000 sessions
// (quick: 200) of 20 lines each, on the file layers (events.jsonl per session, events.index):
//   before   what every open did before the feed kept a directory of owners: list the sessions
//            and read every log (SessionStore.scan + a snapshot of each session), then open
//   first    the first stream of a process (it reads every log once: lines the index lacks, owners)
//   end      later opens from the end (`?from=end`, the dashboard), whole daemon / a tree / one agent
//   resume   later opens with Last-Event-ID a few entries back (two sessions have news)
// Each figure is the median time to the stream's `live` marker. The ratio is before / after for
// the same open in the same run.
import { NodeContext } from "@effect/platform-node"
import { Chunk, Effect, Either, Layer, Stream } from "effect"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SubstratPaths } from "../../src/config/Paths.js"
import * as EventTap from "../../src/storage/EventTap.js"
import { makeEvent } from "../../src/domain/events.js"
import { newAgentId, newSessionId, type SessionId } from "../../src/domain/ids.js"
import { Session } from "../../src/domain/session.js"
import { EventFeed, type FeedOptions } from "../../src/feed/EventFeed.js"
import { Durable } from "../../src/storage/Durable.js"
import { EventIndex } from "../../src/storage/EventIndex.js"
import { encodeEntryLine, EventLog } from "../../src/storage/EventLog.js"
import { SessionStore } from "../../src/storage/SessionStore.js"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "sse-open"

const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]!
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const N = opts.quick ? 200 : 1000
  const LINES = 20
  const REPS = opts.quick ? 5 : 15
  const home = mkdtempSync(join(tmpdir(), "substrat-bench-sse-open-"))
  const sessions: Array<SessionId> = []
  const agents: Array<string> = []
  for (let i = 0; i < N; i++) {
    const id = newSessionId()
    const agent = newAgentId()
    sessions.push(id)
    agents.push(agent)
    const events = [
      makeEvent("session.created", { provider: "scripted", model: null, system_prompt: "" }),
      makeEvent("agent.created", {
        agent_id: agent,
        name: `a${i}`,
        parent_session_id: i > 0 && i % 10 !== 0 ? sessions[i - (i % 10)]! : null,
        instructions: "",
        role: "worker",
        provider: "scripted",
        workspace: null
      }),
      ...Array.from({ length: LINES - 2 }, (_, k) =>
        makeEvent("usage", { turn_id: null, input_tokens: k, output_tokens: k, cost_usd: 0 }))
    ]
    mkdirSync(join(home, "agents", id), { recursive: true })
    writeFileSync(join(home, "agents", id, "events.jsonl"), events.map((e) => Either.getOrThrow(encodeEntryLine(e, new Date().toISOString(), id))).join(""))
  }

  const program = Effect.gen(function*() {
    const store = yield* SessionStore
    for (const id of sessions) {
      yield* store.save(new Session({ id, state: "active", provider_name: "scripted", model: null, created_at: new Date().toISOString(), suspended_at: null, provider_state: new Uint8Array() }))
    }
    const feed = yield* EventFeed
    const tap = yield* EventTap.EventTap
    const log = yield* EventLog
    const toLive = (o: FeedOptions) => feed.stream(o).pipe(Stream.takeUntil((i) => i._tag === "Live"), Stream.runDrain)
    const timed = <A, E>(e: Effect.Effect<A, E>) =>
      Effect.gen(function*() {
        const t0 = performance.now()
        yield* e
        return performance.now() - t0
      })
    const rows: Array<Record<string, string | number>> = []
    const first = yield* timed(toLive({ scope: { _tag: "all" }, from: "end" }))
    rows.push({ case: "first open of the process (reads every log once)", ms: Number(first.toFixed(2)) })

    /** What each open cost before: list the sessions, read every log. */
    const oldScan = Effect.gen(function*() {
      const all = yield* store.scan
      for (const s of all) yield* Effect.map(tap.snapshot(s.id), Chunk.size)
    })
    // Two sessions get news; a resume starts a few entries back.
    const news = () =>
      Effect.forEach([sessions[3]!, sessions[N - 1]!], (id) => log.append(id, makeEvent("usage", { turn_id: null, input_tokens: 1, output_tokens: 1, cost_usd: 0 })), { discard: true })
    const cases: ReadonlyArray<readonly [string, () => FeedOptions]> = [
      ["from end, whole daemon", () => ({ scope: { _tag: "all" }, from: "end" })],
      ["from end, ?tree= (10 sessions)", () => ({ scope: { _tag: "tree", agent: agents[0]! }, from: "end" })],
      ["from end, ?agent=", () => ({ scope: { _tag: "agent", agent: agents[5]! }, from: "end" })],
      ["Last-Event-ID 2 back, whole daemon", () => ({ scope: { _tag: "all" }, from: Effect.runSync(tap.position) - 2 })]
    ]
    const summary: Record<string, number | string> = { sessions: N, lines_per_session: LINES, first_open_ms: Number(first.toFixed(2)) }
    for (const [label, options] of cases) {
      const before: Array<number> = []
      const after: Array<number> = []
      for (let r = 0; r < REPS; r++) {
        yield* news()
        before.push(yield* timed(Effect.zipRight(oldScan, toLive(options()))))
        yield* news()
        after.push(yield* timed(toLive(options())))
      }
      const b = median(before)
      const a = median(after)
      rows.push({ case: label, before_ms: Number(b.toFixed(2)), after_ms: Number(a.toFixed(2)), ratio: Number((b / a).toFixed(1)) })
      summary[`${label} before_ms`] = Number(b.toFixed(2))
      summary[`${label} after_ms`] = Number(a.toFixed(2))
      summary[`${label} ratio`] = Number((b / a).toFixed(1))
    }
    return { rows, summary }
  })

  const storage = EventTap.layer.pipe(
    Layer.provide(Layer.mergeAll(EventLog.layerFile, EventIndex.layerFile.pipe(Layer.provide(NodeContext.layer)))),
    Layer.provideMerge(Layer.mergeAll(Durable.layer, SessionStore.layerMemory)),
    Layer.provide(SubstratPaths.layer(home))
  )
  try {
    return await Effect.runPromise(program.pipe(Effect.provide(EventFeed.Default.pipe(Layer.provideMerge(storage))), Effect.scoped))
  } finally {
    rmSync(home, { recursive: true, force: true })
  }
}
