// `substrat config`: the effective configuration — every setting, its value, and where it came
// from (flag, env, file, default). Secrets print as <redacted>. No daemon needed.
import { Command } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { allKeys, load, valueAt } from "../../config/Config.js"
import { CliError } from "../Client.js"
import { home, json } from "../Common.js"
import { printJson, table } from "../Output.js"
import { describe } from "../Help.js"

const help = describe("Show the effective configuration: every setting, its value and where it came from", {
  details: [
    "Each setting comes from, in order: a flag (daemon start/run), an environment variable (SUBSTRAT_*), the file $SUBSTRAT_HOME/config.toml, else its default. Secrets are shown as <redacted>. The daemon reads its configuration when it starts: restart it to apply a change. Every variable and file key: docs/cli.md, Configuration."
  ],
  examples: [
    "substrat config",
    "substrat config --json",
    "SUBSTRAT_SLOTS=8 substrat config   # what the daemon would use with this environment"
  ]
})

export const configCommand = Command.make("config", { home, json }, (o) =>
  Effect.gen(function*() {
    const loaded = yield* load({ flags: { home: Option.getOrUndefined(o.home) } }).pipe(
      Effect.mapError((e) => new CliError({ kind: "invalid-input", message: e.message }))
    )
    const rows = allKeys.map((k) => ({ info: k, value: valueAt(loaded.settings, k.key), source: loaded.sources[k.key] ?? "default" }))
    if (o.json) {
      return yield* printJson({
        file: loaded.file,
        settings: Object.fromEntries(rows.map(({ info, value, source }) => [info.key, {
          value,
          source,
          env: info.env,
          file_key: info.file,
          flag: info.flag,
          default: info.default,
          description: info.description
        }]))
      })
    }
    yield* Console.log(`config file: ${loaded.file.path}${loaded.file.exists ? "" : " (none)"}`)
    yield* Console.log(table([
      ["VARIABLE", "CONFIG.TOML KEY", "VALUE", "SOURCE"],
      ...rows.map(({ info, value, source }) => [info.env, info.file ?? "-", value === null ? "-" : String(value), source])
    ]))
  })).pipe(Command.withDescription(help))

