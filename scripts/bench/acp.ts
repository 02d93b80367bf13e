// The ACP path's per-turn overhead, next to a baseline in the same run: one daemon (bwrap
// sandboxes), two agents — `scripted` (answers in the daemon) and `acp:` the in-repo ACP test
// agent (test/fixtures/acp-agent.ts; its own process in the agent's sandbox, kept across turns,
// spoken to over stdio: session/prompt, session/update chunks, the reply) — and interleaved
// `substrat agent send --wait <agent> hi` shots (a real CLI process each). The first turn of each
// (the ACP process start, session/new) is a row of its own; `ratio_acp_vs_scripted` compares the
// medians of the warm turns, `acp_overhead_ms` is their difference.
import { execFileSync } from "node:child_process"
import { chmodSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { bundleAcpAgent } from "../../test/support/acpAgent.js"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "acp"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const launcher = join(root, "scripts", "substrat.cjs")

const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]!
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const n = opts.quick ? 5 : 20
  const home = mkdtempSync(join(tmpdir(), "sbacp-"))
  chmodSync(home, 0o755)
  const env = { ...process.env, SUBSTRAT_HOME: home }
  const substrat = (args: ReadonlyArray<string>) => execFileSync(process.execPath, [launcher, ...args], { env, encoding: "utf8" })
  /** One `send --wait` shot, in ms; its output must be the agent's answer. */
  const shot = (agent: string, expect: string) => {
    const t = performance.now()
    const out = substrat(["agent", "send", "--wait", agent, "hi"])
    const ms = performance.now() - t
    if (!out.includes(expect)) throw new Error(`${agent} answered ${JSON.stringify(out)}`)
    return ms
  }
  try {
    const agent = bundleAcpAgent(home)
    substrat(["daemon", "start", "--json"])
    substrat(["agent", "create", "--provider", "scripted", "--name", "base", "--json"])
    substrat(["agent", "create", "--provider", `acp:/usr/bin/node ${agent}`, "--name", "acp", "--json"])
    const firstBase = shot("base", "")
    const firstAcp = shot("acp", "echo:")
    const base: Array<number> = []
    const acp: Array<number> = []
    for (let i = 0; i < n; i++) {
      base.push(shot("base", ""))
      acp.push(shot("acp", "echo:"))
    }
    const mb = median(base)
    const ma = median(acp)
    return {
      rows: [
        { turn: "scripted, first", n: 1, median_ms: firstBase },
        { turn: "acp (test agent), first: process start + session/new", n: 1, median_ms: firstAcp },
        { turn: "scripted, warm", n, median_ms: mb },
        { turn: "acp (test agent), warm", n, median_ms: ma }
      ],
      summary: { scripted_warm_ms: mb, acp_warm_ms: ma, acp_first_ms: firstAcp, acp_overhead_ms: ma - mb, ratio_acp_vs_scripted: ma / mb }
    }
  } finally {
    try {
      substrat(["daemon", "stop"])
    } catch {
      // not running
    }
    rmSync(home, { recursive: true, force: true })
  }
}
