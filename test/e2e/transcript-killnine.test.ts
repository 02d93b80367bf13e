// Transcripts after kill -9: the event log is the source of truth and transcript.txt is derived
// from it, so a daemon that finds the last one died (the `transcripts.dirty` marker) regenerates
// every transcript from the logs. Here: a demo team plus a sink agent under concurrent CLI sends,
// SIGKILL at a (seeded) random moment, the transcripts further damaged while the daemon is down
// (lines cut, a file removed, a torn line appended — what a kill between the log append and the
// transcript append leaves, and worse), restart: every transcript holds exactly the lines its
// log entries imply (an independent count), every acknowledged send included; and a clean stop
// removes the marker.
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type Agent, cli, cliJson, daemons, isAlive, sleep, startDaemon, waitFor, waitQuiet } from "../integration/daemon.support.js"
import { fuzzProfile, prng } from "../support/fuzz.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const rounds = fuzzProfile.name === "nightly" ? 5 : 2
const workers = 3

const owned = daemons()
const dir = makeTmpDir("substrat-transcript9-")
const home = join(dir, "home")
const marker = join(home, "transcripts.dirty")

afterAll(async () => {
  await owned.killAll()
  removeDir(dir)
})

interface Entry {
  readonly event: string
  readonly session_id: string
  readonly data: Record<string, unknown>
}

const sessionsDir = join(home, "agents")
const readLog = (sid: string): ReadonlyArray<Entry> => {
  const text = fs.readFileSync(join(sessionsDir, sid, "events.jsonl"), "utf8")
  return text.split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l) as Entry)
}
const transcript = (sid: string): ReadonlyArray<string> => {
  const f = join(sessionsDir, sid, "transcript.txt")
  return fs.existsSync(f) ? fs.readFileSync(f, "utf8").split("\n").filter((l, i, all) => !(i === all.length - 1 && l === "")) : []
}

/**
 * How many transcript lines each session should have, counted from the logs (independently of
 * the daemon's code): its own created/terminated/provider.error/message.enqueued entries and
 * provider tool calls (invoked, result), plus one per message enqueued in another session's log
 * by an agent of this session.
 */
const expectedCounts = (): Map<string, number> => {
  const sids = fs.readdirSync(sessionsDir).filter((d) => fs.existsSync(join(sessionsDir, d, "events.jsonl")))
  const logs = new Map(sids.map((s) => [s, readLog(s)] as const))
  const sessionOfAgent = new Map<string, string>()
  for (const [sid, entries] of logs) {
    for (const e of entries) if (e.event === "agent.created") sessionOfAgent.set(String(e.data["agent_id"]), sid)
  }
  const counts = new Map<string, number>(sids.map((s) => [s, 0]))
  const bump = (s: string) => counts.set(s, (counts.get(s) ?? 0) + 1)
  for (const [sid, entries] of logs) {
    for (const e of entries) {
      if (["agent.created", "agent.terminated", "provider.error"].includes(e.event)) bump(sid)
      if (e.event.startsWith("tool_call.") && e.data["source"] === "provider") bump(sid)
      if (e.event === "message.enqueued") {
        bump(sid)
        const from = sessionOfAgent.get(String(e.data["sender"]))
        if (from !== undefined && from !== sid) bump(from)
      }
    }
  }
  return counts
}

/** A provider tool call (invoked, result) appended to a session's log, whose last line is whole. */
const appendToolCall = (sid: string) => {
  const file = join(sessionsDir, sid, "events.jsonl")
  expect(fs.readFileSync(file, "utf8").endsWith("\n")).toBe(true)
  const ts = new Date().toISOString()
  const entry = (event: string, data: Record<string, unknown>) => JSON.stringify({ event, data, ts, session_id: sid }) + "\n"
  fs.appendFileSync(file, [
    entry("tool_call.invoked", { call_id: "toolu_killnine", tool: "Write", arguments: { file_path: "PLAN.md", content: "parser first" }, source: "provider" }),
    entry("tool_call.result", { call_id: "toolu_killnine", tool: "Write", result: "File created successfully at: PLAN.md", is_error: false, source: "provider" })
  ].join(""))
}

