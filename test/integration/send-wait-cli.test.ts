// `agent send --wait [--timeout S]` and `agent send <agent> -` through the real CLI and daemon:
// the answer printed is the final text of the root's turn that ends with none of its own
// requests outstanding (the scripted demo: after both workers replied), exit 0; 5 when the
// timeout passes first; 7 when the agent fails to answer. The HTTP route with `wait` returns
// the same answer (test/integration/http-api.test.ts).
import * as fs from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeTmpDir, removeDir } from "../support/tmp.js"
import { type Agent, cli, cliJson, daemons, inboxItems, startDaemon, waitQuiet } from "./daemon.support.js"

const owned = daemons()
const dir = makeTmpDir("substrat-wait-")
const home = join(dir, "home")

// slowpoke's turn is held until the test creates `go`.
const go = join(dir, "go")
const books = {
  slow: { "*": { steps: [{ text: "slow answer", wait_for: go }], after: "silent" } },
  broken: { "*": { steps: [{ error: "the model fell over" }], after: "silent" } }
}

beforeAll(async () => {
  fs.mkdirSync(join(home, "scripts"), { recursive: true })
  for (const [name, book] of Object.entries(books)) fs.writeFileSync(join(home, "scripts", `${name}.json`), JSON.stringify(book))
  owned.track(await startDaemon(home))
}, 60_000)

afterAll(async () => {
  await owned.killAll()
  removeDir(dir)
})

/** The ids `user.read` names in `a`'s log. */
const readIds = (a: Agent): Array<string> =>
  fs.readFileSync(join(home, "agents", a.session_id, "events.jsonl"), "utf8").trimEnd().split("\n")
    .map((l) => JSON.parse(l) as { event: string; data: { message_ids?: Array<string> } })
    .flatMap((e) => e.event === "user.read" ? e.data.message_ids ?? [] : [])

/** The ids of the items in the human's inbox. */
const inboxIds = async (): Promise<Array<string>> => (await inboxItems<{ id: string }>(home)).map((i) => i.id)

describe("agent send --wait", () => {
  it("prints the root's final answer (after both workers replied), not its first turn's text", async () => {
    await cliJson<Agent>(home, ["agent", "create", "--name", "lead", "--provider", "scripted:demo"])
    const r = await cli(home, ["agent", "send", "lead", "Plan the project", "--wait"])
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    expect(r.stdout).toBe("Both workers answered; the team is done.\n")
    // The progress before the answer is in the transcript, marked, and so is the answer.
    const logs = await cli(home, ["agent", "logs", "lead"])
    expect(logs.stdout).toMatch(/lead → USER \(progress\): I spawned alice and bob/)
    expect(logs.stdout).toMatch(/lead → USER: Both workers answered; the team is done\.$/m)
    await waitQuiet(home)
  }, 60_000)

  it("reads the message from stdin with -; --json carries the answer", async () => {
    const echo1 = await cliJson<Agent>(home, ["agent", "create", "--name", "echo1", "--provider", "scripted:echo"])
    const r = await cli(home, ["agent", "send", "echo1", "-", "--wait", "--json"], "first line from stdin\nsecond line\n")
    expect(r.code).toBe(0)
    const out = JSON.parse(r.stdout) as { message_id: string; answer: { text: string; error: boolean; message_id: string } }
    expect(out.answer.error).toBe(false)
    expect(out.answer.text).toMatch(/^echo: /)
    // The whole of stdin was the message.
    const logs = await cli(home, ["agent", "logs", "echo1"])
    expect(logs.stdout).toContain("USER → echo1: first line from stdin ↵ second line")
    // The answer the wait returned is read: logged once (with the answer), not in the inbox.
    expect(readIds(echo1)).toEqual([out.answer.message_id])
    expect((await inboxIds()).includes(out.answer.message_id)).toBe(false)
  }, 60_000)

  it("exits 5 when --timeout passes first (the answer still comes), 7 when the agent fails", async () => {
    const slowpoke = await cliJson<Agent>(home, ["agent", "create", "--name", "slowpoke", "--provider", "scripted:slow"])
    const slow = await cli(home, ["agent", "send", "slowpoke", "hurry", "--wait", "--timeout", "0.5"])
    expect(slow.code).toBe(5)
    expect(slow.stderr).toMatch(/no answer from slowpoke within 0\.5 s/)
    expect(slow.stdout).toBe("")
    fs.writeFileSync(go, "")
    await waitQuiet(home)
    const logs = await cli(home, ["agent", "logs", "slowpoke"])
    expect(logs.stdout).toMatch(/slowpoke → USER: slow answer/)
    // Nobody waited for it any more when it came: unread, in the inbox.
    expect(readIds(slowpoke)).toEqual([])
    expect((await inboxIds()).length).toBeGreaterThan(0)

    await cliJson<Agent>(home, ["agent", "create", "--name", "broken", "--provider", "scripted:broken"])
    const failed = await cli(home, ["agent", "send", "broken", "try", "--wait"])
    expect(failed.code).toBe(7)
    expect(failed.stdout).toMatch(/^\[error\] broken failed to answer: .*the model fell over/)
    expect(failed.stderr).toMatch(/broken did not answer/)
  }, 60_000)

  it("refuses --wait with --notify, and --timeout without --wait, before sending (exit 2)", async () => {
    const a = await cli(home, ["agent", "send", "lead", "x", "--wait", "--notify"])
    expect(a.code).toBe(2)
    const b = await cli(home, ["agent", "send", "lead", "x", "--timeout", "3"])
    expect(b.code).toBe(2)
    const inspect = await cliJson<{ recent_messages: ReadonlyArray<{ text: string }> }>(home, ["agent", "inspect", "lead"])
    expect(inspect.recent_messages.some((m) => m.text === "x")).toBe(false)
  }, 60_000)
})
