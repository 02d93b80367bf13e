// `substrat workspace create|list|link|delete|diff|revert|log`.
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { TurnRef, WorkspaceRef } from "../../daemon/rpcs/common.js"
import { WorkspaceGroup } from "../../daemon/rpcs/workspace.js"
import { call, CliError, withClient } from "../Client.js"
import { home, json, pathsOf, quiet } from "../Common.js"
import { suggest } from "../Exit.js"
import { shellIn, workspaceById } from "../Shell.js"
import { printJson, renderWorkspaces, table } from "../Output.js"
import { describe } from "../Help.js"

const workspaceArg = Args.text({ name: "workspace" }).pipe(Args.withSchema(WorkspaceRef), Args.withDescription("Workspace name, id or unique id prefix"))

const createCommand = Command.make("create", {
  home,
  json,
  quiet,
  parent: Options.text("parent").pipe(
    Options.withSchema(WorkspaceRef),
    Options.withDescription("Parent workspace (name, id or id prefix): the new one is nested in it, never wider"),
    Options.optional
  ),
  name: Options.text("name").pipe(Options.withDescription("A label"), Options.optional),
  network: Options.boolean("network").pipe(Options.withDescription("Allow network access inside the sandbox"))
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const w = yield* withClient(WorkspaceGroup, socket, (c) =>
      call(socket, c.workspace.create({
        ...Option.match(o.parent, { onNone: () => ({}), onSome: (parent) => ({ parent }) }),
        ...Option.match(o.name, { onNone: () => ({}), onSome: (name) => ({ name }) }),
        network: o.network
      })))
    if (o.json) return yield* printJson(w)
    if (o.quiet) return yield* Console.log(w.id)
    yield* Console.log(`created workspace ${w.id} at ${w.root_path}`)
  })).pipe(Command.withDescription(describe("Create a workspace: a sandboxed directory agents run in", {
    examples: [
      "substrat workspace create --name web",
      "substrat workspace create --parent <workspace> --name tests",
      "ws=$(substrat workspace create --network --quiet)"
    ]
  })))

const listCommand = Command.make("list", { home, json, quiet }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(WorkspaceGroup, socket, (c) => call(socket, c.workspace.list()))
    if (o.json) return yield* printJson(r)
    if (o.quiet) return yield* Console.log(r.workspaces.map((w) => w.id).join("\n"))
    yield* Console.log(renderWorkspaces(r.workspaces))
  })).pipe(Command.withDescription(describe("List workspaces", { examples: ["substrat workspace list", "substrat workspace ls --quiet   # ids only"] })))

const linkCommand = Command.make("link", {
  home,
  json,
  ro: Options.boolean("ro").pipe(Options.withDescription("Read-only (default)")),
  rw: Options.boolean("rw").pipe(Options.withDescription("Read-write")),
  workspace: workspaceArg,
  hostPath: Args.text({ name: "host-path" }).pipe(Args.withDescription("Absolute path on the host")),
  mountPath: Args.text({ name: "mount-path" }).pipe(Args.withDescription("Relative path under /workspace"))
}, (o) =>
  Effect.gen(function*() {
    if (o.ro && o.rw) return yield* new CliError({ kind: "invalid-input", message: "choose one of --ro and --rw" })
    const socket = pathsOf(o.home).socket
    const w = yield* withClient(WorkspaceGroup, socket, (c) =>
      call(socket, c.workspace.link({
        workspace: o.workspace,
        host_path: o.hostPath,
        mount_path: o.mountPath,
        mode: o.rw ? "rw" : "ro"
      })))
    if (o.json) return yield* printJson(w)
    yield* Console.log(`linked ${o.hostPath} at /workspace/${o.mountPath} (${o.rw ? "rw" : "ro"}) in ${w.id}`)
  })).pipe(Command.withDescription(describe("Bind a host path into a workspace, read-only or read-write", {
    examples: ["substrat workspace link <workspace> ~/src/app app", "substrat workspace link --rw <workspace> ~/src/app app"]
  })))

