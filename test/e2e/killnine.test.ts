// kill -9 under load: concurrent `substrat agent send`s through the real CLI while the daemon is
// SIGKILLed at (seeded) random moments, several times; after each kill the daemon is started
// again. Then: every send the CLI saw acknowledged is in the recipient's event log, every log
// repairs to a fully decodable file, every session record decodes, every agent's creation is
// logged, and the restarted daemon's tree (rebuilt by start-up recovery) holds every root.
import { Effect, Layer, Schema, Stream } from "effect"
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { SubstratPaths } from "../../src/config/Paths.js"
import type { SessionId } from "../../src/domain/ids.js"
import { Session } from "../../src/domain/session.js"
import { Durable } from "../../src/storage/Durable.js"
import { EventLog } from "../../src/storage/EventLog.js"
import { type Agent, cli, cliJson, daemons, isAlive, sleep, startDaemon, waitFor } from "../integration/daemon.support.js"
import { fuzzProfile, prng } from "../support/fuzz.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const rounds = fuzzProfile.name === "nightly" ? 10 : 3
const workers = 4

const owned = daemons()
const dir = makeTmpDir("substrat-kill9-")
const home = join(dir, "home")

afterAll(async () => {
  await owned.killAll()
  removeDir(dir)
})

interface Ack {
  readonly message_id: string
  readonly session: string
  readonly text: string
}

describe("kill -9 under a load of concurrent CLI sends", () => {
  it(`${rounds} SIGKILLs at random moments lose no acknowledged send and corrupt no log`, async () => {
    const random = prng(fuzzProfile.name === "nightly" ? Date.now() : 0x9e37)
    const acked: Array<Ack> = []
    const sinks: Array<Agent> = []
    let attempted = 0
    let failed = 0
    const unexpected: Array<string> = []

    for (let round = 0; round < rounds; round++) {
      const pid = await startDaemon(home)
      owned.track(pid)
      const sink = await cliJson<Agent>(home, ["agent", "create", "--name", `sink${round}`, "--provider", "scripted"])
      sinks.push(sink)
      let stop = false
      const load = Array.from({ length: workers }, async (_, w) => {
        for (let i = 0; !stop; i++) {
          const text = `r${round}-w${w}-m${i}`
          attempted++
          // Half the workers send requests (each wakes the agent: a turn, a reply), half notifications.
          const r = await cli(home, ["agent", "send", sink.id, text, "--json", ...(w % 2 === 0 ? [] : ["--notify"])])
          if (r.code === 0) {
            const { message_id } = JSON.parse(r.stdout) as { message_id: string }
            acked.push({ message_id, session: sink.session_id, text })
          } else {
            failed++
            // The only acceptable failure: the daemon went away (exit 3).
            if (r.code !== 3) unexpected.push(`${r.code}: ${r.stderr}`)
          }
        }
      })
      // Let some sends land, then kill at a random moment.
      await waitFor("first acks", () => (acked.some((a) => a.session === sink.session_id) ? true : undefined), 60_000)
      await sleep(300 + Math.floor(random() * 2000))
      process.kill(pid, "SIGKILL")
      await waitFor("daemon dead", () => (isAlive(pid) ? undefined : true))
      await sleep(200)
      stop = true
      await Promise.all(load)
      // What SIGKILL leaves behind: the pid file and the socket file; the next start removes both.
      expect(fs.existsSync(join(home, "daemon.pid"))).toBe(true)
    }

    // A final clean start + stop (the last start is also what repairs nothing by itself).
    owned.track(await startDaemon(home))
    const listed = await cliJson<{ sessions: ReadonlyArray<{ id: string; state: string; agent_name: string | null }> }>(home, ["session", "list"])
    expect(listed.sessions.map((s) => s.agent_name).sort()).toEqual(sinks.map((s) => s.name).sort())
    const tree = await cliJson<{ agents: ReadonlyArray<Agent> }>(home, ["agent", "list"])
    expect(tree.agents.map((a) => [a.id, a.session_id]).sort()).toEqual(sinks.map((a) => [a.id, a.session_id]).sort())
    await cliJson(home, ["daemon", "stop"])

    expect(unexpected).toEqual([])
    expect(acked.length).toBeGreaterThan(0)
    expect(attempted).toBeGreaterThan(acked.length - 1)

    // The event log guarantees, checked through its own file layer (repair, then decode all).
    const check = Effect.gen(function*() {
      const log = yield* EventLog
      const result = new Map<string, { readonly enqueued: ReadonlySet<string>; readonly created: boolean; readonly truncated: number }>()
      for (const s of sinks) {
        const sid = s.session_id as SessionId
        const report = yield* log.repair(sid)
        const entries = [...yield* Stream.runCollect(log.read(sid))]
        result.set(s.session_id, {
          enqueued: new Set(entries.flatMap((e) => (e.event === "message.enqueued" ? [e.data.id] : []))),
          created: entries.some((e) => e.event === "agent.created" && e.data.agent_id === s.id),
          truncated: report.truncatedBytes
        })
      }
      return result
    }).pipe(
      Effect.provide(EventLog.layerFile.pipe(Layer.provide(Layer.mergeAll(Durable.layer, SubstratPaths.layer(home))))),
      Effect.scoped
    )
    const logs = await Effect.runPromise(check)
    const lost = acked.filter((a) => !logs.get(a.session)!.enqueued.has(a.message_id))
    expect(lost, `lost ${lost.length} of ${acked.length} acknowledged sends`).toEqual([])
    for (const s of sinks) expect(logs.get(s.session_id)!.created, `${s.name} agent.created`).toBe(true)

    // After repair every line of every log is a complete JSON entry; every record decodes.
    for (const s of sinks) {
      const text = fs.readFileSync(join(home, "agents", s.session_id, "events.jsonl"), "utf8")
      expect(text.endsWith("\n")).toBe(true)
      for (const line of text.trimEnd().split("\n")) expect(() => JSON.parse(line)).not.toThrow()
      const record = fs.readFileSync(join(home, "agents", s.session_id, "session.json"), "utf8")
      expect(() => Schema.decodeUnknownSync(Schema.parseJson(Session))(record)).not.toThrow()
    }
    console.log(`kill -9: ${rounds} rounds, ${attempted} sends attempted, ${acked.length} acknowledged (all found), ${failed} refused while down`)
  })
})
