// Budgets and the human inbox through the REAL daemon process and CLI (scripted agents, whose
// per-turn usage counts: the scripted provider makes no model requests):
//   - a turn budget smaller than the work parks the root at the right point (no turn past it),
//     the inbox shows the breach, kill -9 while parked, restart: still parked, same totals
//     (nothing charged twice), raising the budget resumes it;
//   - `ask_human` round trips through the CLI and through the HTTP API: the agent is parked
//     (a message sent meanwhile does not run a turn) until the answer arrives as its next message.
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type Agent, cli, cliJson, daemons, inboxItems, kill9, sleep, startDaemon, waitFor } from "../integration/daemon.support.js"
import { request } from "../integration/http.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

type Entry = { readonly event: string; readonly data: Record<string, unknown> }
const events = (home: string, sid: string): ReadonlyArray<Entry> =>
  Fs.readFileSync(Path.join(home, "agents", sid, "events.jsonl"), "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as Entry)
const of = (es: ReadonlyArray<Entry>, name: string) => es.filter((e) => e.event === name).map((e) => e.data)

interface Item {
  readonly id: string
  readonly kind: string
  readonly agent_name: string
  readonly text: string
}
interface Usage {
  readonly turns: number
  readonly input_tokens: number
  readonly output_tokens: number
  readonly cost_usd: number
}
interface Inspected {
  readonly queued_turns: number
  readonly usage: { readonly own: Usage; readonly subtree: Usage }
}

const owned = daemons()
const dirs: Array<string> = []
afterAll(async () => {
  await owned.killAll()
  for (const d of dirs) removeDir(d)
})

const home = (book: unknown) => {
  const h = makeTmpDir("sbi-")
  dirs.push(h)
  Fs.mkdirSync(Path.join(h, "scripts"), { recursive: true })
  Fs.writeFileSync(Path.join(h, "scripts", "b.json"), JSON.stringify(book))
  return h
}

/** The inbox without the agents' answers to USER (they wait to be read too; test/e2e/caps-queue.test.ts covers them). */
const inbox = async (h: string) => (await cliJson<{ items: ReadonlyArray<Item> }>(h, ["inbox"])).items.filter((i) => i.kind !== "answer")

describe("budgets and the human inbox (daemon + CLI)", () => {
  it("a turn budget parks the root, survives kill -9, and a raise resumes it", async () => {
    const h = home({ "*": { steps: [{ text: "done", usage: { input_tokens: 100, output_tokens: 10, cost_usd: 0.01 } }], after: "repeat-last" } })
    owned.track(await startDaemon(h))
    const root = await cliJson<Agent>(h, ["agent", "create", "--provider", "scripted:b", "--name", "lead", "--budget-turns", "2"])
    for (const m of ["one", "two", "three"]) expect((await cli(h, ["agent", "send", "lead", m])).code).toBe(0)
    const items = await waitFor("the breach in the inbox", async () => {
      const xs = (await inboxItems<Item>(h)).filter((i) => i.kind !== "answer")
      return xs.some((i) => i.kind === "budget") ? xs : undefined
    })
    expect(items).toMatchObject([{ kind: "budget", agent_name: "lead" }])
    expect(items[0]!.text).toContain("turn budget spent (2 of 2 turns)")
    await sleep(500)
    const before = await cliJson<Inspected>(h, ["agent", "inspect", "lead"])
    expect(before.usage.own).toMatchObject({ turns: 2, input_tokens: 200, output_tokens: 20 })
    expect(before.usage.own.cost_usd).toBeCloseTo(0.02, 10)
    expect(of(events(h, root.session_id), "turn.start").map((d) => d["prompt"])).toHaveLength(2)

    // kill -9 while parked; the restarted daemon keeps it parked with the same totals.
    const status = await cliJson<{ pid: number }>(h, ["daemon", "status"])
    await kill9(status.pid)
    owned.track(await startDaemon(h))
    await sleep(1000)
    expect((await inbox(h)).map((i) => [i.kind, i.id])).toEqual([["budget", items[0]!.id]])
    const after = await cliJson<Inspected>(h, ["agent", "inspect", "lead"])
    expect(after.usage.own).toEqual(before.usage.own)
    expect(of(events(h, root.session_id), "turn.start")).toHaveLength(2)
    const shown = await cliJson<{ exhausted: string | null }>(h, ["budget", "show", "lead"])
    expect(shown.exhausted).toContain("turn budget spent")

    // Raise: the parked message runs, the breach leaves the inbox.
    expect((await cli(h, ["budget", "set", "lead", "--turns", "3"])).code).toBe(0)
    await waitFor("the third turn", () => (of(events(h, root.session_id), "turn.complete").length === 3 ? true : undefined))
    expect(String(of(events(h, root.session_id), "turn.start")[2]!["prompt"])).toContain("three")
    expect(await inbox(h)).toEqual([])
    const bad = await cli(h, ["budget", "set", "lead", "--usd", "-1"])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain("cannot be negative")
  })

  it("ask_human: parked until the answer, through the CLI and through HTTP", async () => {
    const h = home({
      asker: {
        steps: [
          { tools: [{ tool: "ask_human", args: { question: "Which color?" } }], text: "asked" },
          { text: "got: {{prompt}}" },
          { tools: [{ tool: "ask_human", args: { question: "Which size?" } }], text: "asked again" },
          { text: "got: {{prompt}}" }
        ],
        after: "echo"
      }
    })
    owned.track(await startDaemon(h))
    const a = await cliJson<Agent>(h, ["agent", "create", "--provider", "scripted:b", "--name", "asker"])
    expect((await cli(h, ["agent", "send", "asker", "start"])).code).toBe(0)
    const q = await waitFor("the question", async () => (await inboxItems<Item>(h)).find((i) => i.kind === "question"))
    expect(q).toMatchObject({ agent_name: "asker", text: "Which color?" })
    // Parked: a message meanwhile runs no turn.
    expect((await cli(h, ["agent", "send", "asker", "are you there?", "--notify"])).code).toBe(0)
    await sleep(800)
    expect(of(events(h, a.session_id), "turn.start")).toHaveLength(1)
    const answered = await cli(h, ["inbox", "answer", q.id, "blue"])
    expect(answered.code).toBe(0)
    await waitFor("the answer's turn", () => (of(events(h, a.session_id), "turn.complete").length >= 2 ? true : undefined))
    const second = String(of(events(h, a.session_id), "turn.start")[1]!["prompt"])
    expect(second).toContain("Which color?")
    expect(second).toContain("blue")
    expect((await inbox(h)).map((i) => i.id)).not.toContain(q.id)

    // Another question, answered over HTTP (http.sock).
    expect((await cli(h, ["agent", "send", "asker", "next"])).code).toBe(0)
    const target = { socketPath: Path.join(h, "http.sock") }
    const q2 = await waitFor("the second question", async () => {
      const r = await request(target, "GET", "/v1/inbox")
      return r.json<{ items: ReadonlyArray<Item> }>().items.find((i) => i.kind === "question")
    })
    expect(q2.text).toBe("Which size?")
    const missing = await request(target, "POST", "/v1/inbox/nope/answer", { text: "x" })
    expect(missing.status).toBe(404)
    const r = await request(target, "POST", `/v1/inbox/${q2.id}/answer`, { text: "large" })
    expect(r.status).toBe(200)
    expect(r.json()).toMatchObject({ kind: "question", agent_name: "asker" })
    await waitFor("the HTTP answer's turn", () => (of(events(h, a.session_id), "turn.complete").length >= 4 ? true : undefined))
    expect(String(of(events(h, a.session_id), "turn.start")[3]!["prompt"])).toContain("large")
    expect(of(events(h, a.session_id), "human.answered").map((d) => d["answer"])).toEqual(["blue", "large"])
    expect(await inbox(h)).toEqual([])
  })
})
