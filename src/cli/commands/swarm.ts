// `substrat swarm start|stop|status|agents|source|chat|trigger|schedule|unschedule|schedules|log`: swarm mode (docs/swarm.md).
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { resolve } from "node:path"
import { MessageText } from "../../protocol/admin/common.js"
import { CronExpr, NodeRef, type SwarmAgent, type SwarmLogNode, SwarmNodeStatus, type SwarmSchedule, type SwarmStatus } from "../../protocol/SwarmRpcs.js"
import { SwarmLanguage } from "../../swarm/SwarmNode.js"
import { SwarmGroup } from "../../protocol/admin/swarm.js"
import { call, withClient } from "../Client.js"
import { home, json, pathsOf, raw as rawOption } from "../Common.js"
import { describe } from "../Help.js"
import { printJson, table } from "../Output.js"

const nodeArg = Args.text({ name: "node" }).pipe(
  Args.withSchema(NodeRef),
  Args.withDescription("A node id (src/a.ts#function:f, see `swarm agents`), its agent's id, or the name of exactly one node agent")
)

const renderStatus = (s: SwarmStatus): string =>
  [
    `swarm ${s.name} of ${s.root}: ${s.running ? "running (watching for saves)" : "stopped"}`,
    `provider ${s.provider}; languages ${s.languages.join(", ")}`,
    ...(s.workspace_id === null ? [] : [`workspace ${s.workspace_id} (the code tree; its history: substrat workspace log ${s.workspace_id})`]),
    `${s.nodes} node agent(s), ${s.dormant} dormant; ${s.orphaned} orphaned`
  ].join("\n")

const lines = (a: SwarmAgent) => a.lines === null ? "" : `${a.lines.start}-${a.lines.end}`

const startCommand = Command.make("start", {
  home,
  json,
  provider: Options.text("provider").pipe(
    Options.withDescription("Provider of the node agents (as for `agent create`; default: the daemon's). Kept with the swarm: a later start with another provider is refused"),
    Options.optional
  ),
  languages: Options.choice("languages", SwarmLanguage.literals).pipe(
    Options.repeated,
    Options.withDescription("Only these languages (repeat the option; default: all of typescript, tsx, javascript, python)")
  ),
  name: Options.text("name").pipe(Options.withDescription("Swarm name: the root agent's name (default: the directory's name)"), Options.optional),
  cron: Options.text("cron").pipe(
    Options.withSchema(CronExpr),
    Options.withDescription("Swarm-wide schedule: wake the root directory's agent on this cron expression (\"*/5 * * * *\"; 6 fields: seconds first). Kept across restarts; same as `swarm schedule . <cron>`"),
    Options.optional
  ),
  path: Args.directory({ name: "path", exists: "yes" }).pipe(Args.withDescription("The code tree (a directory)"))
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const s = yield* withClient(SwarmGroup, socket, (c) =>
      call(socket, c.swarm.start({
        path: resolve(o.path),
        ...Option.match(o.provider, { onNone: () => ({}), onSome: (provider) => ({ provider }) }),
        ...(o.languages.length > 0 ? { languages: o.languages } : {}),
        ...Option.match(o.name, { onNone: () => ({}), onSome: (name) => ({ name }) }),
        ...Option.match(o.cron, { onNone: () => ({}), onSome: (cron) => ({ cron }) })
      })))
    if (o.json) return yield* printJson(s)
    yield* Console.log(renderStatus(s))
    if (Option.isSome(o.cron)) yield* Console.log(`schedule: the root directory's agent wakes on "${o.cron.value}"`)
  })).pipe(Command.withDescription(describe("Start swarm mode on a code tree: an agent per directory, file, class, function and method", {
    details: [
      "Every node's agent starts dormant (no session, no process); a save wakes the agents of the code that changed. A daemon restart resumes the swarm and reconciles it with the code (docs/swarm.md)."
    ],
    examples: [
      "substrat swarm start . --provider claude",
      "substrat swarm start ~/src/app --languages python --provider scripted:echo",
      "substrat swarm start . --cron '0 * * * *'"
    ]
  })))

const stopCommand = Command.make("stop", { home, json }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const s = yield* withClient(SwarmGroup, socket, (c) => call(socket, c.swarm.stop()))
    if (o.json) return yield* printJson(s)
    yield* Console.log(renderStatus(s))
  })).pipe(Command.withDescription(describe("Stop watching and triggering (the agents and their history stay; swarm start resumes)", {
    examples: ["substrat swarm stop"]
  })))

