// Quotas through the daemon (docs/tools.md, "Quotas"): a root created with its own quota
// (`agent create --quota-open-questions 2`) whose scripted turn asks the human three times gets
// two questions into the inbox; `agent inspect` shows the limit and the count; after kill -9 and a
// start both are the same (the count is the durable inbox's, the limit is logged with the caps).
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type Agent, cliJson, daemons, kill9, startDaemon, waitFor } from "../integration/daemon.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const owned = daemons()
const dir = makeTmpDir("substrat-quota-e2e-")
const home = join(dir, "home")
afterAll(async () => {
  await owned.killAll()
  removeDir(dir)
})

interface Inspected {
  readonly quotas?: { readonly limits: Record<string, number>; readonly used: Record<string, number> }
}

const events = (session: string): ReadonlyArray<{ event: string }> =>
  fs.readFileSync(join(home, "agents", session, "events.jsonl"), "utf8").split("\n").filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as { event: string })

describe("quotas in the daemon", () => {
  it("a root's own open_questions quota holds, and it and the open count survive kill -9", async () => {
    fs.mkdirSync(join(home, "scripts"), { recursive: true })
    const ask = { tool: "ask_human", args: { question: "may I?" } }
    fs.writeFileSync(join(home, "scripts", "asker.json"), JSON.stringify({ "*": { steps: [{ tools: [ask, ask, ask], text: "asked" }] } }))
    let pid = await startDaemon(home)
    owned.track(pid)
    const a = await cliJson<Agent>(home, ["agent", "create", "--name", "asker", "--provider", "scripted:asker", "--quota-open-questions", "2"])
    await cliJson(home, ["agent", "send", "asker", "go", "--notify"])
    await waitFor("turn done", () => (events(a.session_id).some((e) => e.event === "turn.complete") ? true : undefined))
    expect(events(a.session_id).filter((e) => e.event === "human.asked")).toHaveLength(2)
    const before = await cliJson<Inspected>(home, ["agent", "inspect", "asker"])
    expect(before.quotas?.limits["open_questions"]).toBe(2)
    expect(before.quotas?.used["open_questions"]).toBe(2)
    expect(before.quotas?.limits["messages_per_minute"]).toBe(120) // the config's default

    await kill9(pid)
    pid = await startDaemon(home)
    owned.track(pid)
    const after = await cliJson<Inspected>(home, ["agent", "inspect", "asker"])
    expect(after.quotas?.limits["open_questions"]).toBe(2)
    expect(after.quotas?.used["open_questions"]).toBe(2)
    await cliJson(home, ["daemon", "stop"])
  }, 120_000)
})
