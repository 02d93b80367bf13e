// Options shared by every command, and the paths they resolve to.
import { Options } from "@effect/cli"
import { Effect, Option } from "effect"
import { resolve } from "node:path"
import { CliError } from "./Client.js"
import { defaultHome, makePaths, type Paths } from "../config/Paths.js"

export const home = Options.text("home").pipe(
  Options.withPseudoName("dir"),
  Options.withDescription("Substrat home directory (default: $SUBSTRAT_HOME, else ~/.substrat)"),
  Options.optional
)

export const json = Options.boolean("json").pipe(Options.withDescription("Print machine-readable JSON"))

/** `-q, --quiet`: only the ids, one per line (for scripts: `id=$(substrat agent create -q)`). */
/** Human views show who said what (`USER: …`); --raw shows prompts as the agent read them. */
export const raw = Options.boolean("raw").pipe(
  Options.withDescription("Show prompts as the agent read them (the daemon's message headers and ids) instead of who said what")
)
export const quiet = Options.boolean("quiet").pipe(Options.withAlias("q"), Options.withDescription("Print only ids, one per line"))

export const pathsOf = (h: Option.Option<string>): Paths => makePaths(Option.getOrElse(h, () => defaultHome()))

/** `--repo <path>` (resolved against the current directory) and `--ref`, as a create payload. */
export const repoOption = Options.text("repo").pipe(
  Options.withDescription("A git repository (path): the workspace is a clone of it on branch substrat/<name>; your working tree is never touched"),
  Options.optional
)
export const refOption = Options.text("ref").pipe(
  Options.withDescription("With --repo: the branch or commit to start from (default: the repository's HEAD)"),
  Options.optional
)
export const bindIgnoredOption = Options.text("bind-ignored").pipe(
  Options.withPseudoName("path"),
  Options.withDescription("With --repo: bind one directory the repository ignores (e.g. node_modules), relative to its top level, read-only at the same place in the sandbox"),
  Options.optional
)
export const checkOption = Options.text("check").pipe(
  Options.withDescription("With --repo: a command its merge queue runs (sh -c, sandboxed, with a timeout) on each merged tree of a branch child before the branch moves, e.g. \"npm test\""),
  Options.optional
)
export const checkPayload = (check: Option.Option<string>): { readonly check?: string } =>
  Option.match(check, { onNone: () => ({}), onSome: (check) => ({ check }) })
export const repoPayload = (
  repo: Option.Option<string>,
  ref: Option.Option<string>,
  bindIgnored: Option.Option<string> = Option.none()
): Effect.Effect<{ readonly repo?: string; readonly ref?: string; readonly bind_ignored?: string }, CliError> =>
  Option.match(repo, {
    onNone: () =>
      Option.isSome(ref)
        ? Effect.fail(new CliError({ kind: "invalid-input", message: "--ref goes with --repo" }))
        : Option.isSome(bindIgnored)
        ? Effect.fail(new CliError({ kind: "invalid-input", message: "--bind-ignored goes with --repo" }))
        : Effect.succeed({}),
    onSome: (r) =>
      r.trim() === ""
        ? Effect.fail(new CliError({ kind: "invalid-input", message: "--repo: empty path" }))
        : Effect.succeed({
          repo: resolve(r),
          ...Option.match(ref, { onNone: () => ({}), onSome: (ref) => ({ ref }) }),
          ...Option.match(bindIgnored, { onNone: () => ({}), onSome: (bind_ignored) => ({ bind_ignored }) })
        })
  })
/** `--allow-host` (repeatable): egress host patterns (docs/sandbox.md "Egress"). */
export const allowHosts = Options.text("allow-host").pipe(
  Options.withPseudoName("host"),
  Options.withDescription("Let its sandboxes reach this host through the egress proxy (repeatable; *.example.org for subdomains; host:port for ports other than 80/443)"),
  Options.repeated
)
/** `--allow` (repeatable): egress presets. */
export const allowPresets = Options.text("allow").pipe(
  Options.withPseudoName("preset"),
  Options.withDescription("Let its sandboxes reach a preset's hosts: npm, pypi, crates, go, github (repeatable; `substrat config` lists their hosts)"),
  Options.repeated
)
/** The RPC fields of `--allow-host`/`--allow` (absent when none given). */
export const allowFields = (hosts: ReadonlyArray<string>, presets: ReadonlyArray<string>) => ({
  ...(hosts.length > 0 ? { allow_hosts: hosts } : {}),
  ...(presets.length > 0 ? { allow_presets: presets } : {})
})
