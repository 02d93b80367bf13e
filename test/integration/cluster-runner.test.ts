// requires: postgres
// Cluster mode's runner (docs/cluster.md): `daemon start --cluster <url> --listen <host:port>`
// refuses a bad or unreachable Postgres with exit 2 and starts nothing; two runners on one
// Postgres both list each other in `cluster status`, keep their session records and event logs
// in Postgres, and after a `kill -9` of one the engine drops it and the survivor is assigned and
// takes every shard. One Postgres server for the file; daemon output goes to each home's daemon.log.
import * as fs from "node:fs"
import * as net from "node:net"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { type Agent, cli, cliJson, type Inspect, isAlive, kill9, rpcOnce, startDaemon, waitFor } from "./daemon.support.js"
import { request } from "./http.support.js"
import { type ClusterStatus as Status, clusterFile, createOn, enqueued, LEASE_MS, query, runnerOf, startRunner, statusOf, succeeds, userMessages, waitRunnerReady, waitTurnStarted } from "../support/cluster.js"
import { freePort, freshDatabase } from "../support/postgres.js"

const ourVersion = (JSON.parse(fs.readFileSync(join(import.meta.dirname, "..", "..", "package.json"), "utf8")) as { version: string }).version

const { pg, owned, dir } = clusterFile("substrat-cluster-")

/** The CLI with another cluster lease in its environment (the daemon it starts inherits it). */
const cliWithLease = (home: string, leaseMs: string, args: ReadonlyArray<string>) => {
  process.env["SUBSTRAT_CLUSTER_LEASE_MS"] = leaseMs
  try {
    return cli(home, args)
  } finally {
    process.env["SUBSTRAT_CLUSTER_LEASE_MS"] = LEASE_MS
  }
}

/** A daemon that started where it should have been refused is still ended with the file. */
const trackStarted = (home: string) => {
  const pid = fs.existsSync(join(home, "daemon.pid")) ? Number(fs.readFileSync(join(home, "daemon.pid"), "utf8").trim()) : 0
  if (pid > 0) owned.track(pid)
}

