// `substrat agent create|list|send|attach|inspect|terminate|logs`.
//
// Over 300 lines because it is the command table of one area: each subcommand's flags, help and
// output side by side.
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option, Schema, Stream } from "effect"
import { parentEnv } from "../../config/Config.js"
import { AgentRef, MessageText, WorkspaceRef } from "../../protocol/admin/common.js"
import type { AgentActivity, AgentListRpc } from "../../protocol/admin/agent.js"
import { attachCommand } from "./attach.js"
import { AgentGroup } from "../../protocol/admin/agent.js"
import { BudgetGroup } from "../../protocol/admin/budget.js"
import type { InboxItem } from "../../domain/budget.js"
import type * as RpcClient from "@effect/rpc/RpcClient"
import { wantsColor } from "../Help.js"
import { call, CliError, following, fromRpcError, withClient } from "../Client.js"
import { allowFields, allowHosts, allowPresets, home, json, pathsOf, quiet, raw, refOption, bindIgnoredOption, checkOption, checkPayload, repoOption, repoPayload } from "../Common.js"
import { budgetOptions, budgetPatch } from "./budget.js"
import { capsPatch, quotaOptions, quotaPatch } from "./caps.js"
import { printJson, renderInspect, renderSent, renderTree } from "../Output.js"
import { isSwarmNode, type TreeView } from "../Format.js"
import { activityText } from "../Live.js"
import { describe } from "../Help.js"
import { shellWord, suggest } from "../Exit.js"
import { dirname } from "node:path"
import { shellIn, workspaceById } from "../Shell.js"

const agentArg = Args.text({ name: "agent" }).pipe(
  Args.withSchema(AgentRef),
  Args.withDescription("Agent name, id or unique id prefix")
)

const opt = <A>(o: Option.Option<A>, key: string): Record<string, A> =>
  Option.match(o, { onNone: () => ({}), onSome: (v) => ({ [key]: v }) })

const createCommand = Command.make("create", {
  home,
  json,
  quiet,
  provider: Options.text("provider").pipe(
    Options.withDescription("scripted[:<book>], claude, codex, cursor-agent or openai[:<model>] (default: the daemon's; docs/providers.md)"),
    Options.optional
  ),
  name: Options.text("name").pipe(Options.withDescription("Agent name (default: generated)"), Options.optional),
  instructions: Options.text("instructions").pipe(
    Options.withPseudoName("text"),
    Options.withDescription("System instructions for the agent"),
    Options.optional
  ),
  role: Options.text("role").pipe(Options.withDescription("Role label"), Options.optional),
  workspace: Options.text("workspace").pipe(
    Options.withSchema(WorkspaceRef),
    Options.withDescription("Workspace to run in: name, id or unique id prefix"),
    Options.optional
  ),
  approve: Options.choice("approve", ["auto", "ask", "reject"]).pipe(
    Options.withDescription(
      "ACP agents (acp:*): a permission request is allowed (auto), asked of you in `substrat inbox` (ask) or refused (reject); its children do the same (default: config acp.approve)"
    ),
    Options.optional
  ),
  repo: repoOption,
  ref: refOption,
  bindIgnored: bindIgnoredOption,
  check: checkOption,
  allowHosts,
  allowPresets,
  ...budgetOptions("budget-"),
  maxDepth: Options.integer("max-depth").pipe(
    Options.withDescription("This tree's depth cap: levels below the root (0: no cap; default: config caps.max_depth)"),
    Options.optional
  ),
  maxChildren: Options.integer("max-children").pipe(
    Options.withDescription("Live children one agent of this tree may have; more spawns queue (0: no cap; default: caps.max_children)"),
    Options.optional
  ),
  maxLive: Options.integer("max-live").pipe(
    Options.withDescription("Live agents this tree may have, the root included; more spawns queue (0: no cap; default: caps.max_live)"),
    Options.optional
  ),
  ...quotaOptions
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const budget = yield* budgetPatch(o)
    const quotas = yield* quotaPatch(o)
    const caps = { ...(yield* capsPatch(o)), ...(Object.keys(quotas).length > 0 ? { quotas } : {}) }
    const repo = yield* repoPayload(o.repo, o.ref, o.bindIgnored)
    const agent = yield* withClient(AgentGroup, socket, (c) =>
      call(socket, c.agent.create({
        ...opt(o.provider, "provider"),
        ...opt(o.name, "name"),
        ...opt(o.instructions, "instructions"),
        ...opt(o.role, "role"),
        ...opt(o.workspace, "workspace_id"),
        ...opt(o.approve, "approve"),
        ...repo,
        ...checkPayload(o.check),
        ...allowFields(o.allowHosts, o.allowPresets),
        ...(Object.keys(budget).length > 0 ? { budget } : {}),
        ...(Object.keys(caps).length > 0 ? { caps } : {})
      })))
    if (o.json) return yield* printJson(agent)
    if (o.quiet) return yield* Console.log(agent.id)
    yield* Console.log(`created ${agent.name} (${agent.id}, provider ${agent.provider})`)
  })).pipe(Command.withDescription(describe("Create a root agent (and its session)", {
    examples: [
      "substrat agent create --name lead --provider claude --repo .   # works on a clone, on branch substrat/lead",
      "substrat agent create --name lead --provider claude --max-depth 2 --max-live 4 --budget-usd 1",
      "substrat agent create --name coder --provider claude --allow npm --allow-host files.example.org"
    ]
  })))