const statusCommand = Command.make("status", { home, json }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(SwarmGroup, socket, (c) => call(socket, c.swarm.status()))
    if (o.json) return yield* printJson(r)
    yield* Console.log(r.swarm === null ? "no swarm (substrat swarm start <path>)" : renderStatus(r.swarm))
  })).pipe(Command.withDescription(describe("Show the swarm: root, provider, node agents, dormant and orphaned counts", {
    examples: ["substrat swarm status", "substrat swarm status --json"]
  })))

const agentsCommand = Command.make("agents", {
  home,
  json,
  parent: Options.text("parent").pipe(Options.withSchema(NodeRef), Options.withDescription("Only the children of this node"), Options.optional),
  status: Options.choice("status", SwarmNodeStatus.literals).pipe(
    Options.repeated,
    Options.withDescription("Only agents in this state (repeatable): dormant, idle, busy, waiting, orphaned")
  )
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(SwarmGroup, socket, (c) =>
      call(socket, c.swarm.agents({
        ...Option.match(o.parent, { onNone: () => ({}), onSome: (parent) => ({ parent }) }),
        ...(o.status.length > 0 ? { status: o.status } : {})
      })))
    if (o.json) return yield* printJson(r)
    if (r.agents.length === 0) return yield* Console.log("(no node agents)")
    yield* Console.log(table([["NODE", "AGENT", "STATUS", "LINES"], ...r.agents.map((a) => [a.node_id, a.name, a.status, lines(a)])]))
  })).pipe(Command.withDescription(describe("List the node agents (node id, agent name, status, lines)", {
    examples: ["substrat swarm agents --parent src/a.ts#file", "substrat swarm agents --status orphaned"]
  })))

/** A node's lines numbered as an editor shows them: the number right-aligned to the widest. */
const numbered = (firstLine: number, text: string): string => {
  const rows = text.split("\n")
  const width = String(firstLine + rows.length - 1).length
  return rows.map((row, i) => `${String(firstLine + i).padStart(width)}  ${row}`).join("\n")
}

const sourceCommand = Command.make("source", { home, json, node: nodeArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(SwarmGroup, socket, (c) => call(socket, c.swarm.source({ node: o.node })))
    if (o.json) return yield* printJson(r)
    const last = r.first_line + r.text.split("\n").length - 1
    yield* Console.log(`${r.node_id}  ${r.path}:${r.first_line}-${last}\n${numbered(r.first_line, r.text)}`)
  })).pipe(Command.withDescription(describe("Print a node's source: its lines of its file, numbered (a file node: the whole file)", {
    details: ["Read from the swarm's code tree as it is now, never through a link, at most 1 MiB."],
    examples: ["substrat swarm source 'src/a.ts#function:formatDate'", "substrat swarm source src/a.ts#file --json"]
  })))

