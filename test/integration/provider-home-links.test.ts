// The daemon never writes through a link an agent planted in its sandbox home: a codex agent that
// replaces ~/.codex/substrat-model-catalog.json (or ~/.codex itself) with a link to a host file
// (directory) does not get the daemon — root in CI — to overwrite it at its next turn.
import { Effect, Either } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { noLimits } from "../../src/domain/workspace.js"
import type { AgentSandbox } from "../../src/provider/cli/AgentSandbox.js"
import { planCodexTurn } from "../../src/testing/codexPlan.js"

const dirs: Array<string> = []
afterEach(() => {
  for (const d of dirs.splice(0)) Fs.rmSync(d, { recursive: true, force: true })
})

const setup = () => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "substrat-homelinks-"))
  dirs.push(dir)
  const agentDir = Path.join(dir, "agent")
  const homeDir = Path.join(agentDir, "home")
  const hostDir = Path.join(dir, "host")
  Fs.mkdirSync(homeDir, { recursive: true })
  Fs.mkdirSync(hostDir)
  const hostFile = Path.join(hostDir, "precious.conf")
  Fs.writeFileSync(hostFile, "host bytes\n")
  const agent: AgentSandbox = {
    workspace: { root_path: Path.join(agentDir, "workspace"), network_access: false, symlinks: [], limits: noLimits },
    agentDir,
    homeDir,
    socketPath: Path.join(agentDir, "agent.sock"),
    mcpConfigPath: Path.join(agentDir, "mcp.json")
  }
  return { dir, agent, homeDir, hostDir, hostFile }
}

const plan = (agent: AgentSandbox) => planCodexTurn(agent)

describe("codex: links planted in the agent's home", () => {
  it("a link at ~/.codex/substrat-model-catalog.json is replaced, the host file it pointed at keeps its bytes", async () => {
    const s = setup()
    Fs.mkdirSync(Path.join(s.homeDir, ".codex"))
    const planted = Path.join(s.homeDir, ".codex", "substrat-model-catalog.json")
    Fs.symlinkSync(s.hostFile, planted)
    const r = await Effect.runPromise(Effect.either(plan(s.agent)))
    expect(Either.isRight(r), Either.isLeft(r) ? r.left.message : "").toBe(true)
    expect(Fs.readFileSync(s.hostFile, "utf8")).toBe("host bytes\n")
    // The catalog was written (this codex has one) as a regular file in the home.
    expect(Fs.lstatSync(planted).isSymbolicLink()).toBe(false)
    expect(Fs.readFileSync(planted, "utf8")).toContain("\"models\"")
  })

  it("~/.codex itself a link to a host directory: the turn is refused, nothing written there", async () => {
    const s = setup()
    Fs.symlinkSync(s.hostDir, Path.join(s.homeDir, ".codex"))
    const r = await Effect.runPromise(Effect.either(plan(s.agent)))
    expect(Either.isLeft(r) && r.left.message).toMatch(/CODEX_HOME: .*symbolic link/)
    expect(Fs.readdirSync(s.hostDir)).toEqual(["precious.conf"])
    expect(Fs.readFileSync(s.hostFile, "utf8")).toBe("host bytes\n")
  })
})
