// Substrat's configuration: every setting defined once with `effect/Config` (a name, a type, a
// default, a description), read from flags ▸ environment (`SUBSTRAT_*`) ▸ `$SUBSTRAT_HOME/config.toml`
// ▸ defaults, the way @effect/cluster's ShardingConfig does it. A value that does not parse fails
// with a message naming the key and where it came from (SettingsError → exit code 2 in the CLI).
//
// This is the only module under src/ that reads `process.env`. Besides the settings it hands out
// the parent environment (`parentEnv`): what child processes inherit (PATH for git, bwrap and
// prlimit, HOME, TMPDIR), which is not configuration.
//
// Names: a key's path, e.g. ["openai", "baseUrl"], is `SUBSTRAT_OPENAI_BASE_URL` in the environment
// (ConfigProvider.constantCase under the `SUBSTRAT` prefix) and `base_url` in the `[openai]` table
// of config.toml (ConfigProvider.snakeCase). Credentials keep their usual unprefixed names
// (ANTHROPIC_API_KEY, OPENAI_API_KEY, …) and are read from the environment only.
//
// Over 300 lines because the table of every setting (in documentation order) is one declaration,
// kept here with the loader that resolves and checks it; how one setting is declared and its
// value parsed is Setting.ts.
import * as FileSystem from "@effect/platform/FileSystem"
import { Config, ConfigError, ConfigProvider, Context, Data, Effect, Layer, Option, Redacted } from "effect"
import { homedir } from "node:os"
import * as Path from "node:path"
import { parse as parseToml } from "smol-toml"
import type { PresetTable } from "../domain/egress.js"
import {
  approvePolicy,
  capsPolicy,
  hostList,
  hostPort,
  int,
  type KeyInfo,
  keys,
  optional,
  postgresUrl,
  prices,
  setting,
  testResolve,
  text,
  url
} from "./Setting.js"

export type { KeyInfo } from "./Setting.js"

/** An environment: variable name → value (`process.env`'s shape). */
export type ProcessEnv = Readonly<Record<string, string | undefined>>

/** The daemon's/CLI's own environment, as handed down to child processes. Not configuration. */
export const parentEnv = (): ProcessEnv => process.env

/** Where an effective value came from. */
export type Source = "flag" | "env" | "file" | "default"

const cli = (name: string, label: string, binDefault: string) =>
  Config.all({
    bin: optional([name, "bin"], text, { description: `${label} executable (default: ${binDefault})` }),
    model: optional([name, "model"], text, { description: `${label} model (default: the CLI's own default)` })
  })

// Home is read first (config.toml lives in it), from flags and the environment only.
const homeConfig = setting(["home"], text, Path.join(homedir(), ".substrat"), {
  description: "Substrat home: daemon socket, agents, workspaces, config.toml",
  flag: "--home",
  envOnly: true
})

