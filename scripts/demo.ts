// `npm run demo`: the whole product in one minute, offline. A real daemon process in a
// temporary $SUBSTRAT_HOME, driven only through the real `substrat` CLI: a root agent on the
// scripted provider (script "demo") spawns two workers, asks each a question with a sync
// message, one worker broadcasts to the team, the root reports to USER. Then: the tree, every
// transcript, a summary — and the daemon is stopped. No API key, no network.
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const launcher = join(root, "scripts", "substrat.js")
const home = mkdtempSync(join(tmpdir(), "substrat-demo-"))
const env = { ...process.env, SUBSTRAT_HOME: home }

const substrat = (...args: Array<string>): string =>
  execFileSync(process.execPath, [launcher, ...args], { env, encoding: "utf8" })
const json = <A>(...args: Array<string>): A => JSON.parse(substrat(...args, "--json")) as A

interface Agent {
  readonly id: string
  readonly name: string
  readonly session_id: string
  readonly parent_id: string | null
}
interface Inspect {
  readonly agent: Agent & { readonly state: string }
  readonly inbox: number
  readonly queued_turns: number
  readonly waiting_for_replies: number
  readonly usage: { readonly subtree: { readonly turns: number; readonly input_tokens: number; readonly output_tokens: number } }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
/** Bold headings only on a terminal that wants colour (not piped, not NO_COLOR, not TERM=dumb). */
const bold =
  process.stdout.isTTY === true && process.env["NO_COLOR"] === undefined && process.env["TERM"] !== "dumb"
const heading = (s: string) => console.log(bold ? `\n\x1b[1m== ${s}\x1b[0m` : `\n== ${s}`)
const show = (cmd: string, out: string) => console.log(`$ substrat ${cmd}\n${out.trimEnd()}`)

/** Quiescent: every agent idle with nothing queued or awaited, three polls in a row. */
const waitForQuiescence = async () => {
  let calm = 0
  for (let i = 0; i < 600 && calm < 3; i++) {
    const { agents } = json<{ agents: ReadonlyArray<Agent> }>("agent", "list")
    const busy = agents.map((a) => json<Inspect>("agent", "inspect", a.id)).some((r) =>
      r.agent.state !== "idle" || r.queued_turns > 0 || r.waiting_for_replies > 0
    )
    calm = busy ? 0 : calm + 1
    await sleep(100)
  }
}

const main = async () => {
  let started = false
  try {
    heading("start a daemon")
    show("daemon start", substrat("daemon", "start"))
    started = true

    heading("create a root agent on the scripted provider and give it a task")
    show("agent create --name lead --provider scripted:demo", substrat("agent", "create", "--name", "lead", "--provider", "scripted:demo", "--instructions", "You lead a small team."))
    show(`agent send lead "Plan the parser project"`, substrat("agent", "send", "lead", "Plan the parser project"))
    await waitForQuiescence()

    heading("the tree")
    show("agent list", substrat("agent", "list"))

    const { agents } = json<{ agents: ReadonlyArray<Agent> }>("agent", "list")
    for (const a of agents) {
      heading(`transcript of ${a.name}`)
      show(`agent logs ${a.name}`, substrat("agent", "logs", a.id))
    }

    heading("summary")
    const lead = agents.find((a) => a.parent_id === null)!
    const info = json<Inspect>("agent", "inspect", lead.id)
    const lines = substrat("agent", "logs", lead.id).split("\n")
    const messages = agents.flatMap((a) => substrat("agent", "logs", a.id).split("\n")).filter((l) => l.includes(" → "))
    const unique = new Set(messages.map((l) => l.replace(/^\[[^\]]*\] /, ""))).size
    const sessions = json<{ sessions: ReadonlyArray<unknown> }>("session", "list").sessions.length
    console.log([
      `agents:         ${agents.length} (${agents.map((a) => a.name).join(", ")})`,
      `sessions:       ${sessions}`,
      `messages:       ${unique} distinct (${lines.filter((l) => l.includes("→ USER")).length} to USER)`,
      `turns:          ${info.usage.subtree.turns}`,
      `tokens:         ${info.usage.subtree.input_tokens} in / ${info.usage.subtree.output_tokens} out (scripted estimate)`,
      `home:           ${home}`
    ].join("\n"))
  } finally {
    if (started) {
      heading("stop the daemon (sessions are suspended, socket and pid file removed)")
      show("daemon stop", substrat("daemon", "stop"))
    }
    rmSync(home, { recursive: true, force: true })
  }
}

await main()
