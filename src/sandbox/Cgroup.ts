// cgroup v2 support (best effort, UNTESTED here: the dev/CI machines mount cgroup v1 at
// /sys/fs/cgroup). When /sys/fs/cgroup is a writable cgroup2 mount, each sandboxed command gets a
// sub-group `<base>/<run-id>` with memory.max / pids.max; the command moves itself in before exec
// (a two-line sh wrapper), and memory.events / pids.events make the limit attribution certain.
// rlimits stay on in any case — they are the tested default.
import type { FileSystem } from "@effect/platform/FileSystem"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import type { ResourceLimits } from "../domain/workspace.js"
import type { CgroupEvents } from "./Limits.js"

export type CgroupMode = "v2-writable" | "v2-readonly" | "v1-or-hybrid" | "none"

export interface CgroupInfo {
  readonly mode: CgroupMode
  readonly mountPoint: string
  readonly detail: string
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
      return {
        mode: "v1-or-hybrid",
        mountPoint,
        detail: `${mountPoint} is ${fstype}${unified ? ` (cgroup2 only at ${unified})` : ""}; using rlimits only`
      } satisfies CgroupInfo
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

/** Create `<base>/<id>` with memory.max and pids.max. Fails (caller falls back to rlimits only) on any I/O error. */
export const createCgroupRun = (fs: FileSystem, base: string, limits: ResourceLimits) =>
  Effect.gen(function*() {
    const dir = `${base}/run-${randomUUID()}`
    yield* fs.makeDirectory(base, { recursive: true })
    // Enable the controllers for our children (best effort; may already be on).
    yield* fs.writeFileString(`${base}/cgroup.subtree_control`, "+memory +pids").pipe(Effect.ignore)
    yield* fs.makeDirectory(dir)
    if (limits.memory_bytes !== null) {
      yield* fs.writeFileString(`${dir}/memory.max`, String(Math.floor(limits.memory_bytes)))
      yield* fs.writeFileString(`${dir}/memory.swap.max`, "0").pipe(Effect.ignore)
    }
    if (limits.max_processes !== null) yield* fs.writeFileString(`${dir}/pids.max`, String(Math.floor(limits.max_processes)))
    const run: CgroupRun = {
      dir,
      prefix: ["/bin/sh", "-c", "echo $$ > \"$0/cgroup.procs\" && exec \"$@\"", dir],
      events: Effect.all({
        oomKills: readCounter(fs, `${dir}/memory.events`, "oom_kill"),
        pidsMax: readCounter(fs, `${dir}/pids.events`, "max")
      }),
      remove: fs.remove(dir).pipe(Effect.ignore)
    }
    return run
  })