/** Every setting but the home directory and the credentials. */
const settingsConfig = Config.all({
  slots: setting(["slots"], int(1), 4, { description: "Live provider slots: turns that run at the same time", flag: "--slots" }),
  graceMs: setting(["graceMs"], int(0), 10_000, {
    description: "On shutdown, how long running turns may finish before they are stopped (ms)",
    flag: "--grace-ms"
  }),
  crashLoopAttempts: setting(["crashLoopAttempts"], int(1), 2, {
    description: "Quarantine an agent when the daemon died this many starts in a row during one of its turns (its turns wait for `agent resume`)"
  }),
  minFreeBytes: setting(["minFreeBytes"], int(0), 8 * 1024 * 1024, {
    description: "Below this many free bytes under the home the daemon goes read-only (refuses changes, keeps serving reads)"
  }),
  maxLineBytes: setting(["maxLineBytes"], int(1024), 1024 * 1024, {
    description: "Longest request line the admin socket accepts (bytes)",
    flag: "--max-line-bytes"
  }),
  http: Config.map(
    optional(["http"], hostPort(0), {
      description: "Also serve the HTTP API and dashboard on this loopback HOST:PORT (token in $SUBSTRAT_HOME/http.token)",
      flag: "--http"
    }),
    Option.getOrUndefined
  ),
  httpLimits: Config.all({
    maxBodyBytes: setting(["httpLimits", "maxBodyBytes"], int(1024), 1024 * 1024, {
      description: "Largest HTTP request body (bytes); a larger one gets 413 without being read"
    }),
    maxConnections: setting(["httpLimits", "maxConnections"], int(1), 512, {
      description: "Open connections one HTTP listener (http.sock, TCP) keeps; past it a new connection is closed at once"
    }),
    maxUnauthenticated: setting(["httpLimits", "maxUnauthenticated"], int(1), 64, {
      description: "TCP connections that have not yet shown the token or cookie; past it the oldest of them is closed"
    }),
    headersTimeoutMs: setting(["httpLimits", "headersTimeoutMs"], int(1000), 10_000, {
      description: "How long a client may take to send a request's headers (ms)"
    }),
    idleTimeoutMs: setting(["httpLimits", "idleTimeoutMs"], int(1000), 30_000, {
      description: "A TCP connection that has not shown the token or cookie is closed after this long without traffic (ms)"
    })
  }),
  defaultProvider: setting(["defaultProvider"], text, "scripted", { description: "Provider of `agent create` without --provider" }),
  installDir: optional(["installDir"], text, {
    description: "Substrat's install directory, bound read-only into sandboxes (default: this package)"
  }),
  claude: cli("claude", "Claude Code", "the copy installed with substrat, else `claude` on PATH"),
  codex: cli("codex", "Codex", "the copy installed with substrat, else `codex` on PATH"),
  cursor: cli("cursor", "cursor-agent", "`cursor-agent` or `agent` on PATH"),
  acp: Config.all({
    presets: optional(["acp", "presets"], text, {
      description: "ACP agent presets added to / overriding the built-in ones (qwen, gemini, opencode, claude, codex), JSON: {\"name\": {\"command\": [\"bin\", \"--acp\"], \"env\": {}, \"model\": \"openai|anthropic|gemini|none\", \"package\": \"npm-package\"}} (docs/providers.md)"
    }),
    approve: setting(["acp", "approve"], approvePolicy, "auto" as const, {
      description: "How an ACP agent's permission requests are answered: auto (allow; the sandbox is the boundary), reject, or ask (an item in the human inbox the turn waits on: substrat inbox answer <id> allow|allow-always|reject)"
    }),
    askTimeoutSeconds: setting(["acp", "askTimeoutSeconds"], int(0), 0, {
      description: "approve = ask: seconds before an unanswered permission request is rejected (0: wait for the human)"
    }),
    model: optional(["acp", "model"], text, { description: "Model name handed to ACP agents (OPENAI_MODEL / ANTHROPIC_MODEL / GEMINI_MODEL); default: the agent's own" })
  }),
  anthropic: Config.all({
    upstream: setting(["anthropic", "upstream"], url, "https://api.anthropic.com", {
      description: "Where the daemon's Anthropic forwarder sends Claude Code's model requests"
    })
  }),
  gemini: Config.all({
    upstream: setting(["gemini", "upstream"], url, "https://generativelanguage.googleapis.com", {
      description: "Where the daemon's Gemini forwarder sends Gemini CLI's model requests (acp:gemini)"
    })
  }),
  openai: Config.all({
    upstream: setting(["openai", "upstream"], url, "https://api.openai.com", {
      description: "Where the daemon's OpenAI forwarder sends Codex's model requests"
    }),
    baseUrl: optional(["openai", "baseUrl"], text, {
      description: "API base of the openai provider (default https://api.openai.com/v1; OpenRouter's when only OPENROUTER_API_KEY is set)"
    }),
    apiKey: optional(["openai", "apiKey"], (name: string) => Config.redacted(name), {
      description: "API key of the openai provider (else OPENAI_API_KEY, else OPENROUTER_API_KEY)",
      secret: true
    }),
    model: optional(["openai", "model"], text, { description: "Model of the provider string `openai` (`openai:<model>` names one per agent)" }),
    maxSteps: setting(["openai", "maxSteps"], int(1), 25, { description: "openai provider: model calls per turn before the turn fails" }),
    timeoutMs: setting(["openai", "timeoutMs"], int(1), 120_000, {
      description: "openai provider: wait for response headers, and at most this long between two streamed chunks (ms)"
    }),
    maxRetries: setting(["openai", "maxRetries"], int(0), 2, {
      description: "openai provider: retries of a request that failed before its body started"
    }),
    retryDelayMs: setting(["openai", "retryDelayMs"], int(0), 500, { description: "openai provider: first retry backoff (ms)" })
  }),
  otlp: Config.all({
    endpoint: optional(["otlp", "endpoint"], url, {
      description: "Export OpenTelemetry traces over OTLP/HTTP (JSON) to this base URL (`/v1/traces` is appended); else OTEL_EXPORTER_OTLP_ENDPOINT; unset: no tracing"
    })
  }),
  sandbox: Config.all({
    workspaceGrowthBytes: setting(["sandbox", "workspaceGrowthBytes"], int(0), 256 * 1024 * 1024, {
      description:
        "How many bytes one sandboxed turn may add to its workspace; past it the turn's sandbox is killed and the turn fails (0: unbounded)"
    }),
    uid: setting(["sandbox", "uid"], int(1), 65534, {
      description: "The unprivileged host uid sandboxes run as when the daemon runs as root (a sandbox never holds host root; docs/sandbox.md)"
    }),
    gid: setting(["sandbox", "gid"], int(1), 65534, {
      description: "The unprivileged host gid sandboxes run as when the daemon runs as root"
    })
  }),
  egress: Config.all({
    npm: setting(["egress", "npm"], hostList, "registry.npmjs.org,registry.yarnpkg.com", {
      description: "Hosts of the egress preset npm (`--allow npm`), comma-separated patterns (`*.domain`, `host:port`)"
    }),
    pypi: setting(["egress", "pypi"], hostList, "pypi.org,files.pythonhosted.org", {
      description: "Hosts of the egress preset pypi: the Python Package Index and its file host"
    }),
    crates: setting(["egress", "crates"], hostList, "crates.io,index.crates.io,static.crates.io", {
      description: "Hosts of the egress preset crates: the crates registry, its index and its download host"
    }),
    go: setting(["egress", "go"], hostList, "proxy.golang.org,sum.golang.org", {
      description: "Hosts of the egress preset go: the Go module proxy and checksum database"
    }),
    github: setting(["egress", "github"], hostList, "github.com,codeload.github.com,raw.githubusercontent.com,objects.githubusercontent.com", {
      description: "Hosts of the egress preset github: GitHub's web, archive and raw-content hosts"
    }),
    bytesPerTurn: setting(["egress", "bytesPerTurn"], int(0), 1024 * 1024 * 1024, {
      description: "Bytes (up + down) one agent turn may move through the egress proxy; past it the connection ends (0: unbounded)"
    }),
    bytesPerDay: setting(["egress", "bytesPerDay"], int(0), 10 * 1024 * 1024 * 1024, {
      description: "Bytes (up + down) one workspace may move through the egress proxy per UTC day (0: unbounded)"
    }),
    maxConnections: setting(["egress", "maxConnections"], int(1), 32, {
      description: "Open egress connections one workspace may have at once; more are refused"
    }),
    testResolve: optional(["egress", "testResolve"], testResolve, {
      description: "TESTS ONLY: name=address pairs the egress proxy resolves without asking DNS (a fake registry on 127.0.0.1); only names under .substrat-test are accepted, anything else is refused at load",
      envOnly: true
    })
  }),
  swarm: Config.all({
    findHopDelayMs: setting(["swarm", "findHopDelayMs"], int(0), 0, {
      description: "Pause before each hop of a find:<symbol> search, in ms (0: none); to watch a search travel, or to stop the daemon mid-search in a test"
    })
  }),
  workspaces: Config.all({
    spawnMode: setting(["workspaces", "spawnMode"], (name: string) => Config.literal("shared", "branch")(name), "shared" as const, {
      description: "spawn_agent's workspace when the call does not say: shared (the parent's workspace) or branch (a clone on its own branch, merged back through the parent's merge queue; only under a repository workspace, else shared)"
    }),
    mergeCheckTimeoutSeconds: setting(["workspaces", "mergeCheckTimeoutSeconds"], int(1), 600, {
      description: "Longest a merge queue's check command (workspace create --check) may run before it counts as failed, in seconds"
    }),
    mergeMode: setting(["workspaces", "mergeMode"], (name: string) => Config.literal("merge", "rebase")(name), "merge" as const, {
      description: "How the merge queue puts a branch child's work onto its parent's branch when both moved: merge (a merge commit) or rebase (the child's commits replayed one by one on top, a straight history; merge commits of the child's are left out)"
    }),
    mergeMoveDelayMs: setting(["workspaces", "mergeMoveDelayMs"], int(0), 0, {
      description: "Pause after a merge queue moved a branch, before the workspace's clone gets the files, in ms (0: none); to stop the daemon mid-merge in a test"
    })
  }),
  caps: Config.all({
    maxDepth: setting(["caps", "maxDepth"], int(0), 0, {
      description: "Deepest level an agent tree may grow to (a root is level 0); a deeper spawn_agent is refused. 0: no cap (docs/budgets.md)"
    }),
    maxChildren: setting(["caps", "maxChildren"], int(0), 0, {
      description: "Live children one agent may have; a spawn_agent past it waits in a queue (or is refused, caps.policy). 0: no cap"
    }),
    maxLive: setting(["caps", "maxLive"], int(0), 0, {
      description: "Live agents one tree may have, its root included; a spawn_agent past it waits in a queue (or is refused, caps.policy). 0: no cap"
    }),
    policy: setting(["caps", "policy"], capsPolicy, "queue" as const, {
      description: "What a spawn_agent beyond caps.maxChildren / caps.maxLive gets: queue (it starts when room frees) or refuse (an error)"
    })
  }),
  quotas: Config.all({
    messagesPerMinute: setting(["quotas", "messagesPerMinute"], int(0), 120, {
      description: "Messages one agent may send (send_message, broadcast) per minute; past it the tool answers quota_exceeded with retry_after_s (docs/tools.md). 0: no limit"
    }),
    messageBytesPerHour: setting(["quotas", "messageBytesPerHour"], int(0), 64 * 1024 * 1024, {
      description: "Bytes of message text one agent may send per hour. 0: no limit"
    }),
    openQuestions: setting(["quotas", "openQuestions"], int(0), 5, {
      description: "ask_human questions of one agent that may wait for an answer at once. 0: no limit"
    }),
    spawnsPerMinute: setting(["quotas", "spawnsPerMinute"], int(0), 30, {
      description: "spawn_agent calls one agent may make per minute. 0: no limit"
    }),
    toolCallsPerTurn: setting(["quotas", "toolCallsPerTurn"], int(0), 500, {
      description: "Tool calls (Substrat's tools) one agent may make in one turn. 0: no limit"
    }),
    logBytesPerHour: setting(["quotas", "logBytesPerHour"], int(0), 256 * 1024 * 1024, {
      description: "Bytes one agent's tool calls (arguments and results) may add to the event logs per hour. 0: no limit"
    }),
    parkAfter: setting(["quotas", "parkAfter"], int(0), 20, {
      description: "Refused tool calls within 10 minutes that park the agent with an inbox item (substrat inbox answer <id> resume). 0: never"
    })
  }),
  cluster: Config.all({
    postgres: optional(["cluster", "postgres"], postgresUrl, {
      description:
        "Cluster mode (docs/cluster.md): the Postgres URL of the cluster's shared storage; unset: a single daemon on its own disk",
      secret: true,
      flag: "--cluster"
    }),
    listen: optional(["cluster", "listen"], hostPort(1), {
      description: "Cluster mode: host:port this runner listens on for the other runners (an address they can reach)",
      flag: "--listen"
    }),
    leaseMs: setting(["cluster", "leaseMs"], int(1000), 20_000, {
      description:
        "Cluster mode: a runner that stops heartbeating is dropped after this long (ms) and its shards go to the others; it heartbeats every quarter of it"
    }),
    handoverGraceMs: setting(["cluster", "handoverGraceMs"], int(1000), 300_000, {
      description:
        "Cluster mode: how long a tree being handed over to another runner (a drain, a joining runner) waits for its running turns (ms); past it they are interrupted as by a kill -9 and re-run on the new runner"
    }),
    workspaceRemote: optional(["cluster", "workspaceRemote"], text, {
      description: "Cluster mode: the shared git remote (a bare repository on shared storage, or a git URL) recorded turns are pushed to"
    })
  }),
  meter: Config.all({
    prices: optional(["meter", "prices"], prices, {
      description:
        "Model prices in USD per million tokens, JSON: {\"model-prefix\": {\"input\": 3, \"output\": 15, \"cache_read\": 0.3, \"cache_write\": 3.75}}; added to / overriding the defaults (docs/budgets.md)"
    })
  })
})

