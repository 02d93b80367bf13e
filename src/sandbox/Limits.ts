// Resource limits as data → a `prlimit` prefix for the sandboxed command, and the reverse:
// attributing an exit status to the limit that caused it. Both pure.
//
// rlimits are per process (inherited by children), except RLIMIT_NPROC which counts every process
// of the real uid — per user namespace level on Linux ≥ 5.14 (ucounts), so inside a bwrap user
// namespace it is effectively per sandbox. Root (kuid 0) and CAP_SYS_RESOURCE/CAP_SYS_ADMIN holders
// in the initial namespace are exempt from it: see docs/sandbox.md "Identity".
import { constants } from "node:os"
import type { ResourceLimits } from "../domain/workspace.js"
import { type LimitName, LimitExceededError } from "./errors.js"

/** How a process ended: an exit code, or the signal that killed it. */
export interface ExitStatus {
  readonly code: number | null
  readonly signal: string | null
}

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
}

const forkFailure = /cannot fork|can't fork|fork: (retry: )?resource temporarily unavailable|fork failed|EAGAIN|Resource temporarily unavailable/i
const outOfMemory = /out of memory|cannot allocate memory|MemoryError|ENOMEM|bad_alloc|allocation failed|memory exhausted/i
const fileTooLarge = /file too large|EFBIG/i

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
  if (l.memory_bytes !== null) {
    if (outOfMemory.test(tail)) return mk("memory", "likely", l.memory_bytes, "an allocation failed (ENOMEM)")
    if (s.signal === "SIGSEGV" || s.signal === "SIGABRT" || s.signal === "SIGBUS" || s.signal === "SIGKILL") {
      return mk("memory", "likely", l.memory_bytes, `killed by ${s.signal} under an address-space limit`)
    }
  }
  return null
}
