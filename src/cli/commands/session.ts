// `substrat session list|suspend|resume|delete`: low-level control of agents' sessions.
import { Args, Command } from "@effect/cli"
import { Console, Effect } from "effect"
import { SessionRef } from "../../protocol/admin/common.js"
import { SessionGroup } from "../../protocol/admin/session.js"
import { call, withClient } from "../Client.js"
import { home, json, pathsOf, quiet } from "../Common.js"
import { printJson, renderSessions } from "../Output.js"
import { describe } from "../Help.js"

const sessionArg = Args.text({ name: "session" }).pipe(Args.withSchema(SessionRef), Args.withDescription("Session id or unique id prefix, or its agent's name"))

const listCommand = Command.make("list", { home, json, quiet }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(SessionGroup, socket, (c) => call(socket, c.session.list()))
    if (o.json) return yield* printJson(r)
    if (o.quiet) return yield* Console.log(r.sessions.map((s) => s.id).join("\n"))
    yield* Console.log(renderSessions(r.sessions))
  })).pipe(Command.withDescription(describe("List all sessions", { examples: ["substrat session list", "substrat session ls --json"] })))

const suspendCommand = Command.make("suspend", { home, json, session: sessionArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(SessionGroup, socket, (c) => call(socket, c.session.suspend({ session: o.session })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(`session ${r.id} ${r.state}`)
  })).pipe(Command.withDescription(describe("Suspend a session (its provider slot is freed)", { examples: ["substrat session suspend <session>"] })))

const resumeCommand = Command.make("resume", { home, json, session: sessionArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(SessionGroup, socket, (c) => call(socket, c.session.resume({ session: o.session })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(`session ${r.id} ${r.state}`)
  })).pipe(Command.withDescription(describe("Resume a suspended session", { examples: ["substrat session resume <session>"] })))

const deleteCommand = Command.make("delete", { home, json, session: sessionArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(SessionGroup, socket, (c) => call(socket, c.session.delete({ session: o.session })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(`session ${r.session} deleted`)
  })).pipe(Command.withDescription(describe("Delete a session (terminates its agent, removes its files)", { examples: ["substrat session rm <session>"] })))

export const sessionCommand = Command.make("session").pipe(
  Command.withDescription(describe("Low-level session control (suspend, resume, delete)", { examples: ["substrat session list"] })),
  Command.withSubcommands([listCommand, suspendCommand, resumeCommand, deleteCommand])
)