const credential = (field: string, env: string, description: string) => {
  keys.push({ key: `credentials.${field}`, env, file: null, flag: null, default: null, description, secret: true })
  return Config.option(Config.redacted(env).pipe(Config.withDescription(description)))
}

const credentialsConfig = Config.all({
  anthropicApiKey: credential("anthropicApiKey", "ANTHROPIC_API_KEY", "Anthropic key the daemon's forwarder adds to Claude Code's requests"),
  anthropicAuthToken: credential("anthropicAuthToken", "ANTHROPIC_AUTH_TOKEN", "Anthropic bearer token (when there is no ANTHROPIC_API_KEY)"),
  openaiApiKey: credential("openaiApiKey", "OPENAI_API_KEY", "OpenAI key: the forwarder for Codex, and the openai provider"),
  geminiApiKey: credential("geminiApiKey", "GEMINI_API_KEY", "Gemini API key the daemon's forwarder adds to Gemini CLI's requests (x-goog-api-key)"),
  openrouterApiKey: credential("openrouterApiKey", "OPENROUTER_API_KEY", "OpenRouter key of the openai provider"),
  cursorApiKey: credential("cursorApiKey", "CURSOR_API_KEY", "Passed to cursor-agent inside its sandbox")
})

/** Every setting, in documentation order. */
export const allKeys: ReadonlyArray<KeyInfo> = keys

