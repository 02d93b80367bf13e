// `substrat ui`: where the dashboard is. The daemon serves it on its TCP listener
// (`daemon start --http 127.0.0.1:PORT`), whose URL it leaves in $SUBSTRAT_HOME/http.url. The URL
// carries a one-time code (60 s, used once) asked of the daemon over http.sock (owner only), in
// the fragment of `/login`, which trades it for a session cookie: the long-lived bearer token
// (http.token) is never on a command line. With a display (DISPLAY/WAYLAND_DISPLAY) it also opens
// a browser ($SUBSTRAT_OPENER, else xdg-open), unless --no-open.
import { Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { request } from "node:http"
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

/** A one-time login code from the daemon, over http.sock. */
const askCode = (sock: string) =>
  Effect.async<string, CliError>((resume) => {
    const fail = (why: string) => resume(Effect.fail(new CliError({ kind: "daemon-not-running", message: `cannot get a login code from ${sock}: ${why}` })))
    const req = request({ socketPath: sock, method: "POST", path: "/v1/ui/code" }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("error", (e) => fail(String(e)))
      res.on("end", () => {
        try {
          const code: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8")).code
          if (res.statusCode === 201 && typeof code === "string") resume(Effect.succeed(code))
          else fail(`HTTP ${res.statusCode}`)
        } catch (e) {
          fail(String(e))
        }
      })
    })
    req.on("error", (e) => fail(String(e)))
    req.end()
  })

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
    const code = yield* askCode(join(paths.home, "http.sock"))
    const url = `${base}login#code=${encodeURIComponent(code)}`
    if (o.json) yield* printJson({ url, base })
    else yield* Console.log(url)
    const display = (parentEnv()["DISPLAY"] ?? "") !== "" || (parentEnv()["WAYLAND_DISPLAY"] ?? "") !== ""
    if (display && !o.noOpen) {
      yield* Effect.sync(() => {
        try {
          const opener = parentEnv()["SUBSTRAT_OPENER"] ?? ""
          spawn(opener === "" ? "xdg-open" : opener, [url], { detached: true, stdio: "ignore" }).on("error", () => {}).unref()
        } catch {
          // no opener: the printed URL is enough
        }
      })
    }
  })).pipe(Command.withDescription(describe("Open the web dashboard (prints its URL with a one-time login code)", {
    details: [
      "Needs a daemon started with --http HOST:PORT (or http in config.toml).",
      "The URL holds a code good for one sign-in within 60 seconds; the browser trades it for a session cookie. Run it again for a new one."
    ],
    examples: ["substrat ui", "substrat ui --no-open"]
  })))
