// Attacks on the sandbox surface, replayed by `npm run chaos -- --only security`: what a sandboxed
// agent tries against the host (kernel settings as a root daemon's sandbox; links planted in its
// home and in a swarm's code tree for the daemon to write or read through). Each runs the code
// path the daemon runs, in a temporary directory, and says whether the host changed.
import { NodeContext, NodePath } from "@effect/platform-node"
import { Effect, Either, Layer, ManagedRuntime } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { noLimits } from "../../src/domain/workspace.js"
import { Sandbox } from "../../src/sandbox/Sandbox.js"
import { layerBwrap } from "../../src/sandbox/SandboxBwrap.js"
import { Discovery } from "../../src/swarm/Discovery.js"
import { planCodexTurn } from "../../src/testing/codexPlan.js"
import type { Attack, AttackResult } from "./attack.js"

const scratch = async <A>(f: (dir: string) => Promise<A>): Promise<A> => {
  const dir = Fs.realpathSync(Fs.mkdtempSync(Path.join(Os.tmpdir(), "substrat-chaos-sandbox-")))
  try {
    return await f(dir)
  } finally {
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}

const RATELIMIT = "/proc/sys/kernel/printk_ratelimit"
const CORE_PATTERN = "/proc/sys/kernel/core_pattern"

const procSys: Attack = {
  name: "22.2 a sandbox writes the host's /proc/sys (daemon as root)",
  rootOnly: true,
  run: () =>
    scratch(async (dir) => {
      const ratelimit = Fs.readFileSync(RATELIMIT, "utf8").trim()
      const core = Fs.readFileSync(CORE_PATTERN, "utf8").trim()
      const script = [
        `(echo ${Number(ratelimit) + 1} > ${RATELIMIT}) 2>/dev/null && echo WROTE-RATELIMIT`,
        `(printf '%s\\n' '${core.replace(/'/g, "'\\''")}' > ${CORE_PATTERN}) 2>/dev/null && echo WROTE-CORE-PATTERN`,
        "cat /proc/self/uid_map; grep CapEff /proc/self/status"
      ].join("; ")
      const rt = ManagedRuntime.make(layerBwrap().pipe(Layer.provide(NodeContext.layer)))
      let out = ""
      try {
        const r = await rt.runPromise(Effect.flatMap(Sandbox, (s) =>
          s.run({ workspace: { root_path: dir, network_access: false, symlinks: [], limits: noLimits }, command: ["sh", "-c", script] })))
        out = r.stdout
      } finally {
        await rt.dispose()
      }
      const after = Fs.readFileSync(RATELIMIT, "utf8").trim()
      if (after !== ratelimit) Fs.writeFileSync(RATELIMIT, ratelimit)
      const lines = out.split("\n").map((l) => l.trim().replace(/\s+/g, " "))
      const hostRoot = lines.filter((l) => /^\d+ \d+ \d+$/.test(l)).some((l) => {
        const [, outside, count] = l.split(" ").map(Number) as [number, number, number]
        return outside <= 0 && 0 < outside + count
      })
      const capEff = lines.find((l) => l.startsWith("CapEff:")) ?? "CapEff: ?"
      const wrote = lines.filter((l) => l.startsWith("WROTE-"))
      const result: AttackResult = {
        breached: after !== ratelimit || wrote.length > 0 || hostRoot || capEff !== "CapEff: 0000000000000000",
        detail: `writes that landed: ${wrote.length === 0 ? "none" : wrote.join(", ")}; printk_ratelimit ${ratelimit} → ${after}; ` +
          `uid_map maps host root: ${hostRoot}; ${capEff}`
      }
      return result
    })
}

const codexCatalogLink: Attack = {
  name: "22.3 a link planted at ~/.codex/substrat-model-catalog.json makes the daemon overwrite a host file",
  run: () =>
    scratch(async (dir) => {
      const home = Path.join(dir, "agent", "home")
      Fs.mkdirSync(Path.join(home, ".codex"), { recursive: true })
      const hostFile = Path.join(dir, "host-precious.conf")
      Fs.writeFileSync(hostFile, "host bytes\n")
      Fs.symlinkSync(hostFile, Path.join(home, ".codex", "substrat-model-catalog.json"))
      const r = await Effect.runPromise(Effect.either(planCodexTurn({
        workspace: { root_path: Path.join(dir, "agent", "workspace"), network_access: false, symlinks: [], limits: noLimits },
        agentDir: Path.join(dir, "agent"),
        homeDir: home,
        socketPath: Path.join(dir, "agent", "agent.sock"),
        mcpConfigPath: Path.join(dir, "agent", "mcp.json")
      })))
      if (Either.isLeft(r)) throw new Error(`the codex turn could not be planned: ${r.left.message}`)
      const bytes = Fs.readFileSync(hostFile, "utf8")
      return { breached: bytes !== "host bytes\n", detail: `host file after the turn's set-up: ${JSON.stringify(bytes.slice(0, 40))}` }
    })
}

const swarmLink: Attack = {
  name: "22.4 a link to a host directory in a swarm's code tree gets walked and parsed",
  run: () =>
    scratch(async (dir) => {
      const hostDir = Path.join(dir, "host")
      Fs.mkdirSync(hostDir)
      const hostFile = Path.join(hostDir, "secret.py")
      Fs.writeFileSync(hostFile, "def host_secret():\n    return 42\n")
      Fs.utimesSync(hostFile, new Date(0), new Date())
      const root = Path.join(dir, "code")
      Fs.mkdirSync(root)
      Fs.writeFileSync(Path.join(root, "main.py"), "def main():\n    pass\n")
      Fs.symlinkSync(hostDir, Path.join(root, "x"))
      Fs.symlinkSync(hostFile, Path.join(root, "linked.py"))
      const nodes = await Effect.runPromise(Effect.scoped(Effect.flatMap(Discovery, (d) => d.discover(root))).pipe(
        Effect.provide(Discovery.Default.pipe(Layer.provide(Layer.mergeAll(NodeContext.layer, NodePath.layer))))
      ))
      const leaked = nodes.filter((n) => n.path.startsWith("x") || n.path === "linked.py" || n.name.includes("host_secret"))
      const read = Fs.statSync(hostFile).atimeMs !== 0
      return { breached: leaked.length > 0 || read, detail: `nodes from behind the links: ${leaked.length}; host file read: ${read}` }
    })
}

export const attacks: ReadonlyArray<Attack> = [procSys, codexCatalogLink, swarmLink]