export type Settings = Config.Config.Success<typeof settingsConfig> & {
  readonly home: string
  readonly credentials: Config.Config.Success<typeof credentialsConfig>
}

/** Command-line values, by settings path (`{ slots: 8, home: "/x" }`). */
export interface Flags {
  readonly home?: string | undefined
  readonly slots?: number | undefined
  readonly graceMs?: number | undefined
  readonly maxLineBytes?: number | undefined
  readonly http?: string | undefined
  /** `--cluster` / `--listen` (keys `cluster.postgres`, `cluster.listen`). */
  readonly cluster?: { readonly postgres?: string | undefined; readonly listen?: string | undefined } | undefined
}

/** A setting that does not parse, or a config.toml that cannot be used. */
export class SettingsError extends Data.TaggedError("SettingsError")<{
  /** The variable, flag or file key at fault (null: the file as a whole). */
  readonly key: string | null
  readonly message: string
}> {}

export interface Loaded {
  readonly settings: Settings
  /** Where each key's value came from (`allKeys[i].key` → source). */
  readonly sources: Readonly<Record<string, Source>>
  readonly file: { readonly path: string; readonly exists: boolean }
}

/** The environment as a provider: empty values count as unset, values are trimmed. */
const envProvider = (env: ProcessEnv): ConfigProvider.ConfigProvider => {
  const map = new Map<string, string>()
  for (const [k, v] of Object.entries(env)) if (v !== undefined && v.trim() !== "") map.set(k, v.trim())
  // No setting is a list: a comma is part of the value (JSON values such as meter.prices).
  return ConfigProvider.fromMap(map, { pathDelim: "_", seqDelim: "\u0000" })
}

