// The daemon's open-file limit (RLIMIT_NOFILE), raised to its hard limit at start so that a flood
// of connections or many agents' files cannot run it out (docs/http.md "Limits"). Node has no
// setrlimit. It raises the soft limit to the hard one itself when it starts (its PlatformInit),
// so this module first reads /proc/self/limits; only if the soft limit is still below the hard
// one (an embedder, another runtime) it runs util-linux's `prlimit --pid <own pid>` — through the
// spawner (sandbox/Spawner.ts), like every other child: raising the soft limit of a process of the
// same user up to its hard limit needs no privilege. Nothing else can be done from here: the
// hard limit is the administrator's.
import { Effect } from "effect"
import * as fs from "node:fs"
import { parentEnv } from "../config/Config.js"
import { noLimits } from "../domain/workspace.js"
import { runCollect, spawnScoped } from "../sandbox/spawn.js"

export interface FileLimit {
  readonly soft: number
  readonly hard: number
}

/** "Max open files  1024  20000  files" → numbers ("unlimited" → Infinity); undefined when unreadable. */
export const read = (): FileLimit | undefined => {
  try {
    const line = fs.readFileSync("/proc/self/limits", "utf8").split("\n").find((l) => l.startsWith("Max open files"))
    const m = line === undefined ? null : /Max open files\s+(\S+)\s+(\S+)/.exec(line)
    if (m === null) return undefined
    const n = (s: string) => (s === "unlimited" ? Infinity : Number(s))
    return { soft: n(m[1]!), hard: n(m[2]!) }
  } catch {
    return undefined
  }
}

/** Raise the soft limit to the hard one (a no-op when Node already did); the limit in force after. */
export const raise: Effect.Effect<FileLimit | undefined> = Effect.suspend(() => {
  const before = read()
  if (before === undefined || before.soft >= before.hard) return Effect.succeed(before)
  const hard = before.hard === Infinity ? "unlimited" : String(before.hard)
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(parentEnv())) if (v !== undefined) env[k] = v
  return runCollect(spawnScoped(undefined, {
    argv: ["prlimit", "--pid", String(process.pid), `--nofile=${hard}:${hard}`],
    env,
    limits: { ...noLimits, wall_clock_seconds: 5 },
    graceMs: 500
  })).pipe(
    // no prlimit, or it failed: the soft limit stays; logged by the caller
    Effect.ignore,
    Effect.map(read)
  )
})
