// requires: bwrap, git, postgres
// Cluster mode's whole scenario (docs/cluster.md): three runner daemons on one Postgres and one
// shared workspace remote; 30 trees of scripted agents (a root and the helper it spawns) and one
// real `claude` tree (sandboxed, against the scripted Anthropic endpoint). Six clients — two
// through each runner — send to the roots, a unique text per attempt, half of them sync: in turn
// `agent send --wait`, `agent send`, `POST /v1/agents/{ref}/messages {"wait":true}` (one engine
// request open for the whole turn), `agent send`; a client whose runner fails moves on to the next.
//   1. `kill -9` of the claude tree's runner X while an HTTP request with wait, sent through a
//      survivor and logged on X, waits for its turn: that request is delivered again to the new
//      owner and answered once; X's trees are recorded on the survivors and answer through them;
//      the claude agent's next answer uses the code word it was told on X; each moved tree's
//      workspace holds what the remote recorded of it.
//   2. X started again, another runner Y drained under the same load: Y ends with no tree and no
//      shard, X takes trees again.
//   3. `cluster undrain` of Y: Y gets shards and trees again, and a tree on it answers.
// After each part, read from the logs in Postgres: every acknowledged message is in its root's log
// once with its id; no attempt's text is there twice; every USER message logged has exactly one
// answer, and a `--wait` client got that one. Daemon output goes to each home's daemon.log, shown
// when the test fails.
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { join, relative } from "node:path"
import { describe, expect, it } from "vitest"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import { type Agent, cli, cliJson, kill9, sleep, waitFor } from "../integration/daemon.support.js"
import { type ClusterStatus, clusterFile, type Enqueued, query, runnerOf, startRunner, waitRunnerReady } from "../support/cluster.js"
import { freePort, freshDatabase } from "../support/postgres.js"
import { request } from "../integration/http.support.js"
import { claudeMeteredHome, claudeMeterEnvKeys, daemonTestScope, withLlm } from "./support.js"

const { ds, homes } = daemonTestScope(claudeMeterEnvKeys)
const { pg, dir } = clusterFile("substrat-cluster-scenario-", (dir) => ({ SUBSTRAT_CLUSTER_WORKSPACE_REMOTE: join(dir, "remote.git") }))
const remote = join(dir, "remote.git")

const TREES = 30
const CLIENTS_PER_RUNNER = 2

/** Roots (role `root`) spawn their helper in their first turn, then answer each turn after a moment; helpers echo. */
const book = JSON.stringify({
  "role:root": {
    steps: [
      { tools: [{ tool: "spawn_agent", args: { name: "{{agent}}-h", instructions: "You help." } }], text: "spawned" },
      ...Array.from({ length: 400 }, () => ({ text: "answer {{turn}}", delay_ms: 600 }))
    ],
    after: "echo"
  },
  "*": { steps: [], after: "echo" }
})

interface Runner {
  readonly label: string
  readonly home: string
  readonly port: number
  readonly address: string
  pid: number
}

/** One request of a client: its text is unique; `id` once the runner acknowledged it. */
interface Attempt {
  readonly phase: string
  readonly tree: Agent
  readonly text: string
  readonly kind: Kind
  readonly via: string
  code: number
  stderr: string
  id?: string | undefined
  answerId?: string | undefined
}

/** How a client sends: the CLI with `--wait`, the CLI without, HTTP with `"wait": true`. */
type Kind = "cli-wait" | "cli" | "http-wait"
const KINDS: ReadonlyArray<Kind> = ["cli-wait", "cli", "http-wait", "cli"]

interface Ws {
  readonly id: string
  readonly default_for: string | null
  readonly root_path: string
}

/** Every file under `root` (relative paths, sorted). */
const filesUnder = (root: string): Array<string> =>
  (fs.readdirSync(root, { recursive: true, withFileTypes: true }) as Array<fs.Dirent>)
    .filter((d) => d.isFile())
    .map((d) => relative(root, join(d.parentPath, d.name)))
    .sort()