const prefixed = (env: ConfigProvider.ConfigProvider) => env.pipe(ConfigProvider.constantCase, ConfigProvider.nested("SUBSTRAT"))

/** The flags given, as dotted keys (`cluster.postgres`) to their values. */
const flagEntries = (flags: Flags): Array<readonly [string, unknown]> =>
  Object.entries(flags).flatMap(([k, v]): Array<readonly [string, unknown]> =>
    v === undefined
      ? []
      : typeof v === "object" && v !== null
      ? Object.entries(v).flatMap(([k2, v2]) => (v2 === undefined ? [] : [[`${k}.${k2}`, v2] as const]))
      : [[k, v] as const]
  )

const flagsProvider = (flags: Flags) => {
  const doc: Record<string, unknown> = {}
  for (const [key, value] of flagEntries(flags)) {
    const [head, leaf] = key.split(".")
    if (leaf === undefined) doc[head!] = value
    else doc[head!] = { ...(doc[head!] as Record<string, unknown> | undefined), [leaf]: value }
  }
  return ConfigProvider.fromJson(doc)
}

/** `~/.substrat` spelled out. */
export const defaultHomeDir = (): string => Path.join(homedir(), ".substrat")

/** The home directory: `--home` ▸ `$SUBSTRAT_HOME` ▸ `~/.substrat`. Plain (no file is read). */
export const resolveHome = (flag?: string | undefined, env: ProcessEnv = process.env): string => {
  if (flag !== undefined && flag !== "") return flag
  const e = env["SUBSTRAT_HOME"]?.trim()
  return e !== undefined && e !== "" ? e : defaultHomeDir()
}

