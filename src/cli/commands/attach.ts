// `substrat agent attach <agent> [--read-only]`: watch an agent live and talk to it. On a
// terminal a REPL (node:readline: a prompt, line editing, history; output is printed above the
// line being typed); from a pipe each input line is a message. Local commands: /help, /status,
// /quit; Ctrl-C detaches like /quit. `--read-only` only watches (stdin is not read).
import { Args, Command, Options } from "@effect/cli"
import { Effect, Fiber, Stream } from "effect"
import * as readline from "node:readline"
import { AgentRef } from "../../protocol/admin/common.js"
import type { InspectResult, OutputEvent } from "../../protocol/admin/agent.js"
import { AgentGroup } from "../../protocol/admin/agent.js"
import { call, type CliError, withClient } from "../Client.js"
import { home, pathsOf } from "../Common.js"
import { describe } from "../Help.js"
import { activityText } from "../Live.js"

const clock = (ts: string) => (ts.length >= 19 ? ts.slice(11, 19) : ts)

/**
 * Prints attach events as whole lines: a turn's streamed text line by line (`[t] alpha: …`,
 * continuation lines indented), everything else on its own line. A reply is shown once: a turn's
 * final text only when none of it streamed, and a message to USER only when it is not the text
 * just shown.
 */
export const makePrinter = (line: (s: string) => void) => {
  let partial = ""
  let said = ""
  let first = true
  let from = "agent"
  let ts = ""
  const flush = (all: boolean) => {
    for (;;) {
      const i = partial.indexOf("\n")
      if (i < 0 && !(all && partial.length > 0)) return
      const text = i < 0 ? partial : partial.slice(0, i)
      partial = i < 0 ? "" : partial.slice(i + 1)
      line(first ? `[${clock(ts)}] ${from}: ${text}` : `${" ".repeat(11 + from.length)}${text}`)
      first = false
    }
  }
  return (e: OutputEvent): void => {
    const t = `[${clock(e.ts)}]`
    switch (e.kind) {
      case "text":
        ts = e.ts
        from = e.from ?? "agent"
        partial += e.text
        said += e.text
        return flush(false)
      case "message":
        flush(true)
        if (e.to === "USER" && said.trim().length > 0 && e.text.trim() === said.trim()) return
        return line(`${t} ${e.from ?? "?"} → ${e.to ?? "?"}: ${e.text}`)
      case "turn.start":
        flush(true)
        said = ""
        first = true
        return line(`${t} ▶ ${e.from ?? "agent"} turn: ${e.text}`)
      case "turn.complete":
        flush(true)
        if (said.trim().length === 0 && e.text.length > 0) line(`${t} ${e.from ?? "agent"}: ${e.text}`)
        said = ""
        first = true
        return
      case "tool":
        flush(true)
        return line(`${t} ⚙ ${e.text}`)
      case "error":
        flush(true)
        return line(`${t} ! ${e.text}`)
      case "state":
        flush(true)
        return line(`${t} * ${e.text}`)
    }
  }
}

/** One line about the agent: its state, and what its running turn is doing. */
export const statusLine = (i: InspectResult, now: number): string => {
  const a = i.agent
  const doing = i.activity ? `, ${activityText(i.activity, now)}` : ""
  return `${a.name} (${a.id.slice(0, 8)}): ${a.state}${doing}; inbox ${i.inbox}, ${i.queued_turns} queued turn(s), waiting for ${i.waiting_for_replies} repl(ies)`
}

const HELP = [
  "type a line and press Enter to send it to the agent (as USER, a request it answers)",
  "/status   the agent's state and what it is doing",
  "/help     this help",
  "/quit     detach (Ctrl-C and Ctrl-D too); the agent keeps running"
].join("\n")

type Input = { readonly _tag: "send"; readonly text: string } | { readonly _tag: "status" }

