// `substrat ui`: where the dashboard is. The daemon serves it on its TCP listener
// (`daemon start --http 127.0.0.1:PORT`), whose URL it leaves in $SUBSTRAT_HOME/http.url; the
// bearer token (http.token) goes in the URL's fragment, which the browser never sends anywhere.
// With a display (DISPLAY/WAYLAND_DISPLAY) it also opens a browser, unless --no-open.
import { Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { CliError } from "../Client.js"
import { home, json, pathsOf } from "../Common.js"
import { printJson } from "../Output.js"
import { parentEnv } from "../../config/Config.js"
import { describe } from "../Help.js"

const noOpen = Options.boolean("no-open").pipe(Options.withDescription("Only print the URL, even with a display"))

const read = (file: string): string | undefined => {
  try {
    return fs.readFileSync(file, "utf8").trim()
  } catch {
    return undefined
  }
}

export const uiCommand = Command.make("ui", { home, json, noOpen }, (o) =>
  Effect.gen(function*() {
    const paths = pathsOf(o.home)
    const base = read(join(paths.home, "http.url"))
    if (base === undefined) {
      const running = fs.existsSync(join(paths.home, "http.sock"))
      return yield* new CliError({
        kind: running ? "invalid-input" : "daemon-not-running",
        message: running
          ? `the daemon serves no TCP port for a browser (it was started without --http); restart it with: substrat daemon stop --home ${paths.home} && substrat daemon start --home ${paths.home} --http 127.0.0.1:7878`
          : `daemon not running; start it with: substrat daemon start --home ${paths.home} --http 127.0.0.1:7878`
      })
    }
    const token = read(join(paths.home, "http.token"))
    const url = token === undefined ? base : `${base}#token=${encodeURIComponent(token)}`
    if (o.json) yield* printJson({ url, base })
    else yield* Console.log(url)
    const display = (parentEnv()["DISPLAY"] ?? "") !== "" || (parentEnv()["WAYLAND_DISPLAY"] ?? "") !== ""
    if (display && !o.noOpen) {
      yield* Effect.sync(() => {
        try {
          spawn("xdg-open", [url], { detached: true, stdio: "ignore" }).on("error", () => {}).unref()
        } catch {
          // no opener: the printed URL is enough
        }
      })
    }
  })).pipe(Command.withDescription(describe("Open the web dashboard (prints its URL with the token)", {
    details: ["Needs a daemon started with --http HOST:PORT (or http in config.toml)."],
    examples: ["substrat ui", "substrat ui --no-open"]
  })))