const listCommand = Command.make("list", {
  home,
  json,
  quiet,
  all: Options.boolean("all").pipe(Options.withAlias("a"), Options.withDescription("Also show terminated agents and swarm node agents")),
  swarm: Options.boolean("swarm").pipe(Options.withDescription("Also show swarm node agents (hidden by default; substrat swarm agents lists them)")),
  watch: Options.boolean("watch").pipe(
    Options.withAlias("w"),
    Options.withDescription("Keep the list on screen, redrawn whenever something happens (Ctrl-C to stop)")
  ),
  limit: Options.integer("limit").pipe(
    Options.withDescription("Show one page of at most this many agents (the tree in order, parents first); the next page's --after is printed to stderr"),
    Options.optional
  ),
  after: Options.text("after").pipe(
    Options.withPseudoName("id"),
    Options.withDescription("Start after this agent id (the previous page's last)"),
    Options.optional
  ),
  depth: Options.integer("depth").pipe(
    Options.withDescription("Only agents at most this many levels below their root (0: roots only)"),
    Options.optional
  )
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const swarm = o.swarm || o.all
    if (o.watch) return yield* watchList(socket, o.all, swarm)
    const params = { all: o.all, ...opt(o.limit, "limit"), ...opt(o.after, "after"), ...opt(o.depth, "depth") }
    // For scripts: everything, names whole (swarm node agents too; `details` marks the dormant ones).
    if (o.json) return yield* printJson(yield* withClient(AgentGroup, socket, (c) => call(socket, c.agent.list(params))))
    if (o.quiet) {
      const r = yield* withClient(AgentGroup, socket, (c) => call(socket, c.agent.list(params)))
      yield* Console.log(r.agents.filter((a) => swarm || !isSwarmNode(a)).map((a) => a.id).join("\n"))
      return yield* nextHint(r.next)
    }
    const [text, next] = yield* withClient(AgentGroup.merge(BudgetGroup), socket, (c) => listText(socket, c, params, swarm))
    yield* Console.log(text)
    yield* nextHint(next)
  })).pipe(Command.withDescription(describe("Show the agent tree (all roots and their children)", {
    details: [
      "Busy agents show how long their turn has run and what it is doing (DOING).",
      "Swarm node agents are left out (substrat swarm agents lists them); --swarm or --all shows them, dormant ones as dormant. --json has every agent with its whole name.",
      "--limit pages the tree (each agent before its children); when more follow, the next page's --after is printed on stderr. --quiet prints ids only."
    ],
    examples: [
      "substrat agent ls -w        # redrawn live",
      "substrat agent ls --all     # with terminated and swarm node agents",
      "substrat agent ls --limit 500 --depth 1   # the first 500 roots and children"
    ]
  })))

type AgentListResult = typeof AgentListRpc.successSchema.Type

const doingOf = (activity: ReadonlyArray<AgentActivity> | undefined, now: number): ReadonlyMap<string, string> =>
  new Map((activity ?? []).map((a) => [a.agent_id, activityText(a, now)]))

/** What `renderTree` needs of an `agent.list` answer and the inbox. */
const treeView = (r: AgentListResult, inbox: ReadonlyArray<InboxItem>, swarm: boolean): TreeView => ({
  doing: doingOf(r.activity, Date.now()),
  details: new Map((r.details ?? []).map((d) => [d.agent_id, d])),
  swarm,
  inbox,
  color: wantsColor(parentEnv(), process.stdout.isTTY === true)
})

