// requires: postgres
// Cluster mode's handover (docs/cluster.md): a tree lives on the runner that made or recovered it;
// when the engine assigns its shard to another healthy runner (one joined, or this one drains),
// the runner lets the tree go once its turns end and the shard's runner recovers it from
// Postgres. Requests meanwhile are refused for a short while (`tree-elsewhere`), never for good.
// One Postgres server for the file; daemon output goes to each home's daemon.log.
import * as fs from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { type Agent, cli, cliJson, kill9, rpcOnce, waitFor } from "./daemon.support.js"
import { type ClusterStatus as Status, clusterFile, query, runnerOf, startRunner, statusOf, turnStarts, userMessages, waitRunnerReady, waitTurnStarted } from "../support/cluster.js"
import { freePort, freshDatabase } from "../support/postgres.js"

const { pg, owned, dir } = clusterFile("substrat-handover-")

describe("cluster handover", () => {
  let url = ""
  let pa = 0
  let pb = 0
  const [homeA, homeB] = [join(dir, "a"), join(dir, "b")]
  const addrA = () => `127.0.0.1:${pa}`
  const addrB = () => `127.0.0.1:${pb}`

  const start = (home: string, port: number, healthy: number) => startRunner(owned, home, url, port, healthy)

  /** Trees made from A until each runner has `each` of them (their turns wait at `script`'s gate). */
  const treesOnBoth = async (prefix: string, script: string, each: number) => {
    const trees = new Map<string, Array<Agent>>([[addrA(), []], [addrB(), []]])
    for (let i = 0; i < 40 && [...trees.values()].some((t) => t.length < each); i++) {
      // Over the admin socket (no CLI process each): what is tested is where the trees go.
      const created = await rpcOnce<Agent>(homeA, "agent.create", { name: `${prefix}${i}`, provider: `scripted:${script}` })
      const list = trees.get(await runnerOf(url, created.id))!
      if (list.length < each) list.push(created)
      else await rpcOnce(homeA, "agent.terminate", { agent: created.name })
    }
    for (const list of trees.values()) expect(list).toHaveLength(each)
    return trees
  }

  const gated = (name: string, gate: string, text: string) => {
    for (const home of [homeA, homeB]) {
      fs.mkdirSync(join(home, "scripts"), { recursive: true })
      fs.writeFileSync(join(home, "scripts", `${name}.json`), JSON.stringify({ "*": { steps: [{ text, wait_for: gate }], after: "echo" } }))
    }
  }

  const turnStarted = (t: Agent) => waitTurnStarted(url, t.session_id, 1, `the turn of ${t.name} started`)

  it("kill -9 of both runners, A restarted and holding every tree, then B: B's trees come back to it, every acknowledged message answered once", async () => {
    url = await freshDatabase(pg.server())
    ;[pa, pb] = [await freePort(), await freePort()]
    let a = await start(homeA, pa, 1)
    let b = await start(homeB, pb, 2)
    const gate = join(dir, "gate-kill")
    gated("held", gate, "answered after the restarts")
    const trees = await treesOnBoth("k", "held", 2)
    const sent = new Map<string, string>()
    for (const t of [...trees.values()].flat()) {
      sent.set(t.id, (await cliJson<{ message_id: string }>(homeA, ["agent", "send", t.name, `held question to ${t.name}`])).message_id)
      await turnStarted(t)
    }
    await kill9(a)
    await kill9(b)
    fs.writeFileSync(gate, "")

    // A alone: it takes its own trees at once and B's once B's lease has run out.
    a = await start(homeA, pa, 1)
    const all = [...trees.values()].flat()
    await waitFor("every tree on A", async () => {
      for (const t of all) if (await runnerOf(url, t.id) !== addrA()) return undefined
      return true
    }, 90_000)
    // B again: its shards are those of its trees (the same two runners, the same ring).
    b = await start(homeB, pb, 2)
    for (const t of all) {
      // Asked on B: a tree refused for a while (handing over) is answered, none refused for good.
      // Polled over the admin socket (an Unavailable refusal names B's shard); then `agent wait` itself, on B.
      await waitFor(`${t.name} answered through B`, () =>
        rpcOnce(homeB, "agent.wait", { agent: t.name, message_id: sent.get(t.id)! }).then(() => true as const, (e: Error) => {
          if (e.message.includes("Unavailable")) expect(e.message).toContain(`while its shard is now ${addrB()}`)
          return undefined
        }), 60_000)
      const r = await cli(homeB, ["agent", "wait", t.name, sent.get(t.id)!, "--json"])
      expect(r.code, r.stderr).toBe(0)
      expect((JSON.parse(r.stdout) as { answer: { error: boolean } }).answer.error).toBe(false)
    }
    // B's trees are B's again, A's stay A's; a new question is answered once, from either runner.
    for (const [runner, list] of trees) {
      for (const t of list) {
        await waitFor(`${t.name} on ${runner}`, async () => (await runnerOf(url, t.id)) === runner ? true : undefined, 60_000)
        const next = await cli(runner === addrA() ? homeB : homeA, ["agent", "send", t.name, `after the handover to ${t.name}`, "--wait"])
        expect(next.code, next.stderr).toBe(0)
        expect(await userMessages(url, t.session_id, `held question to ${t.name}`)).toEqual([{ id: sent.get(t.id), answers: 1 }])
        expect((await userMessages(url, t.session_id, `after the handover to ${t.name}`)).map((m) => m.answers)).toEqual([1])
      }
    }
    const st = await cliJson<Status>(homeB, ["cluster", "status"])
    expect(Object.fromEntries(st.runners.map((r) => [r.address, r.trees]))).toEqual({ [addrA()]: 2, [addrB()]: 2 })
  }, 300_000)

  it("cluster drain of A with turns held and messages queued: B serves every tree, each message answered once; cluster status shows the drain; daemon stop after it", async () => {
    const gate = join(dir, "gate-drain")
    gated("held2", gate, "answered after the drain")
    const onA = (await treesOnBoth("d", "held2", 2)).get(addrA())!
    const sent: Array<{ tree: Agent; text: string; id: string }> = []
    for (const t of onA) {
      for (const text of [`first to ${t.name}`, `queued to ${t.name}`]) {
        sent.push({ tree: t, text, id: (await cliJson<{ message_id: string }>(homeA, ["agent", "send", t.name, text])).message_id })
        if (text.startsWith("first")) await turnStarted(t)
      }
    }
    const aTrees = (await query(url, `SELECT root_id FROM substrat_trees WHERE runner = '${addrA()}'`)).map((r) => String(r["root_id"]))
    expect(aTrees.length).toBeGreaterThanOrEqual(onA.length)

    const drained = await cliJson<{ self: string; draining: boolean; trees: number }>(homeA, ["cluster", "drain"])
    expect(drained).toEqual({ self: addrA(), draining: true, trees: aTrees.length })
    // Its shards go to B; the trees with a held turn stay on A until the turn ends.
    const draining = await waitFor("A draining with no shard", async () => {
      const st = await statusOf(homeB)
      const a = st.runners.find((r) => r.address === addrA())
      return a?.draining === true && a.shards === 0 && st.runners.find((r) => r.self)?.shards === st.shards ? a : undefined
    }, 60_000)
    expect(draining.trees).toBeGreaterThanOrEqual(onA.length)
    expect((await cli(homeA, ["cluster", "status"])).stdout).toMatch(new RegExp(`${addrA()} \\(this\\)\\tdraining, \\d+ tree\\(s\\) left`))
    fs.writeFileSync(gate, "")
    await waitFor("every tree of A on B", async () => {
      const rows = await query(url, `SELECT runner FROM substrat_trees WHERE root_id IN (${aTrees.map((id) => `'${id}'`).join(",")})`)
      return rows.length === aTrees.length && rows.every((r) => r["runner"] === addrB()) ? true : undefined
    }, 60_000)
    expect((await cli(homeA, ["cluster", "status"])).stdout).toContain(`${addrA()} (this)\tdrained\t0\t0`)
    for (const m of sent) {
      const answered = await cliJson<{ message_id: string; answer: { error: boolean } }>(homeB, ["agent", "wait", m.tree.name, m.id])
      expect(answered.answer.error).toBe(false)
      expect(await userMessages(url, m.tree.session_id, m.text)).toEqual([{ id: m.id, answers: 1 }])
    }
    // Nothing is left on A: it stops, and B answers each tree.
    expect((await cli(homeA, ["daemon", "stop"])).code).toBe(0)
    for (const t of onA) expect((await cli(homeB, ["agent", "send", t.name, `after the stop to ${t.name}`, "--wait"])).code).toBe(0)
  }, 300_000)

  it("a drained runner that stops heartbeating past the lease while its turn runs (SIGSTOP: a loaded machine, a long pause) keeps its tree: B does not take it while A is connected to Postgres; answered once", async () => {
    const a = await start(homeA, pa, 2)
    // B has let go of A's shards, and the trees whose shards are A's again are back on A.
    await waitRunnerReady(homeB, 2)
    await waitFor("no tree between runners", async () => (await query(url, `SELECT 1 FROM substrat_trees WHERE runner = ''`)).length === 0 ? true : undefined, 60_000)
    const gate = join(dir, "gate-slow")
    gated("held3", gate, "answered once after the pause")
    const t = (await treesOnBoth("s", "held3", 1)).get(addrA())![0]!
    const { message_id } = await rpcOnce<{ message_id: string }>(homeA, "agent.send", { agent: t.name, text: "the question" })
    await turnStarted(t)
    await rpcOnce(homeA, "cluster.drain")
    // B holds every shard, the tree's too; the tree stays on A while its turn runs.
    await waitFor("B holding every shard", async () => {
      const st = await statusOf(homeB)
      return st.held === st.shards && st.runners.find((r) => r.self)?.shards === st.shards ? true : undefined
    }, 60_000)
    expect(await runnerOf(url, t.id)).toBe(addrA())

    // A misses its heartbeats for longer than the lease; its connections to Postgres stay open.
    process.kill(a, "SIGSTOP")
    let during = ""
    try {
      await waitFor("B no longer listing A", async () => (await statusOf(homeB)).runners.some((r) => r.address === addrA()) ? undefined : true, 60_000)
      // B's takeover pass (every second) takes the tree, or says why it does not.
      during = await waitFor("B taking the tree, or declining", async () => {
        const row = await runnerOf(url, t.id)
        if (row !== addrA()) return row
        return fs.readFileSync(join(homeB, "daemon.log"), "utf8").includes(`runner ${addrA()} is not heartbeating but still connected to Postgres`)
          ? row
          : undefined
      }, 60_000)
    } finally {
      process.kill(a, "SIGCONT")
    }
    fs.writeFileSync(gate, "")
    // A's turn ends, A hands the tree over, B takes it: the question answered once, by one turn.
    await waitFor("the tree on B", async () => (await runnerOf(url, t.id)) === addrB() ? true : undefined, 60_000)
    expect((await rpcOnce<{ answer: { error: boolean } }>(homeB, "agent.wait", { agent: t.name, message_id })).answer.error).toBe(false)
    expect(await userMessages(url, t.session_id, "the question")).toEqual([{ id: message_id, answers: 1 }])
    expect(await turnStarts(url, t.session_id)).toBe(1)
    expect(during).toBe(addrA())
  }, 300_000)
})
