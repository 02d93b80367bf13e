// Attacks on the quota surface, replayed by `npm run chaos -- --only security`.
import * as fs from "node:fs"
import { join } from "node:path"
import { type Agent, cliJson, daemons, startDaemon, waitFor } from "../../test/integration/daemon.support.js"
import { lostAfterRestart, mountTmpfs, outrunDisk, unmount } from "../../test/e2e/disk-outrun.support.js"
import { makeTmpDir, removeDir } from "../../test/support/tmp.js"
import type { Attack } from "./attack.js"

/** 22.12: fill the disk faster than the free-space floor is probed; breached if the daemon dies, stays silent or loses an ack. */
const diskOutrun: Attack = {
  name: "22.12 disk filled faster than the floor",
  rootOnly: true,
  run: async () => {
    const owned = daemons()
    const dir = makeTmpDir("substrat-sec-outrun-")
    const mnt = join(dir, "mnt")
    if (!mountTmpfs(mnt, "2m")) throw new Error("cannot mount a tmpfs")
    try {
      const run = await outrunDisk(mnt, owned.track)
      const log = run.status?.storage?.log_error ?? null
      const lost = await lostAfterRestart(mnt, run, owned.track)
      return {
        breached: !run.alive || run.status?.storage?.mode !== "read-only" || log === null || lost.length > 0,
        detail: `${run.acked.length} acked, ${run.refused} refused; daemon ${run.alive ? "alive" : "DEAD"}, storage ${
          run.status?.storage?.mode ?? "?"
        }, daemon.log: ${log ?? "no reason reported"}; after a restart on a bigger disk ${lost.length} acked message(s) lost`
      }
    } finally {
      await owned.killAll()
      unmount(mnt)
      removeDir(dir)
    }
  }
}

/** The log lines of a session, parsed. */
const eventsOf = (home: string, session: string): ReadonlyArray<{ readonly event: string }> =>
  fs.readFileSync(join(home, "agents", session, "events.jsonl"), "utf8").split("\n").filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as { event: string })

/**
 * 22.10: one scripted agent, with the daemon's default quotas, floods in one turn: 300
 * `send_message`s of 120 KiB (its prompt, `{{prompt}}`) to USER, 300 `ask_human`s, 100 `spawn_agent`s. Breached if more get
 * through than the defaults allow, or if the agent is not parked with a `quota` inbox item.
 */
const flood: Attack = {
  name: "22.10 an agent floods its tools",
  run: async () => {
    const owned = daemons()
    const dir = makeTmpDir("substrat-sec-quota-")
    const home = join(dir, "home")
    try {
      fs.mkdirSync(join(home, "scripts"), { recursive: true })
      const times = <A>(n: number, f: (i: number) => A) => Array.from({ length: n }, (_, i) => f(i))
      const tools = [
        ...times(300, () => ({ tool: "send_message", args: { recipient: "USER", text: "{{prompt}}", sync: false } })),
        ...times(300, () => ({ tool: "ask_human", args: { question: "may I?" } })),
        ...times(100, (i) => ({ tool: "spawn_agent", args: { name: `k${i}`, instructions: "x" } }))
      ]
      fs.writeFileSync(join(home, "scripts", "flood.json"), JSON.stringify({ flood: { steps: [{ tools, text: "done" }] } }))
      owned.track(await startDaemon(home))
      const a = await cliJson<Agent>(home, ["agent", "create", "--name", "flood", "--provider", "scripted:flood"])
      await cliJson(home, ["agent", "send", "flood", "x".repeat(120 * 1024), "--notify"])
      await waitFor("the flood's turn", () => (eventsOf(home, a.session_id).some((e) => e.event === "turn.complete" || e.event === "provider.error") ? true : undefined), 120_000)
      const log = eventsOf(home, a.session_id)
      const count = (event: string) => log.filter((e) => e.event === event).length
      const toUser = count("message.enqueued") - 1 // the "go" it got
      const asked = count("human.asked")
      const spawned = (await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])).agents.length - 1
      const inbox = await cliJson<{ items: ReadonlyArray<{ kind: string; agent_name: string }> }>(home, ["inbox"])
      const parked = inbox.items.some((i) => i.kind === "quota" && i.agent_name === "flood")
      const logBytes = fs.statSync(join(home, "agents", a.session_id, "events.jsonl")).size
      await cliJson(home, ["daemon", "stop"])
      return {
        breached: toUser > 120 || asked > 5 || spawned > 30 || !parked,
        detail: `of 300 messages of 120 KiB ${toUser} sent, of 300 ask_human ${asked} asked, of 100 spawns ${spawned} made; ${
          parked ? "parked with a quota inbox item" : "NOT parked"
        }; its log ${Math.round(logBytes / 1024 / 1024)} MiB`
      }
    } finally {
      await owned.killAll()
      removeDir(dir)
    }
  }
}

export const attacks: ReadonlyArray<Attack> = [flood, diskOutrun]
