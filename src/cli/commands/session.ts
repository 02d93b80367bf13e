// `substrat session list|suspend|resume|delete`: low-level control of agents' sessions.
import { Args, Command } from "@effect/cli"
import { Console, Effect } from "effect"
import { SessionId } from "../../domain/ids.js"
import { call, withClient } from "../Client.js"
import { home, json, pathsOf } from "../Common.js"
import { printJson, renderSessions } from "../Output.js"

const sessionArg = Args.text({ name: "session" }).pipe(Args.withSchema(SessionId), Args.withDescription("Session id (uuid)"))

const listCommand = Command.make("list", { home, json }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(socket, (c) => call(socket, c.session.list()))
    if (o.json) return yield* printJson(r)
    yield* Console.log(renderSessions(r.sessions))
  })).pipe(Command.withDescription("List all sessions"))

const suspendCommand = Command.make("suspend", { home, json, session: sessionArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(socket, (c) => call(socket, c.session.suspend({ session: o.session })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(`session ${r.id} ${r.state}`)
  })).pipe(Command.withDescription("Suspend a session (its provider slot is freed)"))

const resumeCommand = Command.make("resume", { home, json, session: sessionArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(socket, (c) => call(socket, c.session.resume({ session: o.session })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(`session ${r.id} ${r.state}`)
  })).pipe(Command.withDescription("Resume a suspended session"))

const deleteCommand = Command.make("delete", { home, json, session: sessionArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(socket, (c) => call(socket, c.session.delete({ session: o.session })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(`session ${r.session} deleted`)
  })).pipe(Command.withDescription("Delete a session (terminates its agent, removes its files)"))

export const sessionCommand = Command.make("session").pipe(
  Command.withDescription("Low-level session control"),
  Command.withSubcommands([listCommand, suspendCommand, resumeCommand, deleteCommand])
)
