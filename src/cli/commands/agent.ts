// `substrat agent create|list|send|attach|inspect|terminate|logs`.
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Fiber, Option, Stream } from "effect"
import * as readline from "node:readline"
import { AgentRef, MessageText, type OutputEvent, WorkspaceRef } from "../../daemon/Rpcs.js"
import { call, CliError, withClient } from "../Client.js"
import { home, json, pathsOf, quiet } from "../Common.js"
import { printJson, renderInspect, renderSent, renderTree } from "../Output.js"
import { describe } from "../Help.js"
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
  )
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const agent = yield* withClient(socket, (c) =>
      call(socket, c.agent.create({
        ...opt(o.provider, "provider"),
        ...opt(o.name, "name"),
        ...opt(o.instructions, "instructions"),
        ...opt(o.role, "role"),
        ...opt(o.workspace, "workspace_id")
      })))
    if (o.json) return yield* printJson(agent)
    if (o.quiet) return yield* Console.log(agent.id)
    yield* Console.log(`created ${agent.name} (${agent.id}, provider ${agent.provider})`)
  })).pipe(Command.withDescription(describe("Create a root agent (and its session)", {
    examples: [
      "substrat agent create --name alpha --provider scripted:demo",
      "substrat agent create --name coder --provider claude --workspace <workspace>",
      "id=$(substrat agent create --provider codex --quiet)"
    ]
  })))

const listCommand = Command.make("list", {
  home,
  json,
  quiet,
  all: Options.boolean("all").pipe(Options.withAlias("a"), Options.withDescription("Also show terminated agents"))
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(socket, (c) => call(socket, c.agent.list({ all: o.all })))
    if (o.json) return yield* printJson(r)
    if (o.quiet) return yield* Console.log(r.agents.map((a) => a.id).join("\n"))
    yield* Console.log(renderTree(r.agents))
  })).pipe(Command.withDescription(describe("Show the agent tree (all roots and their children)", {
    examples: ["substrat agent list", "substrat agent ls --json", "substrat agent ls --quiet   # ids only"]
  })))

const sendCommand = Command.make("send", {
  home,
  json,
  notify: Options.boolean("notify").pipe(
    Options.withDescription("Queue as a notification (the agent sees it on its next turn) instead of a request that wakes it")
  ),
  agent: agentArg,
  message: Args.text({ name: "message" }).pipe(Args.withSchema(MessageText), Args.withDescription("The message text"))
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(socket, (c) =>
      call(socket, c.agent.send({ agent: o.agent, text: o.message, sync: !o.notify })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(renderSent(r))
  })).pipe(Command.withDescription(describe("Send one message to an agent as USER", {
    examples: [
      "substrat agent send alpha \"Fix the failing test in src/math.ts\"",
      "substrat agent send --notify alpha \"The build is green again\""
    ]
  })))

/** Status lines go straight to stderr (main.ts captures @effect/cli's own Console.error output). */
const stderr = (line: string) => Effect.sync(() => process.stderr.write(`${line}\n`))

const clock = (ts: string) => (ts.length >= 19 ? ts.slice(11, 19) : ts)

/**
 * Prints attach events: text chunks of a turn run on one line (`[t] alpha: …`), everything else
 * gets its own line. A turn's final text is printed only when no chunk of it was streamed.
 */
export const makePrinter = (write: (s: string) => void) => {
  let inText = false
  let streamed = false
  const line = (s: string) => {
    if (inText) write("\n")
    inText = false
    write(`${s}\n`)
  }
  return (e: OutputEvent): void => {
    const t = `[${clock(e.ts)}]`
    switch (e.kind) {
      case "text":
        if (!inText) write(`${t} ${e.from ?? "agent"}: `)
        write(e.text)
        inText = true
        streamed = true
        return
      case "message":
        return line(`${t} ${e.from ?? "?"} → ${e.to ?? "?"}: ${e.text}`)
      case "turn.start":
        streamed = false
        return line(`${t} … ${e.text}`)
      case "turn.complete":
        if (!streamed && e.text.length > 0) line(`${t} ${e.text}`)
        else if (inText) {
          write("\n")
          inText = false
        }
        streamed = false
        return
      case "tool":
        return line(`${t} ⚙ ${e.text}`)
      case "error":
        return line(`${t} ! ${e.text}`)
      case "state":
        return line(`${t} * ${e.text}`)
    }
  }
}

/** Lines of stdin until EOF or `/quit`. */
const stdinLines = Stream.asyncPush<string>((emit) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const rl = readline.createInterface({ input: process.stdin, terminal: false })
      rl.on("line", (line) => {
        if (line.trim() === "/quit") {
          emit.end()
          rl.close()
        } else emit.single(line)
      })
      rl.on("close", () => emit.end())
      return rl
    }),
    (rl) => Effect.sync(() => rl.close())
  )
)

