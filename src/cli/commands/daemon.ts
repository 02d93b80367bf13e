// `substrat daemon start|stop|status|run`.
import { Command, Options } from "@effect/cli"
import { Console, Duration, Effect, Option, Redacted } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { parentEnv } from "../../config/Config.js"
import { resolveSettings } from "../../config/DaemonConfig.js"
import { isAlive, lockHolder, readPid, socketAnswers } from "../../daemon/Lifecycle.js"
import { DaemonGroup } from "../../protocol/admin/daemon.js"
import { call, CliError, withClient } from "../Client.js"
import { home, json, pathsOf } from "../Common.js"
import { printJson, renderStatus } from "../Output.js"
import { describe } from "../Help.js"

const slots = Options.integer("slots").pipe(
  Options.withDescription("How many agent turns may run at the same time (else $SUBSTRAT_SLOTS, slots in config.toml, 4; see substrat config)"),
  Options.optional
)
const grace = Options.integer("grace-ms").pipe(
  Options.withDescription("On stop, how long running turns may finish, in ms (else $SUBSTRAT_GRACE_MS, grace_ms in config.toml, 10000)"),
  Options.optional
)
const maxLine = Options.integer("max-line-bytes").pipe(
  Options.withDescription("Longest request line the daemon accepts, in bytes (else $SUBSTRAT_MAX_LINE_BYTES, max_line_bytes in config.toml, 1 MiB)"),
  Options.optional
)

const http = Options.text("http").pipe(
  Options.withDescription("Also serve the HTTP API and dashboard on this loopback HOST:PORT, with the token in $SUBSTRAT_HOME/http.token (else $SUBSTRAT_HTTP, http in config.toml)"),
  Options.optional
)

const clusterUrl = Options.text("cluster").pipe(
  Options.withDescription("Cluster mode (docs/cluster.md): run as a runner of the cluster whose shared storage is this Postgres URL (else $SUBSTRAT_CLUSTER_POSTGRES, cluster.postgres in config.toml); needs --listen"),
  Options.optional
)
const listen = Options.text("listen").pipe(
  Options.withDescription("Cluster mode: HOST:PORT this runner listens on for the other runners, an address they can reach (else $SUBSTRAT_CLUSTER_LISTEN, cluster.listen in config.toml)"),
  Options.optional
)

const settingsOf = (o: {
  readonly cluster?: Option.Option<string>
  readonly listen?: Option.Option<string>
  readonly http?: Option.Option<string>
  readonly home: Option.Option<string>
  readonly slots: Option.Option<number>
  readonly grace: Option.Option<number>
  readonly maxLine: Option.Option<number>
}) =>
  resolveSettings({
    home: Option.getOrUndefined(o.home),
    slots: Option.getOrUndefined(o.slots),
    graceMs: Option.getOrUndefined(o.grace),
    maxLineBytes: Option.getOrUndefined(o.maxLine),
    http: Option.getOrUndefined(o.http ?? Option.none()),
    cluster: {
      postgres: Option.getOrUndefined(o.cluster ?? Option.none()),
      listen: Option.getOrUndefined(o.listen ?? Option.none())
    }
  }).pipe(Effect.mapError((e) => new CliError({ kind: "invalid-input", message: e.message })))

const runCommand = Command.make("run", { home, slots, grace, maxLine, http, cluster: clusterUrl, listen }, (o) =>
  Effect.gen(function*() {
    const settings = yield* settingsOf(o)
    // Loaded only here: one-shot commands never pay for the daemon's modules.
    const Daemon = yield* Effect.promise(() => import("../../daemon/Daemon.js"))
    yield* Daemon.run(settings).pipe(
      Effect.mapError((e) =>
        new CliError({
          kind: e.reason === "already-running" ? "already-running" : e.reason === "cluster" ? "invalid-input" : "internal",
          message: e.message
        })
      )
    )
  })).pipe(Command.withDescription(describe("Run the daemon in the foreground (for supervisors and tests); stops on SIGTERM/SIGINT", {
    examples: ["substrat daemon run --home /srv/substrat"]
  })))

