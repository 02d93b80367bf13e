// Attacks on what cluster mode carries to the runner a tree moves to (src/daemon/ClusterCarry.ts):
// an agent's provider state is agent-written (its sandbox home), packed after each turn and
// unpacked on another runner. Replayed by `npm run chaos -- --only security` and by
// test/unit/cluster-carry.test.ts, against the packing and unpacking the daemon runs.
import { Effect, Either } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import { join } from "node:path"
import { maxStateBytes, packState, unpackState } from "../../src/daemon/ClusterCarry.js"
import { makeTmpDir, removeDir } from "../../test/support/tmp.js"
import type { Attack, AttackResult } from "./attack.js"

const stateOf = (files: ReadonlyArray<{ readonly path: string; readonly data: string }>) =>
  JSON.stringify({ v: 1, files: files.map((f) => ({ path: f.path, mode: 0o644, data: Buffer.from(f.data).toString("base64") })) })

/** A fresh agent directory and an "outside" directory beside it; `f` attacks, the result says what got through. */
const inDirs = (f: (agentDir: string, outside: string) => Promise<AttackResult>): Promise<AttackResult> => {
  const dir = makeTmpDir("substrat-sec-carry-")
  const agentDir = join(dir, "agents", "s")
  const outside = join(dir, "outside")
  fs.mkdirSync(agentDir, { recursive: true })
  fs.mkdirSync(outside)
  return f(agentDir, outside).finally(() => removeDir(dir))
}

const unpack = (agentDir: string, state: string) => Effect.runPromise(Effect.either(unpackState(agentDir, state)))

/** A restored state naming `path` (after links planted by `plant`): breached if anything lands in `outside`, or the state was accepted. */
const escape = (name: string, path: (outside: string) => string, plant?: (agentDir: string, outside: string) => void): Attack => ({
  name,
  run: () =>
    inDirs(async (agentDir, outside) => {
      plant?.(agentDir, outside)
      const r = await unpack(agentDir, stateOf([{ path: path(outside), data: "pwned" }]))
      const landed = fs.readdirSync(outside).filter((n) => n !== "target")
      const target = fs.existsSync(join(outside, "target")) ? fs.readFileSync(join(outside, "target"), "utf8") : ""
      return {
        breached: landed.length > 0 || target === "pwned",
        detail: `${Either.isLeft(r) ? `refused (${r.left.reason})` : "accepted"}; outside holds ${landed.length === 0 ? "nothing new" : landed.join(", ")}${target === "pwned" ? ", its target overwritten" : ""}`
      }
    })
})

export const attacks: ReadonlyArray<Attack> = [
  escape("cluster: a provider state path with ..", () => "home/../../../outside/dotdot"),
  escape("cluster: a provider state with an absolute path", (outside) => join(outside, "absolute")),
  escape("cluster: a provider state path outside home/", () => "../outside/sibling"),
  escape("cluster: home/ itself a link to outside", () => "home/through-home", (agentDir, outside) => fs.symlinkSync(outside, join(agentDir, "home"))),
  escape("cluster: a directory in home/ a link to outside", () => "home/.claude/through-dir", (agentDir, outside) => {
    fs.mkdirSync(join(agentDir, "home"))
    fs.symlinkSync(outside, join(agentDir, "home", ".claude"))
  }),
  escape("cluster: the restored file a link to a file outside", () => "home/target", (agentDir, outside) => {
    fs.mkdirSync(join(agentDir, "home"))
    fs.writeFileSync(join(outside, "target"), "original")
    fs.symlinkSync(join(outside, "target"), join(agentDir, "home", "target"))
  }),
  {
    name: "cluster: a provider state over the size limit",
    run: () =>
      inDirs(async (agentDir) => {
        const big = "x".repeat(maxStateBytes / 2 + 1)
        const r = await unpack(agentDir, stateOf([{ path: "home/a", data: big }, { path: "home/b", data: big }]))
        const written = fs.existsSync(join(agentDir, "home", "a"))
        return { breached: Either.isRight(r) || written, detail: `${Either.isLeft(r) ? `refused (${r.left.reason})` : "accepted"}; ${written ? "a file was written" : "nothing written"}` }
      })
  },
  {
    name: "cluster: packing an agent home with a link to a host file, a FIFO and too many bytes",
    run: () =>
      inDirs(async (agentDir, outside) => {
        fs.mkdirSync(join(agentDir, "home", "d"), { recursive: true })
        fs.writeFileSync(join(outside, "secret"), "host secret")
        fs.symlinkSync(join(outside, "secret"), join(agentDir, "home", "leak"))
        fs.symlinkSync(outside, join(agentDir, "home", "d", "dirlink"))
        execFileSync("mkfifo", [join(agentDir, "home", "fifo")])
        fs.writeFileSync(join(agentDir, "home", "own"), "the agent's own")
        const packed = await Effect.runPromise(Effect.either(packState(agentDir)))
        const text = Either.isRight(packed) && packed.right._tag === "Some" ? packed.right.value : ""
        const leaked = text.includes(Buffer.from("host secret").toString("base64")) || text.includes("dirlink") || text.includes("fifo")
        fs.writeFileSync(join(agentDir, "home", "big"), Buffer.alloc(maxStateBytes + 1))
        const over = await Effect.runPromise(Effect.either(packState(agentDir)))
        return {
          breached: leaked || !text.includes("home/own") || Either.isRight(over),
          detail: `${leaked ? "the link's target or the FIFO was packed" : "links and the FIFO left out"}; over the limit: ${Either.isLeft(over) ? `refused (${over.left.reason})` : "PACKED"}`
        }
      })
  }
]