const attachCommand = Command.make("attach", { home, agent: agentArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    yield* withClient(socket, (c) =>
      Effect.gen(function*() {
        // Resolve first, so a bad id fails with "not found" before anything is read.
        const info = yield* call(socket, c.agent.inspect({ agent: o.agent }))
        yield* stderr(`attached to ${info.agent.name} (${info.agent.id}); type a message, /quit or Ctrl-C to detach`)
        const print = makePrinter((s) => process.stdout.write(s))
        const output = yield* c.agent.attach({ agent: info.agent.id }).pipe(
          Stream.runForEach((e) => Effect.sync(() => print(e))),
          (s) => call(socket, s),
          Effect.fork
        )
        const input = stdinLines.pipe(
          Stream.filter((l) => l.trim().length > 0),
          Stream.runForEach((text) => call(socket, c.agent.send({ agent: info.agent.id, text, sync: true }))),
          Effect.zipRight(stderr("detached"))
        )
        // Ends at /quit or EOF on stdin (detach), or when the daemon ends the stream.
        yield* Effect.raceFirst(input, Fiber.join(output))
      }))
  })).pipe(Command.withDescription(describe("Talk to an agent: its output streams live, each input line is a message", {
    details: ["/quit or Ctrl-C detaches; the agent keeps running."],
    examples: ["substrat agent attach alpha"]
  })))

const inspectCommand = Command.make("inspect", { home, json, agent: agentArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(socket, (c) => call(socket, c.agent.inspect({ agent: o.agent })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(renderInspect(r))
  })).pipe(Command.withDescription(describe("Show an agent's state, session, children, inbox, usage and recent activity", {
    examples: ["substrat agent inspect alpha", "substrat agent inspect alpha --json"]
  })))

const terminateCommand = Command.make("terminate", { home, json, agent: agentArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(socket, (c) => call(socket, c.agent.terminate({ agent: o.agent })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(`terminated ${r.agent_id}`)
  })).pipe(Command.withDescription(describe("Terminate an agent and its subtree", {
    examples: ["substrat agent terminate alpha", "substrat agent rm 3f2c9a1e-…"]
  })))

const resumeCommand = Command.make("resume", { home, json, agent: agentArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(socket, (c) => call(socket, c.agent.resume({ agent: o.agent })))
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
    yield* withClient(socket, (c) =>
      c.agent.logs({ agent: o.agent, follow: o.follow }).pipe(
        Stream.runForEach((line) => Console.log(line)),
        (s) => call(socket, s)
      ))
  })).pipe(Command.withDescription(describe("Print an agent's transcript; -f keeps following it", {
    examples: ["substrat agent logs alpha", "substrat agent logs -f alpha"]
  })))

const shellCommand = Command.make("shell", { home, agent: agentArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    yield* withClient(socket, (c) =>
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
    attachCommand,
    inspectCommand,
    terminateCommand,
    resumeCommand,
    logsCommand,
    shellCommand
  ])
)

