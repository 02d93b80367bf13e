// SSE fan-out CPU, in process: N HTTP clients (another process: its CPU is not counted) follow the
// whole daemon from the end (`Sse.response`, what GET /v1/events answers, served by the platform's
// Node HTTP server on a Unix socket) while one session appends an entry every 15 ms to the tapped
// in-memory log — longer than the feed's 10 ms window, so each event is a batch of its own: the
// worst case, and what a working team looks like. The figure is the CPU each extra client costs
// per event: (CPU with N clients − CPU with 1) / (N − 1) / E, from process.cpuUsage over the
// appends and the delivery of every frame. With SUBSTRAT_BENCH_BEFORE=<another checkout> that
// checkout's src/ runs the same cases in the same run (loaded through tsx). `npm run bench -- sse`
// measures the same against a daemon.
import { HttpServer, type HttpServerResponse } from "@effect/platform"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Deferred, Effect, Layer, type Stream } from "effect"
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { pathToFileURL } from "node:url"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "sse-fanout"

const here = join(import.meta.dirname, "..", "..")

interface Modules {
  readonly Sse: typeof import("../../src/http/Sse.js")
  readonly Feed: typeof import("../../src/feed/EventFeed.js")
  readonly Tap: typeof import("../../src/storage/EventTap.js")
  readonly Log: typeof import("../../src/storage/EventLog.js")
  readonly Index: typeof import("../../src/storage/EventIndex.js")
  readonly Store: typeof import("../../src/storage/SessionStore.js")
  readonly Events: typeof import("../../src/domain/events.js")
  readonly Ids: typeof import("../../src/domain/ids.js")
}

const load = async (root: string): Promise<Modules> => {
  const m = (p: string) => import(pathToFileURL(join(root, "src", p)).href)
  return {
    Sse: await m("http/Sse.ts"),
    Feed: await m("feed/EventFeed.ts"),
    Tap: await m("storage/EventTap.ts"),
    Log: await m("storage/EventLog.ts"),
    Index: await m("storage/EventIndex.ts"),
    Store: await m("storage/SessionStore.ts"),
    Events: await m("domain/events.ts"),
    Ids: await m("domain/ids.ts")
  }
}

const MARK = "fanout-end-mark"
const options = { scope: { _tag: "all" as const }, from: "end" as const }

/** A checkout from before `Sse.open`: `Sse.response` over `feed.stream`. */
interface Before {
  readonly open?: unknown
  readonly response: (items: Stream.Stream<unknown, unknown>) => HttpServerResponse.HttpServerResponse
}

/** The response GET /v1/events gives a client following the whole daemon from the end. */
const responseOf = (M: Modules, feed: InstanceType<Modules["Feed"]["EventFeed"]>): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  const old = M.Sse as unknown as Before
  return old.open === undefined ? Effect.sync(() => old.response(feed.stream({ ...options, keepAlive: true }))) : M.Sse.response(feed, options)
}

/** The clients: N connections to the socket; prints `live` when all are live, `done` when all saw the mark. */
const clientScript = `
const http = require("node:http")
const [sock, n, mark] = [process.argv[1], Number(process.argv[2]), process.argv[3]]
let live = 0, done = 0
for (let i = 0; i < n; i++) {
  http.request({ socketPath: sock, path: "/" }, (res) => {
    let tail = "", isLive = false, isDone = false
    res.on("data", (c) => {
      tail = (tail + c.toString("latin1")).slice(-400)
      if (!isLive && tail.includes("event: live")) { isLive = true; if (++live === n) process.stdout.write("live\\n") }
      if (!isDone && tail.includes(mark)) { isDone = true; if (++done === n) process.stdout.write("done\\n") }
    })
  }).on("error", () => {}).end()
}
`

