// cgroup support. When /sys/fs/cgroup is a writable cgroup2 mount (UNTESTED here: the dev/CI
// machines mount cgroup v1), each sandboxed command gets a sub-group `<base>/<run-id>` with
// memory.max / pids.max. Otherwise, when a cgroup v1 `pids` hierarchy is writable (a root daemon
// on a v1/hybrid host, as here), the command gets a pids sub-group there with pids.max: the one
// process limit the kernel enforces for uid 0 too (RLIMIT_NPROC exempts root). Either way the
// command moves itself in before exec (a two-line sh wrapper), and memory.events / pids.events
// make the limit attribution certain. rlimits stay on in any case.
import type { FileSystem } from "@effect/platform/FileSystem"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { rmdirSync } from "node:fs"
import type { ResourceLimits } from "../domain/workspace.js"
import type { CgroupEvents } from "./Limits.js"

export type CgroupMode = "v2-writable" | "v2-readonly" | "v1-or-hybrid" | "none"

export interface CgroupInfo {
  readonly mode: CgroupMode
  readonly mountPoint: string
  readonly detail: string
  /** Where a writable cgroup v1 `pids` hierarchy is mounted (only when `mode` is not v2-writable). */
  readonly pidsV1?: string
}

/** Look at /proc/self/mountinfo: what is mounted at /sys/fs/cgroup, and can we write there? */
export const detectCgroup = (fs: FileSystem, mountPoint = "/sys/fs/cgroup") =>
  Effect.gen(function*() {
    const info = yield* fs.readFileString("/proc/self/mountinfo").pipe(Effect.orElseSucceed(() => ""))
    const lines = info.split("\n").filter((l) => l.length > 0)
    const at = lines.find((l) => l.split(" ")[4] === mountPoint)
    const fstype = at?.split(" - ")[1]?.split(" ")[0]
    if (fstype === undefined) return { mode: "none", mountPoint, detail: `nothing mounted at ${mountPoint}` } satisfies CgroupInfo
    if (fstype !== "cgroup2") {
      const unified = lines.find((l) => l.split(" - ")[1]?.startsWith("cgroup2 "))?.split(" ")[4]
      // A v1 hierarchy with the pids controller: "… <mount point> … - cgroup cgroup rw,pids".
      const pidsAt = lines.find((l) => {
        const [fst, , opts] = (l.split(" - ")[1] ?? "").split(" ")
        return fst === "cgroup" && (opts ?? "").split(",").includes("pids")
      })?.split(" ")[4]
      const pidsWritable = pidsAt === undefined
        ? false
        : yield* fs.access(pidsAt, { writable: true }).pipe(Effect.as(true), Effect.orElseSucceed(() => false))
      const base = `${mountPoint} is ${fstype}${unified ? ` (cgroup2 only at ${unified})` : ""}`
      return pidsWritable && pidsAt !== undefined
        ? {
          mode: "v1-or-hybrid",
          mountPoint,
          pidsV1: pidsAt,
          detail: `${base}; processes limited by the v1 pids controller at ${pidsAt}, the rest by rlimits`
        } satisfies CgroupInfo
        : { mode: "v1-or-hybrid", mountPoint, detail: `${base}; using rlimits only` } satisfies CgroupInfo
    }
    const writable = yield* fs.access(mountPoint, { writable: true }).pipe(Effect.as(true), Effect.orElseSucceed(() => false))
    return writable
      ? { mode: "v2-writable", mountPoint, detail: "cgroup2, writable: per-command sub-groups enabled" } satisfies CgroupInfo
      : { mode: "v2-readonly", mountPoint, detail: "cgroup2 but not writable by this user; using rlimits only" } satisfies CgroupInfo
  })

export interface CgroupRun {
  readonly dir: string
  /** argv prefix that moves the process into `dir` and execs the rest. */
  readonly prefix: ReadonlyArray<string>
  readonly events: Effect.Effect<CgroupEvents>
  readonly remove: Effect.Effect<void>
}

const readCounter = (fs: FileSystem, file: string, key: string) =>
  fs.readFileString(file).pipe(
    Effect.map((t) => {
      const line = t.split("\n").find((l) => l.startsWith(`${key} `))
      return line === undefined ? 0 : Number(line.split(" ")[1] ?? 0)
    }),
    Effect.orElseSucceed(() => 0)
  )

/** rmdir a cgroup directory (its control files cannot be unlinked; `rm -r` fails on it). */
const rmdirQuietly = (dir: string): Effect.Effect<void> =>
  Effect.try(() => rmdirSync(dir)).pipe(Effect.ignore)

/** Tasks of the sandbox machinery itself in the group: bwrap, its pid-namespace init, the wrapper. */
export const PIDS_SLACK = 4

/**
 * Create `<base>/<id>` with memory.max and pids.max (v2), or only pids.max (`v1-pids`: `base` lies
 * in a v1 pids hierarchy). Fails (caller falls back to rlimits only) on any I/O error.
 */
export const createCgroupRun = (fs: FileSystem, base: string, limits: ResourceLimits, version: "v2" | "v1-pids" = "v2") =>
  Effect.gen(function*() {
    const dir = `${base}/run-${randomUUID()}`
    yield* fs.makeDirectory(base, { recursive: true })
    if (version === "v1-pids") {
      yield* fs.makeDirectory(dir)
      if (limits.max_processes !== null) {
        yield* fs.writeFileString(`${dir}/pids.max`, String(Math.floor(limits.max_processes) + PIDS_SLACK)).pipe(
          Effect.tapError(() => rmdirQuietly(dir))
        )
      }
      const run: CgroupRun = {
        dir,
        prefix: ["/bin/sh", "-c", "echo $$ > \"$0/cgroup.procs\" && exec \"$@\"", dir],
        events: Effect.map(readCounter(fs, `${dir}/pids.events`, "max"), (pidsMax) => ({ oomKills: 0, pidsMax })),
        remove: rmdirQuietly(dir)
      }
      return run
    }
    // Enable the controllers for our children (best effort; may already be on).
    yield* fs.writeFileString(`${base}/cgroup.subtree_control`, "+memory +pids").pipe(Effect.ignore)
    yield* fs.makeDirectory(dir)
    if (limits.memory_bytes !== null) {
      yield* fs.writeFileString(`${dir}/memory.max`, String(Math.floor(limits.memory_bytes)))
      yield* fs.writeFileString(`${dir}/memory.swap.max`, "0").pipe(Effect.ignore)
    }
    if (limits.max_processes !== null) yield* fs.writeFileString(`${dir}/pids.max`, String(Math.floor(limits.max_processes) + PIDS_SLACK))
    const run: CgroupRun = {
      dir,
      prefix: ["/bin/sh", "-c", "echo $$ > \"$0/cgroup.procs\" && exec \"$@\"", dir],
      events: Effect.all({
        oomKills: readCounter(fs, `${dir}/memory.events`, "oom_kill"),
        pidsMax: readCounter(fs, `${dir}/pids.events`, "max")
      }),
      remove: rmdirQuietly(dir)
    }
    return run
  })