/** The tree as `agent list` prints it: the agents, their states with what waits for the human (parks, questions). */
const listText = (
  socket: string,
  c: RpcClient.FromGroup<typeof AgentGroup> & RpcClient.FromGroup<typeof BudgetGroup>,
  params: typeof AgentListRpc.payloadSchema.Type,
  swarm: boolean
) =>
  Effect.map(
    Effect.all([call(socket, c.agent.list(params)), call(socket, c.inbox.list())]),
    ([r, inbox]) => [renderTree(r.agents, treeView(r, inbox.items, swarm)) + placementText(r), r.next] as const
  )

/** Cluster mode: which runner each tree is on. */
const placementText = (r: AgentListResult): string => {
  if (r.placement === undefined || r.placement.length === 0) return ""
  const names = new Map(r.agents.map((a) => [a.id as string, a.name]))
  return `\n\nrunners:\n${r.placement.map((p) => `  ${names.get(p.root_id) ?? p.root_id.slice(0, 8)} on ${p.runner}`).join("\n")}`
}

/**
 * After a page with more to come: how to get the next one (stderr, so stdout stays the list;
 * written directly: main.ts captures Console.error for @effect/cli's own messages).
 */
const nextHint = (next: string | undefined) =>
  next === undefined ? Effect.void : Effect.sync(() => process.stderr.write(`more: --after ${next}\n`))

/**
 * `agent list -w`: the tree again on every event of the daemon (coalesced), and each second on a
 * terminal (elapsed times). A terminal gets the screen redrawn; a pipe gets each new table once
 * it differs, after a blank line. Ends with Ctrl-C, or exit 3 when the daemon goes away.
 */
const watchList = (socket: string, all: boolean, swarm: boolean) => {
  const redraw = process.stdout.isTTY === true && parentEnv()["TERM"] !== "dumb"
  let last = ""
  // events.follow's Schemas (every log entry) are loaded only for a watch.
  const group = Effect.map(Effect.promise(() => import("../../protocol/admin/events.js")), (m) => AgentGroup.merge(BudgetGroup, m.EventsGroup))
  const run = Effect.flatMap(group, (group) => withClient(group, socket, (c) =>
    Effect.gen(function*() {
      const draw = Effect.flatMap(listText(socket, c, { all }, swarm), ([text]) =>
        Effect.sync(() => {
          if (text === last) return
          if (redraw) process.stdout.write(`\x1b[H\x1b[2J${new Date().toISOString().slice(11, 19)}  substrat agent list -w (Ctrl-C to stop)\n\n${text}\n`)
          else process.stdout.write(`${last === "" ? "" : "\n"}${text}\n`)
          last = text
        }))
      yield* draw
      const changes = c.events.follow({ from: "end", follow: true }).pipe(
        Stream.mapError(fromRpcError),
        Stream.map(() => undefined)
      )
      const ticks = redraw ? Stream.tick("1 second") : Stream.empty
      yield* Stream.merge(changes, ticks).pipe(Stream.groupedWithin(10_000, "150 millis"), Stream.runForEach(() => draw))
    })))
  return following(socket, run)
}

/** All of stdin, for `agent send <agent> -`. */
const readStdin = Effect.async<string>((resume) => {
  const chunks: Array<Buffer> = []
  process.stdin.on("data", (c: Buffer) => chunks.push(c))
  process.stdin.on("end", () => resume(Effect.succeed(Buffer.concat(chunks).toString("utf8"))))
  process.stdin.on("error", () => resume(Effect.succeed(Buffer.concat(chunks).toString("utf8"))))
})

const messageText = (arg: string) =>
  arg !== "-" ? Effect.succeed(arg) : readStdin.pipe(
    Effect.flatMap((text) => Schema.decodeUnknown(MessageText)(text)),
    Effect.mapError(() => new CliError({ kind: "invalid-input", message: "the message on stdin is over 512 KiB" }))
  )

