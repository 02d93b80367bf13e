// `agent ls` says what the dashboard says: an agent parked by a spent budget (`parked (budget)`),
// one waiting for the human's answer (`asks you`), one whose turn waits for a slot (`queued`),
// and each agent's tokens and USD. States are coloured on a terminal only: through a
// pseudo-terminal (`script`) they are, piped or with NO_COLOR they are not; `workspace diff` the same.
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type Agent, cli, cliJson, daemons, inboxItems, launcher, rpcOnce, startDaemon, waitFor } from "../integration/daemon.support.js"
import { makeTmpDir, removeDir } from "../support/tmp.js"

const owned = daemons()
const dirs: Array<string> = []
afterAll(async () => {
  await owned.killAll()
  for (const d of dirs) removeDir(d)
})

const ESC = "\x1b["

/** The CLI on a pseudo-terminal (util-linux `script`): what a person at a terminal sees. */
const onTerminal = (home: string, args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = {}): Promise<string> =>
  new Promise((resolve, reject) => {
    const command = [process.execPath, launcher, ...args].map((w) => `'${w.replace(/'/g, "'\\''")}'`).join(" ")
    execFile("script", ["-qec", command, "/dev/null"], {
      env: { ...process.env, TERM: "xterm", NO_COLOR: "", ...env, SUBSTRAT_HOME: home },
      timeout: 60_000
    }, (err, stdout, stderr) => (err === null ? resolve(stdout) : reject(new Error(`${err.message}\n${stderr}`))))
  })

interface Item {
  readonly id: string
  readonly kind: string
  readonly agent_name: string
}

/** The row of agent `name` in `agent ls` text: its cells (split on two spaces or more). */
const row = (text: string, name: string) =>
  text.split(/\r?\n/).find((l) => l.startsWith(`${name} `))?.split(/ {2,}/)

