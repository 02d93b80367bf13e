// `substrat workspace create|list|link|delete`.
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { WorkspaceId } from "../../domain/ids.js"
import { call, CliError, withClient } from "../Client.js"
import { home, json, pathsOf } from "../Common.js"
import { printJson, renderWorkspaces } from "../Output.js"

const workspaceArg = Args.text({ name: "workspace" }).pipe(Args.withSchema(WorkspaceId), Args.withDescription("Workspace id (uuid)"))

const createCommand = Command.make("create", {
  home,
  json,
  parent: Options.text("parent").pipe(
    Options.withSchema(WorkspaceId),
    Options.withDescription("Parent workspace: the new one is nested in it, never wider"),
    Options.optional
  ),
  name: Options.text("name").pipe(Options.withDescription("A label"), Options.optional),
  network: Options.boolean("network").pipe(Options.withDescription("Allow network access inside the sandbox"))
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const w = yield* withClient(socket, (c) =>
      call(socket, c.workspace.create({
        ...Option.match(o.parent, { onNone: () => ({}), onSome: (parent) => ({ parent }) }),
        ...Option.match(o.name, { onNone: () => ({}), onSome: (name) => ({ name }) }),
        network: o.network
      })))
    if (o.json) return yield* printJson(w)
    yield* Console.log(`created workspace ${w.id} at ${w.root_path}`)
  })).pipe(Command.withDescription("Create a workspace"))

const listCommand = Command.make("list", { home, json }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(socket, (c) => call(socket, c.workspace.list()))
    if (o.json) return yield* printJson(r)
    yield* Console.log(renderWorkspaces(r.workspaces))
  })).pipe(Command.withDescription("List workspaces"))

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
    const w = yield* withClient(socket, (c) =>
      call(socket, c.workspace.link({
        workspace: o.workspace,
        host_path: o.hostPath,
        mount_path: o.mountPath,
        mode: o.rw ? "rw" : "ro"
      })))
    if (o.json) return yield* printJson(w)
    yield* Console.log(`linked ${o.hostPath} at /workspace/${o.mountPath} (${o.rw ? "rw" : "ro"}) in ${w.id}`)
  })).pipe(Command.withDescription("Bind a host path into a workspace, read-only or read-write"))

const deleteCommand = Command.make("delete", { home, json, workspace: workspaceArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(socket, (c) => call(socket, c.workspace.delete({ workspace: o.workspace })))
    if (o.json) return yield* printJson(r)
    yield* Console.log(`workspace ${r.workspace} deleted`)
  })).pipe(Command.withDescription("Delete a workspace"))

export const workspaceCommand = Command.make("workspace").pipe(
  Command.withDescription("Manage sandbox workspaces"),
  Command.withSubcommands([createCommand, listCommand, linkCommand, deleteCommand])
)
