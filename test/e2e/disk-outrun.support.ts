// A disk that fills faster than the daemon's free-space floor is checked (docs/reliability.md,
// "A full disk"): $SUBSTRAT_HOME on a 2 MiB tmpfs with the floor off (SUBSTRAT_MIN_FREE_BYTES=0),
// a 400 KB filler, then up to 3,000 `agent.send`s over the admin socket — half of them sync
// requests of 3 KB — to a `scripted:echo` agent whose turns write to the same disk. Used by
// test/e2e/disk-full-outrun.test.ts and the `security` chaos experiment. Needs root (mount).
import * as Child from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { type Agent, answers, cli, cliJson, isAlive, kill9, rawConnection, sleep, startDaemon, waitFor } from "../integration/daemon.support.js"

export interface OutrunStatus {
  readonly pid: number
  readonly storage?: {
    readonly mode: string
    readonly reason: string | null
    readonly log_error?: string | null
  }
}

export interface Outrun {
  readonly home: string
  readonly pid: number
  readonly session: string
  readonly acked: ReadonlyArray<string>
  readonly refused: number
  /** alive after the sends and after the turns they queued had time to fail */
  readonly alive: boolean
  readonly status: OutrunStatus | null
}

/** Mount a tmpfs of `size` at `mnt` (root only); false when it cannot. */
export const mountTmpfs = (mnt: string, size: string): boolean => {
  fs.mkdirSync(mnt, { recursive: true })
  return Child.spawnSync("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", mnt]).status === 0
}
export const unmount = (mnt: string): void => void Child.spawnSync("umount", ["-l", mnt])
/** Grow the tmpfs at `mnt` in place ("a bigger disk", same files). */
export const growTmpfs = (mnt: string, size: string): boolean =>
  Child.spawnSync("mount", ["-o", `remount,size=${size}`, mnt]).status === 0

/** The ids of every `message.enqueued` in a session's log. */
export const loggedMessageIds = (home: string, session: string): Set<string> => {
  const text = fs.readFileSync(join(home, "agents", session, "events.jsonl"), "utf8")
  return new Set(
    text.split("\n").filter((l) => l.trim() !== "").flatMap((l) => {
      try {
        const e = JSON.parse(l) as { event: string; data: { id?: string } }
        return e.event === "message.enqueued" && e.data.id !== undefined ? [e.data.id] : []
      } catch {
        return [] // a torn last line (repaired at the next start)
      }
    })
  )
}

/** Run the reproduction in `mnt` (already a 2 MiB tmpfs). The daemon it starts is returned (pid) for the caller to stop. */
export const outrunDisk = async (mnt: string, track: (pid: number) => void): Promise<Outrun> => {
  const home = join(mnt, "home")
  const saved = process.env["SUBSTRAT_MIN_FREE_BYTES"]
  process.env["SUBSTRAT_MIN_FREE_BYTES"] = "0"
  try {
    const pid = await startDaemon(home)
    track(pid)
    const agent = await cliJson<Agent>(home, ["agent", "create", "--name", "echo", "--provider", "scripted:echo"])
    fs.writeFileSync(join(mnt, "filler"), Buffer.alloc(400 * 1000))
    const acked: Array<string> = []
    let refused = 0
    const c = await rawConnection(join(home, "daemon.sock"))
    const body = "x".repeat(3000)
    for (let i = 0; i < 3000 && !c.closed() && isAlive(pid); i++) {
      const params = { agent: agent.id, text: `m${i} ${body}`, sync: i % 2 === 0 }
      c.write(JSON.stringify({ jsonrpc: "2.0", id: i, method: "agent.send", params }) + "\n")
      const line = await c.next(30_000).catch(() => null)
      if (line === null) break
      const reply = JSON.parse(line) as { result?: { message_id: string } }
      if (reply.result !== undefined) acked.push(reply.result.message_id)
      else refused++
      // Read-only and refusing everything: the rest would be refused the same way.
      if (refused >= 200) break
    }
    c.close()
    // The turns the acknowledged messages queued run (or fail) after the sends; give them
    // two free-space probes' time, then look.
    for (let i = 0; i < 10 && isAlive(pid); i++) await sleep(500)
    const alive = isAlive(pid)
    const st = alive ? await cli(home, ["daemon", "status", "--json"]) : null
    const status = st !== null && st.code === 0 ? (JSON.parse(st.stdout) as OutrunStatus) : null
    return { home, pid, session: agent.session_id, acked, refused, alive, status }
  } finally {
    if (saved === undefined) delete process.env["SUBSTRAT_MIN_FREE_BYTES"]
    else process.env["SUBSTRAT_MIN_FREE_BYTES"] = saved
  }
}

/** After `outrunDisk`: kill the daemon, grow the disk, start again; the acked ids not in the log. */
export const lostAfterRestart = async (mnt: string, run: Outrun, track: (pid: number) => void): Promise<ReadonlyArray<string>> => {
  if (isAlive(run.pid)) await kill9(run.pid)
  if (!growTmpfs(mnt, "64m")) throw new Error(`cannot grow the tmpfs at ${mnt}`)
  const pid = await startDaemon(run.home)
  track(pid)
  await waitFor("daemon answers", () => answers(run.home))
  const logged = loggedMessageIds(run.home, run.session)
  await cli(run.home, ["daemon", "stop"])
  await waitFor("daemon stopped", () => (isAlive(pid) ? undefined : true))
  return run.acked.filter((id) => !logged.has(id))
}