/** Dotted keys of a parsed TOML document (tables flattened). */
const flatten = (o: Readonly<Record<string, unknown>>, prefix = ""): Array<string> =>
  Object.entries(o).flatMap(([k, v]) =>
    typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date)
      ? flatten(v as Record<string, unknown>, `${prefix}${k}.`)
      : [`${prefix}${k}`]
  )

const tomlProblem = (e: unknown): string => {
  if (!(e instanceof Error)) return String(e)
  const first = e.message.split("\n")[0] ?? e.message
  const at = e as Error & { readonly line?: unknown; readonly column?: unknown }
  return typeof at.line === "number" && typeof at.column === "number" ? `${first} (line ${at.line}, column ${at.column})` : first
}

/** InvalidData leaves of a ConfigError (MissingData is not an error here: every key is optional). */
const invalid = (e: ConfigError.ConfigError): Array<{ readonly path: ReadonlyArray<string>; readonly message: string }> => {
  switch (e._op) {
    case "And":
    case "Or":
      return [...invalid(e.left), ...invalid(e.right)]
    case "InvalidData":
      return [{ path: e.path, message: e.message }]
    case "SourceUnavailable":
      return [{ path: e.path, message: e.message }]
    case "Unsupported":
      return [{ path: e.path, message: e.message }]
    case "MissingData":
      return []
  }
}

const squash = (s: string) => s.toLowerCase().replace(/[._]/g, "")

/** The key an error path points at, whatever case mapping it went through. */
const keyOfPath = (path: ReadonlyArray<string>): KeyInfo | undefined => {
  const p = squash((path[0] === "SUBSTRAT" ? path.slice(1) : path).join("."))
  return keys.find((k) => squash(k.key) === p)
}

/** Check one source alone, so that a bad value cannot hide behind a good one further down. */
const check = (
  provider: ConfigProvider.ConfigProvider,
  name: (k: KeyInfo) => string | null,
  where: string
): Effect.Effect<void, SettingsError> =>
  provider.load(settingsConfig).pipe(
    Effect.asVoid,
    Effect.catchAll((e) => {
      const bad = invalid(e)[0]
      if (bad === undefined) return Effect.void
      const info = keyOfPath(bad.path)
      const key = (info === undefined ? null : name(info)) ?? bad.path.join(".")
      return Effect.fail(new SettingsError({ key, message: `invalid ${key} (${where}): ${bad.message}` }))
    })
  )

/** The file's path for a home directory. */
export const configFile = (home: string) => Path.join(home, "config.toml")

/**
 * Load the settings: flags ▸ environment ▸ `$SUBSTRAT_HOME/config.toml` ▸ defaults. Each source is
 * checked on its own first (an invalid value anywhere fails, naming the key); then one
 * `ConfigProvider.orElse` chain resolves them.
 */