const sendCommand = Command.make("send", {
  home,
  json,
  notify: Options.boolean("notify").pipe(
    Options.withDescription("Queue as a notification (the agent sees it on its next turn) instead of a request that wakes it")
  ),
  wait: Options.boolean("wait").pipe(
    Options.withDescription("Wait for the answer and print it (exit 5 past --timeout, 7 if the agent fails)")
  ),
  timeout: Options.float("timeout").pipe(
    Options.withSchema(Schema.Number.pipe(Schema.positive(), Schema.finite())),
    Options.withDescription("With --wait: give up after S seconds (default: no limit)"),
    Options.optional
  ),
  agent: agentArg,
  message: Args.text({ name: "message" }).pipe(Args.withSchema(MessageText), Args.withDescription("The message text; - reads it from stdin"))
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    if (o.wait && o.notify) return yield* new CliError({ kind: "invalid-input", message: "--wait needs a request: drop --notify" })
    if (Option.isSome(o.timeout) && !o.wait) return yield* new CliError({ kind: "invalid-input", message: "--timeout applies to --wait only" })
    const text = yield* messageText(o.message)
    // With --wait: send, then wait for the answer to that message id, so that a wait the daemon
    // dropped (crash, restart) can name the command that waits again.
    const since = new Date().toISOString()
    const r = yield* withClient(AgentGroup, socket, (c) =>
      Effect.gen(function*() {
        const sent = yield* call(socket, c.agent.send({ agent: o.agent, text, sync: !o.notify })).pipe(
          Effect.mapError((e) => (o.wait ? rewaitHint(socket, o.agent)(e) : e))
        )
        if (!o.wait) return sent
        // Questions to the human and spent budgets on the way: on stderr, with their inbox ids.
        // The pause notes follow events (events.follow's Schemas: every log entry): loaded only for a wait.
        const pauses = Effect.flatMap(Effect.promise(() => import("../Pauses.js")), (m) => m.watchPauses(socket, sent.agent_id, since))
        yield* Effect.forkScoped(pauses)
        const waited = yield* call(socket, c.agent.wait({ agent: sent.agent_id, message_id: sent.message_id, ...opt(o.timeout, "timeout_s") })).pipe(
          Effect.mapError(rewaitHint(socket, o.agent, sent.message_id))
        )
        return { ...sent, answer: waited.answer }
      }))
    if (o.json) yield* printJson(r)
    else if (r.answer !== undefined) yield* Console.log(r.answer.text)
    else yield* Console.log(renderSent(r))
    if (r.answer !== undefined) yield* failedAnswer(o.agent, r.message_id, r.answer)
  })).pipe(Command.withDescription(describe("Send one message to an agent as USER; --wait prints its answer", {
    examples: [
      "substrat agent send alpha \"Fix the failing test in src/math.ts\"",
      "substrat agent send --wait --timeout 600 lead \"Add a --version flag and get it reviewed\"",
      "git diff | substrat agent send --notify alpha -"
    ]
  })))

/** Exit 7 when the answer is the daemon's word that the agent failed to answer. */
const failedAnswer = (agent: string, request: string, answer: { readonly error: boolean }) =>
  answer.error ? Effect.fail(new CliError({ kind: "agent-failed", message: `${agent} did not answer (message ${request})` })) : Effect.void

/**
 * A wait the daemon dropped (it died or stopped): the request stays open; say how to wait again.
 * Without `request` (the daemon went away before acknowledging the message, which may or may not
 * have been sent): the wait for the agent's latest open request.
 */
const rewaitHint = (socket: string, agent: string, request?: string) => (e: CliError): CliError => {
  if (e.reason !== "lost-connection") return e
  const start = suggest(dirname(socket), "daemon start")
  return new CliError({
    kind: e.kind,
    message: request === undefined
      ? `${e.message}; the message may not have been sent: once the daemon is back (${start}), \`${suggest(dirname(socket), `agent wait ${shellWord(agent)}`)}\` waits for ${agent}'s latest open request, if any`
      : `${e.message}; message ${request} stays open: once the daemon is back (${start}), wait again with: ${suggest(dirname(socket), `agent wait ${shellWord(agent)} ${request}`)}`
  })
}

