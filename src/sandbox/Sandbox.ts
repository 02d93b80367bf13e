// Sandbox port: turn a WorkspaceSpec + command into a scoped (sandboxed) process. Layers:
// `layerBwrap` (SandboxBwrap.ts, the default on Linux) and `layerUnsafeNoSandbox`
// (SandboxUnsafe.ts, explicit opt-in only: no isolation at all).
import { Context, type Effect, type Scope, type Stream } from "effect"
import type { ResourceLimits, WorkspaceSpec } from "../domain/workspace.js"
import type { ExtraBind } from "./BwrapArgs.js"
import type {
  LimitExceededError,
  SandboxPathError,
  SandboxProcessError,
  SandboxUnavailableError
} from "./errors.js"
import type { ExitStatus } from "./Limits.js"

export type { ExitStatus } from "./Limits.js"
export type { ExtraBind } from "./BwrapArgs.js"

export interface SandboxRequest {
  readonly workspace: Pick<WorkspaceSpec, "root_path" | "network_access" | "symlinks" | "limits">
  /** argv: program (resolved by PATH inside the sandbox) and its arguments. */
  readonly command: ReadonlyArray<string>
  /** Working directory inside the sandbox (default `/workspace`). */
  readonly cwd?: string
  /** Merged over the layer's default environment (PATH, HOME=/tmp, TMPDIR, LANG). */
  readonly env?: Readonly<Record<string, string>>
  /** Extra files/sockets bound at absolute sandbox paths (agent socket, MCP config). */
  readonly extraBinds?: ReadonlyArray<ExtraBind>
  /** Overrides `workspace.limits` for this command. */
  readonly limits?: ResourceLimits
  /** A person's terminal shell: keeps the controlling terminal (BwrapArgs `interactive`). */
  readonly interactive?: boolean
  /** Bytes fed to the process' stdin; stdin is closed when the stream ends (default: empty). */
  readonly stdin?: Stream.Stream<Uint8Array>
}

export type SandboxError = SandboxPathError | SandboxUnavailableError | SandboxProcessError

export interface SandboxProcess {
  /** Host pid of the outermost process (bwrap, or the command itself when unsandboxed); also its process group id. */
  readonly pid: number
  readonly stdout: Stream.Stream<Uint8Array, SandboxProcessError>
  /** stderr; its last 4 KiB also feed limit attribution, so drain it before awaiting `exit`. */
  readonly stderr: Stream.Stream<Uint8Array, SandboxProcessError>
  /**
   * Waits for the exit. Fails with `LimitExceededError` when the exit is attributed to a limit,
   * `SandboxProcessError("setup")` when bwrap itself refused to start the sandbox.
   */
  readonly exit: Effect.Effect<ExitStatus, LimitExceededError | SandboxProcessError>
  /** Signal the whole process group (default SIGTERM). */
  readonly kill: (signal?: NodeJS.Signals) => Effect.Effect<void>
}

export interface SandboxResult {
  readonly exit: ExitStatus
  readonly stdout: string
  readonly stderr: string
}

export interface SandboxService {
  readonly kind: "bwrap" | "unsafe"
  /**
   * The host uid/gid sandboxed commands run as when it is not the daemon's own (a root daemon's
   * sandboxes): what the daemon writes for them into their trees gets this owner. null/absent: the daemon's.
   */
  readonly owner?: { readonly uid: number; readonly gid: number } | null
  /** Start the command; closing the scope kills the whole process tree (SIGTERM, then SIGKILL after a grace period). */
  readonly start: (request: SandboxRequest) => Effect.Effect<SandboxProcess, SandboxError, Scope.Scope>
  /** Start, collect stdout/stderr as text, wait. Non-zero exits are results, not errors, unless a limit explains them. */
  readonly run: (request: SandboxRequest) => Effect.Effect<SandboxResult, SandboxError | LimitExceededError>
}

export class Sandbox extends Context.Tag("substrat/Sandbox")<Sandbox, SandboxService>() {}
