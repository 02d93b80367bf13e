// `substrat doctor [--json]`: can this machine run Substrat? Client-side, works with no daemon:
// the sandbox checks (bwrap present and able to create namespaces, prlimit, git, cgroup mode,
// identity — src/sandbox/Doctor.ts), the configuration (src/config/Config.ts: environment and
// $SUBSTRAT_HOME/config.toml, as the daemon would load it), the provider CLIs the daemon would
// find with it (the providers' own binary lookup, src/provider/cli/Binary.ts; each ACP preset's
// executable, src/provider/acp/Presets.ts), and the daemon's
// socket health. Exit 0 unless a check failed (warnings do not fail), 1 otherwise — the report
// is printed either way.
import { Command } from "@effect/cli"
import * as NodeCommandExecutor from "@effect/platform-node/NodeCommandExecutor"
import { Console, Duration, Effect, Option } from "effect"
import * as fs from "node:fs"
import { load, parentEnv } from "../../config/Config.js"
import type { Paths } from "../../config/Paths.js"
import { isAlive, readPid, socketAnswers } from "../../daemon/Lifecycle.js"
import { AgentGroup } from "../../protocol/admin/agent.js"
import { DaemonGroup } from "../../protocol/admin/daemon.js"
import { call, CliError, withClient } from "../Client.js"
import { home, json, pathsOf } from "../Common.js"
import { suggest } from "../Exit.js"
import { printJson, table } from "../Output.js"
import { describe } from "../Help.js"

interface Check {
  readonly name: string
  readonly status: "ok" | "warn" | "fail"
  readonly detail: string
  readonly fix: string | null
}

const providerClis = ["claude", "codex", "cursor-agent"] as const

/** The daemon's socket: answers daemon.status, mode 0600, no stale files. */
const daemonCheck = (paths: Paths): Effect.Effect<Check> =>
  Effect.gen(function*() {
    const pid = readPid(paths.pidFile)
    const alive = pid !== undefined && isAlive(pid)
    const socketFile = fs.existsSync(paths.socket)
    const answers = socketFile && (yield* socketAnswers(paths.socket, 1000))
    if (!alive && !socketFile) {
      return pid === undefined
        ? { name: "daemon", status: "warn", detail: `not running (no ${paths.pidFile})`, fix: suggest(paths.home, "daemon start") }
        : { name: "daemon", status: "warn", detail: `not running; stale pid file (pid ${pid} is gone)`, fix: `${suggest(paths.home, "cleanup --purge")}, or ${suggest(paths.home, "daemon start")} (it removes stale files)` }
    }
    if (!answers) {
      return alive
        ? { name: "daemon", status: "fail", detail: `pid ${pid} is alive but ${paths.socket} does not answer`, fix: `look at ${paths.daemonLog}; ${suggest(paths.home, "daemon stop")}, or kill ${pid}` }
        : { name: "daemon", status: "warn", detail: `not running; stale socket ${paths.socket}${pid === undefined ? "" : ` and pid file (pid ${pid} is gone)`}`, fix: `${suggest(paths.home, "cleanup --purge")}, or ${suggest(paths.home, "daemon start")} (it removes stale files)` }
    }
    const status = yield* withClient(DaemonGroup, paths.socket, (c) => call(paths.socket, c.daemon.status())).pipe(
      Effect.timeoutFail({ duration: Duration.seconds(5), onTimeout: () => new CliError({ kind: "daemon-not-running", message: "daemon.status timed out" }) }),
      Effect.either
    )
    if (status._tag === "Left") {
      return { name: "daemon", status: "fail", detail: `${paths.socket} accepts connections but daemon.status failed: ${status.left.message}`, fix: `look at ${paths.daemonLog}` }
    }
    const s = status.right
    const mode = fs.statSync(paths.socket).mode & 0o777
    if ((mode & 0o077) !== 0) {
      return { name: "daemon", status: "fail", detail: `pid ${s.pid}: ${paths.socket} has mode ${mode.toString(8)} (other users can reach it)`, fix: `chmod 600 ${paths.socket}; restart the daemon` }
    }
    if (s.storage?.mode === "read-only") {
      return {
        name: "daemon",
        status: "fail",
        detail: `pid ${s.pid} is READ-ONLY: ${s.storage.reason ?? "storage unavailable"} (changes are refused, reads are served)`,
        fix: s.storage.restart_needed
          ? `free space under ${paths.home}, then restart the daemon (substrat daemon stop; substrat daemon start)`
          : `free space under ${paths.home}; the daemon leaves read-only mode by itself`
      }
    }
    return {
      name: "daemon",
      status: "ok",
      detail: `pid ${s.pid}, version ${s.version}, up ${Math.round(s.uptime_ms / 1000)} s, ${s.agents} agent(s), socket ${paths.socket} (0${mode.toString(8)})`,
      fix: null
    }
  })

