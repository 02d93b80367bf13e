// `substrat session list|suspend|resume|delete`: low-level control of agents' sessions.
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option, Schema } from "effect"
import { SessionId } from "../../domain/ids.js"
import { SessionRef } from "../../protocol/admin/common.js"
import { SessionGroup } from "../../protocol/admin/session.js"
import { call, withClient } from "../Client.js"
import { home, json, pathsOf, quiet } from "../Common.js"
import { printJson, renderSessions } from "../Output.js"
import { describe } from "../Help.js"

const sessionArg = Args.text({ name: "session" }).pipe(Args.withSchema(SessionRef), Args.withDescription("Session id or unique id prefix, or its agent's name"))

const limit = Options.integer("limit").pipe(
  Options.withSchema(Schema.Int.pipe(Schema.between(1, 100_000))),
  Options.withDescription("Show one page of at most this many sessions (oldest first); the next page's --after is printed to stderr"),
  Options.optional
)
const after = Options.text("after").pipe(
  Options.withPseudoName("session-id"),
  Options.withSchema(SessionId),
  Options.withDescription("Start after this session id (the previous page's last)"),
  Options.optional
)

const listCommand = Command.make("list", { home, json, quiet, limit, after }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const page = {
      ...Option.match(o.limit, { onNone: () => ({}), onSome: (limit) => ({ limit }) }),
      ...Option.match(o.after, { onNone: () => ({}), onSome: (after) => ({ after }) })
    }
    const r = yield* withClient(SessionGroup, socket, (c) => call(socket, c.session.list(Object.keys(page).length === 0 ? undefined : page)))
    if (o.json) return yield* printJson(r)
    yield* Console.log(o.quiet ? r.sessions.map((s) => s.id).join("\n") : renderSessions(r.sessions))
    // The next page's start on stderr, so stdout stays the list.
    if (r.next !== undefined) yield* Effect.sync(() => process.stderr.write(`more: --after ${r.next}\n`))
  })).pipe(Command.withDescription(describe("List the sessions, oldest first", {
    details: ["--limit pages the list; when more follow, the next page's --after is printed on stderr. --quiet prints ids only."],
    examples: ["substrat session list", "substrat session ls --json", "substrat session ls --limit 100   # the first 100"]
  })))

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