/** CPU µs of this process for `clients` followers while `events` entries are appended one every 15 ms. */
const measure = (M: Modules, clients: number, events: number): Promise<number> => {
  const storage = Layer.mergeAll(
    M.Tap.layer.pipe(Layer.provide(Layer.mergeAll(M.Log.EventLog.layerMemory, M.Index.EventIndex.layerMemory))),
    M.Store.SessionStore.layerMemory
  )
  const dir = mkdtempSync(join(tmpdir(), "substrat-bench-sse-fanout-"))
  const sock = join(dir, "http.sock")
  const program = Effect.gen(function*() {
    const feed = yield* M.Feed.EventFeed
    const log = yield* M.Log.EventLog
    const server = yield* Layer.build(NodeHttpServer.layer(() => createServer(), { path: sock }))
    yield* HttpServer.serveEffect(Effect.suspend(() => responseOf(M, feed))).pipe(Effect.provide(server))
    const live = yield* Deferred.make<void>()
    const done = yield* Deferred.make<void>()
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        const child = spawn(process.execPath, ["-e", clientScript, sock, String(clients), MARK], { stdio: ["ignore", "pipe", "ignore"] })
        child.stdout.on("data", (b: Buffer) => {
          if (b.includes("live")) Deferred.unsafeDone(live, Effect.void)
          if (b.includes("done")) Deferred.unsafeDone(done, Effect.void)
        })
        return child
      }),
      (child) => Effect.sync(() => child.kill("SIGKILL"))
    )
    yield* Deferred.await(live)
    const session = M.Ids.newSessionId()
    const t0 = process.cpuUsage()
    for (let i = 0; i < events; i++) {
      yield* log.append(session, M.Events.makeEvent("usage", { turn_id: null, input_tokens: i, output_tokens: i, cost_usd: 0 }))
      yield* Effect.sleep("15 millis")
    }
    yield* log.append(session, M.Events.makeEvent("session.created", { provider: MARK, model: null, system_prompt: "" }))
    yield* Deferred.await(done)
    const t = process.cpuUsage(t0)
    return t.user + t.system
  })
  return Effect.runPromise(program.pipe(Effect.provide(M.Feed.EventFeed.Default.pipe(Layer.provideMerge(storage))), Effect.scoped))
    .finally(() => rmSync(dir, { recursive: true, force: true }))
}

const median = (xs: ReadonlyArray<number>): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const N = opts.quick ? 20 : 50
  const E = opts.quick ? 100 : 300
  const reps = opts.quick ? 3 : 5
  const beforeRoot = process.env["SUBSTRAT_BENCH_BEFORE"]
  const sides: Array<readonly [string, Modules]> = [["after", await load(here)]]
  if (beforeRoot !== undefined && beforeRoot !== "") sides.unshift(["before", await load(beforeRoot)])
  const rows: Array<Record<string, string | number>> = []
  const summary: Record<string, number | string> = { clients: N, events: E }
  const perClient = new Map<string, Array<number>>()
  // Interleaved repetitions, so load changes hit both sides alike; warm-up first.
  for (const [, M] of sides) await measure(M, 2, 20)
  for (let r = 0; r < reps; r++) {
    for (const [label, M] of sides) {
      const one = await measure(M, 1, E)
      const many = await measure(M, N, E)
      const us = (many - one) / (N - 1) / E
      perClient.set(label, [...(perClient.get(label) ?? []), us])
      rows.push({ side: label, rep: r + 1, "cpu ms 1 client": Math.round(one / 1000), [`cpu ms ${N} clients`]: Math.round(many / 1000), "µs/extra client/event": Number(us.toFixed(2)) })
    }
  }
  for (const [label] of sides) summary[`cpu_us_per_extra_client_per_event_${label}`] = Number(median(perClient.get(label)!).toFixed(2))
  if (sides.length === 2) {
    summary["ratio_before_after"] = Number((median(perClient.get("before")!) / median(perClient.get("after")!)).toFixed(2))
  }
  return { rows, summary }
}
