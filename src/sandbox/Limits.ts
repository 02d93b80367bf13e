// Resource limits as data → a `prlimit` prefix for the sandboxed command, and the reverse:
// attributing an exit status to the limit that caused it. Both pure.
//
// rlimits are per process (inherited by children), except RLIMIT_NPROC which counts every process
// of the real uid — per user namespace level on Linux ≥ 5.14 (ucounts), so inside a bwrap user
// namespace it is effectively per sandbox. Root (kuid 0) and CAP_SYS_RESOURCE/CAP_SYS_ADMIN holders
// in the initial namespace are exempt from it: see docs/sandbox.md "Identity".
import { constants } from "node:os"
import { ResourceLimits } from "../domain/workspace.js"
import { type LimitName, LimitExceededError } from "./errors.js"

/** How a process ended: an exit code, or the signal that killed it. */
export interface ExitStatus {
  readonly code: number | null
  readonly signal: string | null
}

// ── Defaults: every sandbox is bounded ───────────────────────────────────────────────────────
// A null in a workspace's (or request's) limits means "the default", not "unbounded". The
// defaults are generous for an agent CLI (Node reserves ~10 GiB of address space per
// WebAssembly memory, so the address-space default leaves room for a few) and stop runaways.

/** The defaults applied to every sandboxed command (docs/sandbox.md "Resource limits"). */
export interface SandboxDefaults {
  /** RLIMIT_AS. */
  readonly memory_bytes: number
  /** RLIMIT_CPU, per process. */
  readonly cpu_seconds: number
  /** RLIMIT_NPROC (tasks of the sandbox's uid) and, where a pids cgroup is writable, pids.max. */
  readonly max_processes: number
  /** RLIMIT_FSIZE: the largest file a process may write. */
  readonly max_file_bytes: number
  /** Wall clock per command; null = none (the orchestrator has its own turn timeouts). */
  readonly wall_clock_seconds: number | null
  /** Size of the sandbox's RAM-backed /tmp (bwrap `--size` on its tmpfs). */
  readonly tmp_bytes: number
  /**
   * How much one command (one agent turn) may grow its /workspace (disk blocks of the tree);
   * null = unbounded. Enforced by a poller that kills the sandbox (WorkspaceGrowth.ts).
   */
  readonly workspace_growth_bytes: number | null
}

const GiB = 1024 * 1024 * 1024

export const defaultSandboxLimits: SandboxDefaults = {
  memory_bytes: 32 * GiB,
  cpu_seconds: 3600,
  max_processes: 512,
  max_file_bytes: 1 * GiB,
  wall_clock_seconds: null,
  tmp_bytes: 256 * 1024 * 1024,
  workspace_growth_bytes: 256 * 1024 * 1024
}

/**
 * The default largest file: no more than the workspace growth budget, since one file that large
 * could not be written in one turn anyway — and RLIMIT_FSIZE stops it at once, where the growth
 * watcher only sees it at its next poll (a write-then-delete could slip between two).
 */
export const defaultFileBytes = (d: SandboxDefaults): number =>
  d.workspace_growth_bytes === null ? d.max_file_bytes : Math.min(d.max_file_bytes, d.workspace_growth_bytes)

/** `limits` with every null replaced by the default. */
export const withDefaults = (l: ResourceLimits, d: SandboxDefaults = defaultSandboxLimits): ResourceLimits =>
  new ResourceLimits({
    memory_bytes: l.memory_bytes ?? d.memory_bytes,
    cpu_seconds: l.cpu_seconds ?? d.cpu_seconds,
    max_processes: l.max_processes ?? d.max_processes,
    max_file_bytes: l.max_file_bytes ?? defaultFileBytes(d),
    wall_clock_seconds: l.wall_clock_seconds ?? d.wall_clock_seconds
  })

export const hasRlimits = (l: ResourceLimits): boolean =>
  l.memory_bytes !== null || l.cpu_seconds !== null || l.max_processes !== null || l.max_file_bytes !== null

/**
 * `prlimit --as=… --cpu=soft:hard --nproc=… --fsize=… --core=0 --`, or [] when no rlimit is set.
 * CPU: soft = N (SIGXCPU, attributable), hard = N+1 (SIGKILL if SIGXCPU is ignored); with soft = hard
 * the kernel sends SIGKILL straight away and the cause is ambiguous.
 */
export const prlimitPrefix = (l: ResourceLimits, prlimit = "prlimit"): ReadonlyArray<string> => {
  if (!hasRlimits(l)) return []
  const out = [prlimit]
  if (l.memory_bytes !== null) out.push(`--as=${Math.max(1, Math.floor(l.memory_bytes))}`)
  if (l.cpu_seconds !== null) {
    const s = Math.max(1, Math.ceil(l.cpu_seconds))
    out.push(`--cpu=${s}:${s + 1}`)
  }
  if (l.max_processes !== null) out.push(`--nproc=${Math.max(1, Math.floor(l.max_processes))}`)
  if (l.max_file_bytes !== null) out.push(`--fsize=${Math.max(0, Math.floor(l.max_file_bytes))}`)
  out.push("--core=0", "--")
  return out
}