const git = (args: ReadonlyArray<string>) => execFileSync("git", ["--git-dir", remote, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim()

describe("cluster scenario", () => {
  it("three runners under load: kill -9 of one mid-turn, restart, drain and undrain of another; nothing acknowledged lost, nothing answered twice", () =>
    withLlm([
      { match: { system: "AGENT=moved", lastUser: "what was the code word", anywhere: "HERON" }, reply: Reply.text("The code word was HERON."), label: "resumed" },
      { match: { system: "AGENT=moved", lastUser: "what was the code word" }, reply: Reply.text("I was never told a code word."), label: "fresh" },
      { match: { system: "AGENT=moved", lastUser: "remember the code word" }, reply: Reply.text("Noted."), label: "told" },
      // Claude Code's side requests (titles, probes).
      { reply: Reply.text("ok"), times: Infinity, label: "side" }
    ], async (llm) => {
      const runners: Array<Runner> = []
      for (const label of ["A", "B", "C"]) {
        const home = claudeMeteredHome(llm, homes, `scn${label.toLowerCase()}-`)
        fs.mkdirSync(join(home, "scripts"), { recursive: true })
        fs.writeFileSync(join(home, "scripts", "load.json"), book)
        const port = await freePort()
        runners.push({ label, home, port, address: `127.0.0.1:${port}`, pid: 0 })
      }
      try {
        await scenario(llm, runners)
      } catch (e) {
        for (const r of runners) {
          const log = join(r.home, "daemon.log")
          const text = fs.existsSync(log) ? fs.readFileSync(log, "utf8") : "(no daemon.log)"
          console.error(`--- runner ${r.label} ${r.address} daemon.log (last 80 lines) ---\n${text.split("\n").slice(-80).join("\n")}`)
        }
        throw e
      }
    }), 900_000)
})

const scenario = async (llm: Parameters<Parameters<typeof withLlm>[1]>[0], runners: Array<Runner>) => {
  execFileSync("git", ["init", "--quiet", "--bare", remote])
  const url = await freshDatabase(pg.server())
  const byAddress = (address: string) => runners.find((r) => r.address === address)!
  for (const [i, r] of runners.entries()) r.pid = await startRunner(ds, r.home, url, r.port, i + 1)
  for (const r of runners) await waitRunnerReady(r.home, 3)
  const [ra] = runners as [Runner, Runner, Runner]

  // The claude tree first: its runner is the one killed.
  const claude = await cliJson<Agent>(ra.home, ["agent", "create", "--name", "claude", "--provider", "claude", "--instructions", "AGENT=moved"])
  const x = byAddress(await runnerOf(url, claude.id))
  const told = await cli(ra.home, ["agent", "send", "claude", "remember the code word: HERON", "--wait"])
  expect(told.code, told.stderr).toBe(0)
  expect(told.stdout).toContain("Noted.")

  // 30 scripted trees, created through the three runners; the engine places them.
  const trees: Array<Agent> = []
  for (let t = 0; t < TREES; t++) {
    trees.push(await cliJson<Agent>(runners[t % 3]!.home, ["agent", "create", "--name", `t${t}`, "--provider", "scripted:load", "--role", "root"]))
  }
  const placement = async () => new Map((await query(url, "SELECT root_id, runner FROM substrat_trees")).map((r) => [String(r["root_id"]), String(r["runner"])]))
  const placed = await placement()
  const onX = trees.filter((t) => placed.get(t.id) === x.address)
  expect(onX.length, "trees on the runner to be killed").toBeGreaterThan(0)
  // Each tree's workspace gets a file its first turn records (and pushes to the remote).
  const workspaces = new Map<string, Ws>()
  for (const r of runners) {
    for (const w of (await cliJson<{ workspaces: ReadonlyArray<Ws> }>(r.home, ["workspace", "list"])).workspaces) {
      if (w.default_for !== null && w.root_path.startsWith(r.home)) workspaces.set(w.default_for, w)
    }
  }
  for (const t of trees) fs.writeFileSync(join(workspaces.get(t.name)!.root_path, "recorded.txt"), `${t.name} on ${placed.get(t.id)}\n`)

  const attempts: Array<Attempt> = []
  const inFlight = new Map<string, { readonly tree: Agent; readonly kind: Kind; readonly via: Runner }>()
  const send = async (phase: string, via: Runner, tree: Agent, text: string, kind: Kind): Promise<Attempt> => {
    inFlight.set(text, { tree, kind, via })
    const r = kind === "http-wait"
      ? await request({ socketPath: join(via.home, "http.sock") }, "POST", `/v1/agents/${tree.name}/messages`, { text, wait: true }).then(
        (res) => ({ code: res.status === 200 ? 0 : res.status, stdout: res.body, stderr: res.status === 200 ? "" : res.body }),
        (e: unknown) => ({ code: -1, stdout: "", stderr: String(e) })
      )
      : await cli(via.home, ["agent", "send", tree.name, text, ...(kind === "cli-wait" ? ["--wait", "--timeout", "90"] : []), "--json"])
    inFlight.delete(text)
    const sync = kind !== "cli"
    const a: Attempt = { phase, tree, text, kind, via: via.label, code: r.code, stderr: r.stderr }
    if (r.code === 0) {
      const out = JSON.parse(r.stdout) as { message_id: string; answer?: { message_id: string; error: boolean } }
      a.id = out.message_id
      a.answerId = out.answer?.message_id
      if (sync) expect(out.answer?.error, `${text}: ${r.stdout}`).toBe(false)
    } else {
      // A wait lost with its runner after the send was acknowledged names the message.
      const open = /message ([0-9a-f-]{36}) stays open/.exec(r.stderr)
      if (open !== null) a.id = open[1]
    }
    attempts.push(a)
    return a
  }
  // The first turn of each tree (spawns its helper, records recorded.txt), six at a time.
  for (let t = 0; t < TREES; t += 6) {
    await Promise.all(trees.slice(t, t + 6).map((tree, i) => send("setup", runners[i % 3]!, tree, `setup of ${tree.name}`, "cli-wait")))
  }
  for (const a of attempts) expect(a.code, `${a.text}: ${a.stderr}`).toBe(0)
  for (const t of trees) {
    expect(git(["show", `refs/substrat/ws/${workspaces.get(t.name)!.id}:recorded.txt`])).toBe(`${t.name} on ${placed.get(t.id)}`)
  }

  /** The clients, until `stop`: two through each runner, each over every tree from its own offset. */
  const load = (phase: string) => {
    let stopped = false
    const clients = Array.from({ length: runners.length * CLIENTS_PER_RUNNER }, async (_, c) => {
      let runner = c % runners.length
      for (let n = 0; !stopped; n++) {
        const tree = trees[(c * 5 + n) % TREES]!
        const a = await send(phase, runners[runner]!, tree, `${phase} c${c} n${n} to ${tree.name}`, KINDS[(c + n) % KINDS.length]!)
        if (a.code !== 0) {
          // Its runner is gone, the tree is between runners, or the wait was cut: next runner, a moment later.
          runner = (runner + 1) % runners.length
          await sleep(300)
        }
      }
    })
    return {
      acked: () => attempts.filter((a) => a.phase === phase && a.id !== undefined).length,
      stop: async () => {
        stopped = true
        await Promise.all(clients)
      }
    }
  }

  /** Every root's `message.enqueued` entries, by root session. */
  const rootLogs = async () => {
    const sessions = [...trees, claude].map((t) => `'${t.session_id}'`).join(",")
    const rows = await query(url, `SELECT session_id, line FROM substrat_events WHERE session_id IN (${sessions}) AND line LIKE '%"event":"message.enqueued"%' ORDER BY session_id, seq`)
    const logs = new Map<string, Array<Enqueued>>()
    for (const r of rows) {
      const entry = JSON.parse(String(r["line"])) as { data: Enqueued }
      const list = logs.get(String(r["session_id"])) ?? []
      list.push(entry.data)
      logs.set(String(r["session_id"]), list)
    }
    return logs
  }
  const answersTo = (log: ReadonlyArray<Enqueued>, id: string | undefined) => log.filter((e) => e.recipient === "USER" && e.reply_to === id)

  /** Once every USER message in the roots' logs has an answer: the exactly-once checks over every attempt so far. */
  const checkOnce = async (what: string) => {
    const logs = await waitFor(`${what}: every USER message answered`, async () => {
      const logs = await rootLogs()
      for (const log of logs.values()) {
        for (const m of log.filter((e) => e.sender === "USER")) if (answersTo(log, m.id).length === 0) return undefined
      }
      return logs
    }, 180_000)
    let acknowledged = 0
    for (const a of attempts) {
      const log = logs.get(a.tree.session_id) ?? []
      const logged = log.filter((e) => e.sender === "USER" && e.payload === a.text)
      // No attempt is logged twice (a re-delivered send is logged once).
      expect(logged.length, `${what}: ${a.text} logged ${logged.length} times (client exit ${a.code}: ${a.stderr})`).toBeLessThanOrEqual(1)
      if (a.id !== undefined) {
        acknowledged++
        // Acknowledged: in its root's log once, under the id the client got.
        expect(logged.map((e) => e.id), `${what}: acknowledged ${a.text}`).toEqual([a.id])
        expect(log.filter((e) => e.id === a.id)).toHaveLength(1)
      }
      for (const m of logged) {
        // Answered once; the client that waited got that answer.
        const answers = answersTo(log, m.id)
        expect(answers.length, `${what}: answers to ${a.text}`).toBe(1)
        if (a.answerId !== undefined) expect(answers[0]!.id, `${what}: the answer ${a.text}'s client got`).toBe(a.answerId)
      }
    }
    // Nothing else from USER was logged.
    const texts = new Set(attempts.map((a) => a.text))
    for (const t of trees) {
      for (const m of (logs.get(t.session_id) ?? []).filter((e) => e.sender === "USER")) expect(texts.has(m.payload ?? ""), `${what}: stray ${m.payload}`).toBe(true)
    }
    return acknowledged
  }

  /** A tree answers a `--wait` through `via`. */
  const answers = async (phase: string, via: Runner, tree: Agent) => {
    const a = await waitFor(`${tree.name} answering through ${via.label}`, async () => {
      const a = await send(phase, via, tree, `${phase} check of ${tree.name} through ${via.label} #${attempts.length}`, "cli-wait")
      return a.code === 0 ? a : (await sleep(300), undefined)
    }, 120_000)
    expect(a.answerId).toBeDefined()
  }

  // 1. kill -9 of X while an HTTP request with wait, sent through a survivor, is logged on X and
  // waits for its answer (the engine's request is open until then), and X's turns run.
  const survivors = runners.filter((r) => r !== x)
  const p1 = load("kill")
  const redelivered = await waitFor("load running and an HTTP wait logged on X, unanswered", async () => {
    if (p1.acked() < 12) return undefined
    const waiting = [...inFlight.entries()].filter(([, f]) => f.kind === "http-wait" && f.via !== x && onX.includes(f.tree))
    if (waiting.length === 0) return undefined
    const logs = await rootLogs()
    for (const [text, f] of waiting) {
      const m = (logs.get(f.tree.session_id) ?? []).find((e) => e.sender === "USER" && e.payload === text)
      if (m !== undefined && answersTo(logs.get(f.tree.session_id)!, m.id).length === 0) return text
    }
    return undefined
  }, 180_000)
  // Written after X's last recorded turn: what the survivor's workspace must not have unless a turn recorded it.
  for (const t of onX) fs.writeFileSync(join(workspaces.get(t.name)!.root_path, "late.txt"), "written just before the kill\n")
  await kill9(x.pid)
  await waitFor("every tree of X recorded on a survivor", async () => {
    const now = await placement()
    return onX.every((t) => survivors.some((s) => s.address === now.get(t.id))) && survivors.some((s) => s.address === now.get(claude.id)) ? true : undefined
  }, 120_000)
  const ackedAtMove = p1.acked()
  await waitFor("the load going on after the move", () => p1.acked() >= ackedAtMove + 12 ? true : undefined, 180_000)
  await p1.stop()
  // The request open when X died was delivered again to the tree's new owner: its client got the answer.
  const again = attempts.find((a) => a.text === redelivered)!
  expect(again.code, `the HTTP wait open at the kill: ${again.stderr}`).toBe(0)
  expect(again.answerId).toBeDefined()
  // X's trees answer through each survivor; the list of any survivor has them (and their helpers) on survivors.
  for (const [i, t] of onX.entries()) await answers("kill", survivors[i % 2]!, t)
  const listed = await cliJson<{ agents: ReadonlyArray<Agent>; placement: ReadonlyArray<{ root_id: string; runner: string }> }>(survivors[0]!.home, ["agent", "list"])
  for (const t of onX) {
    expect(survivors.map((s) => s.address)).toContain(listed.placement.find((p) => p.root_id === t.id)?.runner)
    expect(listed.agents.filter((a) => a.parent_id === t.id).map((a) => a.name)).toEqual([`${t.name}-h`])
  }
  // The claude agent continues its conversation on the survivor.
  const asked = await cli(survivors[0]!.home, ["agent", "send", "claude", "what was the code word?", "--wait"])
  expect(asked.code, asked.stderr).toBe(0)
  expect(asked.stdout).toContain("The code word was HERON.")
  const labels = (await Effect.runPromise(llm.modelRequests)).map((r) => r.label)
  expect(labels).toContain("resumed")
  expect(labels).not.toContain("fresh")
  // Each moved tree's workspace on its new runner is what the remote recorded of it: recorded.txt,
  // and late.txt only where a turn on X recorded it before the kill.
  const afterKill = await placement()
  const wsOn = new Map<string, ReadonlyArray<Ws>>()
  for (const s of survivors) wsOn.set(s.address, (await cliJson<{ workspaces: ReadonlyArray<Ws> }>(s.home, ["workspace", "list"])).workspaces)
  for (const t of onX) {
    const id = workspaces.get(t.name)!.id
    const ws = wsOn.get(afterKill.get(t.id)!)!.find((w) => w.id === id)
    expect(ws?.root_path.startsWith(byAddress(afterKill.get(t.id)!).home), `${t.name}'s workspace on its runner`).toBe(true)
    expect(fs.readFileSync(join(ws!.root_path, "recorded.txt"), "utf8")).toBe(`${t.name} on ${x.address}\n`)
    expect(filesUnder(ws!.root_path), `${t.name}'s workspace`).toEqual(git(["ls-tree", "-r", "--name-only", `refs/substrat/ws/${id}`]).split("\n").sort())
  }
  const acked1 = await checkOnce("after the kill")

  // 2. X again (its home, its address), and Y drained, under load.
  const y = survivors[0]!
  x.pid = await startRunner(ds, x.home, url, x.port, 3)
  const p2 = load("drain")
  await waitFor("load running", () => p2.acked() >= 6 ? true : undefined, 180_000)
  const drained = await cliJson<{ self: string; draining: boolean }>(y.home, ["cluster", "drain"])
  expect(drained).toMatchObject({ self: y.address, draining: true })
  await waitFor("Y drained: no shard, no tree", async () => {
    const st = await cliJson<ClusterStatus>(runners.find((r) => r !== y)!.home, ["cluster", "status"])
    const me = st.runners.find((r) => r.address === y.address)
    return me?.draining === true && me.shards === 0 && me.trees === 0 && [...(await placement()).values()].every((r) => r !== y.address) ? true : undefined
  }, 180_000)
  const ackedAtDrain = p2.acked()
  await waitFor("the load going on after the drain", () => p2.acked() >= ackedAtDrain + 12 ? true : undefined, 180_000)
  await p2.stop()
  expect((await cli(y.home, ["cluster", "status"])).stdout).toContain(`${y.address} (this)\tdrained\t0\t0`)
  // X has trees again (the handover to a runner that came back).
  expect([...(await placement()).values()].filter((r) => r === x.address).length).toBeGreaterThan(0)
  const acked2 = await checkOnce("after the restart and the drain")
  expect(acked2).toBeGreaterThan(acked1)

  // 3. Y undrained: it gets shards and trees again; a tree on it answers through another runner.
  const undrained = await cliJson<{ self: string; draining: boolean }>(y.home, ["cluster", "undrain"])
  expect(undrained).toMatchObject({ self: y.address, draining: false })
  const back = await waitFor("Y holding shards and trees again", async () => {
    const st = await cliJson<ClusterStatus>(y.home, ["cluster", "status"])
    const me = st.runners.find((r) => r.self)
    const rows = [...(await placement()).entries()].filter(([, r]) => r === y.address)
    return me?.healthy === true && !me.draining && st.held > 0 && st.held === me.shards && rows.length > 0 ? rows : undefined
  }, 180_000)
  const onY = trees.find((t) => back.some(([id]) => id === t.id))
  expect(onY, "a scripted tree back on Y").toBeDefined()
  await answers("undrain", x, onY!)
  await checkOnce("after the undrain")
}
