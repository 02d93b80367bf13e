// `substrat workspace create|list|link|delete|diff|revert|log`.
//
// Over 300 lines because it is the command table of one area: each subcommand's flags, help and
// output side by side.
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { mkdirSync, readdirSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { TurnRef, WorkspaceRef } from "../../protocol/admin/common.js"
import { WorkspaceGroup } from "../../protocol/admin/workspace.js"
import { call, CliError, withClient } from "../Client.js"
import { allowFields, allowHosts, allowPresets, checkOption, checkPayload, home, json, pathsOf, quiet, refOption, bindIgnoredOption, repoOption, repoPayload } from "../Common.js"
import { suggest } from "../Exit.js"
import { shellIn, workspaceById } from "../Shell.js"
import { printJson, renderWorkspaces, table } from "../Output.js"
import { describe, wantsColor } from "../Help.js"
import { colourDiff } from "../Format.js"
import { parentEnv } from "../../config/Config.js"
import { describePolicy } from "../../domain/egress.js"

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
  repo: repoOption,
  ref: refOption,
  bindIgnored: bindIgnoredOption,
  check: checkOption,
  network: Options.boolean("network").pipe(
    Options.withDescription("UNSAFE: the sandbox shares the host's network (any host, any port, the host's own services); prefer --allow / --allow-host")
  ),
  allowHosts,
  allowPresets
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const repo = yield* repoPayload(o.repo, o.ref, o.bindIgnored)
    if (Option.isSome(o.parent) && repo.repo !== undefined) {
      return yield* new CliError({ kind: "invalid-input", message: "--repo makes a top-level workspace: not with --parent" })
    }
    const w = yield* withClient(WorkspaceGroup, socket, (c) =>
      call(socket, c.workspace.create({
        ...Option.match(o.parent, { onNone: () => ({}), onSome: (parent) => ({ parent }) }),
        ...Option.match(o.name, { onNone: () => ({}), onSome: (name) => ({ name }) }),
        network: o.network,
        ...repo,
        ...checkPayload(o.check),
        ...allowFields(o.allowHosts, o.allowPresets)
      })))
    if (o.json) return yield* printJson(w)
    if (o.quiet) return yield* Console.log(w.id)
    const egress = `; egress: ${describePolicy(w.egress, w.network_access)}`
    yield* Console.log(
      w.repo === null
        ? `created workspace ${w.id} at ${w.root_path}${egress}`
        : `created workspace ${w.id} at ${w.root_path}: a clone of ${w.repo.path} at ${w.repo.base.slice(0, 12)} on ${w.repo.branch}${egress}`
    )
  })).pipe(Command.withDescription(describe("Create a workspace: a sandboxed directory agents run in", {
    details: [
      "With --repo the workspace is a clone of your git repository on a new branch substrat/<name>; every turn's commit is published to that branch in your repository (nothing else there is written), and `workspace merge` hands the work back when you ask.",
      "Default: no network at all. --allow/--allow-host let the sandbox reach those hosts (80/443) through the daemon's egress proxy; every request is logged. A child workspace is never wider than its parent."
    ],
    examples: [
      "substrat workspace create --repo . --name fix-login",
      "substrat workspace create --repo ~/src/app --ref v2.1 --name backport",
      "substrat workspace create --name web --allow npm --allow-host files.example.org"
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

const hostsArg = Args.text({ name: "host" }).pipe(
  Args.withDescription("Host pattern: host, *.domain (its subdomains), optionally :port (else 80 and 443)"),
  Args.repeated
)
const presetOption = Options.text("preset").pipe(
  Options.withDescription("A preset: npm, pypi, crates, go, github (repeatable; `substrat config` lists their hosts)"),
  Options.repeated
)

const egressCommand = (verb: "allow" | "deny") =>
  Command.make(verb, { home, json, preset: presetOption, workspace: workspaceArg, hosts: hostsArg }, (o) =>
    Effect.gen(function*() {
      const socket = pathsOf(o.home).socket
      const payload = { workspace: o.workspace, hosts: o.hosts, presets: o.preset }
      const w = yield* withClient(WorkspaceGroup, socket, (c) =>
        call(socket, verb === "allow" ? c.workspace.allow(payload) : c.workspace.deny(payload)))
      if (o.json) return yield* printJson(w)
      yield* Console.log(`workspace ${w.name ?? w.id}: egress ${describePolicy(w.egress, w.network_access)}`)
    })).pipe(Command.withDescription(describe(
      verb === "allow"
        ? "Let a workspace's sandboxes reach more hosts through the egress proxy (never wider than its parent)"
        : "Take hosts or presets out of a workspace's egress policy",
      {
        details: ["Applies to the next request: a running agent's proxy reads the policy on every request."],
        examples: verb === "allow"
          ? ["substrat workspace allow web registry.npmjs.org", "substrat workspace allow web --preset pypi '*.example.org'"]
          : ["substrat workspace deny web registry.npmjs.org", "substrat workspace deny web --preset pypi"]
      }
    )))

const inspectCommand = Command.make("inspect", { home, json, workspace: workspaceArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const w = yield* withClient(WorkspaceGroup, socket, (c) => workspaceById(socket, c, o.workspace))
    if (o.json) return yield* printJson(w)
    const e = w.egress
    yield* Console.log(table([
      ["id", w.id],
      ["name", w.name ?? "-"],
      ["parent", w.parent_id ?? "-"],
      ["root", w.root_path],
      ["network", w.network_access ? "all (UNSAFE: --network)" : "none but the egress policy"],
      ["egress presets", e.presets.join(", ") || "-"],
      ["egress hosts", e.hosts.join(", ") || "-"],
      ["egress dismissed", e.dismissed.join(", ") || "-"],
      ["egress waiting", e.asked.map((a) => `${a.kind === "limit" ? "limit" : a.host} (inbox ${a.item_id})`).join(", ") || "-"],
      ["links", w.symlinks.map((l) => `${l.mount_path} → ${l.host_path} (${l.mode})`).join(", ") || "-"]
    ]))
  })).pipe(Command.withDescription(describe("Show a workspace: root, network, egress policy, links", {
    examples: ["substrat workspace inspect web", "substrat workspace inspect --json web"]
  })))

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
      // Refusals that force overrides: the daemon's words end "with force"; here that is a flag.
      Effect.mapError((e) =>
        e.reason === "in-use" || e.reason === "has-children"
          ? new CliError({ kind: e.kind, message: `${e.message.replace(/ with force$/, "")} with ${suggest(pathsOf(o.home).home, `workspace delete --force ${o.workspace}`)}` })
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
    const text = r.diff.endsWith("\n") ? r.diff.slice(0, -1) : r.diff
    yield* Console.log(wantsColor(parentEnv(), process.stdout.isTTY === true) ? colourDiff(text) : text)
  })).pipe(Command.withDescription(describe("Show what a turn changed in a workspace (default: the changes not recorded yet)", {
    details: ["Coloured on a terminal (not when piped, with NO_COLOR or TERM=dumb)."],
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

const mergeCommand = Command.make("merge", {
  home,
  json,
  into: Options.text("into").pipe(Options.withDescription("The branch to merge into (default: the one checked out when the workspace was made)"), Options.optional),
  squash: Options.boolean("squash").pipe(Options.withDescription("One commit with all the changes, not a merge of the branch's commits")),
  message: Options.text("message").pipe(Options.withAlias("m"), Options.withDescription("The merge (or squash) commit's message"), Options.optional),
  workspace: workspaceArg
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(WorkspaceGroup, socket, (c) =>
      call(socket, c.workspace.merge({
        workspace: o.workspace,
        squash: o.squash,
        ...Option.match(o.into, { onNone: () => ({}), onSome: (into) => ({ into }) }),
        ...Option.match(o.message, { onNone: () => ({}), onSome: (message) => ({ message }) })
      })))
    if (o.json) return yield* printJson(r)
    yield* Console.log([
      `${r.fast_forward ? "fast-forwarded" : o.squash ? "squashed" : "merged"} ${r.branch} into ${r.into}: ${r.previous.slice(0, 12)} -> ${r.commit.slice(0, 12)}${r.worktree_updated ? " (working tree updated)" : ""}`,
      ...r.paths.map((p) => `  ${p}`)
    ].join("\n"))
  })).pipe(Command.withDescription(describe("Merge a repository workspace's branch into a branch of your repository", {
    details: [
      "Only when you ask. Refused, with nothing changed, when the branch's working tree has uncommitted changes or the merge conflicts (the conflicting paths are listed)."
    ],
    examples: ["substrat workspace merge <workspace>", "substrat workspace merge --squash -m 'Fix login' --into main <workspace>"]
  })))

const exportCommand = Command.make("export", {
  home,
  json,
  patch: Options.directory("patch", { exists: "either" }).pipe(Options.withDescription("Write the patch series (git format-patch files) into this directory")),
  workspace: workspaceArg
}, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(WorkspaceGroup, socket, (c) => call(socket, c.workspace.export({ workspace: o.workspace })))
    const dir = resolve(o.patch)
    const written = yield* Effect.try({
      try: () => {
        mkdirSync(dir, { recursive: true })
        const clash = r.patches.filter((p) => readdirSync(dir).includes(p.name))
        if (clash.length > 0) throw new Error(`${dir} already has ${clash.map((p) => p.name).join(", ")}`)
        for (const p of r.patches) writeFileSync(join(dir, p.name), p.text, { flag: "wx" })
        return r.patches.map((p) => join(dir, p.name))
      },
      catch: (e) => new CliError({ kind: "invalid-input", message: `--patch ${dir}: ${e instanceof Error ? e.message : String(e)}` })
    })
    if (o.json) return yield* printJson({ workspace: r.workspace, files: written })
    yield* Console.log(written.length === 0 ? "(nothing recorded since the workspace was made)" : written.join("\n"))
  })).pipe(Command.withDescription(describe("Write a repository workspace's work as a patch series (git format-patch)", {
    examples: ["substrat workspace export <workspace> --patch ./patches   # then, in your repository: git am ./patches/*.patch"]
  })))

const queueCommand = Command.make("queue", { home, json, workspace: workspaceArg }, (o) =>
  Effect.gen(function*() {
    const socket = pathsOf(o.home).socket
    const r = yield* withClient(WorkspaceGroup, socket, (c) => call(socket, c.workspace.queue({ workspace: o.workspace })))
    if (o.json) return yield* printJson(r)
    const lines = [`merge queue of ${r.workspace}${r.check === null ? " (no check)" : ` (check: ${r.check})`}`]
    lines.push(r.items.length === 0 ? "nothing waiting" : table([["STATE", "AGENT", "BRANCH", "HEAD", "QUEUED"], ...r.items.map((i) => [i.state, i.agent, i.branch, i.head.slice(0, 12), i.queued_at])]))
    if (r.recent.length > 0) {
      lines.push("recent:")
      lines.push(table([["OUTCOME", "AGENT", "COMMIT", "PATHS", "AT"], ...r.recent.map((d) => [d.outcome, d.agent, d.commit?.slice(0, 12) ?? "-", d.paths.join(",") || "-", d.at])]))
    }
    yield* Console.log(lines.join("\n"))
  })).pipe(Command.withDescription(describe("Show a repository workspace's merge queue: branch children's branches waiting to merge, and recent outcomes", {
    details: [
      "A child spawned with spawn_agent(workspace: \"branch\") works on its own branch; each of its turns that records changes queues that branch. One at a time, while no turn runs in the workspace, it is merged onto the workspace's branch, the --check command (if any) runs on the result, and the branch moves only when both pass. A conflict or failing check goes back to the child."
    ],
    examples: ["substrat workspace queue <workspace>"]
  })))

export const workspaceCommand = Command.make("workspace").pipe(
  Command.withDescription(describe("Manage sandbox workspaces and their history", {
    examples: ["substrat workspace create --name web", "substrat workspace log <workspace>"]
  })),
  Command.withSubcommands([createCommand, listCommand, inspectCommand, egressCommand("allow"), egressCommand("deny"), linkCommand, deleteCommand, diffCommand, revertCommand, logCommand, mergeCommand, queueCommand, exportCommand, shellCommand])
)