const signalNames: ReadonlyMap<number, string> = new Map(
  Object.entries(constants.signals).map(([name, n]) => [n, name])
)

/**
 * bwrap (and sh) report a child killed by signal N as exit code 128+N. Turn that back into a signal
 * name; a program that *chooses* to exit with 128+N is indistinguishable (documented).
 */
export const normaliseExit = (s: ExitStatus): ExitStatus => {
  if (s.signal !== null || s.code === null || s.code <= 128 || s.code > 128 + 64) return s
  const name = signalNames.get(s.code - 128)
  return name === undefined ? s : { code: s.code, signal: name }
}

/** Optional cgroup v2 counters read after the process ended (memory.events oom_kill, pids.events max). */
export interface CgroupEvents {
  readonly oomKills: number
  readonly pidsMax: number
}

export interface AttributionInput {
  readonly status: ExitStatus
  readonly limits: ResourceLimits
  /** Last few KiB of stderr, for the ENOMEM / EAGAIN / EFBIG heuristics. */
  readonly stderrTail: string
  readonly timedOut: boolean
  readonly cgroup?: CgroupEvents
  /** The size of the sandbox's /tmp, when it is bounded (for ENOSPC attribution). */
  readonly tmpBytes?: number
}

const forkFailure = /cannot fork|can't fork|fork: (retry: )?resource temporarily unavailable|fork failed|EAGAIN|Resource temporarily unavailable/i
const outOfMemory = /out of memory|cannot allocate memory|MemoryError|ENOMEM|bad_alloc|allocation failed|memory exhausted/i
const fileTooLarge = /file too large|EFBIG/i
const noSpace = /no space left on device|ENOSPC/i

/** Which limit (if any) explains this exit. null = an ordinary exit (or a failure we cannot pin on a limit). */
export const attributeExit = (input: AttributionInput): LimitExceededError | null => {
  const { limits: l, status: raw } = input
  const s = normaliseExit(raw)
  const mk = (limit: LimitName, certainty: "certain" | "likely", value: number | null, why: string) =>
    new LimitExceededError({
      limit,
      certainty,
      value: value ?? 0,
      exit_code: s.code,
      signal: s.signal,
      message: `${limit} limit (${value ?? "?"}) exceeded: ${why}`
    })
  if (input.timedOut) return mk("wall-clock", "certain", l.wall_clock_seconds, "the command ran past its wall-clock timeout and was killed")
  const failed = s.signal !== null || (s.code !== null && s.code !== 0)
  if (!failed) return null
  if (input.cgroup !== undefined) {
    if (input.cgroup.oomKills > 0 && l.memory_bytes !== null) return mk("memory", "certain", l.memory_bytes, "the cgroup OOM killer fired")
    if (input.cgroup.pidsMax > 0 && l.max_processes !== null) return mk("processes", "certain", l.max_processes, "the cgroup refused a fork (pids.max)")
  }
  if (s.signal === "SIGXCPU" && l.cpu_seconds !== null) return mk("cpu", "certain", l.cpu_seconds, "killed by SIGXCPU")
  if (s.signal === "SIGXFSZ" && l.max_file_bytes !== null) return mk("file-size", "certain", l.max_file_bytes, "killed by SIGXFSZ")
  if (s.signal === "SIGKILL" && l.cpu_seconds !== null) return mk("cpu", "likely", l.cpu_seconds, "killed by SIGKILL (hard CPU limit, SIGXCPU was ignored)")
  const tail = input.stderrTail
  if (l.max_file_bytes !== null && fileTooLarge.test(tail)) return mk("file-size", "likely", l.max_file_bytes, "a write failed with EFBIG")
  if (l.max_processes !== null && forkFailure.test(tail)) return mk("processes", "likely", l.max_processes, "fork failed with EAGAIN")
  if (input.tmpBytes !== undefined && noSpace.test(tail)) {
    return mk("tmp-size", "likely", input.tmpBytes, "a write failed with ENOSPC (the sandbox's /tmp is full, or the disk)")
  }
  if (l.memory_bytes !== null) {
    if (outOfMemory.test(tail)) return mk("memory", "likely", l.memory_bytes, "an allocation failed (ENOMEM)")
    if (s.signal === "SIGSEGV" || s.signal === "SIGABRT" || s.signal === "SIGBUS" || s.signal === "SIGKILL") {
      return mk("memory", "likely", l.memory_bytes, `killed by ${s.signal} under an address-space limit`)
    }
  }
  return null
}