export const load = (
  options: { readonly flags?: Flags; readonly env?: ProcessEnv } = {}
): Effect.Effect<Loaded, SettingsError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const flags = options.flags ?? {}
    const env = options.env ?? process.env
    const fs = yield* FileSystem.FileSystem
    const rawEnv = envProvider(env)
    const envP = prefixed(rawEnv)
    const flagsP = flagsProvider(flags)

    const home = yield* flagsP.pipe(ConfigProvider.orElse(() => envP)).load(homeConfig).pipe(
      Effect.orElseSucceed(() => resolveHome(flags.home, env))
    )
    const path = configFile(home)
    const exists = yield* fs.exists(path).pipe(Effect.orElseSucceed(() => false))
    let doc: Record<string, unknown> = {}
    if (exists) {
      const source = yield* fs.readFileString(path).pipe(
        Effect.mapError((e) => new SettingsError({ key: null, message: `cannot read ${path}: ${e.message}` }))
      )
      doc = yield* Effect.try({
        try: () => parseToml(source) as Record<string, unknown>,
        catch: (e) => new SettingsError({ key: null, message: `${path} is not valid TOML: ${tomlProblem(e)}` })
      })
    }
    const fileKeys = flatten(doc)
    const known = new Set(keys.flatMap((k) => (k.file === null ? [] : [k.file])))
    const unknown = fileKeys.find((k) => !known.has(k))
    if (unknown === "home") {
      return yield* new SettingsError({ key: unknown, message: `${path}: home cannot be set in the file it is read from; use --home or SUBSTRAT_HOME` })
    }
    if (unknown !== undefined) {
      return yield* new SettingsError({
        key: unknown,
        message: `${path}: unknown key "${unknown}" (known keys: ${[...known].join(", ")}; see \`substrat config\`)`
      })
    }
    const fileP = ConfigProvider.fromJson(doc).pipe(ConfigProvider.snakeCase)

    yield* check(flagsP, (k) => k.flag, "command line")
    yield* check(envP, (k) => k.env, "environment")
    yield* check(fileP, (k) => k.file, path)

    const chain = flagsP.pipe(ConfigProvider.orElse(() => envP), ConfigProvider.orElse(() => fileP))
    const rest = yield* chain.load(settingsConfig).pipe(
      Effect.mapError((e) => new SettingsError({ key: null, message: `invalid configuration: ${String(e)}` }))
    )
    const credentials = yield* rawEnv.load(credentialsConfig).pipe(
      Effect.mapError((e) => new SettingsError({ key: null, message: `invalid credentials: ${String(e)}` }))
    )

    // The OpenTelemetry variable everyone knows, when substrat's own key is not set.
    const otel = env["OTEL_EXPORTER_OTLP_ENDPOINT"]?.trim() ?? ""
    const otlp = Option.isNone(rest.otlp.endpoint) && otel !== ""
      ? { endpoint: Option.some(yield* ConfigProvider.fromMap(new Map([["OTEL_EXPORTER_OTLP_ENDPOINT", otel]])).load(url("OTEL_EXPORTER_OTLP_ENDPOINT")).pipe(
        Effect.mapError(() =>
          new SettingsError({ key: "OTEL_EXPORTER_OTLP_ENDPOINT", message: `invalid OTEL_EXPORTER_OTLP_ENDPOINT (environment): Expected an http(s) URL` })
        )
      )) }
      : rest.otlp

    const setFlags = new Set(flagEntries(flags).map(([k]) => k))
    const fileSet = new Set(fileKeys)
    const sources: Record<string, Source> = {}
    for (const k of keys) {
      const envSet = (env[k.env]?.trim() ?? "") !== ""
      sources[k.key] = setFlags.has(k.key)
        ? "flag"
        : envSet
        ? "env"
        : k.file !== null && fileSet.has(k.file)
        ? "file"
        : "default"
    }
    if (Option.isSome(otlp.endpoint) && Option.isNone(rest.otlp.endpoint)) sources["otlp.endpoint"] = "env"
    return { settings: { ...rest, otlp, home, credentials }, sources, file: { path, exists } }
  })

/**
 * Where a loaded key's value came from, as a user would set it: the environment variable, the
 * config.toml key (`config.toml claude.bin`), the flag, or `default`.
 */
export const sourceLabel = (loaded: Loaded, key: string): string => {
  const info = keys.find((k) => k.key === key)
  const source = loaded.sources[key] ?? "default"
  if (info === undefined) return source
  switch (source) {
    case "env":
      return info.env
    case "file":
      return `config.toml ${info.file ?? key}`
    case "flag":
      return info.flag ?? "flag"
    case "default":
      return "default"
  }
}

