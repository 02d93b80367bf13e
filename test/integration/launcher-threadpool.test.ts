// The daemon started through the package's bin (scripts/substrat.cjs) runs with 64 libuv pool
// threads (its appends' fsyncs are in flight together, docs/recovery.md "Cost"); an
// UV_THREADPOOL_SIZE the user set wins. Threads are counted in /proc/<pid>/task once the daemon
// listens (libuv starts its whole pool at the first pool call, long before that).
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const repo = join(import.meta.dirname, "..", "..")
const dir = makeTmpDir("substrat-launcher-pool-")
afterAll(() => removeDir(dir))

/** Start `daemon run` on a fresh home, wait for its socket, count its threads, stop it (by pid). */
const threadsOfDaemon = async (name: string, env: Record<string, string>): Promise<number> => {
  const home = join(dir, name)
  fs.mkdirSync(home, { recursive: true })
  const out = fs.openSync(join(dir, `${name}.log`), "w")
  const base: Record<string, string> = { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: dir, SUBSTRAT_HOME: home }
  const child = spawn(process.execPath, [join(repo, "scripts", "substrat.cjs"), "daemon", "run"], {
    env: { ...base, ...env },
    stdio: ["ignore", out, out]
  })
  fs.closeSync(out)
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  try {
    // Bounded poll for the socket (no time asserted: the bound only keeps a broken start from hanging).
    for (let i = 0; i < 1200 && !fs.existsSync(join(home, "daemon.sock")); i++) {
      if (child.exitCode !== null) break
      await new Promise((r) => setTimeout(r, 100))
    }
    if (!fs.existsSync(join(home, "daemon.sock"))) {
      throw new Error(`daemon did not listen:\n${fs.readFileSync(join(dir, `${name}.log`), "utf8")}`)
    }
    return fs.readdirSync(`/proc/${child.pid}/task`).length
  } finally {
    child.kill("SIGTERM")
    await exited
  }
}

describe("launcher: the daemon's thread pool", () => {
  it("daemon run gets 64 libuv pool threads; UV_THREADPOOL_SIZE set by the user wins", async () => {
    const big = await threadsOfDaemon("default", {})
    const small = await threadsOfDaemon("four", { UV_THREADPOOL_SIZE: "4" })
    expect(big - small).toBeGreaterThanOrEqual(60)
  }, 300_000)
})