/** A terminal: the REPL. Otherwise lines from the pipe. Ends at /quit, Ctrl-C or end of input. */
const inputs = (prompt: string, terminal: boolean, say: (s: string) => void, bind: (rl: readline.Interface) => void) =>
  Stream.asyncPush<Input>((emit) =>
    Effect.acquireRelease(
      Effect.sync(() => {
        const rl = readline.createInterface({
          input: process.stdin,
          output: terminal ? process.stdout : undefined,
          terminal,
          prompt,
          historySize: 500
        })
        bind(rl)
        rl.on("line", (raw) => {
          const text = raw.trim()
          if (text === "/quit" || text === "/exit") {
            emit.end()
            return
          }
          if (text === "/help") say(HELP)
          else if (text === "/status") emit.single({ _tag: "status" })
          else if (text.startsWith("/") && !text.includes(" ")) say(`unknown command ${text}; /help lists them`)
          else if (text.length > 0) emit.single({ _tag: "send", text: raw })
          if (terminal) rl.prompt()
        })
        rl.on("SIGINT", () => emit.end())
        rl.on("close", () => emit.end())
        if (terminal) rl.prompt()
        return rl
      }),
      (rl) => Effect.sync(() => rl.close())
    )
  )

export const attachCommand = Command.make("attach", {
  home,
  readOnly: Options.boolean("read-only").pipe(
    Options.withDescription("Only watch: stdin is not read; stays attached until Ctrl-C or the agent ends")
  ),
  agent: Args.text({ name: "agent" }).pipe(Args.withSchema(AgentRef), Args.withDescription("Agent name, id or unique id prefix"))
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const terminal = !o.readOnly && process.stdin.isTTY === true && process.stdout.isTTY === true
    let rl: readline.Interface | undefined
    /** A line of output: on the REPL above the line being typed, which is redrawn after it. */
    const say = (s: string) => {
      if (rl !== undefined && terminal) {
        readline.clearLine(process.stdout, 0)
        readline.cursorTo(process.stdout, 0)
        process.stdout.write(`${s}\n`)
        rl.prompt(true)
      } else process.stdout.write(`${s}\n`)
    }
    const note = (s: string) =>
      Effect.sync(() => {
        if (rl !== undefined && terminal) say(s)
        else process.stderr.write(`${s}\n`)
      })
    yield* withClient(AgentGroup, socket, (c) =>
      Effect.gen(function*() {
        // Resolve first, so a bad reference fails before anything is read.
        const info = yield* call(socket, c.agent.inspect({ agent: o.agent }))
        const name = info.agent.name
        yield* note(o.readOnly
          ? `watching ${name} (${info.agent.id}), read-only; Ctrl-C to detach`
          : `attached to ${name} (${info.agent.id}); type a message, /help for commands, /quit or Ctrl-C to detach`)
        if (info.activity) yield* note(`${name} is busy: ${activityText(info.activity, Date.now())}`)
        const print = makePrinter(say)
        const output = yield* c.agent.attach({ agent: info.agent.id }).pipe(
          Stream.runForEach((e) => Effect.sync(() => print(e))),
          (s) => call(socket, s),
          Effect.fork
        )
        // The prompt is not drawn again after this line.
        const detached = Effect.sync(() => {
          rl?.close()
          rl = undefined
        }).pipe(Effect.zipRight(note("detached")))
        if (o.readOnly) {
          return yield* Fiber.join(output).pipe(Effect.onInterrupt(() => detached))
        }
        const input = inputs(`${name}> `, terminal, say, (r) => (rl = r)).pipe(
          Stream.runForEach((i): Effect.Effect<void, CliError> =>
            i._tag === "send"
              ? Effect.asVoid(call(socket, c.agent.send({ agent: info.agent.id, text: i.text, sync: true })))
              : Effect.map(call(socket, c.agent.inspect({ agent: info.agent.id })), (s) => say(statusLine(s, Date.now())))
          ),
          Effect.zipRight(detached)
        )
        // Ends at /quit, Ctrl-C or end of input (detach), or when the daemon ends the stream.
        yield* Effect.raceFirst(input, Fiber.join(output)).pipe(Effect.onInterrupt(() => detached))
      }))
  })).pipe(Command.withDescription(describe("Talk to an agent: its output streams live, each input line is a message", {
    details: [
      "On a terminal: a prompt with line editing and history; /help, /status, /quit. Ctrl-C detaches; the agent keeps running.",
      "--read-only only watches (for scripts: stdin is not read)."
    ],
    examples: ["substrat agent attach alpha", "substrat agent attach alpha --read-only > alpha.log"]
  })))
