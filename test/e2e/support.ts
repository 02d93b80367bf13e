// Shared pieces for the offline e2e tests with the real `claude` / `codex` binaries: where the
// binaries are, a child-process runner, and a minimal bwrap argv (network off, env cleared).
// The product's Sandbox port will own bwrap for real; this is only enough to prove the CLIs run.
import { Effect } from "effect"
import * as Child from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { afterEach } from "vitest"
import type { McpServer } from "../../src/provider/claude/Invocation.js"
import { daemons } from "../integration/daemon.support.js"
import { removeDir } from "../support/tmp.js"

export const repoRoot = Path.resolve(import.meta.dirname, "../..")
export {
  agentEvents,
  claudeBin,
  claudeMeteredHome,
  claudeMeterEnvKeys,
  dataNamed,
  jsonLines,
  type LoggedEvent,
  readJsonLines,
  withLlm
} from "./daemon-claude.support.js"

/** The native Codex binary, from the platform package @openai/codex depends on. */
export const codexVendorDir = (): string => {
  const base = Path.join(repoRoot, "node_modules/@openai")
  for (const pkg of Fs.readdirSync(base).filter((d) => d.startsWith(`codex-${process.platform}-`))) {
    const vendor = Path.join(base, pkg, "vendor")
    for (const triple of Fs.readdirSync(vendor)) {
      if (Fs.existsSync(Path.join(vendor, triple, "bin/codex"))) return Path.join(vendor, triple)
    }
  }
  throw new Error("no @openai/codex platform binary under node_modules (npm install?)")
}

export const forwarderScript = Path.join(repoRoot, "src/provider/codex/llm-forward.mjs")
export const tsxLoader = Path.join(repoRoot, "node_modules/tsx/dist/esm/index.mjs")
export const echoMcpScript = Path.join(repoRoot, "test/fixtures/echo-mcp.ts")

/** The echo MCP fixture as an MCP server entry; `log` receives one JSON line per call. */
export const echoMcp = (log: string): McpServer => ({
  command: "node",
  args: ["--import", tsxLoader, echoMcpScript],
  env: { ECHO_MCP_LOG: log }
})

export interface RunResult {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/** Run a command to completion (stdin /dev/null, env exactly as given); killed if interrupted. */
export const run = (command: string, args: ReadonlyArray<string>, options: { readonly env: Record<string, string>; readonly cwd: string }) =>
  Effect.async<RunResult, Error>((resume) => {
    const child = Child.spawn(command, [...args], { env: options.env, cwd: options.cwd, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (c: string) => (stdout += c))
    child.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c))
    child.on("error", (e) => resume(Effect.fail(e)))
    child.on("close", (code, signal) => resume(Effect.succeed({ code, signal, stdout, stderr })))
    return Effect.sync(() => {
      if (child.exitCode === null) child.kill("SIGKILL")
    })
  }).pipe(Effect.timeoutFail({ duration: "50 seconds", onTimeout: () => new Error(`timed out: ${command}`) }))

/** The host's top-level system dirs as bwrap sees fit: symlinks stay symlinks, dirs are bound RO. */
const systemDirs = (): ReadonlyArray<string> =>
  ["bin", "sbin", "lib", "lib64", "lib32", "libx32"].flatMap((d) => {
    const p = `/${d}`
    try {
      const st = Fs.lstatSync(p)
      if (st.isSymbolicLink()) return ["--symlink", Fs.readlinkSync(p), p]
      if (st.isDirectory()) return ["--ro-bind", p, p]
    } catch {
      // absent on this distribution
    }
    return []
  })

export interface SandboxSpec {
  /** Bound read-write at /home/agent (the agent's private HOME). */
  readonly home: string
  /** Bound read-write at /workspace (the cwd). */
  readonly workspace: string
  /** Read-only binds: [host path, sandbox path]. */
  readonly roBinds: ReadonlyArray<readonly [string, string]>
  readonly env: Readonly<Record<string, string>>
}

/**
 * bwrap argv: every namespace unshared (no network: only the sandbox's own loopback), env cleared,
 * /usr and the lib/bin links read-only, fresh /proc /dev /tmp, HOME and workspace read-write. No
 * /etc at all: neither CLI needs it offline.
 */
export const bwrapArgs = (spec: SandboxSpec, command: ReadonlyArray<string>): ReadonlyArray<string> => [
  "--unshare-all",
  "--die-with-parent",
  "--new-session",
  "--clearenv",
  "--ro-bind", "/usr", "/usr",
  ...systemDirs(),
  "--proc", "/proc",
  "--dev", "/dev",
  "--tmpfs", "/tmp",
  "--bind", spec.home, "/home/agent",
  "--bind", spec.workspace, "/workspace",
  ...spec.roBinds.flatMap(([from, to]) => ["--ro-bind", from, to]),
  "--chdir", "/workspace",
  ...Object.entries(spec.env).flatMap(([k, v]) => ["--setenv", k, v]),
  "--",
  ...command
]


/**
 * Per-test daemons and homes for the daemon e2e files: after each test, kill the daemons it
 * started, remove its homes, and restore the environment variables it may have set.
 */
export const daemonTestScope = (envKeys: ReadonlyArray<string>) => {
  const ds = daemons()
  const homes: Array<string> = []
  const saved = Object.fromEntries(envKeys.map((k) => [k, process.env[k]]))
  afterEach(async () => {
    await ds.killAll()
    for (const h of homes.splice(0)) removeDir(h)
    for (const k of envKeys) {
      if (saved[k] === undefined) delete process.env[k]
      else process.env[k] = saved[k]
    }
  })
  return { ds, homes }
}



