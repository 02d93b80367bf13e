// Shared setup for the sandbox/workspace integration suites: identities to run under (root and an
// unprivileged uid when we are root), a store+history+sandbox layer over a temp $SUBSTRAT_HOME.
import { NodeContext } from "@effect/platform-node"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as fs from "node:fs"
import { SubstratPaths } from "../../src/config/Paths.js"
import { Durable } from "../../src/storage/Durable.js"
import { Sandbox } from "../../src/sandbox/Sandbox.js"
import { type BwrapConfig, layerBwrap, type SandboxIdentity } from "../../src/sandbox/SandboxBwrap.js"
import { WorkspaceHistory } from "../../src/sandbox/WorkspaceHistory.js"
import { WorkspaceStore } from "../../src/sandbox/WorkspaceStore.js"
import { WorkspaceUsage } from "../../src/sandbox/WorkspaceUsage.js"

export const isRoot = typeof process.getuid === "function" && process.getuid() === 0
export const NOBODY = 65534

export interface IdentityCase {
  readonly label: string
  readonly identity: SandboxIdentity
  /** The uid files created inside the sandbox end up owned by (root dirs are chowned to it). */
  readonly owner?: { readonly uid: number; readonly gid: number }
  /** bwrap itself runs as an unprivileged uid: host dirs must be traversable by it. */
  readonly needsTraversal: boolean
  /** RLIMIT_NPROC is enforced for this identity. */
  readonly nprocEnforced: boolean
}

/**
 * Is a pids cgroup writable here (cgroup2 at /sys/fs/cgroup, or a v1 hierarchy with the pids
 * controller)? Then the bwrap layer bounds processes for uid 0 too (src/sandbox/Cgroup.ts).
 */
export const pidsCgroupWritable = (): boolean => {
  const lines = fs.readFileSync("/proc/self/mountinfo", "utf8").split("\n")
  for (const l of lines) {
    const mount = l.split(" ")[4]
    const [fstype, , opts] = (l.split(" - ")[1] ?? "").split(" ")
    const pids = (fstype === "cgroup2" && mount === "/sys/fs/cgroup") || (fstype === "cgroup" && (opts ?? "").split(",").includes("pids"))
    if (!pids || mount === undefined) continue
    try {
      fs.accessSync(mount, fs.constants.W_OK)
      return true
    } catch {
      return false
    }
  }
  return false
}

/** As root: root itself, uid 65534 running bwrap (the unprivileged-daemon case), and root bwrap dropping to 65534 inside. */
export const identities: ReadonlyArray<IdentityCase> = isRoot
  ? [
    { label: "root (as-is)", identity: { mode: "as-is" }, needsTraversal: false, nprocEnforced: pidsCgroupWritable() },
    {
      label: "uid 65534 runs bwrap (outer setpriv)",
      identity: { mode: "outer", uid: NOBODY, gid: NOBODY },
      owner: { uid: NOBODY, gid: NOBODY },
      needsTraversal: true,
      nprocEnforced: true
    },
    {
      label: "root bwrap, uid 65534 inside (inner setpriv)",
      identity: { mode: "inner", uid: NOBODY, gid: NOBODY },
      owner: { uid: NOBODY, gid: NOBODY },
      needsTraversal: false,
      nprocEnforced: true
    }
  ]
  : [{ label: `uid ${process.getuid?.() ?? "?"} (as-is, unprivileged)`, identity: { mode: "as-is" }, needsTraversal: false, nprocEnforced: true }]

export const makeRuntime = (
  home: string,
  identity: SandboxIdentity,
  usage: Layer.Layer<WorkspaceUsage> = WorkspaceUsage.layerNone,
  bwrap: Omit<BwrapConfig, "identity"> = {}
) => {
  const base = Layer.mergeAll(Durable.layer, SubstratPaths.layer(home), NodeContext.layer, usage)
  const store = WorkspaceStore.Default.pipe(Layer.provide(base))
  const history = WorkspaceHistory.Default.pipe(Layer.provide(store), Layer.provide(base))
  const sandbox = layerBwrap({ identity, killGraceMs: 1000, ...bwrap }).pipe(Layer.provide(NodeContext.layer))
  return ManagedRuntime.make(Layer.mergeAll(store, history, sandbox, base))
}

export type Runtime = ReturnType<typeof makeRuntime>
export type Services = WorkspaceStore | WorkspaceHistory | Sandbox | WorkspaceUsage

/** Make every directory from `dir` up to (not including) `/` traversable (o+x). For the outer identity only. */
export const openTraversal = (dir: string, stop = "/") => {
  let d = dir
  while (d !== stop && d !== "/" && d.length > 1) {
    const st = fs.statSync(d)
    fs.chmodSync(d, (st.mode & 0o7777) | 0o011)
    d = d.slice(0, d.lastIndexOf("/")) || "/"
  }
}

/** Host processes whose cmdline contains `marker` (pid list). */
export const findProcs = (marker: string): Array<number> => {
  const out: Array<number> = []
  for (const e of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue
    try {
      const cmd = fs.readFileSync(`/proc/${e}/cmdline`, "utf8").replace(/\0/g, " ")
      if (cmd.includes(marker)) out.push(Number(e))
    } catch {
      // raced with exit
    }
  }
  return out
}

/** Host processes whose argv is exactly `argv`. */
export const findExact = (argv: ReadonlyArray<string>): Array<number> => {
  const want = argv.join("\0") + "\0"
  const out: Array<number> = []
  for (const e of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue
    try {
      if (fs.readFileSync(`/proc/${e}/cmdline`, "utf8") === want) out.push(Number(e))
    } catch {
      // raced with exit
    }
  }
  return out
}

export const alive = (pid: number, marker: string): boolean => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").includes(marker)
  } catch {
    return false
  }
}

export const waitFor = async (cond: () => boolean, ms = 15_000): Promise<boolean> => {
  const until = Date.now() + ms
  while (Date.now() < until) {
    if (cond()) return true
    await new Promise((r) => setTimeout(r, 50))
  }
  return cond()
}

export const sh = (script: string): ReadonlyArray<string> => ["/bin/sh", "-c", script]

export { Effect }
