// A question to the human does not end USER's request (the real daemon and CLI, a scripted lead
// that asks): `agent send --wait` says on stderr that the request waits on the human, with the
// inbox id; the human answers with `substrat inbox answer`; --wait then prints the team's final
// answer — not the lead's interim "I asked you…". The same with kill -9 between the question and
// the answer: after the restart the request is still open, and `agent wait` and the inbox's
// answer item deliver the final answer, exactly once.
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type Agent, cli, cliJson, daemons, inboxItems, kill9, spawnCli, startDaemon, waitFor } from "../integration/daemon.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { agentEvents as events, dataNamed as of } from "./support.js"

type Item = { readonly id: string; readonly kind: string; readonly agent_name: string; readonly text: string }

const owned = daemons()
const dirs: Array<string> = []
afterAll(async () => {
  await owned.killAll()
  for (const d of dirs) removeDir(d)
})

const book = {
  "*": {
    steps: [
      { tools: [{ tool: "ask_human", args: { question: "Which colour?" } }], text: "I asked you which colour." },
      { text: "The team's final answer: painted." }
    ],
    after: "silent"
  }
}

const home = () => {
  const h = makeTmpDir("sask-")
  dirs.push(h)
  Fs.mkdirSync(Path.join(h, "scripts"), { recursive: true })
  Fs.writeFileSync(Path.join(h, "scripts", "b.json"), JSON.stringify(book))
  return h
}

const items = async (h: string) => (await cliJson<{ items: ReadonlyArray<Item> }>(h, ["inbox"])).items
const question = (h: string) => waitFor("the question", async () => (await inboxItems<Item>(h)).find((i) => i.kind === "question"))

/** The messages to USER in the lead's log: [kind, progress, text]. */
const toUser = (h: string, sid: string) =>
  of(events(h, sid), "message.enqueued").filter((m) => m["recipient"] === "USER").map((m) => [m["kind"], m["progress"] === true, m["payload"]])

describe("ask_human keeps USER's request open", () => {
  it("send --wait: stderr names the question's inbox item; after the answer it prints the final answer", async () => {
    const h = home()
    owned.track(await startDaemon(h))
    const lead = await cliJson<Agent>(h, ["agent", "create", "--provider", "scripted:b", "--name", "lead"])
    const waiting = spawnCli(h, ["agent", "send", "--wait", "lead", "paint the shed"])
    const q = await question(h)
    expect(q).toMatchObject({ agent_name: "lead", text: "Which colour?" })
    await waitFor("the stderr note", () => (waiting.err().includes(q.id) ? true : undefined))
    expect(waiting.err()).toContain(`waiting on you: lead asks (inbox item ${q.id}): Which colour?`)
    expect(waiting.err()).toContain(`substrat inbox answer ${q.id}`)
    expect(waiting.out()).toBe("")

    expect((await cli(h, ["inbox", "answer", q.id, "green"])).code).toBe(0)
    expect(await waiting.exit).toBe(0)
    expect(waiting.out()).toBe("The team's final answer: painted.\n")
    // The interim text went to USER as progress; one answer, the final one.
    expect(toUser(h, lead.session_id)).toEqual([
      ["notification", true, "I asked you which colour."],
      ["response", false, "The team's final answer: painted."]
    ])
    // `agent wait` gives the same answer.
    const again = await cli(h, ["agent", "wait", "lead"])
    expect(again.stdout).toBe("The team's final answer: painted.\n")
  }, 180_000)

  it("kill -9 between the question and the answer: the request stays open; agent wait and the inbox give the final answer once", async () => {
    const h = home()
    const pid = await startDaemon(h)
    owned.track(pid)
    const lead = await cliJson<Agent>(h, ["agent", "create", "--provider", "scripted:b", "--name", "lead"])
    const waiting = spawnCli(h, ["agent", "send", "--wait", "lead", "paint the shed"])
    const q = await question(h)
    // The asking turn is over once its interim text went to USER as progress (logged after its
    // turn.complete): the kill comes between the question and the answer, not inside the turn's end.
    await waitFor("the asking turn's end", () => (toUser(h, lead.session_id).length === 1 ? true : undefined))
    expect(of(events(h, lead.session_id), "turn.complete")).toHaveLength(1)
    await kill9(pid)
    expect(await waiting.exit).toBe(3)
    const request = of(events(h, lead.session_id), "message.enqueued").find((m) => m["sender"] === "USER")!["id"] as string
    expect(waiting.err()).toContain(`substrat agent wait lead ${request}`)

    owned.track(await startDaemon(h))
    // Still asking, and the request is still open (no answer item yet).
    expect((await items(h)).map((i) => [i.kind, i.id])).toEqual([["question", q.id]])
    expect((await cli(h, ["inbox", "answer", q.id, "green"])).code).toBe(0)
    const answer = await waitFor("the answer item", async () => (await inboxItems<Item>(h)).find((i) => i.kind === "answer"))
    expect(answer).toMatchObject({ id: expect.any(String), agent_name: "lead", text: "The team's final answer: painted." })
    const rewait = await cli(h, ["agent", "wait", "lead", request])
    expect(rewait.code).toBe(0)
    expect(rewait.stdout).toBe("The team's final answer: painted.\n")
    expect(toUser(h, lead.session_id)).toEqual([
      ["notification", true, "I asked you which colour."],
      ["response", false, "The team's final answer: painted."]
    ])
  }, 180_000)
})
