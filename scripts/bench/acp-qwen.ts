// The real Qwen Code's turn through Substrat (`acp:qwen`: its process in the agent's bwrap
// sandbox, kept across turns, its model requests through the agent's metering forwarder and the
// daemon's OpenAI forwarder) next to the same `qwen --acp` driven directly (a bare ACP client over
// its stdio on the host, OPENAI_BASE_URL straight at the endpoint), both against one scripted
// Chat Completions endpoint answering at once, in the same run. A Substrat turn is a real
// `substrat agent send --wait` CLI process; a `scripted` agent's turn in the same daemon shows what
// the CLI round trip itself costs. First turns (process start, session/new) are rows of their own;
// `acp_qwen_overhead_ms` is the difference of the warm medians.
import * as Acp from "@agentclientprotocol/sdk"
import { execFile, spawn } from "node:child_process"
import { promisify } from "node:util"
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { Readable, Writable } from "node:stream"
import { fileURLToPath } from "node:url"
import { Effect, Exit, Scope } from "effect"
import { homeFiles } from "../../src/provider/acp/Launch.js"
import { builtinPresets } from "../../src/provider/acp/Presets.js"
import * as ScriptedLlm from "../../src/testing/ScriptedLlm.js"
import { Reply } from "../../src/testing/ScriptedLlm.js"
import type { BenchOptions, BenchResult } from "./types.js"

export const name = "acp-qwen"

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..")
const launcher = join(root, "scripts", "substrat.cjs")
const qwenEntry = join(root, "node_modules", "@qwen-code", "qwen-code", "cli-entry.js")
const MODEL = "qwen-bench"

const median = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]!
}

/** `qwen --acp` on the host, with a HOME of its own (the preset's settings), spoken to directly. */
const directQwen = async (baseUrl: string, home: string) => {
  for (const [rel, text] of Object.entries(homeFiles["qwen"] ?? {})) {
    mkdirSync(dirname(join(home, rel)), { recursive: true })
    writeFileSync(join(home, rel), text)
  }
  const ws = join(home, "ws")
  mkdirSync(ws)
  const t0 = performance.now()
  const preset = builtinPresets["qwen"]!
  const child = spawn(process.execPath, [qwenEntry, ...preset.command.slice(1)], {
    cwd: ws,
    env: { ...preset.env, PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: home, OPENAI_BASE_URL: `${baseUrl}/v1`, OPENAI_API_KEY: "sk-bench", OPENAI_MODEL: MODEL },
    stdio: ["pipe", "pipe", "ignore"]
  })
  const conn = Acp.client({ name: "bench" })
    .onNotification(Acp.methods.client.session.update, () => undefined)
    .onRequest(Acp.methods.client.session.requestPermission, async (c) => ({ outcome: { outcome: "selected" as const, optionId: c.params.options[0]!.optionId } }))
    .connect(Acp.ndJsonStream(Writable.toWeb(child.stdin!), Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>))
  await conn.agent.request(Acp.methods.agent.initialize, { protocolVersion: Acp.PROTOCOL_VERSION, clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false } })
  const { sessionId } = await conn.agent.request("session/new", { cwd: ws, mcpServers: [] })
  const turn = async () => {
    const t = performance.now()
    const r = await conn.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "hi" }] })
    if (r.stopReason !== "end_turn") throw new Error(`direct qwen stopped: ${r.stopReason}`)
    return performance.now() - t
  }
  await turn()
  const first = performance.now() - t0
  return { first, turn, close: () => child.kill("SIGKILL") }
}

export const run = async (opts: BenchOptions): Promise<BenchResult> => {
  const n = opts.quick ? 3 : 10
  const scope = Effect.runSync(Scope.make())
  const llm = await Effect.runPromise(
    ScriptedLlm.make({ listen: { port: 0 }, script: [{ reply: Reply.text("ok"), times: Infinity }] }).pipe(Scope.extend(scope))
  )
  const home = mkdtempSync(join(tmpdir(), "sbq-"))
  chmodSync(home, 0o755)
  writeFileSync(join(home, "config.toml"), `[acp]\nmodel = "${MODEL}"\n`)
  const env = { ...process.env, SUBSTRAT_HOME: home, SUBSTRAT_OPENAI_UPSTREAM: llm.baseUrl, OPENAI_API_KEY: "sk-bench" }
  // Asynchronous: the scripted endpoint answers from this process's event loop.
  const substrat = async (args: ReadonlyArray<string>) => (await promisify(execFile)(process.execPath, [launcher, ...args], { env, encoding: "utf8" })).stdout
  const shot = async (agent: string) => {
    const t = performance.now()
    const out = await substrat(["agent", "send", "--wait", agent, "hi"])
    const ms = performance.now() - t
    if (agent === "qwen" && out.trim() !== "ok") throw new Error(`${agent} answered ${JSON.stringify(out)}`)
    return ms
  }
  const directHome = mkdtempSync(join(tmpdir(), "sbqd-"))
  let direct: Awaited<ReturnType<typeof directQwen>> | null = null
  try {
    await substrat(["daemon", "start", "--json"])
    await substrat(["agent", "create", "--provider", "scripted", "--name", "base", "--json"])
    await substrat(["agent", "create", "--provider", "acp:qwen", "--name", "qwen", "--json"])
    direct = await directQwen(llm.baseUrl, directHome)
    const firstDirect = direct.first
    await shot("base")
    const firstSubstrat = await shot("qwen")
    const base: Array<number> = []
    const viaSubstrat: Array<number> = []
    const bare: Array<number> = []
    for (let i = 0; i < n; i++) {
      base.push(await shot("base"))
      viaSubstrat.push(await shot("qwen"))
      bare.push(await direct.turn())
    }
    const mb = median(base)
    const ms = median(viaSubstrat)
    const md = median(bare)
    return {
      rows: [
        { turn: "qwen --acp direct, first: start + initialize + session/new + turn", n: 1, median_ms: firstDirect },
        { turn: "acp:qwen via substrat, first: sandbox + start + session/new + turn", n: 1, median_ms: firstSubstrat },
        { turn: "qwen --acp direct, warm", n, median_ms: md },
        { turn: "acp:qwen via substrat (send --wait), warm", n, median_ms: ms },
        { turn: "scripted via substrat (send --wait), warm", n, median_ms: mb }
      ],
      summary: {
        qwen_direct_warm_ms: md,
        acp_qwen_warm_ms: ms,
        scripted_warm_ms: mb,
        acp_qwen_overhead_ms: ms - md,
        ratio_acp_qwen_vs_direct: ms / md,
        qwen_direct_first_ms: firstDirect,
        acp_qwen_first_ms: firstSubstrat
      }
    }
  } finally {
    direct?.close()
    try {
      await substrat(["daemon", "stop"])
    } catch {
      // not running
    }
    await Effect.runPromise(Scope.close(scope, Exit.void))
    rmSync(home, { recursive: true, force: true })
    rmSync(directHome, { recursive: true, force: true })
  }
}