const startCommand = Command.make("start", { home, slots, grace, maxLine, http, cluster: clusterUrl, listen, json }, (o) =>
  Effect.gen(function*() {
    const settings = yield* settingsOf(o)
    const paths = pathsOf(Option.some(settings.home))
    // The daemon's flock on its pid file, not the pid's liveness: a killed daemon nobody has
    // reaped yet (a zombie) holds nothing.
    const existing = yield* lockHolder(paths).pipe(Effect.mapError((e) => new CliError({ kind: "internal", message: e.message })))
    if (existing !== undefined) {
      const who = existing === true ? "" : `pid ${existing}, `
      return yield* new CliError({ kind: "already-running", message: `daemon already running (${who}socket ${paths.socket})` })
    }
    const child = yield* Effect.try({
      try: () => {
        fs.mkdirSync(paths.home, { recursive: true, mode: 0o700 })
        const log = fs.openSync(paths.daemonLog, "a", 0o600)
        const args = [
          ...process.execArgv,
          process.argv[1]!,
          "daemon",
          "run",
          "--home",
          settings.home,
          "--slots",
          String(settings.slots),
          "--grace-ms",
          String(settings.graceMs),
          "--max-line-bytes",
          String(settings.maxLineBytes),
          ...(settings.http === undefined ? [] : ["--http", settings.http]),
          ...Option.match(settings.cluster.listen, { onNone: () => [], onSome: (l) => ["--listen", l] })
        ]
        // The Postgres URL may carry a password: passed in the environment, not on the command line.
        const env = Option.match(settings.cluster.postgres, {
          onNone: () => parentEnv(),
          onSome: (url) => ({ ...parentEnv(), SUBSTRAT_CLUSTER_POSTGRES: Redacted.value(url) })
        })
        const c = spawn(process.execPath, args, { detached: true, stdio: ["ignore", log, log], env })
        fs.closeSync(log)
        c.unref()
        return c
      },
      catch: (e) => new CliError({ kind: "internal", message: `cannot start the daemon: ${String(e)}` })
    })
    const started = yield* Effect.gen(function*() {
      for (;;) {
        if (child.exitCode !== null || child.signalCode !== null) {
          const tail = fs.readFileSync(paths.daemonLog, "utf8").trim().split("\n").slice(-3).join(" | ")
          return yield* new CliError({
            kind: child.exitCode === 6 ? "already-running" : child.exitCode === 2 ? "invalid-input" : "internal",
            message: `the daemon exited during start-up (code ${child.exitCode ?? child.signalCode}); ${paths.daemonLog}: ${tail}`
          })
        }
        const pid = readPid(paths.pidFile)
        // An empty pid file: a disk too full to take the pid (the daemon starts read-only). It is
        // ours when its lock is held and the socket answers while our child lives (no daemon held
        // the lock before it was spawned; another one would have made it exit).
        if (pid === child.pid && (yield* socketAnswers(paths.socket))) return child.pid!
        if (
          pid === undefined && child.exitCode === null && (yield* socketAnswers(paths.socket)) &&
          (yield* Effect.orElseSucceed(lockHolder(paths), () => undefined)) === true
        ) return child.pid!
        yield* Effect.sleep("25 millis")
      }
    }).pipe(
      Effect.timeoutFail({
        duration: Duration.seconds(30),
        // Left running: a large home's recovery can take longer than this on a busy machine.
        onTimeout: () => new CliError({
          kind: "internal",
          message: `the daemon (pid ${child.pid}) did not answer within 30 s and may still be starting: \`substrat daemon status\` tells when it answers, \`kill ${child.pid}\` stops it; see ${paths.daemonLog}`
        })
      })
    )
    if (o.json) yield* printJson({ pid: started, socket: paths.socket, home: paths.home, log: paths.daemonLog })
    else yield* Console.log(`daemon started (pid ${started}, socket ${paths.socket})`)
  })).pipe(Command.withDescription(describe("Start the daemon in the background; waits until its socket answers", {
    examples: [
      "substrat daemon start",
      "substrat daemon start --slots 8 --http 127.0.0.1:7777",
      "substrat daemon start --cluster postgres://substrat:secret@db:5432/substrat --listen 10.0.0.5:7400"
    ]
  })))

const stopCommand = Command.make("stop", { home, json }, (o) =>
  Effect.gen(function*() {
    const paths = pathsOf(o.home)
    const r = yield* withClient(DaemonGroup, paths.socket, (c) => call(paths.socket, c.daemon.stop()))
    // Wait for the process to be gone: its socket and pid file are removed before it exits.
    yield* Effect.gen(function*() {
      while (isAlive(r.pid)) yield* Effect.sleep("25 millis")
    }).pipe(
      Effect.timeoutFail({
        duration: Duration.minutes(5),
        onTimeout: () => new CliError({ kind: "internal", message: `daemon (pid ${r.pid}) still running` })
      })
    )
    if (o.json) yield* printJson({ pid: r.pid, stopped: true })
    else yield* Console.log(`daemon stopped (pid ${r.pid})`)
  })).pipe(Command.withDescription(describe("Stop the daemon: running turns finish (grace period), sessions are suspended", {
    examples: ["substrat daemon stop"]
  })))

const statusCommand = Command.make("status", { home, json }, (o) =>
  Effect.gen(function*() {
    const paths = pathsOf(o.home)
    const s = yield* withClient(DaemonGroup, paths.socket, (c) => call(paths.socket, c.daemon.status()))
    if (o.json) return yield* printJson(s)
    yield* Console.log(renderStatus(s))
  })).pipe(Command.withDescription(describe("Show the daemon's state (exit code 3 when it is not running)", {
    examples: ["substrat daemon status", "substrat daemon status --json"]
  })))

export const daemonCommand = Command.make("daemon").pipe(
  Command.withDescription(describe("Start, stop and check the daemon", { examples: ["substrat daemon start", "substrat daemon status"] })),
  Command.withSubcommands([startCommand, stopCommand, statusCommand, runCommand])
)
