// Attacks on the spawner's channel (src/sandbox/Spawner.ts), replayed by `npm run chaos -- --only
// security` and test/integration/spawner.test.ts: the spawner starts any program the daemon asks
// for, so a command that could write one request on its channel would run a program outside its
// sandbox. A command (unsandboxed: the weakest case, same uid as the daemon; and inside bwrap)
// writes a forged spawn request into every socket it holds beyond its stdio; the channel must
// not be among them, and must have no name on the filesystem or in the abstract namespace that a
// process of another user (or an agent) could connect to.
import { NodeContext } from "@effect/platform-node"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { noLimits } from "../../src/domain/workspace.js"
import { Sandbox } from "../../src/sandbox/Sandbox.js"
import { layerBwrap } from "../../src/sandbox/SandboxBwrap.js"
import { layerUnsafeNoSandbox } from "../../src/sandbox/SandboxUnsafe.js"
import { spawnerPid } from "../../src/sandbox/Spawner.js"
import type { Attack, AttackResult } from "./attack.js"

/** A shell script that tries every socket fd above 2 with a request to spawn `touch <mark>`. */
const forge = (mark: string) => {
  const request = JSON.stringify({ t: "spawn", id: 1, program: "/bin/sh", args: ["-c", `touch ${mark}`], env: { PATH: "/usr/bin:/bin" }, cwd: null, stdin: false })
  return [
    `for f in /proc/self/fd/*; do n=\${f##*/}; t=$(readlink "$f" 2>/dev/null) || continue`,
    `  case "$n" in 0|1|2) continue;; esac`,
    `  case "$t" in socket:*) ;; *) continue;; esac`,
    `  echo "SOCKET $n $t"`,
    `  (printf '%s\\n' '${request.replace(/'/g, "'\\''")}' >&"$n") 2>/dev/null && echo "WROTE $n"`,
    `done; true`
  ].join("\n")
}

/** Socket inodes a process holds. */
const socketInodes = (pid: number): Set<string> => {
  const inodes = new Set<string>()
  for (const fd of Fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(Fs.readlinkSync(`/proc/${pid}/fd/${fd}`))
      if (m !== null) inodes.add(m[1]!)
    } catch {
      // closed meanwhile
    }
  }
  return inodes
}

/** Of these socket inodes, the names (paths, or @abstract) they are bound to in /proc/net/unix. */
const namesOf = (inodes: Set<string>): ReadonlyArray<string> =>
  Fs.readFileSync("/proc/net/unix", "utf8").split("\n").slice(1)
    .map((l) => l.trim().split(/\s+/))
    .filter((cols) => cols.length >= 8 && inodes.has(cols[6]!))
    .map((cols) => cols[7]!)

const run = (label: string, layer: Layer.Layer<Sandbox>): Attack => ({
  name: `25.1 a command ${label} writes a spawn request on every socket it holds (the spawner's channel)`,
  run: async () => {
    const dir = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "substrat-chaos-spawner-")))
    const mark = Path.join(dir, "SPAWNED-BY-AGENT")
    const rt = ManagedRuntime.make(layer)
    try {
      const r = await rt.runPromise(Effect.flatMap(Sandbox, (s) =>
        s.run({ workspace: { root_path: dir, network_access: false, symlinks: [], limits: noLimits }, command: ["bash", "-c", forge(mark)] })))
      // Give a forged request time to be acted on before looking for its mark.
      await new Promise((resolve) => setTimeout(resolve, 500))
      const spawner = spawnerPid()
      const channel = spawner === undefined ? new Set<string>() : socketInodes(spawner)
      const named = namesOf(channel)
      // Either end of the channel: the spawner's, or one this (the daemon's) process holds.
      for (const i of socketInodes(process.pid)) channel.add(i)
      const lines = r.stdout.split("\n").filter((l) => l.length > 0)
      const held = lines.filter((l) => l.startsWith("SOCKET ")).map((l) => /socket:\[(\d+)\]/.exec(l)?.[1] ?? "")
      const shared = held.filter((i) => channel.has(i))
      const created = Fs.existsSync(mark)
      const result: AttackResult = {
        breached: created || spawner === undefined || named.length > 0 || shared.length > 0,
        detail: `sockets beyond stdio: ${held.length}, written: ${lines.filter((l) => l.startsWith("WROTE ")).length}, ` +
          `shared with the spawner or the daemon: ${shared.length}; forged spawn ran: ${created}; ` +
          `spawner ${spawner ?? "not running"}, its sockets' names: ${named.length === 0 ? "none" : named.join(", ")}`
      }
      return result
    } finally {
      await rt.dispose()
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  }
})

export const attacks: ReadonlyArray<Attack> = [
  run("without a sandbox", layerUnsafeNoSandbox.pipe(Layer.provide(NodeContext.layer))),
  run("inside bwrap", layerBwrap().pipe(Layer.provide(NodeContext.layer)))
]