const deleteCommand = Command.make("delete", {
  home,
  json,
  force: Options.boolean("force").pipe(
    Options.withDescription("Delete even while an agent uses it, and with its child workspaces")
  ),
  workspace: workspaceArg
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(WorkspaceGroup, socket, (c) => call(socket, c.workspace.delete({ workspace: o.workspace, force: o.force }))).pipe(
      // The daemon says "with force"; here that is a flag.
      Effect.mapError((e) =>
        e.message.endsWith("with force")
          ? new CliError({ kind: e.kind, message: `${e.message.slice(0, -"force".length)}${suggest(pathsOf(o.home).home, `workspace delete --force ${o.workspace}`)}` })
          : e
      )
    )
    if (o.json) return yield* printJson(r)
    const others = (r.removed ?? []).filter((id) => id !== r.workspace)
    yield* Console.log(`workspace ${r.workspace} deleted${others.length > 0 ? ` (and ${others.length} child workspace(s))` : ""}`)
  })).pipe(Command.withDescription(describe("Delete a workspace (refused while an agent uses it, unless --force)", {
    examples: ["substrat workspace delete <workspace>", "substrat workspace rm --force <workspace>"]
  })))

const turnOption = Options.text("turn").pipe(
  Options.withSchema(TurnRef),
  Options.withDescription("Turn id or unique id prefix: see `substrat workspace log`")
)

const changeMark = { added: "A", modified: "M", deleted: "D" } as const

const diffCommand = Command.make("diff", { home, json, turn: Options.optional(turnOption), workspace: workspaceArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(WorkspaceGroup, socket, (c) =>
      call(socket, c.workspace.diff({
        workspace: o.workspace,
        ...Option.match(o.turn, { onNone: () => ({}), onSome: (turn) => ({ turn }) })
      })))
    if (o.json) return yield* printJson(r)
    if (r.paths.length === 0) {
      return yield* Console.log(r.turn === null ? "(no changes since the last recorded turn)" : `(turn ${r.turn} changed nothing)`)
    }
    yield* Console.log(r.diff.endsWith("\n") ? r.diff.slice(0, -1) : r.diff)
  })).pipe(Command.withDescription(describe("Show what a turn changed in a workspace (default: the changes not recorded yet)", {
    examples: ["substrat workspace diff <workspace>", "substrat workspace diff --turn <turn> <workspace>"]
  })))

const revertCommand = Command.make("revert", { home, json, turn: turnOption, workspace: workspaceArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(WorkspaceGroup, socket, (c) => call(socket, c.workspace.revert({ workspace: o.workspace, turn: o.turn })))
    if (o.json) return yield* printJson(r)
    if (r.commit === null) return yield* Console.log(`turn ${r.turn}: nothing left to revert`)
    yield* Console.log([`reverted turn ${r.turn} in ${r.workspace}:`, ...r.paths.map((p) => `  ${changeMark[p.change]} ${p.path}`)].join("\n"))
  })).pipe(Command.withDescription(describe("Undo one turn's changes in a workspace (a new history commit)", {
    examples: ["substrat workspace revert --turn <turn> <workspace>"]
  })))

const logCommand = Command.make("log", {
  home,
  json,
  limit: Options.integer("limit").pipe(Options.withDescription("At most this many turns (default 100)"), Options.optional),
  workspace: workspaceArg
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(WorkspaceGroup, socket, (c) =>
      call(socket, c.workspace.log({
        workspace: o.workspace,
        ...Option.match(o.limit, { onNone: () => ({}), onSome: (limit) => ({ limit }) })
      })))
    if (o.json) return yield* printJson(r)
    if (r.turns.length === 0) return yield* Console.log("(no recorded turns)")
    yield* Console.log(table([
      ["TIME", "AGENT", "TURN", "COMMIT", "SUBJECT"],
      ...r.turns.map((t) => [t.time, t.agent, t.turn_id ?? "-", t.commit.slice(0, 12), t.subject])
    ]))
  })).pipe(Command.withDescription(describe("List the recorded turns of a workspace, newest first", {
    examples: ["substrat workspace log <workspace>", "substrat workspace log --limit 10 --json <workspace>"]
  })))

const shellCommand = Command.make("shell", { home, workspace: workspaceArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    yield* withClient(WorkspaceGroup, socket, (c) =>
      Effect.flatMap(workspaceById(socket, c, o.workspace), (spec) => shellIn(socket, c, spec, spec.name ?? spec.id.slice(0, 8))))
  })).pipe(Command.withDescription(describe("Open a shell inside a workspace's sandbox (same binds, limits, network)", {
    details: ["Your changes are recorded in the workspace history as a turn of human when the shell exits."],
    examples: ["substrat workspace shell <workspace>"]
  })))

export const workspaceCommand = Command.make("workspace").pipe(
  Command.withDescription(describe("Manage sandbox workspaces and their history", {
    examples: ["substrat workspace create --name web", "substrat workspace log <workspace>"]
  })),
  Command.withSubcommands([createCommand, listCommand, linkCommand, deleteCommand, diffCommand, revertCommand, logCommand, shellCommand])
)
