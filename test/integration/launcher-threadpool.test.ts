// The daemon started through the package's bin (scripts/substrat.cjs) runs with 64 libuv pool
// threads (its appends' fsyncs are in flight together, docs/recovery.md "Cost"); an
// UV_THREADPOOL_SIZE the user set wins. Threads are counted in /proc/<pid>/task once the daemon
// listens (libuv starts its whole pool at the first pool call, long before that). The variable
// is the launcher's, not the user's: the daemon's children see the user's environment. Which of
// them gets the daemon's whole environment: `flock(1)` on the pid file at boot (and FileLimit's
// `prlimit`, when it runs); a `flock` first on PATH records what it was given, then runs the real one.
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const repo = join(import.meta.dirname, "..", "..")
const dir = makeTmpDir("substrat-launcher-pool-")
afterAll(() => removeDir(dir))

const bin = join(dir, "bin")
fs.mkdirSync(bin)
const realFlock = ["/usr/bin/flock", "/bin/flock"].find((f) => fs.existsSync(f)) ?? "flock"
fs.writeFileSync(
  join(bin, "flock"),
  `#!/bin/sh\nprintf '%s\\n' "\${UV_THREADPOOL_SIZE-unset}" >> "$FLOCK_SEEN"\nexec ${realFlock} "$@"\n`,
  { mode: 0o755 }
)

/**
 * Start `daemon run` on a fresh home, wait for its socket, count its threads, stop it (by pid);
 * and what the daemon's `flock` child saw of UV_THREADPOOL_SIZE.
 */
const threadsOfDaemon = async (name: string, env: Record<string, string>): Promise<{ threads: number; seen: string }> => {
  const home = join(dir, name)
  fs.mkdirSync(home, { recursive: true })
  const out = fs.openSync(join(dir, `${name}.log`), "w")
  const seen = join(dir, `${name}.seen`)
  const base: Record<string, string> = {
    PATH: `${bin}:${process.env["PATH"] ?? "/usr/bin:/bin"}`,
    HOME: dir,
    SUBSTRAT_HOME: home,
    FLOCK_SEEN: seen
  }
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
    const threads = fs.readdirSync(`/proc/${child.pid}/task`).length
    return { threads, seen: fs.readFileSync(seen, "utf8") }
  } finally {
    child.kill("SIGTERM")
    await exited
  }
}

describe("launcher: the daemon's thread pool", () => {
  it("daemon run gets 64 libuv pool threads; UV_THREADPOOL_SIZE set by the user wins; children see the user's environment", async () => {
    const big = await threadsOfDaemon("default", {})
    const small = await threadsOfDaemon("four", { UV_THREADPOOL_SIZE: "4" })
    expect(big.threads - small.threads).toBeGreaterThanOrEqual(60)
    // One line per flock(1) the daemon ran: none of them saw the launcher's 64.
    expect(big.seen).toMatch(/^(unset\n)+$/)
    expect(small.seen).toMatch(/^(4\n)+$/)
  }, 300_000)
})
