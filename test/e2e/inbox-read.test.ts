// The inbox keeps only what the human has not seen: an answer printed by `agent attach` or
// `swarm chat --wait` is read; `inbox read --all` reads every answer; inbox ids take a unique
// prefix like every other id, and a prefix of several items is refused (exit 2, nothing changed).
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { cli, cliJson, daemons, rpcClient, rpcOnce, spawnCli, startDaemon, waitFor, waitQuiet } from "../integration/daemon.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const owned = daemons()
const dirs: Array<string> = []
afterAll(async () => {
  await owned.killAll()
  for (const d of dirs) removeDir(d)
})

interface Item {
  readonly id: string
  readonly kind: string
  readonly agent_name: string
  readonly text: string
}

describe("inbox: answers shown are read; read --all; id prefixes", () => {
  it("attach and swarm chat --wait read what they print; read --all; a unique prefix works, an ambiguous one changes nothing", async () => {
    const d = makeTmpDir("sir-")
    dirs.push(d)
    const h = Path.join(d, "home")
    const repo = Path.join(d, "repo")
    Fs.mkdirSync(repo, { recursive: true })
    Fs.writeFileSync(Path.join(repo, "m.py"), "def host_from_uri():\n    return 1\n")
    owned.track(await startDaemon(h))
    const answers = async () => (await cliJson<{ items: ReadonlyArray<Item> }>(h, ["inbox"])).items.filter((i) => i.kind === "answer")
    /** The same list over the admin socket (what `inbox --json` prints): for the loop and the poll, no CLI process each. */
    const answersRpc = async () => (await rpcOnce<{ items: ReadonlyArray<Item> }>(h, "inbox.list")).items.filter((i) => i.kind === "answer")
    await cliJson(h, ["agent", "create", "--provider", "scripted:echo", "--name", "a"])

    // Answers until two of them share a first character (17 always do: ids are hex).
    const c = await rpcClient(Path.join(h, "daemon.sock"))
    let shared: { prefix: string; ids: ReadonlyArray<string> } | undefined
    for (let n = 0; n < 17 && shared === undefined; n++) {
      await c.call("agent.send", { agent: "a", text: `question ${n}`, wait: true })
      // (The wait read it: unread it again by asking without waiting.)
      await c.call("agent.send", { agent: "a", text: `note ${n}` })
      await waitQuiet(h)
      const ids = (await answersRpc()).map((i) => i.id)
      const first = ids.map((i) => i[0]!).find((ch, k, all) => all.indexOf(ch) !== k)
      if (first !== undefined) shared = { prefix: first, ids: ids.filter((i) => i.startsWith(first)) }
    }
    c.close()
    expect(shared).toBeDefined()
    const before = (await answers()).map((i) => i.id).sort()

    // Ambiguous: exit 2 naming the candidates; nothing read, nothing answered.
    const ambiguous = await cli(h, ["inbox", "read", shared!.prefix])
    expect(ambiguous.code).toBe(2)
    expect(ambiguous.stderr).toContain(`inbox item "${shared!.prefix}" is ambiguous`)
    const answered = await cli(h, ["inbox", "answer", shared!.prefix, "read"])
    expect(answered.code).toBe(2)
    expect(answered.stderr).toContain("is ambiguous")
    expect((await answers()).map((i) => i.id).sort()).toEqual(before)

    // A unique prefix reads exactly that answer.
    const one = shared!.ids[0]!
    const unique = one.slice(0, 12)
    expect(before.filter((i) => i.startsWith(unique))).toEqual([one])
    const read = await cli(h, ["inbox", "read", unique])
    expect([read.code, read.stderr]).toEqual([0, ""])
    expect((await answers()).map((i) => i.id).sort()).toEqual(before.filter((i) => i !== one))

    // --all: every answer.
    const all = await cli(h, ["inbox", "read", "--all"])
    expect([all.code, all.stderr]).toEqual([0, ""])
    expect(all.stdout).toContain(`read: ${before.length - 1} answer(s) left the inbox`)
    expect(await answers()).toEqual([])

    // attach prints the answer: it is read.
    const attach = spawnCli(h, ["agent", "attach", "a", "--read-only"])
    try {
      // Connected once an answer shows up in it (answers before that stay unread: read them).
      await waitFor("attach watching", () => (attach.err().includes("watching a") ? true : undefined))
      for (let n = 0; n < 20 && !attach.out().includes("echo: USER: ping"); n++) {
        expect((await cli(h, ["agent", "send", "a", `ping ${n}`])).code).toBe(0)
        await waitQuiet(h)
      }
      expect((await cli(h, ["inbox", "read", "--all"])).code).toBe(0)
      expect((await cli(h, ["agent", "send", "a", "seen live"])).code).toBe(0)
      await waitFor("the answer in attach", () => (attach.out().includes("echo: USER: seen live") ? true : undefined))
      await waitQuiet(h)
      expect(await answers()).toEqual([])
    } finally {
      attach.child.kill("SIGINT")
      await attach.exit
    }

    // swarm chat --wait prints the node agent's answer: it is read.
    await cliJson(h, ["swarm", "start", repo, "--provider", "scripted:echo"])
    const chat = await cli(h, ["swarm", "chat", "m.py#function:host_from_uri", "what do you do?", "--wait"])
    expect(chat.code).toBe(0)
    expect(chat.stdout).toContain("what do you do?")
    await waitQuiet(h)
    expect(await answers()).toEqual([])
    // Without --wait the answer waits in the inbox.
    expect((await cli(h, ["swarm", "chat", "m.py#function:host_from_uri", "and now?"])).code).toBe(0)
    await waitFor("the unread answer", async () => ((await answersRpc()).length === 1 ? true : undefined))
    expect(await answers()).toHaveLength(1)
  }, 240_000)
})
