// requires: postgres
// Cluster mode's drain and handover at their edges (docs/cluster.md "Handover and drain"): a turn
// that never ends is interrupted past `cluster.handover_grace_ms` and re-run where its tree goes
// (its unrecorded files not there), a `send` racing the handover is delivered once or refused with
// exit 5 (never lost, never refused as unknown), a moved tree whose workspace stayed behind runs
// without an error after each turn, and a stopping runner suspends only its own sessions.
// One Postgres server and two runners (A, B) with one shared bare repository; daemon output goes
// to each home's daemon.log.
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { type Agent, cli, cliJson, rpcClient, sleep, waitFor } from "./daemon.support.js"
import { clusterFile, createOn, enqueued, query, runnerOf as rowOf, startRunner, turnStarts } from "../support/cluster.js"
import { freePort, freshDatabase } from "../support/postgres.js"

interface Ws {
  readonly id: string
  readonly default_for: string | null
  readonly root_path: string
}

const { pg, owned, dir } = clusterFile("substrat-cluster-drain-", (d) => ({
  SUBSTRAT_CLUSTER_WORKSPACE_REMOTE: join(d, "remote.git"),
  SUBSTRAT_CLUSTER_HANDOVER_GRACE_MS: "4000"
}))
const remote = join(dir, "remote.git")