describe("transcripts after kill -9", () => {
  it(`${rounds} SIGKILLs under load + damaged transcripts: regenerated complete from the event logs`, async () => {
    const random = prng(fuzzProfile.name === "nightly" ? Date.now() : 0x7a11)
    owned.track(await startDaemon(home))
    expect(fs.existsSync(marker)).toBe(true)
    const lead = await cliJson<Agent>(home, ["agent", "create", "--name", "lead", "--provider", "scripted:demo"])
    await cliJson(home, ["agent", "send", "lead", "Plan the project"])
    const team = await waitQuiet(home)
    const sid = (name: string) => team.find((a) => a.name === name)!.session_id
    const acked: Array<{ readonly session: string; readonly line: RegExp }> = []
    let pid = (await cliJson<{ pid: number }>(home, ["daemon", "status"])).pid

    for (let round = 0; round < rounds; round++) {
      const sink = await cliJson<Agent>(home, ["agent", "create", "--name", `sink${round}`, "--provider", "scripted"])
      let stop = false
      const load = Array.from({ length: workers }, async (_, w) => {
        for (let i = 0; !stop; i++) {
          const text = `r${round}-w${w}-m${i}`
          const r = await cli(home, ["agent", "send", sink.id, text, "--json", ...(w === 0 ? [] : ["--notify"])])
          if (r.code === 0) acked.push({ session: sink.session_id, line: new RegExp(`^\\[\\d\\d:\\d\\d:\\d\\d\\] USER → sink${round}: ${text}$`) })
          else expect(r.code, r.stderr).toBe(3)
        }
      })
      await waitFor("first acks", () => (acked.some((a) => a.session === sink.session_id) ? true : undefined), 60_000)
      await sleep(200 + Math.floor(random() * 1500))
      process.kill(pid, "SIGKILL")
      await waitFor("daemon dead", () => (isAlive(pid) ? undefined : true))
      stop = true
      await Promise.all(load)
      expect(fs.existsSync(marker)).toBe(true)

      // Damage while the daemon is down.
      const cut = (s: string, keep: number) => {
        const lines = transcript(s)
        fs.writeFileSync(join(sessionsDir, s, "transcript.txt"), lines.slice(0, keep).map((l) => l + "\n").join(""))
      }
      cut(sink.session_id, 2)
      cut(sid("alice"), Math.max(0, transcript(sid("alice")).length - 1))
      fs.rmSync(join(sessionsDir, lead.session_id, "transcript.txt"), { force: true })
      // The provider's own tool calls (a claude Write, as its provider logs them) in lead's log,
      // quiet since before the kill: the regenerated transcript shows them.
      if (round === 0) appendToolCall(lead.session_id)
      fs.appendFileSync(join(sessionsDir, sid("bob"), "transcript.txt"), "[00:00:00] torn line without its end")

      pid = await startDaemon(home)
      owned.track(pid)
      await waitQuiet(home)
      expect(fs.readFileSync(join(home, "daemon.log"), "utf8")).toMatch(/transcripts: the last daemon did not stop cleanly; regenerated/)

      const want = expectedCounts()
      for (const [s, n] of want) expect(transcript(s).length, `lines of ${s}`).toBe(n)
    }

    // Every acknowledged send is in its recipient's transcript, exactly once.
    for (const a of acked) expect(transcript(a.session).filter((l) => a.line.test(l)), String(a.line)).toHaveLength(1)
    // The demo team's conversation, on both sides.
    expect(transcript(lead.session_id)).toEqual(expect.arrayContaining([
      expect.stringMatching(/USER → lead: Plan the project$/),
      expect.stringMatching(/lead → alice: What should we build first\?$/),
      expect.stringMatching(/alice → lead: Build the parser first\.$/)
    ]))
    expect(transcript(sid("alice"))).toEqual(expect.arrayContaining([
      expect.stringMatching(/lead → alice: What should we build first\?$/),
      expect.stringMatching(/alice → bob: alice here: I am starting on the parser\.$/)
    ]))
    expect(transcript(sid("bob")).some((l) => l.includes("torn line"))).toBe(false)
    // The provider's tool call, invoked and answered, rebuilt into lead's transcript.
    expect(transcript(lead.session_id).filter((l) => l.includes(" lead ⚙ Write"))).toEqual([
      expect.stringMatching(/^\[\d\d:\d\d:\d\d\] lead ⚙ Write .*PLAN\.md/),
      expect.stringMatching(/^\[\d\d:\d\d:\d\d\] lead ⚙ Write → .*File created successfully at: PLAN\.md/)
    ])

    // The live writer goes on after a regeneration: one more message, one more line.
    const before = transcript(sid("bob")).length
    await cliJson(home, ["agent", "send", "lead", "One more thing"])
    await waitQuiet(home)
    expect(transcript(lead.session_id).filter((l) => /USER → lead: One more thing$/.test(l))).toHaveLength(1)
    for (const [s, n] of expectedCounts()) expect(transcript(s).length, `lines of ${s} after a live turn`).toBe(n)
    expect(transcript(sid("bob")).length).toBeGreaterThanOrEqual(before)

    // A clean stop flushes and removes the marker.
    await cliJson(home, ["daemon", "stop"])
    await waitFor("daemon stopped", () => (isAlive(pid) ? undefined : true))
    expect(fs.existsSync(marker)).toBe(false)
    console.log(`transcripts after kill -9: ${rounds} rounds, ${acked.length} acknowledged sends, all in their transcripts`)
  }, 240_000)
})