describe("agent ls: states, usage and colour", () => {
  it("parked (budget), asks you, queued, tokens/$ per agent; colour only on a terminal without NO_COLOR", async () => {
    const h = makeTmpDir("sls-")
    dirs.push(h)
    const release = Path.join(h, "release")
    const usage = { input_tokens: 100, output_tokens: 20, cost_usd: 0.012 }
    Fs.mkdirSync(Path.join(h, "scripts"), { recursive: true })
    Fs.writeFileSync(Path.join(h, "scripts", "b.json"), JSON.stringify({
      asker: { steps: [{ tools: [{ tool: "ask_human", args: { question: "Which colour?" } }], text: "asked", usage }] },
      spender: { steps: [{ text: "spent", usage }], after: "repeat-last" },
      holder: { steps: [{ wait_for: release, text: "held" }] },
      "*": { steps: [], after: "echo" }
    }))
    // One slot: while holder's turn holds it, another agent's turn is queued.
    owned.track(await startDaemon(h, ["--slots", "1"]))

    await cliJson<Agent>(h, ["agent", "create", "--provider", "scripted:b", "--name", "asker"])
    expect((await cli(h, ["agent", "send", "asker", "start"])).code).toBe(0)
    await waitFor("the question", async () => (await inboxItems<Item>(h)).find((i) => i.kind === "question"))

    await cliJson<Agent>(h, ["agent", "create", "--provider", "scripted:b", "--name", "spender", "--budget-turns", "1"])
    for (const m of ["one", "two"]) expect((await cli(h, ["agent", "send", "spender", m])).code).toBe(0)
    await waitFor("the breach", async () => (await inboxItems<Item>(h)).find((i) => i.kind === "budget"))

    const holder = await cliJson<Agent>(h, ["agent", "create", "--provider", "scripted:b", "--name", "holder"])
    expect((await cli(h, ["agent", "send", "holder", "hold the slot"])).code).toBe(0)
    const log = Path.join(h, "agents", holder.session_id, "events.jsonl")
    await waitFor("holder's turn", () => (Fs.readFileSync(log, "utf8").includes("\"turn.start\"") ? true : undefined))
    await cliJson<Agent>(h, ["agent", "create", "--provider", "scripted:b", "--name", "waiter"])
    expect((await cli(h, ["agent", "send", "waiter", "wait for a slot"])).code).toBe(0)

    // Polled over the socket (a CLI process per poll costs more than the poll); then `agent ls`.
    type Listed = { agents: ReadonlyArray<Agent>; details: ReadonlyArray<{ agent_id: string; tokens?: number; cost_usd?: number; queued?: boolean }> }
    const listedNow = () => rpcOnce<Listed>(h, "agent.list", { all: false })
    await waitFor("waiter queued", async () => {
      const l = await listedNow()
      const waiter = l.agents.find((a) => a.name === "waiter")
      return waiter !== undefined && l.details.some((d) => d.agent_id === waiter.id && d.queued === true) ? true : undefined
    })
    const piped = (await cli(h, ["agent", "ls"])).stdout
    expect(row(piped, "waiter")?.slice(0, 2), piped).toEqual(["waiter", "queued"])
    expect(piped.split("\n")[0]!.split(/ {2,}/)).toEqual(["NAME", "STATE", "PROVIDER", "ROLE", "USED", "ID", "DOING"])
    expect(row(piped, "asker")?.slice(0, 2)).toEqual(["asker", "asks you"])
    expect(row(piped, "spender")?.slice(0, 2)).toEqual(["spender", "parked (budget)"])
    expect(row(piped, "holder")?.slice(0, 2)).toEqual(["holder", "busy"])
    // Tokens (input + output, as budgets count them) and USD of each agent's own turns.
    expect(row(piped, "asker")?.[4]).toBe("120 tok · $0.0120")
    expect(row(piped, "spender")?.[4]).toBe("120 tok · $0.0120")
    expect(piped).not.toContain(ESC)
    // A page of the list carries the extras of its own agents only.
    const listed = await cliJson<Listed>(h, ["agent", "ls"])
    const idOf = (name: string) => listed.agents.find((a) => a.name === name)!.id
    expect(listed.details.map((d) => d.agent_id).sort()).toEqual([idOf("asker"), idOf("spender"), idOf("waiter")].sort())
    const page = await cliJson<Listed>(h, ["agent", "ls", "--after", idOf("asker"), "--limit", "1"])
    expect(page.agents.map((a) => a.name)).toEqual(["spender"])
    expect(page.details.map((d) => d.agent_id)).toEqual([idOf("spender")])
    expect(page.details[0]).toMatchObject({ tokens: 120, cost_usd: 0.012 })

    // A terminal: the states coloured; NO_COLOR (or a pipe, above): none.
    const tty = await onTerminal(h, ["agent", "ls"])
    expect(tty).toContain(`${ESC}35masks you${ESC}0m`)
    expect(tty).toContain(`${ESC}31mparked (budget)${ESC}0m`)
    expect(tty).toContain(`${ESC}36mqueued${ESC}0m`)
    expect(await onTerminal(h, ["agent", "ls"], { NO_COLOR: "1" })).not.toContain(ESC)

    Fs.writeFileSync(release, "")
    await waitFor("waiter answered", async () => {
      const l = await listedNow()
      const waiter = l.agents.find((a) => a.name === "waiter")
      return waiter?.state === "idle" && !l.details.some((d) => d.agent_id === waiter.id && d.queued === true) ? true : undefined
    })
    expect(row((await cli(h, ["agent", "ls"])).stdout, "waiter")?.[1]).toBe("idle")
  })

  it("workspace diff is coloured on a terminal only", async () => {
    const h = makeTmpDir("sls-")
    dirs.push(h)
    owned.track(await startDaemon(h))
    const ws = await cliJson<{ id: string; root_path: string }>(h, ["workspace", "create", "--name", "w"])
    Fs.writeFileSync(Path.join(ws.root_path, "a.txt"), "one\n")
    const piped = await cli(h, ["workspace", "diff", "w"])
    expect(piped.code).toBe(0)
    expect(piped.stdout).toContain("+one")
    expect(piped.stdout).not.toContain(ESC)
    const tty = await onTerminal(h, ["workspace", "diff", "w"])
    expect(tty).toContain(`${ESC}32m+one${ESC}0m`)
    expect(await onTerminal(h, ["workspace", "diff", "w"], { NO_COLOR: "1" })).not.toContain(ESC)
  })
})
