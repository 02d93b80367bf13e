// The egress proxy (src/egress/) against a direct connection, same run, same local server
// (127.0.0.1, reached through the proxy under a name the resolver override maps to it):
//   request    median time of a small GET (1-byte body), direct vs through the proxy (plain HTTP,
//              a fresh connection each time, as a tool behind HTTP_PROXY makes them); the
//              difference is the proxy's overhead per request (policy read, resolve, connect, event)
//   download   a 50 MB body (quick: 10 MB) direct, through the proxy as plain HTTP, and through a
//              CONNECT tunnel; throughput in MB/s and the ratio to direct
// The proxy is measured from the host (its Unix socket), without a sandbox or the in-sandbox relay.
import { NodeContext } from "@effect/platform-node"
import { Effect, Exit, Layer, ManagedRuntime, Scope } from "effect"
import * as Http from "node:http"
import * as Net from "node:net"
import { join } from "node:path"
import { SubstratPaths } from "../../src/config/Paths.js"
import { newAgentId, newSessionId } from "../../src/domain/ids.js"
import { Egress, layer as egressLayer } from "../../src/egress/Egress.js"
import * as Resolver from "../../src/egress/Resolver.js"
import { WorkspaceStore } from "../../src/sandbox/WorkspaceStore.js"
import { WorkspaceUsage } from "../../src/sandbox/WorkspaceUsage.js"
import { Durable } from "../../src/storage/Durable.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { startFakeRegistry } from "../../test/support/fakeRegistry.js"
import { makeTmpDir, removeDir } from "../../test/support/tmp.js"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "egress"

const HOST = "registry.bench-egress"

const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]!
}

/** GET `path`, directly or through the proxy socket; resolves with the body length once read. */
const get = (port: number, path: string, proxy: string | null): Promise<number> =>
  new Promise((resolve, reject) => {
    const req = Http.request(
      proxy === null
        ? { host: "127.0.0.1", port, path, agent: false }
        : { socketPath: proxy, path: `http://${HOST}:${port}${path}`, headers: { host: `${HOST}:${port}` }, agent: false },
      (res) => {
        let n = 0
        res.on("data", (b: Buffer) => (n += b.length))
        res.on("end", () => resolve(n))
        res.on("error", reject)
      }
    )
    req.on("error", reject)
    req.end()
  })

/** GET through a CONNECT tunnel (raw HTTP/1.0 inside it); the bytes received. */
const viaTunnel = (port: number, path: string, proxy: string): Promise<number> =>
  new Promise((resolve, reject) => {
    const s = Net.connect(proxy)
    let n = 0
    let open = false
    let head = ""
    s.on("data", (b: Buffer) => {
      if (!open) {
        head += b.toString("latin1")
        if (head.includes("\r\n\r\n")) {
          open = true
          s.write(`GET ${path} HTTP/1.0\r\nHost: ${HOST}\r\n\r\n`)
        }
        return
      }
      n += b.length
    })
    s.on("end", () => resolve(n))
    s.on("error", reject)
    s.write(`CONNECT ${HOST}:${port} HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`)
  })

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const home = makeTmpDir("bench-egress-")
  const reg = await startFakeRegistry(home, HOST, HOST)
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
        const t0 = performance.now()
        await get(reg.port, "/blob/1", via)
        ;(via === null ? direct : proxied).push(performance.now() - t0)
      }
    }
    const size = (opts.quick ? 10 : 50) * 1024 * 1024
    const dl = async (label: string, f: () => Promise<number>) => {
      const t0 = performance.now()
      const n = await f()
      if (n < size) throw new Error(`${label}: short body: ${n} of ${size}`)
      return size / 1024 / 1024 / ((performance.now() - t0) / 1000)
    }
    const runs = opts.quick ? 1 : 3
    const d: Array<number> = []
    const p: Array<number> = []
    const t: Array<number> = []
    for (let i = 0; i < runs; i++) {
      d.push(await dl("direct", () => get(reg.port, `/blob/${size}`, null)))
      p.push(await dl("proxy", () => get(reg.port, `/blob/${size}`, socketPath)))
      t.push(await dl("tunnel", () => viaTunnel(reg.port, `/blob/${size}`, socketPath)))
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
