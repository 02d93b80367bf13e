// Options shared by every command, and the paths they resolve to.
import { Options } from "@effect/cli"
import { Option } from "effect"
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