/** A settings value at a dotted key, as JSON (secrets `<redacted>`; unset: null). */
export const valueAt = (settings: Settings, key: string): string | number | null => {
  let v: unknown = settings
  for (const segment of key.split(".")) {
    v = typeof v === "object" && v !== null ? (v as Record<string, unknown>)[segment] : undefined
  }
  if (Option.isOption(v)) v = Option.getOrNull(v)
  if (Redacted.isRedacted(v)) return "<redacted>"
  if (typeof v === "number" || typeof v === "string") return v
  if (v === undefined || v === null) return null
  return typeof v === "object" ? JSON.stringify(v) : String(v)
}

/** The egress presets of the configuration: name → host patterns. */
export const presetTable = (settings: Settings): PresetTable => {
  const e = settings.egress
  const split = (s: string) => s.split(",").filter((h) => h !== "")
  return { npm: split(e.npm), pypi: split(e.pypi), crates: split(e.crates), go: split(e.go), github: split(e.github) }
}

/** The loaded settings as a service (the daemon provides them once, at start-up). */
export class SubstratConfig extends Context.Tag("substrat/Config")<SubstratConfig, Settings>() {
  static readonly layer = (settings: Settings): Layer.Layer<SubstratConfig> => Layer.succeed(SubstratConfig, settings)
}

/** Settings with every default and nothing configured (tests, embedders). */
export const defaults = (overrides: Partial<Settings> = {}): Settings => ({
  home: defaultHomeDir(),
  slots: 4,
  graceMs: 10_000,
  crashLoopAttempts: 2,
  minFreeBytes: 8 * 1024 * 1024,
  maxLineBytes: 1024 * 1024,
  http: undefined,
  httpLimits: { maxBodyBytes: 1024 * 1024, maxConnections: 512, maxUnauthenticated: 64, headersTimeoutMs: 10_000, idleTimeoutMs: 30_000 },
  defaultProvider: "scripted",
  installDir: Option.none(),
  claude: { bin: Option.none(), model: Option.none() },
  codex: { bin: Option.none(), model: Option.none() },
  cursor: { bin: Option.none(), model: Option.none() },
  acp: { presets: Option.none(), approve: "auto", askTimeoutSeconds: 0, model: Option.none() },
  anthropic: { upstream: "https://api.anthropic.com" },
  gemini: { upstream: "https://generativelanguage.googleapis.com" },
  openai: {
    upstream: "https://api.openai.com",
    baseUrl: Option.none(),
    apiKey: Option.none(),
    model: Option.none(),
    maxSteps: 25,
    timeoutMs: 120_000,
    maxRetries: 2,
    retryDelayMs: 500
  },
  otlp: { endpoint: Option.none() },
  sandbox: { workspaceGrowthBytes: 256 * 1024 * 1024, uid: 65534, gid: 65534 },
  egress: {
    npm: "registry.npmjs.org,registry.yarnpkg.com",
    pypi: "pypi.org,files.pythonhosted.org",
    crates: "crates.io,index.crates.io,static.crates.io",
    go: "proxy.golang.org,sum.golang.org",
    github: "github.com,codeload.github.com,raw.githubusercontent.com,objects.githubusercontent.com",
    bytesPerTurn: 1024 * 1024 * 1024,
    bytesPerDay: 10 * 1024 * 1024 * 1024,
    maxConnections: 32,
    testResolve: Option.none()
  },
  swarm: { findHopDelayMs: 0 },
  workspaces: { spawnMode: "shared", mergeCheckTimeoutSeconds: 600, mergeMode: "merge", mergeMoveDelayMs: 0 },
  caps: { maxDepth: 0, maxChildren: 0, maxLive: 0, policy: "queue" },
  quotas: {
    messagesPerMinute: 120,
    messageBytesPerHour: 64 * 1024 * 1024,
    openQuestions: 5,
    spawnsPerMinute: 30,
    toolCallsPerTurn: 500,
    logBytesPerHour: 256 * 1024 * 1024,
    parkAfter: 20
  },
  cluster: { postgres: Option.none(), listen: Option.none(), leaseMs: 20_000, handoverGraceMs: 300_000, workspaceRemote: Option.none() },
  meter: { prices: Option.none() },
  credentials: {
    anthropicApiKey: Option.none(),
    anthropicAuthToken: Option.none(),
    openaiApiKey: Option.none(),
    geminiApiKey: Option.none(),
    openrouterApiKey: Option.none(),
    cursorApiKey: Option.none()
  },
  ...overrides
})