describe("cluster runner", () => {
  it("a bad or unreachable Postgres: exit 2 naming the URL (password hidden) and the cause; nothing started", async () => {
    const home = join(dir, "refused")
    const port = await freePort()
    const bad = await cli(home, ["daemon", "start", "--cluster", "mysql://db/x", "--listen", `127.0.0.1:${port}`])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain("postgres://")
    const closed = await freePort()
    const unreachable = await cli(home, ["daemon", "start", "--cluster", `postgres://u:hunter2@127.0.0.1:${closed}/db`, "--listen", `127.0.0.1:${port}`])
    expect(unreachable.code).toBe(2)
    expect(unreachable.stderr).toContain(`cannot connect to Postgres at postgres://u:***@127.0.0.1:${closed}/db`)
    expect(unreachable.stderr).not.toContain("hunter2")
    // A --listen port in use: refused with exit 2 naming it, before anything starts.
    const taken = net.createServer()
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve))
    const busyPort = (taken.address() as net.AddressInfo).port
    const busy = await cli(home, ["daemon", "start", "--cluster", pg.server().url, "--listen", `127.0.0.1:${busyPort}`])
    // A start that timed out leaves its daemon running and names its pid: ended with the file.
    const stray = /\(pid (\d+)\)/.exec(busy.stderr)
    if (stray !== null) owned.track(Number(stray[1]))
    await new Promise<void>((resolve) => taken.close(() => resolve()))
    expect(busy.code).toBe(2)
    expect(busy.stderr).toContain(`cannot listen on 127.0.0.1:${busyPort} (--listen): the address is in use`)
    const noListen = await cli(home, ["daemon", "start", "--cluster", pg.server().url])
    expect(noListen.code).toBe(2)
    expect(noListen.stderr).toContain("--listen")
    expect(fs.existsSync(join(home, "daemon.sock"))).toBe(false)
    expect(fs.existsSync(join(home, "daemon.pid")) && fs.readFileSync(join(home, "daemon.pid"), "utf8").trim() !== "").toBe(false)
  }, 60_000)

  // Two runners on one database, shared by the tests below (in order: the last kills A).
  let url = ""
  let pa = 0
  let pb = 0
  let a = 0
  let b = 0
  const [homeA, homeB] = [join(dir, "a"), join(dir, "b")]

  /** Runner B started again on its home and address; resolves once both runners are healthy and B holds its shards. */
  const startB = async (extra: ReadonlyArray<string> = []) => {
    b = await startRunner(owned, homeB, url, pb, 2, extra)
  }

  it("two runners on one Postgres list each other; records and logs are in Postgres", async () => {
    url = await freshDatabase(pg.server())
    ;[pa, pb] = [await freePort(), await freePort()]
    a = await startDaemon(homeA, ["--cluster", url, "--listen", `127.0.0.1:${pa}`])
    owned.track(a)
    b = await startDaemon(homeB, ["--cluster", url, "--listen", `127.0.0.1:${pb}`])
    owned.track(b)
    const both = [`127.0.0.1:${pa}`, `127.0.0.1:${pb}`].sort()

    for (const home of [homeA, homeB]) {
      const s = await waitFor(`both runners healthy in ${home}`, async () => {
        const s = await statusOf(home)
        return s.runners.filter((r) => r.healthy).length === 2 ? s : undefined
      }, 60_000)
      expect(s.runners.map((r) => r.address)).toEqual(both)
      expect(s.runners.reduce((n, r) => n + r.shards, 0)).toBe(s.shards)
      expect(s.runners.filter((r) => r.self).map((r) => r.address)).toEqual([s.self])
    }
    // Each runner holds its shards before trees are placed.
    for (const home of [homeA, homeB]) await waitRunnerReady(home, 2)
    const human = await cli(homeB, ["cluster", "status"])
    expect(human.code).toBe(0)
    expect(human.stdout).toContain(`127.0.0.1:${pb} (this)`)

    // The daemon's storage is Postgres: the record and the log are rows, not files under the home.
    const agent = await cliJson<Agent>(homeA, ["agent", "create", "--name", "r", "--provider", "scripted"])
    const sessions = await query(url, `SELECT id FROM substrat_sessions`)
    expect(sessions.map((r) => r["id"])).toContain(agent.session_id)
    const events = await query(url, `SELECT count(*)::int AS n FROM substrat_events WHERE session_id = '${agent.session_id}'`)
    expect(Number(events[0]?.["n"])).toBeGreaterThan(0)
    expect(fs.existsSync(join(homeA, "agents", agent.session_id, "events.jsonl"))).toBe(false)
    // cluster status: the tree on the runner it was placed on; each runner's version.
    const placedOn = String((await query(url, `SELECT runner FROM substrat_trees WHERE root_id = '${agent.id}'`))[0]?.["runner"])
    const withTree = await cliJson<Status>(homeB, ["cluster", "status"])
    expect(withTree.trees).toBe(1)
    expect(withTree.runners.map((r) => [r.address, r.trees, r.version])).toEqual(
      both.map((addr) => [addr, addr === placedOn ? 1 : 0, ourVersion]))
    expect((await cli(homeA, ["cluster", "status"])).stdout).toMatch(new RegExp(`${placedOn}[^\\t]*\\tyes\\t\\d+\\t1\\t${ourVersion.replaceAll(".", "\\.")}`))
  }, 180_000)

  it("a tree lives on the runner of its shard: created on A, placed on B; send, wait, inspect, list from A reach it", async () => {
    // The engine places a root's id; A creates roots until one lands on B (each does with p = 1/2).
    let far: Agent | undefined
    for (let i = 0; i < 24 && far === undefined; i++) {
      const created = await cliJson<Agent>(homeA, ["agent", "create", "--name", `t${i}`, "--provider", "scripted"])
      const runner = await runnerOf(url, created.id)
      if (runner === `127.0.0.1:${pb}`) far = created
      else expect(runner).toBe(`127.0.0.1:${pa}`)
    }
    expect(far).toBeDefined()
    const tree = far!
    // It is B's: B's own list has it; its default workspace is under B's home, not A's.
    const onB = await cliJson<{ agents: ReadonlyArray<Agent>; placement: ReadonlyArray<{ root_id: string; runner: string }> }>(
      homeB, ["agent", "list"])
    expect(onB.agents.map((x) => x.id)).toContain(tree.id)
    const ws = (await cliJson<{ workspaces: ReadonlyArray<{ default_for: string | null; root_path: string }> }>(homeB, ["workspace", "list"]))
      .workspaces.find((w) => w.default_for === tree.name)
    expect(ws?.root_path.startsWith(homeB)).toBe(true)
    const wsA = (await cliJson<{ workspaces: ReadonlyArray<{ default_for: string | null }> }>(homeA, ["workspace", "list"]))
      .workspaces.find((w) => w.default_for === tree.name)
    expect(wsA).toBeUndefined()

    // From A: send --wait is answered by B's agent (the scripted provider echoes).
    const sent = await cli(homeA, ["agent", "send", tree.name, "hello from A", "--wait"])
    expect(sent.stderr).toBe("")
    expect(sent.code).toBe(0)
    expect(sent.stdout).toContain("hello from A")
    const inspected = await cliJson<Inspect & { recent_turns: ReadonlyArray<{ prompt: string; response: string }> }>(homeA, ["agent", "inspect", tree.name])
    expect(inspected.agent.id).toBe(tree.id)
    expect(inspected.recent_turns.some((t) => t.response.includes("hello from A"))).toBe(true)
    // The message is in B's tree's log once.
    const logged = await query(url, `SELECT count(*)::int AS n FROM substrat_events WHERE session_id = '${tree.session_id}' AND line LIKE '%message.enqueued%' AND line LIKE '%"sender":"USER"%' AND line LIKE '%hello from A%'`)
    expect(Number(logged[0]?.["n"])).toBe(1)

    // Every tree from either runner, each with its runner; the same root name is refused cluster-wide.
    for (const home of [homeA, homeB]) {
      const l = await cliJson<{ agents: ReadonlyArray<Agent>; placement: ReadonlyArray<{ root_id: string; runner: string }> }>(home, ["agent", "list"])
      expect(l.agents.map((x) => x.id)).toContain(tree.id)
      expect(l.placement.find((p) => p.root_id === tree.id)?.runner).toBe(`127.0.0.1:${pb}`)
      expect(l.agents.length).toBe(l.placement.length)
    }
    const again = await cli(homeB, ["agent", "create", "--name", tree.name, "--provider", "scripted"])
    expect(again.code).toBe(2)
    expect(again.stderr).toContain("exists")

    // Terminated from A: gone from B and from the cluster's trees.
    expect((await cli(homeA, ["agent", "terminate", tree.name])).code).toBe(0)
    expect(await query(url, `SELECT root_id FROM substrat_trees WHERE root_id = '${tree.id}'`)).toEqual([])
    const left = await cliJson<{ agents: ReadonlyArray<Agent> }>(homeB, ["agent", "list"])
    expect(left.agents.map((x) => x.id)).not.toContain(tree.id)
  }, 180_000)

  it("kill -9 of the runner holding a tree: the survivor takes every shard, recovers the tree from Postgres, and answers the message sent before the kill once", async () => {
    // The agents' turns wait at a gate (a file) the test opens once the tree has moved.
    const gate = join(dir, "gate")
    for (const home of [homeA, homeB]) {
      fs.mkdirSync(join(home, "scripts"), { recursive: true })
      fs.writeFileSync(join(home, "scripts", "gated.json"), JSON.stringify({ "*": { steps: [{ text: "answered after the move", wait_for: gate }], after: "echo" } }))
    }
    const tree = await createOn(url, homeA, `127.0.0.1:${pb}`, "m", ["--provider", "scripted:gated"])
    // Acknowledged before the kill: B logged it and its turn started (held at the gate).
    const sent = await cliJson<{ message_id: string; agent_id: string }>(homeA, ["agent", "send", tree.name, "question before the kill"])
    expect(sent.agent_id).toBe(tree.id)
    await waitTurnStarted(url, tree.session_id, 1, "the turn started on B")

    // A second question sent with wait through A's HTTP API (one `send` that returns the answer):
    // the engine's request is open on B (its reply waits for the answer) when B dies, so the
    // engine delivers it again to the tree's new owner.
    const waiting = request({ socketPath: join(homeA, "http.sock") }, "POST", `/v1/agents/${tree.name}/messages`, {
      text: "second question, waited for",
      wait: true
    })
    await waitFor("the second question logged on B", async () => {
      const r = await query(url, `SELECT count(*)::int AS n FROM substrat_events WHERE session_id = '${tree.session_id}' AND line LIKE '%second question, waited for%'`)
      return Number(r[0]?.["n"]) > 0 ? true : undefined
    }, 60_000)

    await kill9(b)
    // A runner of another home taking B's address while B's heartbeat is within the lease (this
    // one's lease is long, so B counts as live whatever the timing): refused, nothing started.
    const homeC = join(dir, "c")
    const sameAddress = await cliWithLease(homeC, "600000", ["daemon", "start", "--cluster", url, "--listen", `127.0.0.1:${pb}`])
    trackStarted(homeC)
    expect(sameAddress.code).toBe(2)
    expect(sameAddress.stderr).toContain(`is registered at 127.0.0.1:${pb} and was alive`)
    expect(sameAddress.stderr).toContain("two runners cannot share an address")
    // A runner of another version is refused, both versions named.
    await query(url, `UPDATE substrat_runners SET version = '0.0.1-other' WHERE address = '127.0.0.1:${pa}'`)
    const otherVersion = await cli(homeC, ["daemon", "start", "--cluster", url, "--listen", `127.0.0.1:${await freePort()}`])
    await query(url, `UPDATE substrat_runners SET version = '${ourVersion}' WHERE address = '127.0.0.1:${pa}'`)
    trackStarted(homeC)
    expect(otherVersion.code).toBe(2)
    expect(otherVersion.stderr).toContain(`runner 127.0.0.1:${pa} runs Substrat 0.0.1-other, this one is ${ourVersion}`)
    expect(fs.existsSync(join(homeC, "daemon.sock"))).toBe(false)
    expect(fs.existsSync(join(homeC, "daemon.pid")) && fs.readFileSync(join(homeC, "daemon.pid"), "utf8").trim() !== "").toBe(false)

    const after = await waitFor("runner B dropped and A holding every shard", async () => {
      const s = await statusOf(homeA)
      const gone = s.runners.every((r) => r.address !== `127.0.0.1:${pb}` || !r.healthy)
      return gone && s.held === s.shards ? s : undefined
    }, 90_000)
    expect(after.runners.filter((r) => r.healthy).map((r) => r.address)).toEqual([`127.0.0.1:${pa}`])
    expect(after.runners.find((r) => r.self)?.shards).toBe(after.shards)
    // The tree is A's now, recovered from Postgres: A's home holds no log or record of it.
    await waitFor("the tree recorded on A", async () => (await runnerOf(url, tree.id)) === `127.0.0.1:${pa}` ? true : undefined, 60_000)
    const listed = await cliJson<{ agents: ReadonlyArray<Agent>; placement: ReadonlyArray<{ root_id: string; runner: string }> }>(homeA, ["agent", "list"])
    expect(listed.agents.map((x) => x.id)).toContain(tree.id)
    expect(listed.placement.find((p) => p.root_id === tree.id)?.runner).toBe(`127.0.0.1:${pa}`)
    expect(fs.existsSync(join(homeA, "agents", tree.session_id))).toBe(false)

    fs.writeFileSync(gate, "")
    const answered = await cliJson<{ message_id: string; answer: { message_id: string; text: string; error: boolean } }>(
      homeA, ["agent", "wait", tree.name, sent.message_id])
    expect(answered.message_id).toBe(sent.message_id)
    expect(answered.answer.error).toBe(false)
    // Exactly once: the question in the agent's log once, one answer to it.
    const lines = await enqueued(url, tree.session_id)
    expect(lines.filter((l) => l.id === sent.message_id)).toHaveLength(1)
    expect(lines.filter((l) => l.recipient === "USER" && l.reply_to === sent.message_id).map((l) => l.id)).toEqual([answered.answer.message_id])
    // The re-delivered request is logged once (its id is the engine request's), answered once,
    // and the client that sent it before the kill gets that answer.
    const second = await waiting
    expect(second.status, second.body).toBe(200)
    const secondResult = second.json<{ message_id: string; answer: { message_id: string; error: boolean } }>()
    const all = await enqueued(url, tree.session_id)
    const asked = all.filter((l) => l.sender === "USER" && l.payload === "second question, waited for")
    expect(asked.map((l) => l.id)).toEqual([secondResult.message_id])
    expect(all.filter((l) => l.recipient === "USER" && l.reply_to === secondResult.message_id).map((l) => l.id))
      .toEqual([secondResult.answer.message_id])
    // A new message is answered by A.
    const next = await cli(homeA, ["agent", "send", tree.name, "after the move", "--wait"])
    expect(next.code).toBe(0)
  }, 240_000)

  it("daemon stop of a runner hands its trees over: its turn finishes or is suspended before another runner takes the tree, so the question is answered once", async () => {
    // B again, on its home and address (the same runner: its runner.id), with a short grace.
    await startB(["--grace-ms", "4000"])
    const gate = join(dir, "gate-stop")
    for (const home of [homeA, homeB]) {
      fs.writeFileSync(join(home, "scripts", "gated2.json"), JSON.stringify({ "*": { steps: [{ text: "answered once", wait_for: gate }], after: "echo" } }))
    }
    const tree = await createOn(url, homeA, `127.0.0.1:${pb}`, "s", ["--provider", "scripted:gated2"])
    const sent = await cliJson<{ message_id: string }>(homeA, ["agent", "send", tree.name, "question before the stop"])
    await waitTurnStarted(url, tree.session_id, 1, "the turn started on B")

    // Stop B while its turn is held. The gate opens only once A has the tree: had A taken it while
    // B still ran the turn, both turns would now finish and the question be answered twice.
    const stopping = cli(homeB, ["daemon", "stop"])
    await waitFor("the tree recorded on A", async () => (await runnerOf(url, tree.id)) === `127.0.0.1:${pa}` ? true : undefined, 60_000)
    fs.writeFileSync(gate, "")
    expect((await stopping).code).toBe(0)
    const answered = await cliJson<{ answer: { message_id: string; error: boolean } }>(homeA, ["agent", "wait", tree.name, sent.message_id])
    expect(answered.answer.error).toBe(false)
    const lines = await enqueued(url, tree.session_id)
    expect(lines.filter((l) => l.id === sent.message_id)).toHaveLength(1)
    expect(lines.filter((l) => l.recipient === "USER" && l.reply_to === sent.message_id).map((l) => l.id))
      .toEqual([answered.answer.message_id])
    const s = await cliJson<Status>(homeA, ["cluster", "status"])
    expect(s.runners.map((r) => r.address)).toEqual([`127.0.0.1:${pa}`])
    expect(s.held).toBe(s.shards)
  }, 240_000)

  it("Postgres restarts under a runner: requests meanwhile fail with exit 5, the runner serves again without a restart, nothing acknowledged is lost", async () => {
    const created = await cliJson<Agent>(homeA, ["agent", "create", "--name", "pgr", "--provider", "scripted"])
    const before = await cli(homeA, ["agent", "send", "pgr", "before the restart", "--wait"])
    expect(before.code).toBe(0)
    await pg.server().stop()
    const during = await cli(homeA, ["agent", "send", "pgr", "while Postgres is down"])
    expect(during.code, during.stderr).toBe(5)
    await pg.server().start()
    // Bounded: the runner reconnects on its own; the same process serves again.
    const after = await waitFor("a send answered after the restart", async () => {
      const r = await cli(homeA, ["agent", "send", "pgr", "after the restart", "--wait"])
      return r.code === 0 ? r : undefined
    }, 90_000)
    expect(after.stdout).toContain("after the restart")
    expect(isAlive(a)).toBe(true)
    expect(await userMessages(url, created.session_id, "before the restart")).toEqual([{ id: expect.any(String), answers: 1 }])
    expect(await userMessages(url, created.session_id, "while Postgres is down")).toEqual([])
    expect((await userMessages(url, created.session_id, "after the restart")).map((m) => m.answers)).toEqual([1])
    await waitFor("A holding every shard again", async () => {
      const st = await statusOf(homeA)
      return st.held === st.shards ? st : undefined
    }, 60_000)
  }, 240_000)

  it("kill -9 of every runner, then both started again: every acknowledged message is answered once", async () => {
    await startB()
    const gate = join(dir, "gate-all")
    for (const home of [homeA, homeB]) {
      fs.writeFileSync(join(home, "scripts", "gated3.json"), JSON.stringify({ "*": { steps: [{ text: "answered after the restart", wait_for: gate }], after: "echo" } }))
    }
    // A tree on each runner, each with a question acknowledged and its turn held.
    const trees = new Map<string, Agent>()
    for (let i = 0; i < 24 && trees.size < 2; i++) {
      const created = await rpcOnce<Agent>(homeA, "agent.create", { name: `w${i}`, provider: "scripted:gated3" })
      const runner = await runnerOf(url, created.id)
      if (!trees.has(runner)) trees.set(runner, created)
      else expect((await cli(homeA, ["agent", "terminate", created.name])).code).toBe(0)
    }
    expect([...trees.keys()].sort()).toEqual([`127.0.0.1:${pa}`, `127.0.0.1:${pb}`].sort())
    const sent = new Map<string, string>()
    for (const t of trees.values()) {
      sent.set(t.id, (await cliJson<{ message_id: string }>(homeB, ["agent", "send", t.name, `held question to ${t.name}`])).message_id)
      await waitTurnStarted(url, t.session_id, 1, `the turn of ${t.name} started`)
    }
    await kill9(a)
    await kill9(b)
    fs.writeFileSync(gate, "")
    // Both started again at once, as a cluster is restarted.
    const restart = (home: string, port: number) =>
      startDaemon(home, ["--cluster", url, "--listen", `127.0.0.1:${port}`]).then((pid) => { owned.track(pid); return pid })
    ;[a, b] = await Promise.all([restart(homeA, pa), restart(homeB, pb)])
    for (const t of trees.values()) {
      // Polled over the admin socket until the tree's runner answers; then `agent wait` itself.
      await waitFor(`${t.name} answered`, () => succeeds(rpcOnce(homeA, "agent.wait", { agent: t.name, message_id: sent.get(t.id)! })), 120_000)
      const waited = await cli(homeA, ["agent", "wait", t.name, sent.get(t.id)!, "--json"])
      expect(waited.code, waited.stderr).toBe(0)
      expect((JSON.parse(waited.stdout) as { answer: { error: boolean } }).answer.error).toBe(false)
      expect(await userMessages(url, t.session_id, `held question to ${t.name}`)).toEqual([{ id: sent.get(t.id), answers: 1 }])
    }
  }, 300_000)
  it("a runner that joins after the trees were made: the trees of its shards are handed over to it (meanwhile refused with exit 5 naming where they are, never called terminated); every tree answers from both runners", async () => {
    // B hands its trees to A; A alone makes new trees; then B joins again and gets half the shards.
    expect((await cli(homeB, ["daemon", "stop"])).code).toBe(0)
    const made: Array<Agent> = []
    // Over the admin socket (no CLI process each): what is tested here is B's answer below.
    for (let i = 0; i < 12; i++) made.push(await rpcOnce<Agent>(homeA, "agent.create", { name: `late${i}`, provider: "scripted" }))
    await startB()
    const fromB = await Promise.all(made.map((t) => cli(homeB, ["agent", "inspect", t.name])))
    // Each tree is reached, or (while A hands it over) refused naming where it is; never "terminated".
    for (const r of fromB) expect([0, 5]).toContain(r.code)
    for (const r of fromB.filter((r) => r.code === 5)) {
      expect(r.stderr).toContain(`is on runner 127.0.0.1:${pa} while its shard is now 127.0.0.1:${pb}'s`)
      expect(r.stderr).not.toContain("terminated")
    }
    // The trees of B's shards move to B; then every tree answers from B and from A.
    const ids = made.map((t) => `'${t.id}'`).join(",")
    await waitFor("some trees handed over to B", async () => {
      const rows = await query(url, `SELECT count(*)::int AS n FROM substrat_trees WHERE root_id IN (${ids}) AND runner = '127.0.0.1:${pb}'`)
      return Number(rows[0]?.["n"]) > 0 ? true : undefined
    }, 60_000)
    for (const t of made) {
      await waitFor(`${t.name} answering from B`, () => succeeds(rpcOnce(homeB, "agent.inspect", { agent: t.name })), 60_000)
      expect((await rpcOnce<{ agent: { id: string } }>(homeA, "agent.inspect", { agent: t.name })).agent.id).toBe(t.id)
    }
  }, 240_000)
})