const chatCommand = Command.make("chat", {
  home,
  json,
  wait: Options.boolean("wait").pipe(Options.withDescription("Wait for the agent's answer and print it")),
  node: nodeArg,
  text: Args.text({ name: "text" }).pipe(Args.withSchema(MessageText), Args.withDescription("The message"))
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(SwarmGroup, socket, (c) => call(socket, c.swarm.chat({ node: o.node, text: o.text, wait: o.wait })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(r.reply ?? `sent ${r.message_id} to ${r.node_id} (agent ${r.agent_id})`)
  })).pipe(Command.withDescription(describe("Send a message as USER to one node's agent (it wakes and answers)", {
    examples: ["substrat swarm chat 'src/a.ts#function:formatDate' 'does this handle time zones?' --wait"]
  })))

const triggerCommand = Command.make("trigger", { home, json, node: nodeArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(SwarmGroup, socket, (c) => call(socket, c.swarm.trigger({ node: o.node })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(`triggered ${r.node_id} (agent ${r.agent_id}; message ${r.message_id})`)
  })).pipe(Command.withDescription(describe("Wake one node's agent, as a save of its code would", {
    examples: ["substrat swarm trigger 'src/a.ts#class:User'"]
  })))

const renderSchedule = (s: SwarmSchedule): string => `${s.node}  "${s.cron}"  next ${s.next}${s.last === null ? "" : `  (last ${s.last})`}`

const scheduleCommand = Command.make("schedule", {
  home,
  json,
  node: nodeArg,
  cron: Args.text({ name: "cron" }).pipe(
    Args.withSchema(CronExpr),
    Args.withDescription("A cron expression: \"min hour day month weekday\" (\"*/5 * * * *\"), or six fields with seconds first; the daemon's local time")
  )
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(SwarmGroup, socket, (c) => call(socket, c.swarm.schedule({ node: o.node, cron: o.cron })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(`scheduled ${renderSchedule(r)}`)
  })).pipe(Command.withDescription(describe("Wake one node's agent on a cron schedule (replaces its schedule; kept across restarts)", {
    details: [
      "Each tick is a `swarm trigger`. A tick while the swarm is stopped is skipped; ticks missed while the daemon was down fire once when it starts. `.` (the root directory) is the swarm-wide schedule of `swarm start --cron`."
    ],
    examples: ["substrat swarm schedule 'src/a.ts#class:User' '*/30 * * * *'", "substrat swarm schedule . '0 9 * * 1-5'"]
  })))

const unscheduleCommand = Command.make("unschedule", { home, json, node: nodeArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(SwarmGroup, socket, (c) => call(socket, c.swarm.unschedule({ node: o.node })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(`unscheduled ${r.node} ("${r.cron}")`)
  })).pipe(Command.withDescription(describe("Remove a node's cron schedule", {
    examples: ["substrat swarm unschedule 'src/a.ts#class:User'"]
  })))

const schedulesCommand = Command.make("schedules", { home, json }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(SwarmGroup, socket, (c) => call(socket, c.swarm.schedules()))
    if (o.json) return yield* printJson(r)
    if (r.schedules.length === 0) return yield* Console.log("(no schedules: substrat swarm schedule <node> <cron>)")
    yield* Console.log(table([["NODE", "CRON", "NEXT", "LAST"], ...r.schedules.map((s) => [s.node, s.cron, s.next, s.last ?? "-"])]))
  })).pipe(Command.withDescription(describe("List the cron schedules (node, expression, next and last tick)", {
    examples: ["substrat swarm schedules", "substrat swarm schedules --json"]
  })))

const renderLog = (nodes: ReadonlyArray<SwarmLogNode>, raw: boolean): string => {
  if (nodes.length === 0) return "(no node agent has had a turn yet)"
  const out: Array<string> = []
  for (const n of nodes) {
    out.push(`${n.node_id}  ${n.name} (${n.status}): ${n.turns.length} turn(s)`)
    if (n.turns.length === 0) out.push("  (no turns)")
    for (const t of n.turns) {
      const what = t.commit === null ? "no changes" : `${t.changes.length} file(s) changed, commit ${t.commit.slice(0, 12)}`
      out.push(`  ${t.started}  turn ${t.turn_id.slice(0, 8)}  ${t.outcome}  ${what}`)
      out.push(`    ▶ ${raw ? t.raw_prompt : t.prompt}`)
      for (const c of t.changes) out.push(`    ${c.change === "added" ? "A" : c.change === "deleted" ? "D" : "M"} ${c.path}`)
    }
  }
  return out.join("\n")
}

const logCommand = Command.make("log", {
  home,
  json,
  raw: rawOption,
  node: nodeArg.pipe(Args.optional)
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(SwarmGroup, socket, (c) =>
      call(socket, c.swarm.log(Option.match(o.node, { onNone: () => ({}), onSome: (node) => ({ node }) }))))
    if (o.json) return yield* printJson(r)
    yield* Console.log(renderLog(r.nodes, o.raw))
  })).pipe(Command.withDescription(describe("Per node agent: its turns and the files each turn changed (the per-turn workspace history)", {
    details: [
      "Without <node>: every node agent that has had a turn. A turn's changes are its commit in the workspace history: `substrat workspace diff <ws> --turn <turn>` shows them."
    ],
    examples: ["substrat swarm log", "substrat swarm log 'src/a.ts#function:formatDate'", "substrat swarm log --json"]
  })))

export const swarmCommand = Command.make("swarm").pipe(
  Command.withDescription(describe("Swarm mode: an agent per directory, file, class, function and method of a code tree", {
    examples: ["substrat swarm start . --provider claude", "substrat swarm agents --status idle"]
  })),
  Command.withSubcommands([
    startCommand,
    stopCommand,
    statusCommand,
    agentsCommand,
    sourceCommand,
    chatCommand,
    triggerCommand,
    scheduleCommand,
    unscheduleCommand,
    schedulesCommand,
    logCommand
  ])
)