/** Agents a crash loop quarantined (docs/recovery.md): none → no check at all. */
const quarantineCheck = (paths: Paths): Effect.Effect<ReadonlyArray<Check>> =>
  withClient(AgentGroup, paths.socket, (c) => call(paths.socket, c.agent.list({}))).pipe(
    Effect.timeout(Duration.seconds(5)),
    Effect.map((r): ReadonlyArray<Check> => {
      const held = r.agents.filter((a) => a.state === "quarantined")
      if (held.length === 0) return []
      return [{
        name: "quarantine",
        status: "warn",
        detail: `${held.length} agent(s) quarantined after a crash loop (the daemon died repeatedly during their turn): ${
          held.map((a) => a.name).join(", ")
        }; their turns are held`,
        fix: held.map((a) => `substrat agent resume ${a.id} (or substrat agent terminate ${a.id})`).join("; ")
      }]
    }),
    Effect.orElseSucceed(() => [])
  )

export const doctorCommand = Command.make("doctor", { home, json }, (o) =>
  Effect.gen(function*() {
    const paths = pathsOf(o.home)
    // Loaded on demand: other one-shot commands do not pay for them.
    const Doctor = yield* Effect.promise(() => import("../../sandbox/Doctor.js"))
    const Binary = yield* Effect.promise(() => import("../../provider/cli/Binary.js"))
    // The settings the daemon would start with; the sandbox's identity and the provider lookup below use them.
    const loaded = yield* Effect.either(load({ flags: { home: Option.getOrUndefined(o.home) } }))
    const sandbox = yield* Doctor.sandboxChecks(
      loaded._tag === "Right" ? { sandboxUser: { uid: loaded.right.settings.sandbox.uid, gid: loaded.right.settings.sandbox.gid } } : {}
    ).pipe(Effect.provide(NodeCommandExecutor.layer))
    const config: Check = loaded._tag === "Right"
      ? {
        name: "config",
        status: "ok",
        detail: loaded.right.file.exists ? `${loaded.right.file.path}` : `no ${loaded.right.file.path} (environment and defaults)`,
        fix: null
      }
      : { name: "config", status: "fail", detail: loaded.left.message, fix: "correct the setting it names (substrat config shows every setting)" }
    const configured = loaded._tag === "Right" ? Binary.configuredBinaries(loaded.right) : {}
    const installDir = loaded._tag === "Right" ? Option.getOrUndefined(loaded.right.settings.installDir) : undefined
    const providers = yield* Effect.forEach(providerClis, (name) =>
      Binary.findBinary(name, configured[name], parentEnv(), installDir).pipe(
        Effect.match({
          onFailure: (e): Check => ({ name: `provider:${name}`, status: "warn", detail: e.problem, fix: e.install }),
          onSuccess: (b): Check => ({ name: `provider:${name}`, status: "ok", detail: `${b.hostPath} (from ${b.from})`, fix: null })
        })
      ))
    const Presets = yield* Effect.promise(() => import("../../provider/acp/Presets.js"))
    const { defaultInstallDir } = yield* Effect.promise(() => import("../../provider/cli/CliSettings.js"))
    const acp = yield* Presets.locatePresets(
      loaded._tag === "Right" ? Option.getOrUndefined(loaded.right.settings.acp.presets) : undefined,
      { installDir: defaultInstallDir(installDir), path: parentEnv()["PATH"] ?? "", binaries: configured }
    )
    const acpChecks = acp.map((p): Check => ({
      name: `provider:acp:${p.name}`,
      status: p.found ? "ok" : "warn",
      detail: p.detail,
      fix: p.found ? null : "install the agent (npm install -g …) or set its command in acp.presets (docs/providers.md \"ACP agents\")"
    }))
    const daemon = yield* daemonCheck(paths)
    const held = daemon.status === "ok" ? yield* quarantineCheck(paths) : []
    const report = Doctor.makeReport([...sandbox, config, ...providers, ...acpChecks, daemon, ...held].map((c) => new Doctor.DoctorCheck(c)))
    if (o.json) {
      yield* printJson(report)
    } else {
      const mark = { ok: "ok", warn: "WARN", fail: "FAIL" } as const
      yield* Console.log(table(report.checks.map((c) => [mark[c.status], c.name, c.detail])))
      const fixes = report.checks.filter((c) => c.status !== "ok" && c.fix !== null)
      if (fixes.length > 0) yield* Console.log(["", "fixes:", ...fixes.map((c) => `  ${c.name}: ${c.fix}`)].join("\n"))
    }
    const failed = report.checks.filter((c) => c.status === "fail")
    if (failed.length > 0) {
      return yield* new CliError({ kind: "internal", message: `doctor: ${failed.length} check(s) failed: ${failed.map((c) => c.name).join(", ")}` })
    }
  })).pipe(
  Command.withDescription(describe("Check bwrap, namespaces, cgroups, provider CLIs and the daemon (no daemon needed)", {
    examples: ["substrat doctor", "substrat doctor --json"]
  }))
)
