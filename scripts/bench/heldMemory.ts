// What a benchmarked daemon really holds: its memory after a full garbage collection, through the
// V8 inspector (bench-only: the daemon runs no extra code for it). `inspectable(env)` gives a
// daemon's environment an inspector port (`--inspect-port`, inactive until SIGUSR1); `held`
// activates it, collects garbage twice (HeapProfiler.collectGarbage), reads process.memoryUsage()
// in the daemon, then waits until its RSS stops falling (the allocator and V8 give freed pages
// back after a while) and reads that RSS. An RSS read without this counts garbage and allocator
// high-water marks, which vary from run to run of the same code (docs/recovery.md).
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as Socket from "@effect/platform/Socket"
import { Deferred, Effect } from "effect"
import { readFileSync } from "node:fs"
import * as net from "node:net"

/** A free TCP port on 127.0.0.1 (taken and released; the daemon binds it moments later). */
const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port")))
    })
  })

/** `env` plus an inspector port for the daemon (inactive until `held` sends SIGUSR1). */
export const inspectable = async (env: NodeJS.ProcessEnv): Promise<{ readonly env: NodeJS.ProcessEnv; readonly port: number }> => {
  const port = await freePort()
  const options = [env["NODE_OPTIONS"] ?? "", `--inspect-port=127.0.0.1:${port}`].join(" ").trim()
  return { env: { ...env, NODE_OPTIONS: options }, port }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
const rssKb = (pid: number): number => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? Number.NaN)

/** CDP requests, one after another, over a fresh inspector connection (each answer's `result`). */
const cdp = (url: string, requests: ReadonlyArray<readonly [string, unknown]>) =>
  Effect.scoped(Effect.gen(function*() {
    const socket = yield* Socket.makeWebSocket(url)
    const write = yield* socket.writer
    const answers = yield* Effect.forEach(requests, () => Deferred.make<unknown>())
    yield* socket.runRaw((data) => {
      const msg = JSON.parse(typeof data === "string" ? data : new TextDecoder().decode(data)) as { id?: number; result?: unknown }
      const d = msg.id === undefined ? undefined : answers[msg.id]
      return d === undefined ? Effect.void : Deferred.succeed(d, msg.result)
    }).pipe(Effect.forkScoped)
    const out: Array<unknown> = []
    for (const [i, [method, params]] of requests.entries()) {
      yield* write(JSON.stringify({ id: i, method, params }))
      out.push(yield* Deferred.await(answers[i]!))
    }
    return out
  })).pipe(Effect.provide(NodeSocket.layerWebSocketConstructor), Effect.timeout("60 seconds"), Effect.runPromise)

export interface Held {
  /** The daemon's V8 heap in use after a full GC (bytes). */
  readonly heapUsed: number
  /** Its RSS once it stopped falling after that GC (bytes). */
  readonly rss: number
}

/** The memory the daemon `pid` (started with `inspectable`'s env and `port`) holds after a full GC. */
export const held = async (pid: number, port: number): Promise<Held> => {
  process.kill(pid, "SIGUSR1") // activates the inspector; again when active: no effect
  let targets: ReadonlyArray<{ readonly webSocketDebuggerUrl: string }> = []
  for (let i = 0; i < 100 && targets.length === 0; i++) {
    targets = await fetch(`http://127.0.0.1:${port}/json/list`).then((r) => r.json() as Promise<typeof targets>, () => [])
    if (targets.length === 0) await sleep(100)
  }
  if (targets.length === 0) throw new Error(`no inspector on port ${port} for pid ${pid}`)
  const [, , usage] = await cdp(targets[0]!.webSocketDebuggerUrl, [
    ["HeapProfiler.collectGarbage", {}],
    ["HeapProfiler.collectGarbage", {}],
    ["Runtime.evaluate", { expression: "process.memoryUsage().heapUsed", returnByValue: true }]
  ])
  const heapUsed = Number((usage as { result?: { value?: unknown } }).result?.value)
  // RSS falls for a while after a GC (pages returned); read it once it has not fallen for 1.5 s.
  let last = rssKb(pid)
  for (let i = 0, still = 0; i < 80 && still < 6; i++) {
    await sleep(250)
    const now = rssKb(pid)
    still = now < last ? 0 : still + 1
    last = Math.min(last, now)
  }
  return { heapUsed, rss: last * 1024 }
}
