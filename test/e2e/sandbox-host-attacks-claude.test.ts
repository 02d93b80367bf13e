// The real Claude Code, sandboxed by the daemon (as root in CI) against the scripted Anthropic
// endpoint, attacks the host from its Bash tool: it writes kernel settings under /proc/sys and
// plants links to a host directory and a host file in its workspace and its home. After its
// turn (the daemon records the turn's diff through git) and a forced workspace delete, the host
// is untouched: the kernel values are what they were, the host files keep their bytes and the
// host directory its entries.
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { describe, expect, it } from "vitest"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { type Agent, cli, cliJson, startDaemon } from "../integration/daemon.support.js"
import { makeTmpDir } from "../support/tmp.js"
import { claudeBin, daemonTestScope } from "./support.js"

const { Reply } = ScriptedLlm
const { ds, homes } = daemonTestScope(["SUBSTRAT_ANTHROPIC_UPSTREAM", "ANTHROPIC_API_KEY", "SUBSTRAT_CLAUDE_BIN"])

const RATELIMIT = "/proc/sys/kernel/printk_ratelimit"
const CORE_PATTERN = "/proc/sys/kernel/core_pattern"
const isRoot = process.getuid?.() === 0

describe.runIf(isRoot)("a sandboxed claude attacking the host (daemon as root)", () => {
  it("/proc/sys writes and planted links change nothing on the host", () => {
    const ratelimit = Fs.readFileSync(RATELIMIT, "utf8").trim()
    const corePattern = Fs.readFileSync(CORE_PATTERN, "utf8").trim()
    const base = makeTmpDir("sha-")
    homes.push(base)
    const hostDir = Path.join(base, "host")
    Fs.mkdirSync(hostDir)
    const hostFile = Path.join(hostDir, "precious.conf")
    Fs.writeFileSync(hostFile, "host bytes\n")
    const other = String(Number(ratelimit) + 1)
    const attack = [
      `(echo ${other} > ${RATELIMIT}) 2>/dev/null && echo WRO""TE-RATELIMIT`,
      `(printf '%s\\n' '${corePattern.replace(/'/g, "'\\''")}' > ${CORE_PATTERN}) 2>/dev/null && echo WRO""TE-CORE-PATTERN`,
      "grep CapEff /proc/self/status; cat /proc/self/uid_map",
      `ln -s ${hostDir} /workspace/escape; ln -s ${hostFile} /workspace/precious.conf`,
      `mkdir -p /home/agent/.codex; ln -s ${hostFile} /home/agent/.codex/substrat-model-catalog.json; ln -s ${hostDir} /home/agent/escape`,
      "echo plan\"\"ted"
    ].join("; ") // the markers are spelt apart in the command, so only the tool's output holds them
    return Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const llm = yield* ScriptedLlm.make({
        listen: { port: 0 },
        script: [
          { match: { system: "AGENT=x", lastUser: "attack" }, reply: Reply.toolCall("Bash", { command: attack, description: "attack" }), label: "attack" },
          { match: { system: "AGENT=x" }, reply: Reply.text("done"), label: "done" }
        ]
      })
      yield* Effect.promise(async () => {
        const home = makeTmpDir("sha-home-")
        homes.push(home)
        process.env["SUBSTRAT_ANTHROPIC_UPSTREAM"] = llm.baseUrl
        process.env["ANTHROPIC_API_KEY"] = "sk-test-daemon-only"
        process.env["SUBSTRAT_CLAUDE_BIN"] = claudeBin
        ds.track(await startDaemon(home))
        const ws = await cliJson<{ id: string; root_path: string }>(home, ["workspace", "create", "--name", "attacked"])
        const a = await cliJson<Agent>(home, ["agent", "create", "--provider", "claude", "--name", "x", "--workspace", ws.id, "--instructions", "AGENT=x"])
        try {
          const first = await cli(home, ["agent", "send", "--wait", "x", "attack"])
          expect(first.code, first.stderr).toBe(0)
          // The Bash tool ran (the links are there) and its writes to /proc/sys were refused.
          const attackResult = (await Effect.runPromise(llm.modelRequests)).find((r) => r.label === "done")
          expect(JSON.stringify(attackResult?.body ?? "")).toContain("planted")
          expect(JSON.stringify(attackResult?.body ?? "")).not.toContain("WROTE-")
          expect(Fs.lstatSync(Path.join(ws.root_path, "escape")).isSymbolicLink()).toBe(true)
          const agentHome = Path.join(home, "agents", a.session_id, "home")
          expect(Fs.lstatSync(Path.join(agentHome, "escape")).isSymbolicLink()).toBe(true)
          // The workspace goes, with its links: not what they point at.
          await cli(home, ["agent", "terminate", "x"])
          const del = await cliJson<{ deleted: ReadonlyArray<string> | boolean }>(home, ["workspace", "delete", ws.id, "--force"])
          expect(del.deleted).toBeTruthy()
          expect(Fs.existsSync(ws.root_path)).toBe(false)
        } finally {
          const after = Fs.readFileSync(RATELIMIT, "utf8").trim()
          if (after !== ratelimit) Fs.writeFileSync(RATELIMIT, ratelimit)
          expect(after).toBe(ratelimit)
          expect(Fs.readFileSync(CORE_PATTERN, "utf8").trim()).toBe(corePattern)
          expect(Fs.readFileSync(hostFile, "utf8")).toBe("host bytes\n")
          expect(Fs.readdirSync(hostDir)).toEqual(["precious.conf"])
        }
      })
    })))
  }, 300_000)
})
