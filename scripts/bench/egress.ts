// The egress proxy (src/egress/) against a direct connection, same run, same local server
// (127.0.0.1, reached through the proxy under a name the resolver override maps to it):
//   request    median time of a small GET (1-byte body), direct vs through the proxy (plain HTTP,
//              a fresh connection each time, as a tool behind HTTP_PROXY makes them); the
//              difference is the proxy's overhead per request (policy read, resolve, connect, event)
//   download   a 50 MB body (quick: 10 MB) direct, through the proxy as plain HTTP, and through a
//              CONNECT tunnel; throughput in MB/s and the ratio to direct
// The proxy is measured from the host (its Unix socket), without a sandbox or the in-sandbox relay.
// The server and the client run in a child process of their own (as a registry and a tool in the
// sandbox do): this process does only the proxy's work, as the daemon would; direct, the same
// child talks to itself. Without that, all three would share one thread and the proxy's relay
// would be charged three times over.
import { NodeContext } from "@effect/platform-node"
import { Effect, Exit, Layer, ManagedRuntime, Scope } from "effect"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import { join } from "node:path"
import { SubstratPaths } from "../../src/config/Paths.js"
import { newAgentId, newSessionId } from "../../src/domain/ids.js"
import { Egress, layer as egressLayer } from "../../src/egress/Egress.js"
import * as Resolver from "../../src/egress/Resolver.js"
import { WorkspaceStore } from "../../src/sandbox/WorkspaceStore.js"
import { WorkspaceUsage } from "../../src/sandbox/WorkspaceUsage.js"
import { Durable } from "../../src/storage/Durable.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { makeTmpDir, removeDir } from "../../test/support/tmp.js"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "egress"

const HOST = "registry.bench-egress"

const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]!
}

/**
 * The far side, in its own process: an HTTP server whose `/blob/<n>` is n bytes, and a client
 * that GETs from it directly, through the proxy's socket (absolute-form request) or through a
 * CONNECT tunnel; each request's body length and time go back over IPC.
 */
const FAR_SIDE = `
const http = require("node:http"), net = require("node:net")
const HOST = process.argv[2]
const chunk = Buffer.alloc(64 * 1024, 120)
const server = http.createServer((req, res) => {
  let left = Number(req.url.split("/").pop())
  res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(left) })
  const more = () => {
    while (left > 0) {
      const b = left >= chunk.length ? chunk : chunk.subarray(0, left)
      left -= b.length
      if (!res.write(b)) return res.once("drain", more)
    }
    res.end()
  }
  more()
})
const get = (port, path, proxy) => new Promise((resolve, reject) => {
  const req = http.request(proxy === null
    ? { host: "127.0.0.1", port, path, agent: false }
    : { socketPath: proxy, path: "http://" + HOST + ":" + port + path, headers: { host: HOST + ":" + port }, agent: false },
  (res) => { let n = 0; res.on("data", (b) => (n += b.length)); res.on("end", () => resolve(n)); res.on("error", reject) })
  req.on("error", reject)
  req.end()
})
const tunnel = (port, path, proxy) => new Promise((resolve, reject) => {
  const s = net.connect(proxy)
  let n = 0, open = false, head = ""
  s.on("data", (b) => {
    if (!open) {
      head += b.toString("latin1")
      if (head.includes("\\r\\n\\r\\n")) { open = true; s.write("GET " + path + " HTTP/1.0\\r\\nHost: " + HOST + "\\r\\n\\r\\n") }
      return
    }
    n += b.length
  })
  s.on("end", () => resolve(n))
  s.on("error", reject)
  s.write("CONNECT " + HOST + ":" + port + " HTTP/1.1\\r\\nHost: " + HOST + "\\r\\n\\r\\n")
})
server.listen(0, "127.0.0.1", () => {
  const port = server.address().port
  process.send({ port })
  process.on("message", async (m) => {
    if (m === "exit") { server.close(); process.disconnect(); return }
    try {
      const t0 = performance.now()
      const n = m.tunnel ? await tunnel(port, m.path, m.proxy) : await get(port, m.path, m.proxy)
      process.send({ n, ms: performance.now() - t0 })
    } catch (e) { process.send({ error: String(e) }) }
  })
})
`