describe("cluster drain at its edges", () => {
  let url = ""
  let pa = 0
  let pb = 0
  const [homeA, homeB] = [join(dir, "a"), join(dir, "b")]
  const addrA = () => `127.0.0.1:${pa}`
  const addrB = () => `127.0.0.1:${pb}`

  const runnerOf = (root: string) => rowOf(url, root)
  // A tree whose shard is B's while both runners live: it stays on B throughout.
  let staying: Agent | undefined
  // The race's tree (on B once A is drained below).
  let raced: Agent | undefined

  /** A tree made from A that the engine places on A (others made on the way are terminated). */
  const treeOnA = async (prefix: string, provider: string): Promise<Agent> => {
    for (let i = 0; i < 40; i++) {
      const created = await cliJson<Agent>(homeA, ["agent", "create", "--name", `${prefix}${i}`, "--provider", provider])
      if (await runnerOf(created.id) === addrA()) return created
      expect((await cli(homeA, ["agent", "terminate", created.name])).code).toBe(0)
    }
    throw new Error("no tree placed on A in 40 tries")
  }

  /** USER's messages in the session's log and how many answers each has. */
  const fromUser = async (session: string) => {
    const lines = await enqueued(url, session)
    return lines.filter((l) => l.sender === "USER")
      .map((l) => ({ id: l.id!, text: l.payload!, answers: lines.filter((r) => r.recipient === "USER" && r.reply_to === l.id).length }))
  }

  const drainA = async (on: boolean) => {
    const r = await cli(homeA, ["cluster", on ? "drain" : "undrain"])
    expect(r.code, r.stderr).toBe(0)
  }

  it("two runners", async () => {
    url = await freshDatabase(pg.server())
    ;[pa, pb] = [await freePort(), await freePort()]
    execFileSync("git", ["init", "--quiet", "--bare", remote])
    for (const [home, script] of [
      [homeA, { steps: [{ text: "recorded on A" }, { text: "never answered on A", wait_for: join(dir, "never") }], after: "echo" }],
      [homeB, { steps: [{ text: "the re-run on B" }, { text: "the re-run on B" }], after: "echo" }]
    ] as const) {
      fs.mkdirSync(join(home, "scripts"), { recursive: true })
      fs.writeFileSync(join(home, "scripts", "stuck.json"), JSON.stringify({ "*": script }))
    }
    await startRunner(owned, homeA, url, pa, 1)
    await startRunner(owned, homeB, url, pb, 2)
    staying = await createOn(url, homeA, addrB(), "stay", ["--provider", "scripted"])
  }, 120_000)

  it("a send racing handovers both ways: each answered once on the tree's runner, or refused with exit 5; none lost, none 'not found'", async () => {
    const tree = await treeOnA("race", "scripted")
    raced = tree
    const outcomes: Array<{ ok: true; id: string; text: string } | { ok: false; message: string }> = []
    let stop = false
    let n = 0
    // Senders on both runners' admin sockets, one request at a time each, for the whole drain/undrain cycle.
    const sender = async (home: string) => {
      const c = await rpcClient(join(home, "daemon.sock"))
      try {
        while (!stop) {
          const text = `race ${n++} via ${home === homeA ? "A" : "B"}`
          try {
            const r = await c.call<{ message_id: string }>("agent.send", { agent: tree.name, text })
            outcomes.push({ ok: true, id: r.message_id, text })
            // A short pause: the agent answers each message in a turn of its own, and the backlog is waited for below.
            await sleep(100)
          } catch (e) {
            outcomes.push({ ok: false, message: e instanceof Error ? e.message : String(e) })
            await sleep(20)
          }
        }
      } finally {
        c.close()
      }
    }
    const senders = [homeA, homeA, homeA, homeB, homeB].map(sender)
    for (let round = 0; round < 2; round++) {
      await drainA(true)
      await waitFor("the tree on B", async () => (await runnerOf(tree.id)) === addrB() ? true : undefined, 90_000)
      await drainA(false)
      await waitFor("the tree back on A", async () => (await runnerOf(tree.id)) === addrA() ? true : undefined, 90_000)
    }
    stop = true
    await Promise.all(senders)
    const acked = outcomes.flatMap((o) => (o.ok ? [o] : []))
    const refused = outcomes.flatMap((o) => (o.ok ? [] : [o]))
    expect(acked.length).toBeGreaterThan(10)
    // Refused only as "the tree is on its way" (Unavailable, tree-elsewhere), nothing else.
    for (const r of refused) expect(r.message).toMatch(/while its shard is now|Nothing was sent/)
    // Every acknowledged message is in the log once and answered once (by the runner the tree is on).
    await waitFor("every acknowledged message answered", async () => {
      const logged = await fromUser(tree.session_id)
      return acked.every((a) => logged.some((l) => l.id === a.id && l.answers >= 1)) ? true : undefined
    }, 240_000).catch(async (e: unknown) => {
      const logged = await fromUser(tree.session_id)
      const missing = acked.filter((a) => !logged.some((l) => l.id === a.id && l.answers >= 1))
        .map((a) => ({ ...a, logged: logged.filter((l) => l.id === a.id) }))
      throw new Error(`${String(e)}: ${missing.length} of ${acked.length} unanswered: ${JSON.stringify(missing.slice(0, 5))}; runner ${await runnerOf(tree.id)}`)
    })
    const logged = await fromUser(tree.session_id)
    for (const a of acked) expect(logged.filter((l) => l.id === a.id).map((l) => [l.text, l.answers])).toEqual([[a.text, 1]])
    // A refused message was not logged.
    expect(logged.length).toBe(acked.length)
  }, 600_000)

  it("a turn that never ends: past cluster.handover_grace_ms it is interrupted, the tree moves, the turn re-runs there without its unrecorded files; a tree without its workspace runs without errors", async () => {
    const stuck = await treeOnA("stuck", "scripted:stuck")
    const idle = await treeOnA("idle", "scripted")
    const ws = (await cliJson<{ workspaces: ReadonlyArray<Ws> }>(homeA, ["workspace", "list"])).workspaces.find((w) => w.default_for === stuck.name)!
    expect(ws.root_path.startsWith(homeA)).toBe(true)
    fs.writeFileSync(join(ws.root_path, "one.txt"), "recorded on A\n")
    const first = await cli(homeA, ["agent", "send", stuck.name, "turn one", "--wait"])
    expect(first.code, first.stderr).toBe(0)
    // The second turn writes a file and never ends.
    fs.writeFileSync(join(ws.root_path, "partial.txt"), "written by the turn that never ends\n")
    const held = await cliJson<{ message_id: string }>(homeA, ["agent", "send", stuck.name, "turn two"])
    await waitFor("turn two started on A", async () => (await turnStarts(url, stuck.session_id)) >= 2 ? true : undefined, 60_000)

    await drainA(true)
    // Without the limit the tree stays on A for as long as its turn runs (here: forever).
    for (const t of [stuck, idle]) await waitFor(`${t.name} on B`, async () => (await runnerOf(t.id)) === addrB() ? true : undefined, 90_000)
    expect(fs.readFileSync(join(homeA, "daemon.log"), "utf8")).toMatch(/still running after cluster\.handover_grace_ms \(4000 ms\)/)
    // B's workspace holds the last recorded turn, not the interrupted turn's file; the turn re-ran on B, answered once.
    const answered = await cliJson<{ answer: { text: string; error: boolean } }>(homeB, ["agent", "wait", stuck.name, held.message_id])
    expect(answered.answer.error).toBe(false)
    expect(answered.answer.text).toContain("the re-run on B")
    const wsB = (await cliJson<{ workspaces: ReadonlyArray<Ws> }>(homeB, ["workspace", "list"])).workspaces.find((w) => w.id === ws.id)
    expect(wsB?.root_path.startsWith(homeB)).toBe(true)
    expect(fs.readFileSync(join(wsB!.root_path, "one.txt"), "utf8")).toBe("recorded on A\n")
    expect(fs.existsSync(join(wsB!.root_path, "partial.txt"))).toBe(false)
    expect((await fromUser(stuck.session_id)).map((m) => [m.text, m.answers])).toEqual([["turn one", 1], ["turn two", 1]])

    // The idle tree never recorded a turn: its workspace was never pushed and stayed on A. Its turns on B run, and B's log
    // says so once, with no error after each turn.
    for (const i of [1, 2, 3]) {
      const r = await cli(homeB, ["agent", "send", idle.name, `on B ${i}`, "--wait"])
      expect(r.code, r.stderr).toBe(0)
    }
    const logB = fs.readFileSync(join(homeB, "daemon.log"), "utf8")
    expect(logB).not.toContain("NotFoundError")
    expect(logB).not.toMatch(/no workspace [0-9a-f-]{36}/)
  }, 300_000)

  it("daemon stop of the drained runner suspends its own sessions only (none), not the other runner's", async () => {
    const before = (await query(url, `SELECT count(*)::int AS n FROM substrat_sessions WHERE record LIKE '%"state":"active"%'`))[0]?.["n"]
    expect(Number(before)).toBeGreaterThan(0)
    const r = await cli(homeA, ["daemon", "stop"])
    expect(r.code, r.stderr).toBe(0)
    expect(fs.readFileSync(join(homeA, "daemon.log"), "utf8")).toContain("suspended 0 session(s)")
  }, 120_000)

  it("A restarted takes back its shards' trees reading only theirs: a log of a tree that stays on B that does not decode is not read", async () => {
    // A row of the staying tree's log that does not decode: a read of that log fails (EventLogError, decode).
    await query(url, `INSERT INTO substrat_events (session_id, seq, line) VALUES ('${staying!.session_id}', 1000000, 'not an entry')`)
    const race = raced!
    expect(await runnerOf(race.id)).toBe(addrB())
    await startRunner(owned, homeA, url, pa, 2)
    // Before, A's takeover read every record and log of the cluster, failed on that row and was retried forever: the tree never came back.
    await waitFor("the race tree back on A", async () => (await runnerOf(race.id)) === addrA() ? true : undefined, 90_000)
    const r = await cli(homeA, ["agent", "send", race.name, "after the restart", "--wait"])
    expect(r.code, r.stderr).toBe(0)
    expect(await runnerOf(staying!.id)).toBe(addrB())
  }, 180_000)
})