const waitCommand = Command.make("wait", {
  home,
  json,
  timeout: Options.float("timeout").pipe(
    Options.withSchema(Schema.Number.pipe(Schema.positive(), Schema.finite())),
    Options.withDescription("Give up after S seconds (exit 5; the answer still comes)"),
    Options.optional
  ),
  agent: agentArg,
  message: Args.text({ name: "message-id" }).pipe(
    Args.withDescription("USER's request to wait for: its id or a unique prefix (default: the latest one still open, else the last answered)"),
    Args.optional
  )
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(AgentGroup, socket, (c) =>
      call(socket, c.agent.wait({ agent: o.agent, ...opt(o.message, "message_id"), ...opt(o.timeout, "timeout_s") })).pipe(
        Effect.mapError((e) => Option.match(o.message, { onNone: () => e, onSome: (id) => rewaitHint(socket, o.agent, id)(e) }))
      ))
    if (o.json) yield* printJson(r)
    else yield* Console.log(r.answer.text)
    yield* failedAnswer(o.agent, r.message_id, r.answer)
  })).pipe(Command.withDescription(describe("Print the answer to a request sent to an agent, once it comes", {
    details: ["For a `send --wait` that lost its daemon: it printed the exact command. Works across daemon restarts."],
    examples: [
      "substrat agent wait lead",
      "substrat agent wait lead 3f2c9a1e-5b7d-4c1a-9e8f-0a1b2c3d4e5f --timeout 600",
      "substrat agent wait lead 3f2c --json"
    ]
  })))

const inspectCommand = Command.make("inspect", { home, json, raw, agent: agentArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(AgentGroup, socket, (c) => call(socket, c.agent.inspect({ agent: o.agent })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(renderInspect(r, o.raw))
  })).pipe(Command.withDescription(describe("Show an agent's state, session, children, inbox, usage and recent activity", {
    examples: ["substrat agent inspect alpha", "substrat agent inspect alpha --raw", "substrat agent inspect alpha --json"]
  })))

const terminateCommand = Command.make("terminate", { home, json, agent: agentArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(AgentGroup, socket, (c) => call(socket, c.agent.terminate({ agent: o.agent })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(`terminated ${r.agent_id}`)
  })).pipe(Command.withDescription(describe("Terminate an agent and its subtree", {
    examples: ["substrat agent terminate alpha", "substrat agent rm 3f2c9a1e-…"]
  })))

const resumeCommand = Command.make("resume", { home, json, agent: agentArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(AgentGroup, socket, (c) => call(socket, c.agent.resume({ agent: o.agent })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(`resumed ${r.agent_id}: ${r.turns} held turn(s) run again`)
  })).pipe(Command.withDescription(describe("Lift a quarantine: a crash-looping agent runs its held turns again", {
    details: ["An agent is quarantined when the daemon died repeatedly during its turn (agent list shows it as quarantined)."],
    examples: ["substrat agent resume alpha"]
  })))

const logsCommand = Command.make("logs", {
  home,
  follow: Options.boolean("follow").pipe(Options.withAlias("f"), Options.withDescription("Keep printing new lines")),
  agent: agentArg
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const run = withClient(AgentGroup, socket, (c) =>
      c.agent.logs({ agent: o.agent, follow: o.follow }).pipe(
        Stream.runForEach((line) => Console.log(line)),
        (s) => call(socket, s)
      ))
    if (o.follow) return yield* following(socket, run)
    yield* run
  })).pipe(Command.withDescription(describe("Print an agent's transcript; -f keeps following it", {
    examples: ["substrat agent logs alpha", "substrat agent logs -f alpha"]
  })))

const shellCommand = Command.make("shell", { home, agent: agentArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const { WorkspaceGroup } = yield* Effect.promise(() => import("../../protocol/admin/workspace.js"))
    yield* withClient(AgentGroup.merge(WorkspaceGroup), socket, (c) =>
      Effect.gen(function*() {
        const info = yield* call(socket, c.agent.inspect({ agent: o.agent }))
        const ws = info.agent.workspace_id
        if (ws === null || ws === undefined) {
          return yield* new CliError({ kind: "invalid-input", message: `agent ${info.agent.name} has no workspace (it was created without --workspace)` })
        }
        const spec = yield* workspaceById(socket, c, ws)
        yield* shellIn(socket, c, spec, info.agent.name)
      }))
  })).pipe(Command.withDescription(describe("Open a shell inside an agent's sandbox: its workspace, binds, limits, network", {
    details: ["Your changes are recorded in the workspace history as a turn of human when the shell exits."],
    examples: ["substrat agent shell alpha"]
  })))

export const agentCommand = Command.make("agent").pipe(
  Command.withDescription(describe("Create, list and talk to agents", {
    examples: ["substrat agent create --name alpha --provider scripted:demo", "substrat agent send alpha \"hello\"", "substrat agent ls"]
  })),
  Command.withSubcommands([
    createCommand,
    listCommand,
    sendCommand,
    waitCommand,
    attachCommand,
    inspectCommand,
    terminateCommand,
    resumeCommand,
    logsCommand,
    shellCommand
  ])
)

