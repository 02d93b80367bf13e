// Attacks on the http surface, replayed by `npm run chaos -- --only security`: each against a real
// daemon (`daemon start --http 127.0.0.1:0`) in its own temporary home, raw TCP on 127.0.0.1,
// bounded in count and size.
import * as fs from "node:fs"
import * as net from "node:net"
import { join } from "node:path"
import { cliJson, daemons, waitFor } from "../../test/integration/daemon.support.js"
import { rawHttp, streamBody } from "../../test/integration/raw-http.support.js"
import { makeTmpDir, removeDir } from "../../test/support/tmp.js"
import type { Attack, AttackResult } from "./attack.js"

interface Target {
  readonly home: string
  readonly pid: number
  readonly port: number
  readonly token: string
}

/** Run `f` against a fresh daemon with a TCP listener and a `lead` agent; the daemon is killed after. */
const withDaemon = async (f: (t: Target) => Promise<AttackResult>): Promise<AttackResult> => {
  const dir = makeTmpDir("substrat-chaos-http-")
  const home = join(dir, "home")
  const owned = daemons()
  try {
    const { pid } = await cliJson<{ pid: number }>(home, ["daemon", "start", "--http", "127.0.0.1:0"])
    owned.track(pid)
    const port = Number(new URL(fs.readFileSync(join(home, "http.url"), "utf8").trim()).port)
    const token = fs.readFileSync(join(home, "http.token"), "utf8").trim()
    await cliJson(home, ["agent", "create", "--name", "lead", "--provider", "scripted:echo"])
    return await f({ home, pid, port, token })
  } finally {
    await owned.killAll()
    removeDir(dir)
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const rss = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) * 1024

const MiB = 1024 * 1024

const families: ReadonlyArray<readonly [string, string, string | undefined]> = [
  ["GET", "/v1/agents", undefined],
  ["GET", "/v1/agents/lead/inspect", undefined],
  ["GET", "/v1/events", undefined],
  ["GET", "/v1/inbox", undefined],
  ["POST", "/v1/agents", JSON.stringify({ name: "intruder", provider: "scripted:echo" })],
  ["POST", "/v1/agents/lead/messages", JSON.stringify({ text: "pwned" })],
  ["DELETE", "/v1/agents/lead", undefined],
  ["POST", "/swarm/start", JSON.stringify({ path: "/", provider: "scripted:echo" })]
]

const spellings = (p: string) => {
  const depth = p.split("/").length - 1
  return [`${p};/${"../".repeat(depth)}`, `${p};`, `/x/..${p}`, `/${p}`, `${p}/%2e%2e/`, p.replace("/", "%2f"), p.toUpperCase(), p]
}

export const attacks: ReadonlyArray<Attack> = [
  {
    name: "22.1 token bypass by path spelling (8 route families × 8 spellings, no token)",
    run: () =>
      withDaemon(async (t) => {
        const through: Array<string> = []
        const statuses = new Map<number, number>()
        for (const [method, path, body] of families) {
          for (const target of spellings(path)) {
            const r = await rawHttp(t.port, method, target, { ...(body === undefined ? {} : { body }), timeoutMs: 3_000 })
            statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1)
            if (r.status >= 200 && r.status < 300) through.push(`${method} ${target} → ${r.status}`)
          }
        }
        const agents = await cliJson<{ agents: ReadonlyArray<{ name: string }> }>(t.home, ["agent", "list"])
        const names = agents.agents.map((a) => a.name).join(",")
        return {
          breached: through.length > 0 || names !== "lead",
          detail: `statuses ${JSON.stringify(Object.fromEntries(statuses))}; agents after: ${names}${through.length > 0 ? `; through: ${through.join(", ")}` : ""}`
        }
      })
  },
  {
    name: "22.5 one request kills the daemon (600 MiB generated body, 64 MiB refused body, depth bomb)",
    run: () =>
      withDaemon(async (t) => {
        const before = rss(t.pid)
        const big = await streamBody(t.port, "/v1/agents", { token: t.token, totalBytes: 600 * MiB, chunked: true })
        const declared = await streamBody(t.port, "/v1/agents", { token: t.token, totalBytes: 600 * MiB, chunked: false })
        const grown = rss(t.pid) - before
        const echo = await rawHttp(t.port, "POST", "/v1/agents/lead/messages", { token: t.token, body: JSON.stringify({ text: { x: "E".repeat(64 * MiB) } }) })
        const n = 100_000
        const bomb = await rawHttp(t.port, "POST", "/v1/agents", { token: t.token, body: `{"name":${"[".repeat(n)}${"]".repeat(n)}}` })
        const up = alive(t.pid)
        return {
          breached: !up || big.status !== 413 || declared.status !== 413 || grown > 64 * MiB || echo.bytes > 2048 || bomb.status !== 400,
          detail:
            `600 MiB chunked → ${big.status} after ${Math.round(big.sent / MiB)} MiB sent; declared → ${declared.status} after ${
              Math.round(declared.sent / MiB)
            } MiB; RSS +${Math.round(grown / MiB)} MiB; 64 MiB refused body → ${echo.status}, reply ${echo.bytes} B; depth bomb → ${bomb.status}; daemon ${
              up ? "up" : "DEAD"
            }`
        }
      })
  },
  {
    name: "22.9 local lock-out (3,000 token-less connections)",
    run: () =>
      withDaemon(async (t) => {
        const sockets: Array<net.Socket> = []
        let closed = 0
        try {
          for (let batch = 0; batch < 15; batch++) {
            await Promise.all(Array.from({ length: 200 }, () =>
              new Promise<void>((resolve) => {
                const s = net.connect({ host: "127.0.0.1", port: t.port })
                sockets.push(s)
                s.on("close", () => closed++)
                s.on("error", () => {})
                s.once("connect", () => resolve())
                s.once("error", () => resolve())
              })))
          }
          await waitFor("evictions", () => (closed >= 3_000 - 64 ? true : undefined), 30_000).catch(() => undefined)
          const held = 3_000 - closed
          const fds = fs.readdirSync(`/proc/${t.pid}/fd`).length
          const status = await cliJson<{ pid: number }>(t.home, ["daemon", "status"]).then((s) => s.pid === t.pid, () => false)
          const http = await rawHttp(t.port, "GET", "/v1/daemon", { token: t.token, timeoutMs: 10_000 })
          return {
            breached: !status || http.status !== 200 || held > 64,
            detail: `connections the daemon kept: ${held}; its open files: ${fds}; daemon status ${status ? "ok" : "FAILED"}; authorised GET /v1/daemon → ${http.status}`
          }
        } finally {
          for (const s of sockets) s.destroy()
        }
      })
  }
]