/** The far side's process: its server's port, and one request at a time (`ask`). */
const startFarSide = async (dir: string) => {
  const file = join(dir, "far-side.cjs")
  Fs.writeFileSync(file, FAR_SIDE)
  const child = ChildProcess.fork(file, [HOST], { stdio: ["ignore", "ignore", "inherit", "ipc"] })
  const port = await new Promise<number>((resolve, reject) => {
    child.once("message", (m) => resolve((m as { port: number }).port))
    child.once("error", reject)
  })
  const ask = (path: string, proxy: string | null, tunnel = false) =>
    new Promise<{ n: number; ms: number }>((resolve, reject) => {
      child.once("message", (m) => {
        const r = m as { n: number; ms: number } | { error: string }
        if ("error" in r) reject(new Error(r.error))
        else resolve(r)
      })
      child.send({ path, proxy, tunnel })
    })
  const close = () => new Promise<void>((resolve) => {
    child.once("exit", () => resolve())
    child.send("exit")
  })
  return { port, ask, close }
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const home = makeTmpDir("bench-egress-")
  const reg = await startFarSide(home)
  const base = Layer.mergeAll(Durable.layer, SubstratPaths.layer(home), NodeContext.layer, WorkspaceUsage.layerRegistry)
  const store = WorkspaceStore.Default.pipe(Layer.provide(base))
  const log = EventLog.layerFile.pipe(Layer.provide(base))
  const egress = egressLayer({ presets: {}, bytesPerTurn: 0, bytesPerDay: 0, maxConnections: 64 }).pipe(
    Layer.provide(Layer.mergeAll(store, log, Resolver.layerOverride({ [HOST]: "127.0.0.1" })))
  )
  const rt = ManagedRuntime.make(Layer.mergeAll(store, egress))
  const socketPath = join(home, "egress.sock")
  const scope = await rt.runPromise(Scope.make())
  try {
    await rt.runPromise(Effect.gen(function*() {
      const ws = yield* (yield* WorkspaceStore).create({ egress: { hosts: [`${HOST}:${reg.port}`], presets: [], table: {} } })
      yield* (yield* Egress).serveTurn({ session_id: newSessionId(), agent_id: newAgentId(), agent_name: "bench", workspace_id: ws.id, socketPath }).pipe(Scope.extend(scope))
    }))
    const rounds = opts.quick ? 50 : 300
    const direct: Array<number> = []
    const proxied: Array<number> = []
    for (let i = 0; i < rounds; i++) {
      // Alternate so drift in machine load lands on both.
      for (const via of i % 2 === 0 ? [null, socketPath] : [socketPath, null]) {
        const { ms } = await reg.ask("/blob/1", via)
        ;(via === null ? direct : proxied).push(ms)
      }
    }
    const size = (opts.quick ? 10 : 50) * 1024 * 1024
    const dl = async (label: string, f: () => Promise<{ n: number; ms: number }>) => {
      const { n, ms } = await f()
      if (n < size) throw new Error(`${label}: short body: ${n} of ${size}`)
      return size / 1024 / 1024 / (ms / 1000)
    }
    const runs = opts.quick ? 1 : 3
    const d: Array<number> = []
    const p: Array<number> = []
    const t: Array<number> = []
    for (let i = 0; i < runs; i++) {
      d.push(await dl("direct", () => reg.ask(`/blob/${size}`, null)))
      p.push(await dl("proxy", () => reg.ask(`/blob/${size}`, socketPath)))
      t.push(await dl("tunnel", () => reg.ask(`/blob/${size}`, socketPath, true)))
    }
    const md = median(direct)
    const mp = median(proxied)
    const rows = [
      { case: "small GET direct", ms: md },
      { case: "small GET via proxy", ms: mp },
      { case: `${size / 1024 / 1024} MB direct`, "MB/s": median(d) },
      { case: `${size / 1024 / 1024} MB via proxy (HTTP)`, "MB/s": median(p) },
      { case: `${size / 1024 / 1024} MB via proxy (CONNECT)`, "MB/s": median(t) }
    ]
    return {
      rows,
      summary: {
        request_direct_ms: md,
        request_proxy_ms: mp,
        request_overhead_ms: mp - md,
        download_mb: size / 1024 / 1024,
        download_direct_mb_s: median(d),
        download_proxy_http_mb_s: median(p),
        download_proxy_connect_mb_s: median(t),
        download_http_ratio: median(p) / median(d),
        download_connect_ratio: median(t) / median(d)
      }
    }
  } finally {
    await rt.runPromise(Scope.close(scope, Exit.void))
    await rt.dispose()
    await reg.close()
    removeDir(home)
  }
}
